#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <type_traits>
#include <unordered_map>

#include "core/error.h"
#include "core/mapped_file.h"
#include "io/gguf.h"
#include "io/json_util.h"
#include "tokenizer/bpe.h"
#include "tokenizer/embedded_assets.h"
#include "tokenizer/pipeline.h"
#include "tokenizer/pipeline_json.h"
#include "tokenizer/gguf_vocab.h"
#include "tokenizer/split_regex.h"
#include "tokenizer/tokenizer_config.h"
#include "tokenizer/utf8.h"

namespace tessera {
namespace {

// o200k_harmony's tokenizer.json is 27 MB; the largest public ones are a few times that.
constexpr size_t kMaxTokenizerJsonBytes = size_t{512} << 20;

constexpr char kBuiltInSource[] = "<built-in o200k_harmony>";

// Vocabulary and merge entries processed per prefetch group while loading.
constexpr size_t kBatch = 16;

// GPT-2's bytes_to_unicode(): printable bytes (! to ~, ¡ to ¬, ® to ÿ) stand for themselves,
// the other 68 bytes map to U+0100, U+0101, ... in increasing byte order.
struct ByteLevelAlphabet {
  char32_t byte_to_char[256];
  int16_t char_to_byte[0x144];

  ByteLevelAlphabet() {
    std::fill(std::begin(char_to_byte), std::end(char_to_byte), int16_t{-1});
    char32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      byte_to_char[b] = printable ? static_cast<char32_t>(b) : next++;
      char_to_byte[byte_to_char[b]] = static_cast<int16_t>(b);
    }
  }

  // Bytes spelled by a byte-level string; false if some character is outside the alphabet.
  bool ToBytes(std::string_view text, std::string& bytes) const {
    bytes.clear();
    size_t pos = 0;
    while (pos < text.size()) {
      const char32_t c = utf8::Next(text, pos);
      if (c >= 0x144 || char_to_byte[c] < 0) return false;
      bytes.push_back(static_cast<char>(char_to_byte[c]));
    }
    return true;
  }
};

const ByteLevelAlphabet& Alphabet() {
  static const ByteLevelAlphabet alphabet;
  return alphabet;
}

}  // namespace

std::string QuoteToken(std::string_view s) {
  std::string out = "\"";
  size_t pos = 0;
  const bool valid = utf8::FindInvalid(s) == s.size();
  while (pos < s.size() && out.size() < 64) {
    const auto b = static_cast<unsigned char>(s[pos]);
    if (b >= 0x20 && b < 0x7F && b != '"' && b != '\\') {
      out += static_cast<char>(b);
      ++pos;
      continue;
    }
    if (valid && b >= 0x80) {
      const size_t start = pos;
      const char32_t c = utf8::Next(s, pos);
      if (c >= 0xA0 && c != 0x2028 && c != 0x2029) {
        out.append(s.substr(start, pos - start));
        continue;
      }
      out += StrCat("\\u{", std::hex, static_cast<uint32_t>(c), "}");
      continue;
    }
    static const char kHex[] = "0123456789ABCDEF";
    out += b == '"' ? "\\\"" : b == '\\' ? "\\\\" : std::string{'\\', 'x', kHex[b >> 4], kHex[b & 15]};
    ++pos;
  }
  if (pos < s.size()) out += "...";
  out += '"';
  return out;
}

namespace {

// Leftmost-longest matcher for added tokens: a byte trie walked from each candidate start.
class AddedTokenTrie {
 public:
  void Add(std::string_view content, int32_t token_index) {
    if (nodes_.empty()) nodes_.emplace_back();
    int32_t node = 0;
    for (unsigned char b : content) {
      int32_t child = Child(node, b);
      if (child < 0) {
        child = static_cast<int32_t>(nodes_.size());
        nodes_[node].children.emplace_back(b, child);
        nodes_.emplace_back();
      }
      node = child;
    }
    nodes_[node].token = token_index;
    first_bytes_[static_cast<unsigned char>(content[0])] = true;
    if (first_byte_ < 0) {
      first_byte_ = static_cast<unsigned char>(content[0]);
    } else if (first_byte_ != static_cast<unsigned char>(content[0])) {
      first_byte_ = 256;  // several first bytes: no memchr shortcut
    }
  }

  bool empty() const { return nodes_.empty(); }

  // First position >= pos where some token may start.
  size_t NextCandidate(std::string_view text, size_t pos) const {
    if (first_byte_ >= 0 && first_byte_ < 256) {
      const void* hit = std::memchr(text.data() + pos, first_byte_, text.size() - pos);
      return hit == nullptr ? text.size() : static_cast<const char*>(hit) - text.data();
    }
    while (pos < text.size() && !first_bytes_[static_cast<unsigned char>(text[pos])]) ++pos;
    return pos;
  }

  // The longest token starting at text[pos]: its index and length, or -1.
  int32_t Longest(std::string_view text, size_t pos, size_t& length) const {
    int32_t node = 0;
    int32_t best = -1;
    for (size_t i = pos; i < text.size(); ++i) {
      node = Child(node, static_cast<unsigned char>(text[i]));
      if (node < 0) break;
      if (nodes_[node].token >= 0) {
        best = nodes_[node].token;
        length = i + 1 - pos;
      }
    }
    return best;
  }

 private:
  struct Node {
    std::vector<std::pair<unsigned char, int32_t>> children;
    int32_t token = -1;
  };
  int32_t Child(int32_t node, unsigned char b) const {
    for (const auto& [byte, child] : nodes_[node].children) {
      if (byte == b) return child;
    }
    return -1;
  }
  std::vector<Node> nodes_;
  bool first_bytes_[256] = {};
  int first_byte_ = -1;
};

}  // namespace

struct Tokenizer::Impl {
  struct AddedToken {
    std::string content;
    int32_t id;
    bool special;
    bool lstrip = false, rstrip = false, single_word = false;
  };

  std::string source;
  Normalizer normalizer;
  // Model. Byte-level models (the pre-tokenizer ends with ByteLevel) key their vocabulary by
  // raw bytes and merge bytes; the others (BpeModel::SetCharSymbols) by UTF-8 text and merge
  // characters.
  BpeModel model;  // vocab (raw bytes or text -> id, model tokens only) and merges
  bool byte_level = true;
  bool ignore_merges = false;
  size_t max_token_bytes = 0;
  // Pre-tokenizer: when it is only Split steps before a byte-level model, `splits` (applied in
  // order, each cutting the pieces of the previous) is the whole of it and `pipeline` is
  // unused; this keeps o200k on its fast path. Otherwise `pipeline` does the work.
  std::vector<SplitRegex> splits;
  bool general_pipeline = false;
  PiecePipeline pipeline;
  PostProcessor post;
  Decoder decoder;
  std::vector<std::string> token_text;  // id -> token as spelled, for decoders other than ByteLevel
  // Added tokens, matched in two passes like HF: "normalized": false first, then true.
  std::vector<AddedToken> added;
  AddedTokenTrie raw_trie;
  AddedTokenTrie normalized_trie;
  std::unordered_map<std::string, int32_t> added_by_content;
  // Decoding: id -> bytes. span_offset[id] == kAbsent for unassigned ids.
  static constexpr uint32_t kAbsent = ~uint32_t{0};
  std::vector<uint32_t> span_offset;
  std::vector<uint32_t> span_length;
  std::vector<bool> special;
  std::string decode_bytes;

  int32_t vocab_size() const { return static_cast<int32_t>(span_offset.size()); }
  bool Contains(int32_t id) const { return id >= 0 && id < vocab_size() && span_offset[id] != kAbsent; }

  // Always inlined: it is the whole per-token work of Decode and IncrementalDecoder.
  [[gnu::always_inline]] std::string_view Bytes(int32_t id) const {
    if (!Contains(id)) {
      Fail(source, ": token id ", id, " is not in the vocabulary (", vocab_size(), " ids)");
    }
    return std::string_view(decode_bytes.data() + span_offset[id], span_length[id]);  // in range by construction
  }

  // The fast path (Split steps only, byte-level model) calls this. It must inline into the
  // Split loop, vector append included: emplace_back, a different instantiation from the
  // push_back used all over this file, which GCC stops inlining once it has enough callers.
  void EncodePiece(std::string_view piece, BpeScratch& scratch, std::vector<int32_t>& out) const {
    if (ignore_merges && piece.size() <= max_token_bytes) {
      const int32_t id = model.vocab().Find(piece);
      if (id >= 0) {
        out.emplace_back(id);
        return;
      }
    }
    model.Merge(piece, scratch, out);
  }

  // Any model (the general pipeline).
  void EncodeAnyPiece(std::string_view piece, BpeScratch& scratch, std::vector<int32_t>& out) const {
    if (byte_level) {
      EncodePiece(piece, scratch, out);
      return;
    }
    if (ignore_merges && piece.size() <= max_token_bytes) {
      const int32_t id = model.vocab().Find(piece);
      if (id >= 0) {
        out.push_back(id);
        return;
      }
    }
    model.MergeChars(piece, scratch, out);
  }

  void PreTokenize(std::string_view text, size_t level, BpeScratch& scratch, std::vector<int32_t>& out) const {
    if (level == splits.size()) {
      EncodePiece(text, scratch, out);
      return;
    }
    splits[level].Split(text, [&](size_t begin, size_t end) {
      PreTokenize(text.substr(begin, end - begin), level + 1, scratch, out);
    });
  }

  // A stretch of text with no added token in it; `at_origin`: it starts the original text.
  void EncodePlain(std::string_view text, bool at_origin, BpeScratch& scratch, std::vector<int32_t>& out) const {
    if (!general_pipeline) {
      PreTokenize(text, 0, scratch, out);
      return;
    }
    pipeline.Run(text, at_origin, [&](std::string_view piece) { EncodeAnyPiece(piece, scratch, out); });
  }

  // Cuts `text` at the added tokens of `trie`; gaps go to gap(text, starts_at_0), matched ids
  // to `out`. As HF's AddedVocabulary::find_matches: matches are leftmost-longest and
  // non-overlapping in the text as it is; a special token (with split_special false) or a
  // single_word token touching a word character is passed over as text, the scan resuming
  // after it; lstrip/rstrip widen the cut over adjacent whitespace (lstrip not past the
  // previous cut), while the scan still resumes right after the token itself.
  template <typename Gap>
  void SplitAdded(std::string_view text, const AddedTokenTrie& trie, bool split_special, std::vector<int32_t>& out,
                  Gap&& gap) const {
    if (trie.empty()) {
      if (!text.empty()) gap(text, true);
      return;
    }
    size_t gap_start = 0;
    size_t pos = trie.NextCandidate(text, 0);
    while (pos < text.size()) {
      size_t length = 0;
      const int32_t index = trie.Longest(text, pos, length);
      if (index < 0) {
        pos = trie.NextCandidate(text, pos + 1);
        continue;
      }
      const AddedToken& token = added[index];
      const size_t match_end = pos + length;
      if ((!split_special && token.special) || (token.single_word && !IsSingleWord(text, pos, match_end))) {
        pos = trie.NextCandidate(text, match_end);
        continue;
      }
      size_t start = pos, stop = match_end;
      if (token.lstrip) start = std::max(WhitespaceStartBefore(text, pos), gap_start);
      if (token.rstrip) stop = WhitespaceEndAfter(text, stop);
      if (gap_start < start) gap(text.substr(gap_start, start - gap_start), gap_start == 0);
      out.push_back(token.id);
      gap_start = std::max(gap_start, stop);
      pos = trie.NextCandidate(text, match_end);
    }
    if (gap_start < text.size()) gap(text.substr(gap_start), gap_start == 0);
  }

  static char32_t CharBefore(std::string_view text, size_t pos, size_t& start) {
    start = pos - 1;
    while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
    size_t p = start;
    return utf8::Next(text, p);
  }
  static bool IsSingleWord(std::string_view text, size_t begin, size_t end) {
    size_t at = 0;
    if (begin > 0 && IsRustWordChar(CharBefore(text, begin, at))) return false;
    size_t p = end;
    return end == text.size() || !IsRustWordChar(utf8::Next(text, p));
  }
  static size_t WhitespaceStartBefore(std::string_view text, size_t pos) {
    size_t at = 0;
    while (pos > 0 && IsRustWhitespace(CharBefore(text, pos, at))) pos = at;
    return pos;
  }
  static size_t WhitespaceEndAfter(std::string_view text, size_t pos) {
    while (pos < text.size()) {
      size_t next = pos;
      if (!IsRustWhitespace(utf8::Next(text, next))) break;
      pos = next;
    }
    return pos;
  }

  void Encode(std::string_view text, bool split_special, std::vector<int32_t>& out) const {
    const size_t bad = utf8::FindInvalid(text);
    if (bad != text.size()) Fail("text to encode is not valid UTF-8 (byte offset ", bad, ")");
    BpeScratch scratch;
    // HF: cut at "normalized": false tokens in the raw text, normalize each gap, cut it at the
    // "normalized": true tokens, pre-tokenize what is left.
    SplitAdded(text, raw_trie, split_special, out, [&](std::string_view gap, bool gap_at_origin) {
      const auto plain = [&](std::string_view piece, bool piece_at_origin) {
        EncodePlain(piece, gap_at_origin && piece_at_origin, scratch, out);
      };
      if (normalizer.empty()) {
        SplitAdded(gap, normalized_trie, split_special, out, plain);
      } else {
        const std::string normalized = normalizer.Apply(gap);
        SplitAdded(normalized, normalized_trie, split_special, out, plain);
      }
    });
  }

  // The token strings `decoder` works on, special tokens left out if asked.
  std::string Decode(std::span<const int32_t> ids, bool skip_special) const {
    if (decoder.IsByteLevelOnly()) {
      std::string bytes;
      if (!skip_special) {
        for (int32_t id : ids) bytes.append(Bytes(id));
      } else {
        for (int32_t id : ids) {
          const std::string_view b = Bytes(id);
          if (!special[id]) bytes.append(b);
        }
      }
      std::string text;
      text.reserve(bytes.size());
      utf8::AppendLossy(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), true, text);
      return text;
    }
    std::vector<std::string> tokens;
    tokens.reserve(ids.size());
    for (int32_t id : ids) {
      Bytes(id);  // throws for an unknown id
      if (!skip_special || !special[id]) tokens.push_back(token_text[id]);
    }
    return decoder.Decode(std::move(tokens));
  }
};

namespace {

using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::element_type;
using simdjson::dom::object;

// Reads tokenizer.json into a Tokenizer::Impl. Every failure names the file and the JSON path.
class Loader : public PipelineJson {
 public:
  // `explicit_added_ids`: the added tokens' ids are the source's own (a GGUF token list numbers
  // every token), not ids to check against the order in which `tokenizers` would assign them.
  Loader(Tokenizer::Impl& impl, std::string_view json, bool explicit_added_ids = false)
      : PipelineJson(impl.source), impl_(impl), json_(json), explicit_added_ids_(explicit_added_ids) {}

  void Run() {
    CheckJsonLimits(json_, impl_.source);
    simdjson::padded_string padded(json_.data(), json_.size());
    element root;
    if (auto error = parser_.parse(padded).get(root)) {
      Fail(impl_.source, ": invalid JSON (", simdjson::error_message(error), ")");
    }
    const object top = AsObject(root, "top level");
    element model;
    if (!Get(top, "model", model)) Reject("model", "is missing");
    for (const char* key : {"truncation", "padding"}) {
      element value;
      if (!Get(top, key, value) || value.is_null()) continue;
      Reject(key, "is not supported (must be null; HF would truncate or pad the ids)");
    }
    // Order matters: the decoder gives the stream bytes of the vocabulary entries, the
    // pre-tokenizer decides whether the vocabulary is byte-level, and the normalizer applies
    // to the contents of "normalized" added tokens.
    LoadNormalizer(top, impl_.normalizer);
    LoadPostProcessor(top, impl_.post);
    LoadDecoder(top, impl_.decoder);
    element pre_tokenizer;
    if (Get(top, "pre_tokenizer", pre_tokenizer) && !pre_tokenizer.is_null()) {
      std::vector<PreTokenizerStep> steps;
      impl_.byte_level = LoadPreTokenizer(pre_tokenizer, steps);
      impl_.general_pipeline = !impl_.byte_level;
      for (const PreTokenizerStep& step : steps) {
        if (step.kind != PreTokenizerStep::Kind::kSplit) impl_.general_pipeline = true;
      }
      if (impl_.general_pipeline) {
        impl_.pipeline.steps = std::move(steps);
      } else {
        for (PreTokenizerStep& step : steps) impl_.splits.push_back(std::move(*step.regex));
      }
    } else {
      // The whole normalized text is one piece; only a character-level model makes sense.
      impl_.byte_level = false;
      impl_.general_pipeline = true;
    }
    need_text_ = !impl_.decoder.IsByteLevelOnly();
    LoadModel(AsObject(model, "model"));
    element added;
    if (Get(top, "added_tokens", added) && !added.is_null()) LoadAddedTokens(AsArray(added, "added_tokens"));
    BuildDecodeTable();
  }

 private:
  void LoadModel(const object& model) {
    const std::string_view type = TypeOf(model, "model");
    if (type != "BPE") Reject("model.type", QuoteToken(type), " is not supported (only BPE)");
    element dropout;
    if (Get(model, "dropout", dropout) && !dropout.is_null()) Reject("model.dropout", "is not supported (must be null)");
    const std::string_view unk_token = OptionalString(model, "unk_token", "model.unk_token");
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
      const std::string_view s = OptionalString(model, key, StrCat("model.", key));
      if (!s.empty()) Reject(StrCat("model.", key), "is not supported (must be null or empty)");
    }
    const bool byte_fallback = OptionalBool(model, "byte_fallback", "model.byte_fallback", false);
    const bool fuse_unk = OptionalBool(model, "fuse_unk", "model.fuse_unk", false);
    if (impl_.byte_level && !unk_token.empty()) {
      Reject("model.unk_token", "is not supported with a byte-level pre-tokenizer (must be null)");
    }
    if (impl_.byte_level && byte_fallback) {
      Reject("model.byte_fallback", "is not supported with a byte-level pre-tokenizer (must be false)");
    }
    impl_.ignore_merges = OptionalBool(model, "ignore_merges", "model.ignore_merges", false);

    element vocab_e;
    if (!Get(model, "vocab", vocab_e)) Reject("model.vocab", "is missing");
    const object vocab = AsObject(vocab_e, "model.vocab");
    impl_.model.vocab().Reserve(vocab.size());
    // Both tables are far larger than the caches; entries are processed in groups whose table
    // slots are prefetched first, so that their cache misses overlap (about 2x faster loads).
    struct VocabEntry {
      std::string_view token;
      int32_t id;
      std::string bytes;
      uint64_t hash;
    };
    std::vector<VocabEntry> vocab_batch(kBatch);
    size_t pending = 0;
    auto insert_vocab = [&] {
      for (size_t k = 0; k < pending; ++k) {
        VocabEntry& e = vocab_batch[k];
        if (!impl_.model.vocab().Insert(e.bytes, e.id, e.hash)) {
          Reject("model.vocab", "token ", QuoteToken(e.token), " appears twice");
        }
        const auto path = [&] { return StrCat("model.vocab[", QuoteToken(e.token), "]"); };
        if (need_text_) {
          AddDecodeEntry(e.id, impl_.decoder.TokenBytes(e.token), path);
          SetText(e.id, e.token);
        } else {
          AddDecodeEntry(e.id, e.bytes, path);
        }
        impl_.max_token_bytes = std::max(impl_.max_token_bytes, e.bytes.size());
      }
      pending = 0;
    };
    for (auto field : vocab) {
      VocabEntry& e = vocab_batch[pending];
      e.token = field.key;
      e.id = AsId(field.value, [&] { return StrCat("model.vocab[", QuoteToken(e.token), "]"); });
      if (e.token.empty()) Reject("model.vocab", "empty token");
      if (!ModelKey(e.token, e.bytes)) {
        Reject("model.vocab", "token ", QuoteToken(e.token), " is not spelled in byte-level characters");
      }
      e.hash = HashBytes(e.bytes.data(), e.bytes.size());
      impl_.model.vocab().Prefetch(e.hash);
      if (++pending == kBatch) insert_vocab();
    }
    insert_vocab();
    impl_.model.IndexByteTokens();
    if (!impl_.byte_level) {
      int32_t unk_id = -1;
      if (!unk_token.empty()) {
        unk_id = impl_.model.vocab().Find(unk_token);
        if (unk_id < 0) Reject("model.unk_token", QuoteToken(unk_token), " is not in the vocabulary");
      }
      impl_.model.SetCharSymbols(unk_id, byte_fallback, fuse_unk);
    }

    element merges_e;
    if (!Get(model, "merges", merges_e)) Reject("model.merges", "is missing");
    const array merges = AsArray(merges_e, "model.merges");
    impl_.model.ReserveMerges(merges.size());
    struct MergeEntry {
      std::string_view left, right;
      std::string left_bytes, right_bytes, joined;
      uint64_t left_hash, right_hash, joined_hash;
      bool left_ok, right_ok;  // spelled in byte-level characters
      int32_t rank, left_id, right_id, new_id;
    };
    std::vector<MergeEntry> merge_batch(kBatch);
    auto add_merges = [&] {
      for (size_t k = 0; k < pending; ++k) {
        MergeEntry& e = merge_batch[k];
        const auto path = [&] { return StrCat("model.merges[", e.rank, "]"); };
        e.left_id = e.left_ok ? impl_.model.vocab().Find(e.left_bytes, e.left_hash) : -1;
        if (e.left_id < 0) Reject(path(), "token ", QuoteToken(e.left), " is not in the vocabulary");
        e.right_id = e.right_ok ? impl_.model.vocab().Find(e.right_bytes, e.right_hash) : -1;
        if (e.right_id < 0) Reject(path(), "token ", QuoteToken(e.right), " is not in the vocabulary");
        e.new_id = impl_.model.vocab().Find(e.joined, e.joined_hash);
        if (e.new_id < 0) {
          Reject(path(), "merged token ", QuoteToken(StrCat(e.left, e.right)), " is not in the vocabulary");
        }
        impl_.model.PrefetchMerge(e.left_id, e.right_id);
      }
      for (size_t k = 0; k < pending; ++k) {
        const MergeEntry& e = merge_batch[k];
        impl_.model.AddMerge(e.left_id, e.right_id, MergeRule{e.rank, e.new_id});
      }
      pending = 0;
    };
    int32_t rank = 0;
    for (element m : merges) {
      MergeEntry& e = merge_batch[pending];
      e.rank = rank;
      if (m.type() == element_type::STRING) {
        const std::string_view line = AsString(m, "");
        const size_t space = line.find(' ');
        if (space == std::string_view::npos || line.find(' ', space + 1) != std::string_view::npos) {
          Reject(StrCat("model.merges[", rank, "]"), QuoteToken(line), " is not two tokens separated by one space");
        }
        e.left = line.substr(0, space);
        e.right = line.substr(space + 1);
      } else {
        const auto path = [&] { return StrCat("model.merges[", rank, "]"); };
        const array pair = AsArray(m, path);
        if (pair.size() != 2) Reject(path(), "expected a pair of tokens");
        e.left = AsString(pair.at(0).value_unsafe(), [&] { return path() + "[0]"; });
        e.right = AsString(pair.at(1).value_unsafe(), [&] { return path() + "[1]"; });
      }
      e.left_ok = ModelKey(e.left, e.left_bytes);
      e.right_ok = ModelKey(e.right, e.right_bytes);
      if (e.left_ok && e.right_ok) {
        e.joined = e.left_bytes;
        e.joined += e.right_bytes;
        e.left_hash = HashBytes(e.left_bytes.data(), e.left_bytes.size());
        e.right_hash = HashBytes(e.right_bytes.data(), e.right_bytes.size());
        e.joined_hash = HashBytes(e.joined.data(), e.joined.size());
        impl_.model.vocab().Prefetch(e.left_hash);
        impl_.model.vocab().Prefetch(e.right_hash);
        impl_.model.vocab().Prefetch(e.joined_hash);
      }
      if (rank == INT32_MAX) Reject("model.merges", "too many merges");
      ++rank;
      if (++pending == kBatch) add_merges();
    }
    add_merges();
  }

  // The vocabulary key of a token as tokenizer.json spells it: its raw bytes for a byte-level
  // model (false if it is not spelled in byte-level characters), else its text.
  bool ModelKey(std::string_view token, std::string& key) const {
    if (impl_.byte_level) return Alphabet().ToBytes(token, key);
    key.assign(token);
    return true;
  }

  void SetText(int32_t id, std::string_view text) {
    if (static_cast<size_t>(id) >= impl_.token_text.size()) impl_.token_text.resize(id + size_t{1});
    impl_.token_text[id] = std::string(text);
  }

  void LoadAddedTokens(const array& tokens) {
    // HF re-assigns ids when it loads added tokens (tokenizer/serialization.rs, then
    // AddedVocabulary::add_tokens): an existing vocabulary token keeps its id, a new one gets
    // max(added ids) + 1, or the model's vocabulary size (its entry count) for the first one.
    // A file whose "id" disagrees is refused instead of silently renumbered.
    const int64_t model_size = static_cast<int64_t>(impl_.model.vocab().size());
    int64_t max_added = -1;
    size_t index = 0;
    std::string bytes;
    for (element t_e : tokens) {
      const std::string path = StrCat("added_tokens[", index++, "]");
      const object t = AsObject(t_e, path);
      element id_e, content_e;
      if (!Get(t, "id", id_e)) Reject(path, "has no \"id\"");
      if (!Get(t, "content", content_e)) Reject(path, "has no \"content\"");
      const int32_t id = AsId(id_e, StrCat(path, ".id"));
      const std::string_view content = AsString(content_e, StrCat(path, ".content"));
      if (content.empty()) Reject(StrCat(path, ".content"), "is empty");
      const bool single_word = OptionalBool(t, "single_word", StrCat(path, ".single_word"), false);
      const bool lstrip = OptionalBool(t, "lstrip", StrCat(path, ".lstrip"), false);
      const bool rstrip = OptionalBool(t, "rstrip", StrCat(path, ".rstrip"), false);
      const bool special = OptionalBool(t, "special", StrCat(path, ".special"), false);
      const bool normalized = OptionalBool(t, "normalized", StrCat(path, ".normalized"), !special);
      if (impl_.added_by_content.count(std::string(content)) != 0) {
        Reject(StrCat(path, ".content"), QuoteToken(content), " appears twice");
      }
      const bool byte_level = ModelKey(content, bytes);
      const int32_t model_id = byte_level ? impl_.model.vocab().Find(bytes) : -1;
      int64_t expected = model_id;
      if (model_id < 0) expected = explicit_added_ids_ ? id : max_added >= model_size ? max_added + 1 : model_size;
      if (id != expected) {
        Reject(StrCat(path, ".id"), id, " for ", QuoteToken(content), " differs from the id tokenizers assigns (", expected,
              ")");
      }
      // A content that is already a model token decodes to the same bytes either way; a new
      // one colliding with a model id (possible with holes in the vocabulary) is refused here.
      if (model_id < 0) {
        if (need_text_) {
          AddDecodeEntry(id, impl_.decoder.TokenBytes(content), StrCat(path, ".id"));
          SetText(id, content);
        } else {
          AddDecodeEntry(id, byte_level ? std::string_view(bytes) : content, StrCat(path, ".id"));
        }
      }
      max_added = std::max<int64_t>(max_added, id);
      const int32_t index_in_added = static_cast<int32_t>(impl_.added.size());
      impl_.added.push_back({std::string(content), id, special, lstrip, rstrip, single_word});
      impl_.added_by_content.emplace(std::string(content), id);
      if (!normalized) {
        impl_.raw_trie.Add(content, index_in_added);
      } else if (impl_.normalizer.empty()) {
        impl_.normalized_trie.Add(content, index_in_added);
      } else {
        // HF matches these in normalized text, so it normalizes their contents too.
        const std::string n = impl_.normalizer.Apply(content);
        if (!n.empty()) impl_.normalized_trie.Add(n, index_in_added);
      }
      if (special) special_ids_.push_back(id);
    }
  }

  template <typename P>
  void AddDecodeEntry(int32_t id, std::string_view bytes, const P& path) {
    if (static_cast<size_t>(id) >= decode_entries_.size()) decode_entries_.resize(id + size_t{1}, {kUnset, 0});
    if (decode_entries_[id].first != kUnset) Reject(PathOf(path), "id ", id, " is used by two tokens");
    if (impl_.decode_bytes.size() + bytes.size() >= UINT32_MAX) Reject(PathOf(path), "token table exceeds 4 GiB");
    decode_entries_[id] = {static_cast<uint32_t>(impl_.decode_bytes.size()), static_cast<uint32_t>(bytes.size())};
    impl_.decode_bytes.append(bytes);
  }

  void BuildDecodeTable() {
    const size_t n = decode_entries_.size();
    impl_.span_offset.assign(n, Tokenizer::Impl::kAbsent);
    impl_.span_length.assign(n, 0);
    impl_.special.assign(n, false);
    for (size_t id = 0; id < n; ++id) {
      if (decode_entries_[id].first == kUnset) continue;
      impl_.span_offset[id] = decode_entries_[id].first;
      impl_.span_length[id] = decode_entries_[id].second;
    }
    for (int32_t id : special_ids_) impl_.special[id] = true;
    if (need_text_) impl_.token_text.resize(n);
  }

  static constexpr uint32_t kUnset = ~uint32_t{0};
  Tokenizer::Impl& impl_;
  std::string_view json_;
  bool explicit_added_ids_ = false;
  simdjson::dom::parser parser_;
  std::vector<std::pair<uint32_t, uint32_t>> decode_entries_;  // id -> (offset, length)
  std::vector<int32_t> special_ids_;
  bool need_text_ = false;  // the decoder works on token strings (Impl::token_text)
};

}  // namespace

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::FromJson(std::string_view json, std::string_view source) {
  auto impl = std::make_unique<Impl>();
  impl->source = std::string(source);
  Loader(*impl, json).Run();
  return Tokenizer(std::move(impl));
}

Tokenizer Tokenizer::FromFile(const std::string& path) {
  return FromJson(ReadBoundedFile(path, kMaxTokenizerJsonBytes), path);
}

Tokenizer Tokenizer::FromModelDir(const std::string& dir) {
  if (IsGgufPath(dir)) {  // the tokenizer in a GGUF file's metadata (gguf_vocab.h)
    const std::unique_ptr<GgufFile> file = GgufFile::Open(dir);
    auto impl = std::make_unique<Impl>();
    impl->source = dir;
    Loader(*impl, GgufTokenizerJson(*file).dump(), /*explicit_added_ids=*/true).Run();
    return Tokenizer(std::move(impl));
  }
  const std::string path = (std::filesystem::path(dir) / "tokenizer.json").string();
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) Fail(dir, ": no tokenizer.json in this directory");
  Tokenizer tokenizer = FromFile(path);
  if (const std::optional<TokenizerConfig> config = LoadTokenizerConfig(dir)) tokenizer.ApplyConfig(*config);
  return tokenizer;
}

void Tokenizer::ApplyConfig(const TokenizerConfig& config) {
  if (!config.RebuildsPostProcessor()) return;
  const auto token_id = [&](const ConfigToken& token, std::string_view class_default, const char* flag,
                            const char* key) {
    const std::optional<std::string> content = token.Or(class_default);
    if (!content) Fail(config.source, ": ", flag, " is true but ", key, " is null");
    const std::optional<int32_t> id = TokenId(*content);
    if (!id) Fail(config.source, ": ", key, " ", QuoteToken(*content), " is not a token of ", impl_->source);
    return *id;
  };
  // Built before assigning, so that a failure leaves the tokenizer as it was.
  PostProcessor post;
  post.has_template = true;
  if (config.add_bos_token.value_or(true)) {
    post.prefix.push_back(token_id(config.bos_token, "<s>", "add_bos_token", "bos_token"));
  }
  if (config.add_eos_token.value_or(false)) {
    post.suffix.push_back(token_id(config.eos_token, "</s>", "add_eos_token", "eos_token"));
  }
  impl_->post = std::move(post);
}

Tokenizer Tokenizer::FromPath(const std::string& dir_or_file) {
  std::error_code ec;
  if (std::filesystem::is_directory(dir_or_file, ec) || IsGgufPath(dir_or_file)) return FromModelDir(dir_or_file);
  return FromFile(dir_or_file);
}

const Tokenizer& Tokenizer::BuiltIn() {
  static const Tokenizer tokenizer = FromJson(EmbeddedTokenizerJson(), kBuiltInSource);
  return tokenizer;
}

std::vector<int32_t> Tokenizer::Encode(std::string_view text) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 4 + 1);
  impl_->Encode(text, true, ids);
  return ids;
}

void Tokenizer::Encode(std::string_view text, std::vector<int32_t>& out) const { impl_->Encode(text, true, out); }

std::vector<int32_t> Tokenizer::EncodeOrdinary(std::string_view text) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 4 + 1);
  impl_->Encode(text, false, ids);
  return ids;
}

std::vector<int32_t> Tokenizer::EncodeWithTemplate(std::string_view text) const {
  std::vector<int32_t> ids = impl_->post.prefix;
  ids.reserve(text.size() / 4 + 1 + impl_->post.prefix.size() + impl_->post.suffix.size());
  impl_->Encode(text, true, ids);
  ids.insert(ids.end(), impl_->post.suffix.begin(), impl_->post.suffix.end());
  return ids;
}

std::string Tokenizer::Decode(std::span<const int32_t> ids) const { return impl_->Decode(ids, false); }

std::string Tokenizer::Decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  return impl_->Decode(ids, skip_special_tokens);
}

std::string_view Tokenizer::TokenBytes(int32_t id) const { return impl_->Bytes(id); }

std::optional<int32_t> Tokenizer::TokenId(std::string_view token) const {
  if (auto it = impl_->added_by_content.find(std::string(token)); it != impl_->added_by_content.end()) {
    return it->second;
  }
  std::string bytes;
  if (!impl_->byte_level) {
    bytes.assign(token);
  } else if (!Alphabet().ToBytes(token, bytes)) {
    return std::nullopt;
  }
  const int32_t id = impl_->model.vocab().Find(bytes);
  if (id < 0) return std::nullopt;
  return id;
}

int32_t Tokenizer::RequireTokenId(std::string_view token) const {
  const std::optional<int32_t> id = TokenId(token);
  if (!id) Fail(impl_->source, ": token ", QuoteToken(token), " is not in the vocabulary");
  return *id;
}

int32_t Tokenizer::vocab_size() const { return impl_->vocab_size(); }
bool Tokenizer::Contains(int32_t id) const { return impl_->Contains(id); }
bool Tokenizer::IsSpecial(int32_t id) const { return impl_->Contains(id) && impl_->special[id]; }
const std::string& Tokenizer::source() const { return impl_->source; }

std::string IncrementalDecoder::Add(int32_t id) {
  const std::string_view bytes = tokenizer_->TokenBytes(id);
  pending_.append(bytes);
  std::string text;
  const size_t used =
      utf8::AppendLossy(reinterpret_cast<const uint8_t*>(pending_.data()), pending_.size(), false, text);
  pending_.erase(0, used);
  return text;
}

std::string IncrementalDecoder::Flush() {
  std::string text;
  utf8::AppendLossy(reinterpret_cast<const uint8_t*>(pending_.data()), pending_.size(), true, text);
  pending_.clear();
  return text;
}

}  // namespace tessera
