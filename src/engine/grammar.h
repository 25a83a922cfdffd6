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
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace tessera {

class Tokenizer;

// A compiled grammar with the tokens that may end it; shared by every sequence that uses it.
class CompiledConstraint;

// What to compile: a JSON schema (as text) or an xgrammar structural tag (its "format" object as
// JSON text), and the tokens the reply may end with once the grammar has matched.
struct GrammarRecipe {
  bool structural_tag = false;
  std::string text;
  std::vector<int32_t> end_tokens;
};

// The budget of one compile. With `isolate`, the recipe and the compile run first in a child
// process (fork): the deadline, `cancelled` (polled every 20 ms: a client gone, a server
// stopping) and the heap cap stop it for real, within 20 ms, whatever the grammar engine is
// doing (it has no way to be interrupted; a schema with a few thousand optional properties
// compiles for minutes). Only a recipe whose compile ended within them is compiled again here
// (the same deterministic work, so no longer than the child took; it is not interrupted). Without
// `isolate` (tests, fuzz targets that want the compile's coverage) it runs here, unbounded.
struct CompileLimits {
  bool isolate = false;
  double seconds = 10.0;                    // wall-clock deadline of the recipe and the compile
  size_t memory_bytes = size_t{1} << 30;    // the child's heap beyond what it inherits
  std::function<bool()> cancelled;          // true: stop now (may be empty)
};

// Why an isolated compile was stopped (a tessera::Error whose what() says so in one line).
class GrammarCompileStopped : public Error {
 public:
  enum Reason { kDeadline, kCancelled, kMemory };
  GrammarCompileStopped(Reason reason, const std::string& message) : Error(message), reason_(reason) {}
  Reason reason() const { return reason_; }

 private:
  Reason reason_;
};

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

  // The constraint that `recipe` describes, from the cache under `key` (which must determine
  // the recipe) or compiled within `limits` and cached. `recipe` runs where the compile runs (in
  // the child with `isolate`), so that its own cost (a schema's EBNF) is under the same budget;
  // a tessera::Error it throws reaches the caller with its message. Throws
  // GrammarCompileStopped when the budget stops it.
  std::shared_ptr<const CompiledConstraint> Compile(const std::string& key, const std::function<GrammarRecipe()>& recipe,
                                                    const CompileLimits& limits) const;
  // The compiled-grammar cache: at most `bytes` (the engine's own estimate of each grammar's
  // memory, plus its key); least recently used first out. Default 256 MiB.
  void SetCacheBytes(size_t bytes) const;
  size_t cache_bytes() const;    // held now
  size_t cache_entries() const;  // held now

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
