// BPE tokenizer loaded from a Hugging Face tokenizer.json, exact to the `tokenizers` library
// for the configurations it accepts: gpt-oss's o200k_harmony and the pipelines of Llama 3,
// Mistral (Metaspace or the legacy Prepend/Replace normalizer), Qwen2/2.5 and Qwen3.
// EncodeWithTemplate gives the ids of `tokenizer.encode(text).ids`, Encode those of
// `encode(text, add_special_tokens=False)`, Decode the text of `tokenizer.decode(ids,
// skip_special_tokens)`. tests/tokenizer_test.cpp (o200k) and tests/tokenizer_families_test.cpp
// (tools/make_family_tokenizers.py) check them against golden corpora.
//
// Pipeline, in HF's order:
//   1. added tokens (`added_tokens`, e.g. <|start|>) with "normalized": false are cut out of
//      the raw text (leftmost-longest, with their lstrip/rstrip/single_word flags);
//   2. each gap is normalized (NFC, Prepend, Replace; pipeline.h) and "normalized": true
//      tokens are cut out of it;
//   3. what is left is pre-tokenized: Split regexes (behavior Isolated; split_regex.h),
//      Metaspace, Digits, and ByteLevel, which makes the model byte-level (its vocabulary is
//      keyed by the bytes the byte-level characters stand for; o200k stays on a fast path of
//      Split steps only). Without ByteLevel the model works on characters, with unk and
//      byte_fallback (bpe.h);
//   4. each piece is looked up whole when the model has `ignore_merges`, otherwise (or when
//      absent) BPE-merged by merge rank, leftmost first;
//   5. EncodeWithTemplate adds the TemplateProcessing ids (ByteLevel post-processors do not
//      change ids).
// Decoding with the plain ByteLevel decoder concatenates the bytes of the tokens (a token
// spelled in byte-level characters stands for those bytes, any other for its UTF-8 text) and
// replaces ill-formed UTF-8 with U+FFFD like Rust's String::from_utf8_lossy; other decoders
// (Replace, ByteFallback, Fuse, Strip, Metaspace, ByteLevel in a Sequence) run HF's
// decode_chain on the token strings.
//
// Everything else (other normalizers, models, pre-tokenizers, processors or decoders, Split
// behaviors other than Isolated, truncation, padding, added-token ids other than those
// `tokenizers` assigns when it loads the file) is refused at load time with a tessera::Error
// naming the file and the JSON path, rather than tokenized differently from HF.
// FromModelDir also reads tokenizer_config.json beside tokenizer.json (ApplyConfig): with
// transformers 4.x, LlamaTokenizerFast (Mistral) replaces the file's post-processor by one built
// from add_bos_token (default true) / add_eos_token (default false), and EncodeWithTemplate
// follows it there; FromFile/FromJson keep the file's post-processor, as `tokenizers` does.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tessera {

struct TokenizerConfig;  // tokenizer/tokenizer_config.h

class Tokenizer {
 public:
  // Parses tokenizer.json text; `source` names it in error messages (usually its path).
  // Throws tessera::Error with a one-line message for malformed or unsupported content.
  static Tokenizer FromJson(std::string_view json, std::string_view source);
  static Tokenizer FromFile(const std::string& path);
  // `dir`/tokenizer.json, then ApplyConfig with `dir`/tokenizer_config.json when there is one.
  static Tokenizer FromModelDir(const std::string& dir);
  // A model directory or a tokenizer.json path.
  static Tokenizer FromPath(const std::string& dir_or_file);
  // The o200k_harmony tokenizer of gpt-oss compiled into the binary, parsed on first use.
  static const Tokenizer& BuiltIn();

  // What the HF tokenizer class named by `config` changes at load time: for LlamaTokenizer(Fast)
  // the template of EncodeWithTemplate becomes [bos_token if add_bos_token] $A [eos_token if
  // add_eos_token] (HF4 LlamaTokenizerFast.update_post_processor; defaults true, false, "<s>",
  // "</s>"); other classes keep the file's. Throws tessera::Error naming the config when a token
  // it needs is null or not in this tokenizer.
  void ApplyConfig(const TokenizerConfig& config);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Token ids of `text` (UTF-8), added/special tokens inside the text recognised as HF does by
  // default. Throws tessera::Error if `text` is not well-formed UTF-8 (HF takes Python str,
  // which cannot hold such bytes). Thread-safe.
  std::vector<int32_t> Encode(std::string_view text) const;
  // As Encode, but tokens marked "special" are left as text (HF: encode_special_tokens=True).
  std::vector<int32_t> EncodeOrdinary(std::string_view text) const;
  // Appends instead of returning; `out` keeps its earlier contents.
  void Encode(std::string_view text, std::vector<int32_t>& out) const;
  // As Encode, with the post-processor's template around the ids (Llama 3's
  // <|begin_of_text|>, Mistral's <s>): HF encode(text, add_special_tokens=True). Encode is
  // add_special_tokens=False, which is what rendered chat prompts need (their template writes
  // the BOS text itself).
  std::vector<int32_t> EncodeWithTemplate(std::string_view text) const;

  // The text of `ids`, ill-formed UTF-8 replaced by U+FFFD. Throws tessera::Error for an id
  // with no token (HF silently skips those).
  std::string Decode(std::span<const int32_t> ids) const;
  // HF decode(ids, skip_special_tokens): with true, tokens marked "special" are left out.
  std::string Decode(std::span<const int32_t> ids, bool skip_special_tokens) const;
  // The bytes one token decodes to (possibly a fragment of a UTF-8 sequence). Throws for an
  // id with no token.
  std::string_view TokenBytes(int32_t id) const;

  // The id of a token as tokenizer.json spells it: an added token's content ("<|start|>") or a
  // vocabulary entry in byte-level characters ("Ġuser" for " user"), like HF token_to_id.
  std::optional<int32_t> TokenId(std::string_view token) const;
  // As TokenId, but throws tessera::Error naming the tokenizer when the token is absent.
  int32_t RequireTokenId(std::string_view token) const;

  // One past the largest id; ids below it may still be unassigned (see Contains). 200019 for
  // o200k_harmony, whereas gpt-oss has 201088 embedding rows: ids 200019..201087 have no
  // token (Decode throws), so samplers should mask them.
  int32_t vocab_size() const;
  bool Contains(int32_t id) const;
  // True for added tokens marked "special" (HF skip_special_tokens would drop them).
  bool IsSpecial(int32_t id) const;
  // The file (or "<built-in o200k_harmony>") this tokenizer was loaded from.
  const std::string& source() const;

  struct Impl;  // defined in tokenizer.cpp (public only for the loader there)

 private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Turns a stream of token ids into text pieces for streaming output. Every piece is valid
// UTF-8: bytes of a character split across tokens are held back until it is complete, and
// ill-formed bytes become U+FFFD as soon as they are known to be ill-formed. With the ByteLevel
// decoder the concatenation of all pieces (including Flush) equals tokenizer.Decode(all ids);
// with other decoders each token contributes Decoder::TokenBytes (pipeline.h), which differs
// from Decode in whole-text effects (Strip of the first space, Metaspace's first token, one
// U+FFFD per byte of an invalid byte-fallback run).
class IncrementalDecoder {
 public:
  explicit IncrementalDecoder(const Tokenizer& tokenizer) : tokenizer_(&tokenizer) {}

  // The text completed by `id` (possibly empty). Throws tessera::Error for an unknown id,
  // leaving the decoder unchanged.
  std::string Add(int32_t id);
  // Text for what is still held back (U+FFFD for an unfinished sequence); the decoder is then
  // empty again.
  std::string Flush();
  // Bytes held back waiting for the rest of a character (0 to 3).
  size_t pending() const { return pending_.size(); }

 private:
  const Tokenizer* tokenizer_;
  std::string pending_;  // a well-formed but incomplete UTF-8 prefix
};

}  // namespace tessera
