// `tessera synth`: write a synthetic gpt-oss model directory (see model/synth.h).
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "core/error.h"
#include "model/quant_scheme.h"
#include "model/synth.h"

namespace tessera::cli {

namespace {

struct SynthArgs {
  std::string preset;
  std::string out;
  uint64_t seed = 0;
  uint64_t max_shard_bytes = kGptOssMaxShardBytes;
  bool force = false;
  std::string quant;   // "", awq, compressed-tensors, compressed-tensors-sym
  int64_t group = 128;
  int64_t layers = 0;  // 0: the preset's own count
};

// "26.44 M", "20.91 B"; "52.0 MB", "13.76 GB".
std::string Scaled(double value, const char* small_unit, const char* large_unit, int small_digits) {
  char buf[32];
  if (value >= 1e9) std::snprintf(buf, sizeof(buf), "%.2f %s", value / 1e9, large_unit);
  else std::snprintf(buf, sizeof(buf), "%.*f %s", small_digits, value / 1e6, small_unit);
  return buf;
}

void RunSynth(const SynthArgs& args) {
  SynthOptions options;
  options.config_json = SynthPresetConfigJson(args.preset);
  if (args.layers > 0) options.config_json = ShallowerConfig(options.config_json, args.layers);
  if (!args.quant.empty()) {
    if (options.config_json.value("model_type", "") == "gpt_oss") {
      Fail("synth: --quant applies to the dense families (gpt-oss presets carry MXFP4 experts)");
    }
    Int4Scheme scheme;
    scheme.layout = args.quant == "awq" ? Int4Layout::kAutoAwqGemm : Int4Layout::kPackQuantized;
    scheme.zero_points = args.quant != "compressed-tensors-sym";
    scheme.group_size = args.group;
    options.config_json["quantization_config"] = Int4QuantizationConfigJson(scheme);
  }
  options.seed = args.seed;
  options.max_shard_bytes = args.max_shard_bytes;
  options.overwrite = args.force;
  if (isatty(STDERR_FILENO)) {
    // One progress line rewritten in place, at most once per percent.
    options.progress = [last = -1](uint64_t done, uint64_t total) mutable {
      const int percent = total == 0 ? 100 : static_cast<int>(done * 100 / total);
      if (percent == last) return;
      last = percent;
      std::fprintf(stderr, "\rsynth: %3d%% (%.2f / %.2f GB)", percent, done / 1e9, total / 1e9);
      if (done == total) std::fprintf(stderr, "\n");
    };
  }
  std::printf("synth: preset %s, seed %llu -> %s\n", args.preset.c_str(),
              static_cast<unsigned long long>(args.seed), args.out.c_str());
  std::fflush(stdout);
  const SynthResult r = WriteSyntheticModel(args.out, options);
  std::string files;
  for (const std::string& f : r.weight_files) files += (files.empty() ? "" : ", ") + f;
  std::printf("wrote %zu tensors (%s parameters, %s) in %zu file%s: %s\n", r.num_tensors,
              Scaled(r.parameters, "M", "B", 2).c_str(), Scaled(r.tensor_bytes, "MB", "GB", 1).c_str(),
              r.weight_files.size(), r.weight_files.size() == 1 ? "" : "s", files.c_str());
  if (options.config_json.value("model_type", "") == "gpt_oss") {
    std::printf("plus config.json, generation_config.json, tokenizer.json, tokenizer_config.json, "
                "special_tokens_map.json\n");
  } else {
    std::printf("plus config.json, generation_config.json (no tokenizer: the family's real one cannot be made "
                "offline)\n");
  }
  std::printf("time: %.1f s (%.0f MB/s)\n", r.seconds, r.seconds > 0 ? r.tensor_bytes / 1e6 / r.seconds : 0.0);
}

// At most 19 digits, nothing else: CLI11 would wrap "-5" around to a huge unsigned value and
// saturate values beyond 2^64 silently.
CLI::Validator UnsignedInteger(bool allow_zero) {
  return CLI::Validator(
      [allow_zero](std::string& value) -> std::string {
        const bool digits = !value.empty() && value.size() <= 19 &&
                            value.find_first_not_of("0123456789") == std::string::npos;
        const bool zero = value.find_first_not_of("0") == std::string::npos;
        if (!digits || (zero && !allow_zero)) {
          return allow_zero ? "must be an unsigned integer of at most 19 digits"
                            : "must be a positive integer of at most 19 digits";
        }
        return "";
      },
      allow_zero ? "UINT" : "POSITIVE");
}

}  // namespace

void RegisterSynth(CLI::App& app) {
  auto args = std::make_shared<SynthArgs>();
  auto* cmd = app.add_subcommand(
      "synth", "write a model directory (Hugging Face layout) with deterministic random weights");
  cmd->add_option("--preset", args->preset,
                  "model: tiny (gpt-oss, ~52 MB, for tests and demos), gpt-oss-20b (13.8 GB), gpt-oss-120b (65.2 GB), "
                  "llama-3.1-8b, mistral-7b, qwen2.5-7b, qwen3-8b, qwen3-30b-a3b (the real configs and tensor "
                  "layout, BF16; no tokenizer), tiny-llama, tiny-qwen3, tiny-qwen3-moe")
      ->required()
      ->check(CLI::IsMember(SynthPresetNames()));
  cmd->add_option("-o,--out", args->out, "output directory (created; must be empty unless --force)")
      ->required();
  cmd->add_option("--seed", args->seed, "random seed; the same seed gives byte-identical files")
      ->capture_default_str()
      ->check(UnsignedInteger(/*allow_zero=*/true));
  cmd->add_option("--max-shard-bytes", args->max_shard_bytes,
                  "start a new model-NNNNN-of-NNNNN.safetensors shard before exceeding this size "
                  "(the default reproduces the real checkpoints' shards)")
      ->capture_default_str()
      ->check(UnsignedInteger(/*allow_zero=*/false));
  cmd->add_flag("-f,--force", args->force, "replace the model files of a non-empty output directory");
  cmd->add_option("--quant", args->quant,
                  "store the linear layers as int4: awq (AutoAWQ GEMM), compressed-tensors (asymmetric) or "
                  "compressed-tensors-sym")
      ->check(CLI::IsMember({"awq", "compressed-tensors", "compressed-tensors-sym"}));
  cmd->add_option("--group", args->group, "int4 group size (-1: one group per input row; default 128)")
      ->check([](const std::string& v) -> std::string {
        try {
          const long long g = std::stoll(v);
          return g == -1 || (g > 0 && g % 8 == 0) ? "" : "must be -1 or a positive multiple of 8";
        } catch (...) {
          return "must be an integer";
        }
      });
  cmd->add_option("--layers", args->layers,
                  "keep only the first N decoder layers (every other dimension as the preset): a quick stand-in "
                  "for depth and per-layer measurements")
      ->check(CLI::PositiveNumber);
  cmd->callback([args] { RunSynth(*args); });
}

}  // namespace tessera::cli
