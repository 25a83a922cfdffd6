// Fuzz target of JSON schema -> grammar (issue 44 point 6): the input is a request's schema as
// the server receives it. It goes through the bounded JSON parser, the response_format checks
// (features the grammar could not enforce), the request budget (CheckStructuredBudget: bytes,
// properties, enum values: what keeps a compile's time bounded), the schema's conversion and
// compile against the tiny-gpt-oss vocabulary, and 32 steps of a matcher that takes the first
// token the mask allows. The first byte picks the reply format: /v1/completions (the schema
// alone) or a harmony chat reply (the schema in the final message, or as a forced tool call's
// parameters), so the structural-tag paths are covered too.
// The compile runs in this process (CompileLimits without isolate), so that libFuzzer sees its
// coverage; its time is held by the budget, and libFuzzer's -timeout reports an input that still
// compiles too long. Refusals (tessera::Error, ApiError 400) are valid answers; anything else is a
// finding. Seeds: tests/fuzz/corpus/schema.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_main.h"
#include "io/json_util.h"
#include "model/model.h"
#include "server/openai_api.h"
#include "server/structured_output.h"
#include "tokenizer/tokenizer.h"

namespace {

using namespace tessera;
using json = ApiJson;

struct Harness {
  std::unique_ptr<Model> model = Model::Load(TESSERA_SOURCE_DIR "/models/tiny-gpt-oss");
  Tokenizer tokenizer = Tokenizer::FromModelDir(model->path());
  ChatFormat format{*model, tokenizer};
  Harness() {
    // A small cache: distinct inputs must not grow the process (and eviction gets exercised).
    if (const GrammarVocabulary* v = format.grammar_vocabulary()) v->SetCacheBytes(size_t{8} << 20);
  }
};

Harness& Shared() {
  static Harness* harness = new Harness();  // lives for the whole process
  return *harness;
}

void Run(std::string_view input) {
  Harness& h = Shared();
  const int mode = input.empty() ? 0 : static_cast<unsigned char>(input[0]) % 3;
  if (!input.empty()) input.remove_prefix(1);
  const json schema = ParseOrderedJsonText(std::string(input), "schema", {size_t{1} << 20, kMaxJsonDepth});
  const json field = {{"type", "json_schema"}, {"json_schema", {{"name", "s"}, {"schema", schema}}}};
  ResponseFormat response = ParseResponseFormat(&field);
  std::shared_ptr<const CompiledConstraint> constraint;
  if (mode == 0) {
    CheckStructuredBudget(response, {});
    constraint = BuildReplyConstraint(h.format, response, nullptr);
  } else {
    ChatRequestData chat;
    if (mode == 2) {
      // The schema as a forced tool call's parameters.
      ToolDescription tool;
      tool.name = "f";
      tool.parameters = response.schema;
      chat.tools.push_back(tool);
      chat.tool_choice.mode = ToolChoice::kRequired;
      response = ResponseFormat{};
    }
    CheckStructuredBudget(response, chat.tools);
    CheckReplyConstraint(response, &chat);
    constraint = BuildReplyConstraint(h.format, response, &chat);
  }
  if (!constraint) return;
  GrammarState state(constraint);
  std::vector<float> logits(static_cast<size_t>(h.model->vocab_size()));
  for (int step = 0; step < 32 && !state.Finished(); ++step) {
    std::fill(logits.begin(), logits.end(), 0.0f);
    state.Mask(logits);
    int32_t next = -1;
    for (size_t t = 0; t < logits.size(); ++t) {
      if (logits[t] != -std::numeric_limits<float>::infinity()) {
        next = static_cast<int32_t>(t);
        break;
      }
    }
    if (next < 0) break;  // a grammar with nothing allowed (an unsatisfiable schema) ends here
    if (!state.Accept(next)) {
      std::fprintf(stderr, "schema_fuzzer: the matcher refused token %d that its own mask allowed\n", next);
      std::abort();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    fuzz::Guarded([&] { Run(std::string_view(reinterpret_cast<const char*>(data), size)); });
  } catch (const ApiError& e) {
    if (std::getenv("TESSERA_FUZZ_VERBOSE")) std::fprintf(stderr, "  refused: %s\n", e.what());
    if (e.status() != 400) {
      std::fprintf(stderr, "schema_fuzzer: status %d: %s\n", e.status(), e.what());
      std::abort();
    }
  }
  return 0;
}
