#include "io/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>
#include <unordered_set>

#include "core/error.h"
#include "core/fail_point.h"
#include "core/temp_file.h"
#include "io/gguf_tensors.h"
#include "io/json_util.h"
#include "io/model_dir.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// The reference implementation (huggingface/safetensors, MAX_HEADER_SIZE) rejects larger headers.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
// Bounds that no real checkpoint approaches; they cap what a hostile header can make us allocate
// or recurse into (the rank of one shape; nesting inside values of keys we skip).
constexpr size_t kMaxRank = 64;
constexpr int kMaxSkipDepth = 64;
// model.safetensors.index.json of the largest public checkpoints is a few MB.
constexpr size_t kMaxIndexBytes = 64u << 20;

constexpr std::string_view kMetadataKey = "__metadata__";
constexpr std::string_view kIndexName = "model.safetensors.index.json";
constexpr std::string_view kSingleName = "model.safetensors";

// Names the safetensors format defines that tessera's DType table does not hold: the sub-byte
// floats (several elements per byte, so numel * size does not describe their bytes) and complex.
constexpr std::string_view kSubByteDTypes[] = {"F4", "F6_E2M3", "F6_E3M2"};
constexpr std::string_view kUnsupportedDTypes[] = {"C64"};

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += StrCat(i ? ", " : "", shape[i]);
  return out + "]";
}

// numel * element size, or nullopt on uint64 overflow. Dimensions are non-negative here.
std::optional<uint64_t> ByteSize(const std::vector<int64_t>& shape, DType dtype) {
  uint64_t bytes = DTypeSize(dtype);
  for (const int64_t dim : shape) {
    if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(dim), &bytes)) return std::nullopt;
  }
  return bytes;
}

// ---- header parsing --------------------------------------------------------------------------

// One entry of the header as it is being parsed.
struct PendingTensor {
  TensorInfo info;
  bool has_dtype = false, has_shape = false, has_offsets = false;
  size_t num_offsets = 0;
  std::vector<std::string> keys;  // keys seen in this entry, to reject duplicates
};

// A SAX consumer of the header JSON that builds the tensor list directly, so a malformed header
// is rejected at the first offending token and nothing proportional to a wrong value is built.
// nlohmann's SAX parser is iterative (no recursion on nesting) and validates UTF-8 in strings.
//
// Accepted shape (anything else is an error; unknown keys inside a tensor entry are skipped like
// the reference implementation's serde derive does):
//   { "__metadata__": {string: string} | null,  name: {"dtype": s, "shape": [u...],
//     "data_offsets": [u, u]}, ... }
class HeaderHandler {
 public:
  using number_integer_t = json::number_integer_t;
  using number_unsigned_t = json::number_unsigned_t;
  using number_float_t = json::number_float_t;
  using string_t = json::string_t;
  using binary_t = json::binary_t;

  explicit HeaderHandler(SafetensorsHeader& header) : header_(header) {}

  bool null() { return Scalar("null", nullptr, nullptr); }
  bool boolean(bool) { return Scalar("a boolean", nullptr, nullptr); }
  bool number_integer(number_integer_t v) {
    if (v >= 0) {
      const uint64_t u = static_cast<uint64_t>(v);
      return Scalar("an integer", &u, nullptr);
    }
    return Scalar("a negative integer", nullptr, nullptr);
  }
  bool number_unsigned(number_unsigned_t v) { return Scalar("an integer", &v, nullptr); }
  bool number_float(number_float_t, const string_t&) { return Scalar("a number", nullptr, nullptr); }
  bool string(string_t& v) { return Scalar("a string", nullptr, &v); }
  bool binary(binary_t&) { return Scalar("binary data", nullptr, nullptr); }

  bool start_object(std::size_t) { return StartContainer(/*is_object=*/true); }
  bool start_array(std::size_t) { return StartContainer(/*is_object=*/false); }
  bool end_object() { return EndContainer(); }
  bool end_array() { return EndContainer(); }

  bool key(string_t& k) {
    switch (stack_.back()) {
      case Ctx::kHeader:
        if (!top_keys_.insert(k).second) return Err("duplicate key ", Quote(k));
        if (k == kMetadataKey) {
          slot_ = Slot::kMetadata;
        } else {
          pending_.emplace_back();
          pending_.back().info.name = k;
          slot_ = Slot::kTensor;
        }
        return true;
      case Ctx::kMetadata:
        if (header_.metadata.count(k)) return Err("__metadata__: duplicate key ", Quote(k));
        meta_key_ = k;
        slot_ = Slot::kMetaValue;
        return true;
      case Ctx::kTensor: {
        auto& t = pending_.back();
        if (std::find(t.keys.begin(), t.keys.end(), k) != t.keys.end()) {
          return Err(TensorPrefix(), "duplicate key ", Quote(k));
        }
        t.keys.push_back(k);
        slot_ = k == "dtype"          ? Slot::kDType
                : k == "shape"        ? Slot::kShape
                : k == "data_offsets" ? Slot::kOffsets
                                      : Slot::kUnknown;
        return true;
      }
      default:
        return true;  // keys inside a skipped value
    }
  }

  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) {
    if (error_.empty()) error_ = StrCat("invalid header JSON: ", OneLine(e.what()));
    return false;
  }

  bool done() const { return done_; }
  const std::string& error() const { return error_; }
  std::vector<PendingTensor>& pending() { return pending_; }

 private:
  // Containers we are inside, innermost last.
  enum class Ctx { kHeader, kMetadata, kTensor, kShape, kOffsets, kSkip };
  // What the next value inside an object context belongs to (set by the preceding key).
  enum class Slot { kMetadata, kTensor, kMetaValue, kDType, kShape, kOffsets, kUnknown };

  template <typename... Args>
  bool Err(Args&&... args) {
    if (error_.empty()) error_ = StrCat(std::forward<Args>(args)...);
    return false;
  }
  std::string TensorPrefix() const { return StrCat("tensor ", Quote(pending_.back().info.name), ": "); }

  // A scalar value: `kind` for messages, `u` when it is a non-negative integer, `s` when a string.
  bool Scalar(const char* kind, const uint64_t* u, const std::string* s) {
    if (stack_.empty()) return Err("header is not a JSON object (found ", kind, ")");
    switch (stack_.back()) {
      case Ctx::kSkip:
        return true;
      case Ctx::kShape: {
        auto& t = pending_.back();
        if (u == nullptr)
          return Err(TensorPrefix(), "shape must be an array of non-negative integers (found ", kind, ")");
        if (*u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
          return Err(TensorPrefix(), "shape dimension ", *u, " is too large");
        }
        if (t.info.shape.size() >= kMaxRank)
          return Err(TensorPrefix(), "shape has more than ", kMaxRank, " dimensions");
        t.info.shape.push_back(static_cast<int64_t>(*u));
        return true;
      }
      case Ctx::kOffsets: {
        auto& t = pending_.back();
        if (u == nullptr)
          return Err(TensorPrefix(), "data_offsets must be two non-negative integers (found ", kind, ")");
        if (t.num_offsets == 2) return Err(TensorPrefix(), "data_offsets must have exactly two entries");
        (t.num_offsets == 0 ? t.info.begin : t.info.end) = *u;
        ++t.num_offsets;
        return true;
      }
      default:
        break;
    }
    // A value directly under an object key.
    switch (slot_) {
      case Slot::kMetadata:
        if (s == nullptr && std::string_view(kind) == "null") return true;  // "__metadata__": null
        return Err("__metadata__ must be an object of strings (found ", kind, ")");
      case Slot::kTensor:
        return Err(TensorPrefix(), "entry must be an object (found ", kind, ")");
      case Slot::kMetaValue:
        if (s == nullptr)
          return Err("__metadata__: value of ", Quote(meta_key_), " must be a string (found ", kind, ")");
        header_.metadata.emplace(meta_key_, *s);
        return true;
      case Slot::kDType: {
        if (s == nullptr) return Err(TensorPrefix(), "dtype must be a string (found ", kind, ")");
        auto& t = pending_.back();
        const auto dtype = DTypeFromName(*s);
        if (!dtype) {
          for (const auto name : kSubByteDTypes) {
            if (*s == name) return Err(TensorPrefix(), "unsupported sub-byte dtype ", Quote(*s));
          }
          for (const auto name : kUnsupportedDTypes) {
            if (*s == name) return Err(TensorPrefix(), "unsupported dtype ", Quote(*s));
          }
          return Err(TensorPrefix(), "unknown dtype ", Quote(*s));
        }
        t.info.dtype = *dtype;
        t.has_dtype = true;
        return true;
      }
      case Slot::kShape:
        return Err(TensorPrefix(), "shape must be an array of non-negative integers (found ", kind, ")");
      case Slot::kOffsets:
        return Err(TensorPrefix(), "data_offsets must be two non-negative integers (found ", kind, ")");
      case Slot::kUnknown:
        return true;
    }
    return true;
  }

  bool StartContainer(bool is_object) {
    const char* kind = is_object ? "an object" : "an array";
    if (stack_.empty()) {
      if (done_ || !is_object) return Err("header is not a JSON object (found an array)");
      stack_.push_back(Ctx::kHeader);
      return true;
    }
    switch (stack_.back()) {
      case Ctx::kSkip:
        if (++skip_depth_ > kMaxSkipDepth) return Err(TensorPrefix(), "value nested too deeply");
        stack_.push_back(Ctx::kSkip);
        return true;
      case Ctx::kShape:
        return Err(TensorPrefix(), "shape must be an array of non-negative integers (found ", kind, ")");
      case Ctx::kOffsets:
        return Err(TensorPrefix(), "data_offsets must be two non-negative integers (found ", kind, ")");
      default:
        break;
    }
    switch (slot_) {
      case Slot::kMetadata:
        if (!is_object) return Err("__metadata__ must be an object of strings (found an array)");
        stack_.push_back(Ctx::kMetadata);
        return true;
      case Slot::kTensor:
        if (!is_object) return Err(TensorPrefix(), "entry must be an object (found an array)");
        stack_.push_back(Ctx::kTensor);
        return true;
      case Slot::kMetaValue:
        return Err("__metadata__: value of ", Quote(meta_key_), " must be a string (found ", kind, ")");
      case Slot::kDType:
        return Err(TensorPrefix(), "dtype must be a string (found ", kind, ")");
      case Slot::kShape:
        if (is_object) return Err(TensorPrefix(), "shape must be an array of non-negative integers (found an object)");
        pending_.back().has_shape = true;
        stack_.push_back(Ctx::kShape);
        return true;
      case Slot::kOffsets:
        if (is_object) return Err(TensorPrefix(), "data_offsets must be two non-negative integers (found an object)");
        pending_.back().has_offsets = true;
        stack_.push_back(Ctx::kOffsets);
        return true;
      case Slot::kUnknown:
        skip_depth_ = 1;
        stack_.push_back(Ctx::kSkip);
        return true;
    }
    return true;
  }

  bool EndContainer() {
    const Ctx ctx = stack_.back();
    stack_.pop_back();
    switch (ctx) {
      case Ctx::kHeader:
        done_ = true;
        return true;
      case Ctx::kSkip:
        --skip_depth_;
        return true;
      case Ctx::kOffsets:
        if (pending_.back().num_offsets != 2) return Err(TensorPrefix(), "data_offsets must have exactly two entries");
        return true;
      case Ctx::kTensor: {
        const auto& t = pending_.back();
        if (!t.has_dtype) return Err(TensorPrefix(), "missing \"dtype\"");
        if (!t.has_shape) return Err(TensorPrefix(), "missing \"shape\"");
        if (!t.has_offsets) return Err(TensorPrefix(), "missing \"data_offsets\"");
        return true;
      }
      default:
        return true;
    }
  }

  SafetensorsHeader& header_;
  std::vector<Ctx> stack_;
  Slot slot_ = Slot::kUnknown;
  int skip_depth_ = 0;
  bool done_ = false;
  std::unordered_set<std::string> top_keys_;
  std::string meta_key_;
  std::vector<PendingTensor> pending_;
  std::string error_;
};

}  // namespace

uint64_t TensorInfo::numel() const {
  uint64_t n = 1;
  for (const int64_t dim : shape) n *= static_cast<uint64_t>(dim);  // no overflow: checked at parse
  return n;
}

SafetensorsHeader ParseSafetensorsHeader(const uint8_t* data, size_t size, const std::string& source) {
  if (size < 8) Fail(source, ": file too small for a safetensors header (", size, " bytes)");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | data[i];  // u64 little-endian
  if (n > kMaxHeaderBytes) Fail(source, ": header length ", n, " exceeds the limit of ", kMaxHeaderBytes, " bytes");
  if (n > size - 8) {
    Fail(source, ": header length ", n, " runs past the end of the file (", size, " bytes; truncated?)");
  }
  if (n == 0 || data[8] != '{') Fail(source, ": header does not start with '{'");

  SafetensorsHeader header;
  header.data_offset = 8 + n;
  const uint64_t data_size = size - header.data_offset;

  const char* begin = reinterpret_cast<const char*>(data + 8);
  // nlohmann's lexer takes a NUL byte for the end of input and would ignore what follows; JSON
  // never contains a raw NUL (strings must escape it), so any NUL makes the header invalid.
  if (const void* nul = std::memchr(begin, 0, n)) {
    Fail(source, ": invalid header JSON: NUL byte at header offset ", static_cast<const char*>(nul) - begin);
  }
  CheckJsonLimits(std::string_view(begin, n), source);
  HeaderHandler handler(header);
  const bool ok = json::sax_parse(begin, begin + n, &handler, json::input_format_t::json, /*strict=*/true);
  if (!ok || !handler.done()) {
    Fail(source, ": ", handler.error().empty() ? std::string("invalid header JSON") : handler.error());
  }

  // Per tensor: dtype/shape agree with the byte range, and the range lies in the data section.
  auto& pending = handler.pending();
  header.tensors.reserve(pending.size());
  for (auto& p : pending) {
    TensorInfo& t = p.info;
    const std::string name = Quote(t.name);
    if (t.begin > t.end)
      Fail(source, ": tensor ", name, ": data_offsets [", t.begin, ", ", t.end, "] have begin > end");
    const auto bytes = ByteSize(t.shape, t.dtype);
    if (!bytes) Fail(source, ": tensor ", name, ": shape ", ShapeString(t.shape), " overflows 64-bit byte counts");
    if (*bytes != t.end - t.begin) {
      Fail(source, ": tensor ", name, ": data_offsets [", t.begin, ", ", t.end, "] hold ", t.end - t.begin,
           " bytes but dtype ", DTypeName(t.dtype), " shape ", ShapeString(t.shape), " needs ", *bytes);
    }
    if (t.end > data_size) {
      Fail(source, ": tensor ", name, ": data_offsets [", t.begin, ", ", t.end,
           "] out of range (the data section holds ", data_size, " bytes; truncated?)");
    }
    header.tensors.push_back(std::move(t));
  }

  // The byte ranges, sorted, must tile [0, data_size) exactly: no overlap, no gap, nothing after.
  std::vector<size_t> order(header.tensors.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const auto& x = header.tensors[a];
    const auto& y = header.tensors[b];
    return x.begin != y.begin ? x.begin < y.begin : x.end < y.end;
  });
  uint64_t covered = 0;
  const TensorInfo* previous = nullptr;
  for (const size_t i : order) {
    const auto& t = header.tensors[i];
    if (t.begin < covered) {
      Fail(source, ": tensors ", Quote(previous->name), " and ", Quote(t.name), " overlap (data_offsets [",
           previous->begin, ", ", previous->end, "] and [", t.begin, ", ", t.end, "])");
    }
    if (t.begin > covered) {
      Fail(source, ": bytes [", covered, ", ", t.begin, ") of the data section belong to no tensor (before ",
           Quote(t.name), ")");
    }
    covered = t.end;
    previous = &t;
  }
  if (covered != data_size) {
    Fail(source, ": the data section holds ", data_size, " bytes but the tensors cover ", covered);
  }
  return header;
}

// ---- SafetensorsFile -------------------------------------------------------------------------

SafetensorsFile SafetensorsFile::Open(const std::string& path) {
  SafetensorsFile file;
  file.file_ = MappedFile(path);
  file.header_ = ParseSafetensorsHeader(file.file_.data(), file.file_.size(), path);
  // The views point into header_.tensors' strings; moving the vector later keeps its elements.
  file.by_name_.reserve(file.header_.tensors.size());
  for (size_t i = 0; i < file.header_.tensors.size(); ++i) {
    file.by_name_.emplace(file.header_.tensors[i].name, i);
  }
  return file;
}

const TensorInfo* SafetensorsFile::Find(std::string_view name) const {
  const auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &header_.tensors[it->second];
}

TensorView SafetensorsFile::View(const TensorInfo& info) const {
  TensorView view;
  view.info = &info;
  view.data = file_.data() + header_.data_offset + info.begin;
  view.file = &file_.path();
  return view;
}

// ---- WeightStore -----------------------------------------------------------------------------

namespace {

// A shard name from an index must stay inside the model directory.
void CheckShardName(const std::string& shard, const std::string& index_path) {
  const fs::path p(shard);
  bool ok = !shard.empty() && p.is_relative();
  for (const auto& part : p) ok = ok && part != "..";
  if (!ok) Fail(index_path, ": shard name ", Quote(shard), " is not a file inside the model directory");
}

}  // namespace

WeightStore WeightStore::Open(const std::string& path) {
  WeightStore store;
  store.path_ = path;
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (!fs::exists(status)) Fail(path, ": no such file or directory");

  auto add_file = [&store](const std::string& file_path) -> SafetensorsFile& {
    store.files_.push_back(std::make_unique<SafetensorsFile>(SafetensorsFile::Open(file_path)));
    return *store.files_.back();
  };
  auto add_all = [&store](const SafetensorsFile& file) {
    for (const TensorInfo& t : file.tensors()) store.index_.emplace(t.name, file.View(t));
  };

  if (!fs::is_directory(status)) {
    if (IsGgufPath(path)) {
      store.gguf_ = std::make_unique<GgufHfTensors>(MapGgufTensors(OpenGgufSet(path)));
      for (const GgufHfTensor& t : store.gguf_->tensors) {
        if (!store.index_.emplace(t.info->name, TensorView{t.info, t.data, t.file}).second) {
          Fail(*t.file, ": two tensors map to the Hugging Face tensor ", Quote(t.info->name));
        }
      }
      return store;
    }
    add_all(add_file(path));
    store.UnwrapLanguageModel();
    return store;
  }

  const fs::path dir(ResolveModelDir(path));
  const fs::path index_path = dir / kIndexName;
  if (!fs::exists(index_path, ec)) {
    const fs::path single = dir / kSingleName;
    if (!fs::exists(single, ec)) {
      Fail(path, ": neither ", kSingleName, " nor ", kIndexName, " found (not a Hugging Face model directory?)");
    }
    add_all(add_file(single.string()));
    store.UnwrapLanguageModel();
    return store;
  }

  // Sharded: the index's weight_map names the shard of every tensor, and each shard must hold
  // exactly the tensors the index assigns to it (gpt-oss.md §1.4: always resolve through it).
  const std::string index_name = index_path.string();
  const json index = ParseJsonText(ReadBoundedFile(index_name, kMaxIndexBytes), index_name);
  if (!index.is_object()) Fail(index_name, ": top-level JSON value must be an object");
  const auto wm = index.find("weight_map");
  if (wm == index.end()) Fail(index_name, ": weight_map: missing");
  if (!wm->is_object()) Fail(index_name, ": weight_map: must be an object of tensor name -> shard file");
  if (wm->empty()) Fail(index_name, ": weight_map: empty");

  std::map<std::string, std::vector<std::string>> by_shard;  // shard -> tensors the index puts there
  for (const auto& [name, shard] : wm->items()) {
    if (!shard.is_string()) Fail(index_name, ": weight_map: shard of tensor ", Quote(name), " must be a string");
    const std::string& shard_name = shard.get_ref<const std::string&>();
    CheckShardName(shard_name, index_name);
    by_shard[shard_name].push_back(name);
  }

  for (const auto& [shard, names] : by_shard) {
    const fs::path shard_path = dir / shard;
    if (!fs::exists(shard_path, ec)) {
      Fail(index_name, ": shard ", Quote(shard), " is missing (", shard_path.string(), ")");
    }
    const auto& file = add_file(shard_path.string());
    for (const auto& name : names) {
      const TensorInfo* info = file.Find(name);
      if (info == nullptr) {
        Fail(file.path(), ": tensor ", Quote(name), " listed in ", index_name, " is missing from this shard");
      }
      store.index_.emplace(name, file.View(*info));
    }
    for (const auto& t : file.tensors()) {
      const auto it = wm->find(t.name);
      if (it == wm->end()) Fail(file.path(), ": tensor ", Quote(t.name), " is not listed in ", index_name);
      if (it->get_ref<const std::string&>() != shard) {
        Fail(file.path(), ": tensor ", Quote(t.name), " is in this shard, but ", index_name, " assigns it to ",
             Quote(it->get_ref<const std::string&>()));
      }
    }
  }
  store.UnwrapLanguageModel();
  return store;
}

void WeightStore::UnwrapLanguageModel() {
  // Where a multimodal checkpoint keeps its language model: the older save_pretrained layout
  // (language_model.model.*, language_model.lm_head.*) and transformers >= 4.52's
  // (model.language_model.*, lm_head.* unchanged).
  static constexpr std::pair<std::string_view, std::string_view> kRenames[] = {
      {"language_model.model.", "model."},
      {"language_model.lm_head.", "lm_head."},
      {"model.language_model.", "model."},
      {"lm_head.", "lm_head."},
  };
  const bool multimodal = std::any_of(index_.begin(), index_.end(), [](const auto& entry) {
    return entry.first.starts_with("language_model.") || entry.first.starts_with("model.language_model.");
  });
  if (!multimodal) return;
  std::unordered_map<std::string, TensorView> text;
  for (auto& [name, view] : index_) {
    bool kept = false;
    for (const auto& [from, to] : kRenames) {
      if (!name.starts_with(from)) continue;
      const std::string renamed = StrCat(to, std::string_view(name).substr(from.size()));
      if (!text.emplace(renamed, view).second) Fail(path_, ": two tensors of the language model are named ", Quote(renamed));
      kept = true;
      break;
    }
    if (!kept) set_aside_.push_back(name);
  }
  std::sort(set_aside_.begin(), set_aside_.end());
  index_ = std::move(text);
}

std::vector<std::string> WeightStore::names() const {
  std::vector<std::string> out;
  out.reserve(index_.size());
  for (const auto& entry : index_) out.push_back(entry.first);
  std::sort(out.begin(), out.end());
  return out;
}

std::optional<TensorView> WeightStore::Find(std::string_view name) const {
  const auto it = index_.find(std::string(name));
  if (it == index_.end()) return std::nullopt;
  return it->second;
}

WeightStore::WeightStore() = default;
WeightStore::WeightStore(WeightStore&&) noexcept = default;
WeightStore& WeightStore::operator=(WeightStore&&) noexcept = default;
WeightStore::~WeightStore() = default;

TensorView WeightStore::Get(std::string_view name) const {
  auto view = Find(name);
  if (!view) Fail(path_, ": tensor ", Quote(name), " not found");
  return *view;
}

// ---- writing ---------------------------------------------------------------------------------

namespace {

// Byte sizes of the tensors to write; rejects what no reader would accept.
std::vector<uint64_t> PlanTensors(const std::string& path, const std::vector<TensorToWrite>& tensors) {
  std::vector<uint64_t> sizes;
  sizes.reserve(tensors.size());
  std::unordered_set<std::string_view> names;
  for (const auto& t : tensors) {
    if (t.name == kMetadataKey) Fail(path, ": tensor name ", Quote(t.name), " is reserved");
    if (!names.insert(t.name).second) Fail(path, ": duplicate tensor name ", Quote(t.name));
    if (!t.fill) Fail(path, ": tensor ", Quote(t.name), " has no data filler");
    if (t.shape.size() > kMaxRank) Fail(path, ": tensor ", Quote(t.name), ": more than ", kMaxRank, " dimensions");
    for (const int64_t dim : t.shape) {
      if (dim < 0) Fail(path, ": tensor ", Quote(t.name), ": negative dimension in shape ", ShapeString(t.shape));
    }
    const auto bytes = ByteSize(t.shape, t.dtype);
    if (!bytes)
      Fail(path, ": tensor ", Quote(t.name), ": shape ", ShapeString(t.shape), " overflows 64-bit byte counts");
    sizes.push_back(*bytes);
  }
  return sizes;
}

std::string JsonString(const std::string& text, const std::string& path) {
  try {
    return json(text).dump();
  } catch (const json::exception&) {
    Fail(path, ": ", Quote(text), " is not valid UTF-8");
  }
}

// The header JSON exactly as the reference writer lays it out (serde_json, compact):
// {"__metadata__":{..},"name":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},...}
// padded with spaces so that 8 + N is a multiple of 8.
std::string BuildHeader(const std::string& path, const std::vector<TensorToWrite>& tensors,
                        const std::vector<uint64_t>& sizes, const std::map<std::string, std::string>& metadata) {
  std::string out = "{";
  if (!metadata.empty()) {
    out += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [k, v] : metadata) {
      out += StrCat(first ? "" : ",", JsonString(k, path), ":", JsonString(v, path));
      first = false;
    }
    out += "}";
  }
  uint64_t offset = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& t = tensors[i];
    if (out.size() > 1) out += ",";
    out += StrCat(JsonString(t.name, path), ":{\"dtype\":\"", DTypeName(t.dtype), "\",\"shape\":[");
    for (size_t d = 0; d < t.shape.size(); ++d) out += StrCat(d ? "," : "", t.shape[d]);
    out += StrCat("],\"data_offsets\":[", offset, ",", offset + sizes[i], "]}");
    offset += sizes[i];
  }
  out += "}";
  out.append((8 - out.size() % 8) % 8, ' ');
  if (out.size() > kMaxHeaderBytes) Fail(path, ": header would exceed ", kMaxHeaderBytes, " bytes");
  return out;
}

// Shard i (0-based) of count, named as transformers' save_pretrained names them: one-based,
// model-00001-of-00003 .. model-00003-of-00003.
std::string ShardName(size_t i, size_t count) {
  char name[64];
  std::snprintf(name, sizeof(name), "model-%05zu-of-%05zu.safetensors", i + 1, count);
  return name;
}

}  // namespace

void WriteSafetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  const std::vector<uint64_t> sizes = PlanTensors(path, tensors);
  const std::string header = BuildHeader(path, tensors, sizes, metadata);

  TempFile out(path);
  uint8_t length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<uint8_t>(static_cast<uint64_t>(header.size()) >> (8 * i));
  out.Write(length, 8);
  out.Write(header.data(), header.size());
  // One buffer, grown to the largest tensor so far: only one tensor's bytes are held at a time.
  // It is zeroed before each fill so that the output never depends on an earlier tensor.
  std::vector<uint8_t> buffer;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (sizes[i] > std::numeric_limits<size_t>::max()) Fail(path, ": tensor ", Quote(tensors[i].name), " is too large");
    const size_t n = static_cast<size_t>(sizes[i]);
    if (buffer.size() < n) buffer.resize(n);
    std::fill_n(buffer.begin(), n, uint8_t{0});
    tensors[i].fill(buffer.data(), n);
    out.Write(buffer.data(), n);
    FailPoint("write.tensor");  // tests: an interrupted or failed writer
  }
  out.Commit();
}

std::vector<std::string> WriteShardedSafetensors(const std::string& dir, const std::vector<TensorToWrite>& tensors,
                                                 uint64_t max_shard_bytes) {
  if (max_shard_bytes == 0) Fail(dir, ": max_shard_bytes must be positive");
  const std::vector<uint64_t> sizes = PlanTensors(dir, tensors);
  uint64_t total = 0;
  for (const uint64_t s : sizes) {
    if (__builtin_add_overflow(total, s, &total)) Fail(dir, ": total tensor size overflows 64 bits");
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) Fail(dir, ": cannot create directory: ", ec.message());
  const fs::path root(dir);
  // HF's save_pretrained tags files with format "pt"; some transformers versions refuse files
  // whose metadata names another format.
  const std::map<std::string, std::string> metadata = {{"format", "pt"}};

  if (total <= max_shard_bytes) {
    WriteSafetensors((root / kSingleName).string(), tensors, metadata);
    // An index left from an earlier sharded write would take precedence over the new file.
    fs::remove(root / kIndexName, ec);
    return {std::string(kSingleName)};
  }

  // Greedy packing in the given order; a tensor larger than the limit gets a shard of its own.
  std::vector<std::vector<size_t>> shards;
  uint64_t shard_bytes = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (shards.empty() || (!shards.back().empty() && shard_bytes + sizes[i] > max_shard_bytes)) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shards.back().push_back(i);
    shard_bytes += sizes[i];
  }

  std::vector<std::string> written;
  json weight_map = json::object();
  for (size_t s = 0; s < shards.size(); ++s) {
    const std::string name = ShardName(s, shards.size());
    std::vector<TensorToWrite> subset;
    subset.reserve(shards[s].size());
    for (const size_t i : shards[s]) {
      subset.push_back(tensors[i]);
      weight_map[tensors[i].name] = name;
    }
    WriteSafetensors((root / name).string(), subset, metadata);
    written.push_back(name);
  }
  // Like transformers' save_pretrained: sorted keys, indent 2, trailing newline.
  const json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  WriteFile((root / kIndexName).string(), index.dump(2) + "\n");
  written.emplace_back(kIndexName);
  return written;
}

}  // namespace tessera
