// Fuzz target of config.json and generation_config.json (issue 44 point 6). The input is split at
// fuzz::kSeparator lines into config.json, generation_config.json and quant_config.json (AutoAWQ's
// legacy file, read when config.json has no quantization_config); the parts present are written
// into a scratch directory that is read as a model directory is (LoadModelConfig,
// LoadGenerationConfig). A config that parses is validated (ValidateModelConfig); one the engine
// accepts must also survive what `tessera synth` does with it: ModelConfigToJson, parsed again,
// gives a config whose JSON is the same (a difference aborts: the writer and the reader disagree).
// The generation config is held to the same round trip.
// Seeds: tests/fuzz/corpus/config (the built-in models' and tests/data's config pairs).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_main.h"
#include "io/config.h"

namespace {

using namespace tessera;

const fuzz::ScratchDir& Scratch() {
  static const fuzz::ScratchDir dir("config");
  return dir;
}

[[noreturn]] void RoundTripFailed(const char* what, const std::string& first, const std::string& second) {
  std::fprintf(stderr, "config_fuzzer: %s does not survive its own writer:\n  %.2000s\n  %.2000s\n", what,
               first.c_str(), second.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<std::string_view> parts =
      fuzz::Split(std::string_view(reinterpret_cast<const char*>(data), size), 3);
  Scratch().Clear();
  Scratch().Write("config.json", parts[0]);
  if (parts.size() > 1) Scratch().Write("generation_config.json", parts[1]);
  if (parts.size() > 2) Scratch().Write("quant_config.json", parts[2]);

  fuzz::Guarded([&] {
    const ModelConfig config = LoadModelConfig(Scratch().str());
    ValidateModelConfig(config, "config.json");
    const std::string written = ModelConfigToJson(config).dump();
    ModelConfig again;
    if (!fuzz::Guarded([&] { again = ParseModelConfig(written, "written config.json"); })) {
      RoundTripFailed("config.json", written, "(refused)");
    }
    const std::string rewritten = ModelConfigToJson(again).dump();
    if (rewritten != written) RoundTripFailed("config.json", written, rewritten);
  });
  fuzz::Guarded([&] {
    const GenerationConfig generation = LoadGenerationConfig(Scratch().str());
    const std::string written = GenerationConfigToJson(generation).dump();
    GenerationConfig again;
    if (!fuzz::Guarded([&] { again = ParseGenerationConfig(written, "written generation_config.json"); })) {
      RoundTripFailed("generation_config.json", written, "(refused)");
    }
    const std::string rewritten = GenerationConfigToJson(again).dump();
    if (rewritten != written) RoundTripFailed("generation_config.json", written, rewritten);
  });
  return 0;
}
