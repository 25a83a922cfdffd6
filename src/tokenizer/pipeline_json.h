// Reading tokenizer.json with simdjson: typed accessors that fail with a one-line
// tessera::Error naming the file and the JSON path (JsonReader), and the loaders of the
// pipeline components of pipeline.h (PipelineJson), shared by tokenizer.cpp's Loader.
#pragma once

#include <simdjson.h>

#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/error.h"
#include "tokenizer/pipeline.h"

namespace tessera {

// Ids are kept below 2^21 so that the id-indexed tables stay small (tens of MB) even for a
// corrupt file (o200k_harmony uses 200019; the largest public vocabularies are about 2^18).
inline constexpr int64_t kMaxTokenId = int64_t{1} << 21;

// A token or key quoted for a one-line error message: control and line-breaking characters
// are escaped, long strings cut.
std::string QuoteToken(std::string_view s);

class JsonReader {
 public:
  using array = simdjson::dom::array;
  using element = simdjson::dom::element;
  using element_type = simdjson::dom::element_type;
  using object = simdjson::dom::object;

  // `source` names the file in messages and must outlive the reader.
  explicit JsonReader(std::string_view source) : source_(source) {}

  template <typename... Args>
  [[noreturn]] void Reject(std::string_view path, Args&&... args) {
    Fail(source_, ": ", path, ": ", std::forward<Args>(args)...);
  }

  static bool Get(const object& obj, std::string_view key, element& out) {
    return obj.at_key(key).get(out) == simdjson::SUCCESS;
  }

  static const char* TypeName(const element& e) {
    switch (e.type()) {
      case element_type::ARRAY: return "an array";
      case element_type::OBJECT: return "an object";
      case element_type::INT64:
      case element_type::UINT64:
      case element_type::DOUBLE: return "a number";
      case element_type::STRING: return "a string";
      case element_type::BOOL: return "a boolean";
      case element_type::NULL_VALUE: return "null";
    }
    return "a value";
  }

  // Paths are either text or a callable producing it, so that the 650k vocabulary and merge
  // entries do not format a path each unless they fail.
  template <typename P>
  static std::string PathOf(const P& path) {
    if constexpr (std::is_invocable_v<const P&>) {
      return path();
    } else {
      return std::string(std::string_view(path));
    }
  }

  template <typename P>
  object AsObject(const element& e, const P& path) {
    object obj;
    if (e.get_object().get(obj)) Reject(PathOf(path), "expected an object, found ", TypeName(e));
    return obj;
  }
  template <typename P>
  array AsArray(const element& e, const P& path) {
    array arr;
    if (e.get_array().get(arr)) Reject(PathOf(path), "expected an array, found ", TypeName(e));
    return arr;
  }
  template <typename P>
  std::string_view AsString(const element& e, const P& path) {
    std::string_view s;
    if (e.get_string().get(s)) Reject(PathOf(path), "expected a string, found ", TypeName(e));
    return s;
  }
  template <typename P>
  bool AsBool(const element& e, const P& path) {
    bool b = false;
    if (e.get_bool().get(b)) Reject(PathOf(path), "expected true or false, found ", TypeName(e));
    return b;
  }
  template <typename P>
  int32_t AsId(const element& e, const P& path) {
    int64_t v = 0;
    if (e.get_int64().get(v)) Reject(PathOf(path), "expected an integer token id, found ", TypeName(e));
    if (v < 0 || v >= kMaxTokenId) Reject(PathOf(path), "token id ", v, " is outside [0, ", kMaxTokenId, ")");
    return static_cast<int32_t>(v);
  }
  // `key` of `obj` as a string; empty when absent or null.
  std::string_view OptionalString(const object& obj, std::string_view key, std::string_view path) {
    element e;
    if (!Get(obj, key, e) || e.is_null()) return {};
    return AsString(e, path);
  }
  bool OptionalBool(const object& obj, std::string_view key, std::string_view path, bool fallback) {
    element e;
    if (!Get(obj, key, e) || e.is_null()) return fallback;
    return AsBool(e, path);
  }
  std::string_view TypeOf(const object& obj, std::string_view path) {
    element e;
    if (!Get(obj, "type", e)) Reject(path, "has no \"type\"");
    return AsString(e, StrCat(path, ".type"));
  }

 private:
  std::string_view source_;
};

// Loaders of the normalizer, pre-tokenizer, post-processor and decoder sections. Each refuses
// component kinds and options outside pipeline.h with the JSON path of the offending value.
class PipelineJson : public JsonReader {
 public:
  using JsonReader::JsonReader;

  // The "normalizer" / "post_processor" / "decoder" of the top-level object (absent or null:
  // nothing, except for the decoder, which is required).
  void LoadNormalizer(const object& top, Normalizer& out);
  void LoadPostProcessor(const object& top, PostProcessor& out);
  void LoadDecoder(const object& top, Decoder& out);
  // Appends the steps of the "pre_tokenizer" value; returns true if it ends with ByteLevel
  // (the model is then byte-level; the ByteLevel byte mapping itself is not a step).
  bool LoadPreTokenizer(const element& e, std::vector<PreTokenizerStep>& steps);
  // A Metaspace pre-tokenizer or decoder.
  PreTokenizerStep LoadMetaspace(const object& m, const std::string& path);

 private:
  std::shared_ptr<SplitRegex> LoadSplit(const object& s, const std::string& path);
  std::shared_ptr<SplitRegex> MakeSplit(std::string_view regex, const std::string& path);
  void LoadPattern(const object& obj, const std::string& path, std::string& literal,
                   std::shared_ptr<SplitRegex>& regex);
  std::vector<std::pair<object, std::string>> Flatten(const object& obj, const std::string& path,
                                                      std::string_view list_key);
};

}  // namespace tessera
