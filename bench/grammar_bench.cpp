// Structured outputs: what the grammar costs per generated token (engine/grammar.h), i.e. the
// mask filled and applied to one row of logits plus the sampled token accepted, along the
// tokens of a real JSON reply. Vocabularies: o200k_harmony (201,088 logits, gpt-oss), and its
// first 128,256 ids (Llama 3's size; a byte-level BPE vocabulary of the most frequent merges,
// standing in for a 128k tokenizer, none of which ships with the repository).
// Also the one-time costs: building the vocabulary and compiling a schema.
//
//   build/grammar_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <memory>
#include <string>
#include <vector>

#include "engine/grammar.h"
#include "tokenizer/tokenizer.h"

namespace tessera {
namespace {

const char* kSchema = R"({"type": "object", "properties": {
  "name": {"type": "string"}, "age": {"type": "integer", "minimum": 0, "maximum": 150},
  "email": {"type": "string", "format": "email"},
  "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 8},
  "address": {"type": "object", "properties": {"city": {"type": "string"}, "zip": {"type": "string", "pattern": "^[0-9]{5}$"}},
              "required": ["city"], "additionalProperties": false}},
  "required": ["name", "age", "tags"], "additionalProperties": false})";

// A reply as the compact grammar writes it (", " and ": " separators); all its o200k tokens lie in
// the 128k cut.
const char* kReply =
    R"({"name": "Augusta King, Countess of Lovelace", "age": 36, "email": "ada@analytical.example", "tags": ["mathematics", "poetical science", "engines"], "address": {"city": "London", "zip": "10001"}})";

struct Setup {
  int64_t vocab;
  std::unique_ptr<GrammarVocabulary> grammar;
  std::shared_ptr<const CompiledConstraint> constraint;
  std::vector<int32_t> reply;  // kReply's tokens, then the end token
};

Setup& SetupFor(int64_t vocab) {
  static std::unique_ptr<Setup> cache[2];
  const int slot = vocab > 150000 ? 0 : 1;
  if (!cache[slot]) {
    const Tokenizer& tokenizer = Tokenizer::BuiltIn();
    auto s = std::make_unique<Setup>();
    s->vocab = vocab;
    s->grammar = std::make_unique<GrammarVocabulary>(tokenizer, vocab);
    // The end: <|endoftext|> in o200k; in the cut, its last id (ids are what the grammar needs).
    const int32_t end = vocab > 199999 ? 199999 : static_cast<int32_t>(vocab - 1);
    s->constraint = s->grammar->JsonSchema(kSchema, std::vector<int32_t>{end});
    s->reply = tokenizer.Encode(kReply);
    s->reply.push_back(end);
    for (int32_t t : s->reply) {
      if (t >= vocab) std::abort();  // every reply token must have a logit (also in the cut)
    }
    cache[slot] = std::move(s);
  }
  return *cache[slot];
}

// Per generated token: Mask over one row of logits, then Accept.
void BM_MaskAndAccept(benchmark::State& state) {
  if (!GrammarVocabulary::Available()) {
    state.SkipWithError("no grammar engine in this build");
    return;
  }
  Setup& s = SetupFor(state.range(0));
  std::vector<float> logits(static_cast<size_t>(s.vocab), 0.0f);
  int64_t tokens = 0;
  for (auto _ : state) {
    GrammarState grammar(s.constraint);
    for (int32_t t : s.reply) {
      grammar.Mask(logits);
      if (!grammar.Accept(t)) state.SkipWithError("the reply does not follow the schema");
      benchmark::DoNotOptimize(logits.data());
    }
    tokens += static_cast<int64_t>(s.reply.size());
  }
  // Seconds per token (kInvert of the rate): the figure to set beside a decode step.
  state.counters["s_per_token"] =
      benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["reply_tokens"] = static_cast<double>(s.reply.size());
}
BENCHMARK(BM_MaskAndAccept)->Arg(201088)->Arg(128256)->Unit(benchmark::kMicrosecond);

// One-time: the vocabulary of a tokenizer (once per server), and a schema (once per distinct
// schema; compiled schemas are cached by text).
void BM_BuildVocabulary(benchmark::State& state) {
  for (auto _ : state) {
    GrammarVocabulary grammar(Tokenizer::BuiltIn(), state.range(0));
    benchmark::DoNotOptimize(&grammar);
  }
}
BENCHMARK(BM_BuildVocabulary)->Arg(201088)->Unit(benchmark::kMillisecond)->Iterations(3);

void BM_CompileSchema(benchmark::State& state) {
  GrammarVocabulary grammar(Tokenizer::BuiltIn(), state.range(0));
  int n = 0;
  for (auto _ : state) {
    // A distinct schema text each time: the compiler's cache would answer a repeat at once.
    const std::string schema = std::string(kSchema).insert(1, "\"title\": \"s" + std::to_string(n++) + "\", ");
    benchmark::DoNotOptimize(grammar.JsonSchema(schema, std::vector<int32_t>{199999}));
  }
}
BENCHMARK(BM_CompileSchema)->Arg(201088)->Unit(benchmark::kMillisecond)->Iterations(5);

}  // namespace
}  // namespace tessera
