// The configurable stages of a Hugging Face tokenizer.json around the BPE model: normalizer,
// pre-tokenizer, post-processor and decoder, each a flattened "Sequence" of the component
// kinds tessera reproduces exactly (semantics of tokenizers 0.22, src/{normalizers,
// pre_tokenizers,processors,decoders}). The loader (tokenizer.cpp) builds them from JSON and
// refuses every other kind or option; tests/tokenizer_families_test.cpp checks them against
// HF on the goldens of tools/make_family_tokenizers.py.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/split_regex.h"

namespace tessera {

// Unicode predicates of Rust's char, which `tokenizers` uses for added-token flags and Digits.
bool IsRustWhitespace(char32_t c);  // char::is_whitespace (White_Space)
bool IsRustNumeric(char32_t c);     // char::is_numeric (general category N*)
bool IsRustWordChar(char32_t c);    // char::is_alphanumeric() || c == '_'

// A normalizer Sequence (a single normalizer is a sequence of one).
struct Normalizer {
  struct Step {
    enum class Kind { kNfc, kPrepend, kReplace } kind;
    std::string text;     // kPrepend: the prefix; kReplace: the literal pattern (if no regex)
    std::string content;  // kReplace: the replacement
    std::shared_ptr<const SplitRegex> regex;  // kReplace with {"Regex": ...}
  };
  std::vector<Step> steps;

  bool empty() const { return steps.empty(); }
  // The normalized form of `text` (well-formed UTF-8).
  std::string Apply(std::string_view text) const;
};

// A pre-tokenizer step; pieces flow through the steps in order, each step cutting (and for
// Metaspace and ByteLevel add_prefix_space, rewriting) the pieces of the previous one.
struct PreTokenizerStep {
  enum class Kind { kSplit, kByteLevelPrefix, kMetaspace, kDigits } kind;
  std::shared_ptr<SplitRegex> regex;  // kSplit (behavior Isolated)
  // kMetaspace.
  std::string replacement;  // "▁"
  enum class Prepend { kAlways, kFirst, kNever } prepend = Prepend::kAlways;
  bool split = true;
  bool individual_digits = false;  // kDigits
};

// A piece of text on its way to the model. `at_origin`: the piece starts at offset 0 of the
// original text, which is what Metaspace's prepend_scheme "first" tests.
struct PiecePipeline {
  std::vector<PreTokenizerStep> steps;

  // Calls emit(piece) for every final piece of `text`.
  void Run(std::string_view text, bool at_origin, const std::function<void(std::string_view)>& emit) const {
    RunFrom(0, text, at_origin, emit);
  }

 private:
  void RunFrom(size_t level, std::string_view text, bool at_origin,
               const std::function<void(std::string_view)>& emit) const;
};

// TemplateProcessing's "single" template, the only part that changes ids of one sequence
// (ByteLevel post-processors only move offsets; a Sequence concatenates the templates' effect).
struct PostProcessor {
  std::vector<int32_t> prefix;  // ids before $A
  std::vector<int32_t> suffix;  // ids after $A
  bool has_template = false;
};

// A decoder Sequence working on token strings as HF's decode_chain does.
struct Decoder {
  struct Step {
    enum class Kind { kByteLevel, kReplace, kByteFallback, kFuse, kStrip, kMetaspace } kind;
    std::string pattern, content;  // kReplace (literal pattern); kStrip: content (one char)
    std::shared_ptr<const SplitRegex> regex;  // kReplace with {"Regex": ...}
    size_t start = 0, stop = 0;    // kStrip
    char32_t replacement = 0;      // kMetaspace
    bool strip_first = false;      // kMetaspace: prepend_scheme != never
  };
  std::vector<Step> steps;

  // True for the plain ByteLevel decoder, whose result is the lossy UTF-8 of the concatenated
  // token bytes (the fast path in tokenizer.cpp).
  bool IsByteLevelOnly() const { return steps.size() == 1 && steps[0].kind == Step::Kind::kByteLevel; }
  std::string Decode(std::vector<std::string> tokens) const;
  // What one token contributes in a stream: the decoder applied as if the token stood alone
  // in the middle of a text (no first-token stripping, byte tokens as their byte).
  std::string TokenBytes(std::string_view token) const;
};

// Replaces every match of `regex` (or, without one, every occurrence of `literal`) in `text`.
std::string ReplaceAll(std::string_view text, const SplitRegex* regex, std::string_view literal,
                       std::string_view content);

// The byte of a ByteFallback token "<0xNN>" (u8::from_str_radix rules: two hex digits of
// either case, or '+' and one), or -1.
int ByteFallbackValue(std::string_view token);

}  // namespace tessera
