// Grammar-constrained decoding: a grammar (from a JSON schema or an xgrammar structural tag)
// becomes, at every step, a mask over the vocabulary that is applied to the logits before
// sampling, so that the reply always parses.
//
// The engine is xgrammar's C++ core (built from its PyPI sdist by scripts/setup_xgrammar.sh; why
// a library and not our own: README "Structured outputs"). This file is the only one that sees
// it. A build without it (TESSERA_HAVE_XGRAMMAR undefined) still compiles: GrammarVocabulary's
// compile calls then throw a one-line tessera::Error saying so.
//
// Costs: GrammarVocabulary is built once per tokenizer (tens of ms for a 200k vocabulary);
// compiling a schema takes milliseconds and is cached by its text; a GrammarState per sequence
// fills its mask in microseconds (docs/BENCHMARKS.md "Structured outputs").
//
// Special tokens (Tokenizer::IsSpecial) are never text to the grammar: they are masked unless a
// structural tag names them by id (harmony's <|channel|>, Mistral's [TOOL_CALLS]), so that a JSON
// string can never hold a control token the reply parser would act on.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tessera {

class Tokenizer;

// A compiled grammar with the tokens that may end it; shared by every sequence that uses it.
class CompiledConstraint;

class GrammarVocabulary {
 public:
  // `model_vocab`: the logits' width (embedding rows; ids past the tokenizer are masked).
  GrammarVocabulary(const Tokenizer& tokenizer, int64_t model_vocab);
  ~GrammarVocabulary();
  GrammarVocabulary(const GrammarVocabulary&) = delete;
  GrammarVocabulary& operator=(const GrammarVocabulary&) = delete;

  static bool Available();  // this build has the grammar engine

  // A JSON value matching `schema_json` (a JSON schema as text), written compactly (", " and ": "
  // separators, no other whitespace: a model cannot pad a reply with whitespace forever). `end_tokens`: the tokens the
  // reply may end with once the value is complete (and only then). Throws tessera::Error with
  // the engine's reason for a schema it cannot compile.
  std::shared_ptr<const CompiledConstraint> JsonSchema(const std::string& schema_json,
                                                       std::span<const int32_t> end_tokens) const;
  // An xgrammar structural tag (its "format" object as JSON text): sequences of literal text,
  // special tokens by id, free text and JSON schemas (tool calls in a family's wrapper, a
  // reasoning section before the answer).
  std::shared_ptr<const CompiledConstraint> StructuralTag(const std::string& format_json,
                                                          std::span<const int32_t> end_tokens) const;
  // The EBNF text of a JSON schema's values, for a structural tag's {"type": "grammar"} (whose
  // own json_schema format would allow unbounded whitespace). Throws like JsonSchema.
  static std::string JsonSchemaEbnf(const std::string& schema_json);
  int64_t model_vocab() const { return model_vocab_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int64_t model_vocab_;
};

// One sequence's position in a constraint.
class GrammarState {
 public:
  explicit GrammarState(std::shared_ptr<const CompiledConstraint> constraint);
  ~GrammarState();
  // Sets the logits of the tokens the grammar does not allow next to -inf (logits.size() is the
  // model vocabulary).
  void Mask(std::span<float> logits);
  // Advances over a sampled token; false when the grammar does not allow it.
  bool Accept(int32_t token);
  // The reply is complete: its end token was accepted, or (a grammar without end tokens) the
  // grammar has matched.
  bool Finished() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera
