#include "engine/grammar.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "core/error.h"
#include "io/json_util.h"
#include "tokenizer/tokenizer.h"

#ifdef TESSERA_HAVE_XGRAMMAR
#include <xgrammar/xgrammar.h>
#endif

namespace tessera {

#ifdef TESSERA_HAVE_XGRAMMAR

namespace {

// The engine's messages start "[HH:MM:SS] xgrammar-0.2.9/cpp/file.cc:123: "; the reason follows.
std::string EngineReason(const std::exception& e) {
  std::string_view text = e.what();
  const size_t source = text.find("xgrammar-");
  if (source != std::string_view::npos) {
    const size_t colon = text.find(": ", source);
    if (colon != std::string_view::npos) text.remove_prefix(colon + 2);
  }
  return OneLine(text, 300);
}

// The tokens as the grammar sees them: their bytes; special tokens behind a 0xFF byte, which no
// UTF-8 text holds, so no string, literal or free-text region of a grammar can produce one
// (only a structural tag's {"type": "token"} can, by id); ids without a token are empty
// (always masked).
// Ids at or past `model_vocab` have no logit and are left out.
std::vector<std::string> GrammarTokens(const Tokenizer& tokenizer, int64_t model_vocab) {
  const int32_t count = static_cast<int32_t>(std::min<int64_t>(tokenizer.vocab_size(), model_vocab));
  std::vector<std::string> tokens(static_cast<size_t>(count));
  for (int32_t id = 0; id < count; ++id) {
    if (!tokenizer.Contains(id)) continue;
    tokens[static_cast<size_t>(id)] =
        tokenizer.IsSpecial(id) ? std::string("\xff").append(tokenizer.TokenBytes(id)) : std::string(tokenizer.TokenBytes(id));
  }
  return tokens;
}

}  // namespace

class CompiledConstraint {
 public:
  CompiledConstraint(xgrammar::CompiledGrammar grammar, std::vector<int32_t> end_tokens)
      : grammar(std::move(grammar)), end_tokens(std::move(end_tokens)) {}
  xgrammar::CompiledGrammar grammar;
  std::vector<int32_t> end_tokens;
};

struct GrammarVocabulary::Impl {
  Impl(const Tokenizer& tokenizer, int64_t model_vocab)
      : info(GrammarTokens(tokenizer, model_vocab), xgrammar::VocabType::RAW, static_cast<int>(model_vocab), std::vector<int32_t>{},
             false),
        compiler(info, /*max_threads=*/1, /*cache_enabled=*/true, /*max_memory_bytes=*/int64_t{256} << 20) {}
  xgrammar::TokenizerInfo info;
  mutable xgrammar::GrammarCompiler compiler;
};

GrammarVocabulary::GrammarVocabulary(const Tokenizer& tokenizer, int64_t model_vocab) : model_vocab_(model_vocab) {
  if (model_vocab <= 0 || model_vocab > INT32_MAX) Fail("grammar: vocabulary size ", model_vocab, " is out of range");
  try {
    impl_ = std::make_unique<Impl>(tokenizer, model_vocab);
  } catch (const std::exception& e) {
    Fail("grammar: cannot index the vocabulary: ", EngineReason(e));
  }
}
GrammarVocabulary::~GrammarVocabulary() = default;
bool GrammarVocabulary::Available() { return true; }

std::shared_ptr<const CompiledConstraint> GrammarVocabulary::JsonSchema(const std::string& schema_json,
                                                                        std::span<const int32_t> end_tokens) const {
  try {
    return std::make_shared<const CompiledConstraint>(
        impl_->compiler.CompileJSONSchema(schema_json, /*any_whitespace=*/false, std::nullopt, std::nullopt,
                                          /*strict_mode=*/true),
        std::vector<int32_t>(end_tokens.begin(), end_tokens.end()));
  } catch (const std::exception& e) {
    Fail("the JSON schema cannot be used: ", EngineReason(e));
  }
}

std::string GrammarVocabulary::JsonSchemaEbnf(const std::string& schema_json) {
  try {
    return xgrammar::Grammar::FromJSONSchema(schema_json, /*any_whitespace=*/false, std::nullopt, std::nullopt,
                                             /*strict_mode=*/true)
        .ToString();
  } catch (const std::exception& e) {
    Fail("the JSON schema cannot be used: ", EngineReason(e));
  }
}

std::shared_ptr<const CompiledConstraint> GrammarVocabulary::StructuralTag(const std::string& format_json,
                                                                           std::span<const int32_t> end_tokens) const {
  try {
    return std::make_shared<const CompiledConstraint>(
        impl_->compiler.CompileStructuralTag(R"({"type": "structural_tag", "format": )" + format_json + "}"),
        std::vector<int32_t>(end_tokens.begin(), end_tokens.end()));
  } catch (const std::exception& e) {
    Fail("the constraint cannot be used: ", EngineReason(e));
  }
}

struct GrammarState::Impl {
  explicit Impl(std::shared_ptr<const CompiledConstraint> c)
      : constraint(std::move(c)),
        matcher(constraint->grammar, std::vector<int>(constraint->end_tokens.begin(), constraint->end_tokens.end())),
        words(static_cast<size_t>(xgrammar::GetBitmaskSize(constraint->grammar.GetTokenizerInfo().GetVocabSize()))) {
    shape[0] = static_cast<int64_t>(words.size());
    tensor.data = words.data();
    tensor.device = DLDevice{kDLCPU, 0};
    tensor.ndim = 1;
    tensor.dtype = xgrammar::GetBitmaskDLType();
    tensor.shape = shape;
    tensor.strides = nullptr;
    tensor.byte_offset = 0;
  }
  std::shared_ptr<const CompiledConstraint> constraint;
  xgrammar::GrammarMatcher matcher;
  std::vector<int32_t> words;  // bit t of word t / 32: token t is allowed
  int64_t shape[1];
  DLTensor tensor{};
};

GrammarState::GrammarState(std::shared_ptr<const CompiledConstraint> constraint)
    : impl_(std::make_unique<Impl>(std::move(constraint))) {}
GrammarState::~GrammarState() = default;

void GrammarState::Mask(std::span<float> logits) {
  if (!impl_->matcher.FillNextTokenBitmask(&impl_->tensor)) return;  // everything allowed
  constexpr float kMasked = -std::numeric_limits<float>::infinity();
  const size_t n = logits.size();
  for (size_t w = 0; w < impl_->words.size() && w * 32 < n; ++w) {
    const auto bits = static_cast<uint32_t>(impl_->words[w]);
    if (bits == 0xFFFFFFFFu) continue;
    const size_t end = std::min(n, w * 32 + 32);
    for (size_t t = w * 32; t < end; ++t) {
      if (!((bits >> (t - w * 32)) & 1u)) logits[t] = kMasked;
    }
  }
}

bool GrammarState::Accept(int32_t token) { return impl_->matcher.AcceptToken(token); }
bool GrammarState::Finished() const {
  return impl_->matcher.IsTerminated() || (impl_->constraint->end_tokens.empty() && impl_->matcher.IsCompleted());
}

#else  // !TESSERA_HAVE_XGRAMMAR

class CompiledConstraint {};
struct GrammarVocabulary::Impl {};
struct GrammarState::Impl {};

namespace {
[[noreturn]] void NoEngine() {
  Fail("this build of tessera has no grammar engine for structured outputs (scripts/setup_xgrammar.sh builds it; "
       "then rebuild)");
}
}  // namespace

GrammarVocabulary::GrammarVocabulary(const Tokenizer&, int64_t model_vocab) : model_vocab_(model_vocab) {}
GrammarVocabulary::~GrammarVocabulary() = default;
bool GrammarVocabulary::Available() { return false; }
std::shared_ptr<const CompiledConstraint> GrammarVocabulary::JsonSchema(const std::string&, std::span<const int32_t>) const {
  NoEngine();
}
std::shared_ptr<const CompiledConstraint> GrammarVocabulary::StructuralTag(const std::string&,
                                                                           std::span<const int32_t>) const {
  NoEngine();
}
std::string GrammarVocabulary::JsonSchemaEbnf(const std::string&) { NoEngine(); }
GrammarState::GrammarState(std::shared_ptr<const CompiledConstraint>) { NoEngine(); }
GrammarState::~GrammarState() = default;
void GrammarState::Mask(std::span<float>) {}
bool GrammarState::Accept(int32_t) { return false; }
bool GrammarState::Finished() const { return false; }

#endif

}  // namespace tessera
