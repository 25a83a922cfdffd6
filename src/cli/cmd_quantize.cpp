// `tessera quantize`: convert a checkpoint with dense (BF16) experts into the gpt-oss MXFP4
// layout (model/quantize.h), or a dense family's linear layers to int4 (model/quantize_int4.h).
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "core/error.h"
#include "io/json_util.h"
#include "model/quantize.h"
#include "model/quantize_int4.h"

namespace tessera::cli {

namespace {

struct QuantizeArgs {
  std::string model;
  std::string to;
  std::string out;
  bool force = false;
  int64_t group = 128;
  std::string format = "autoawq";
  std::string calib;
  int64_t samples = 128;
};

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

void RunQuantizeInt4(const QuantizeArgs& args) {
  Int4QuantizeOptions options;
  options.awq = args.to == "awq";
  options.layout = args.format == "compressed-tensors" ? Int4Layout::kPackQuantized : Int4Layout::kAutoAwqGemm;
  options.group_size = args.group;
  options.calib_file = args.calib;
  options.samples = args.samples;
  options.overwrite = args.force;
  options.progress = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
  const Int4QuantizeResult r = QuantizeToInt4(args.model, args.out, options);
  std::printf("quantize: %s -> %s (%s, %s, group %lld)\n", args.model.c_str(), args.out.c_str(), args.to.c_str(),
              args.format.c_str(), static_cast<long long>(args.group));
  if (r.calibration_tokens > 0) std::printf("calibration: %lld tokens\n", static_cast<long long>(r.calibration_tokens));
  std::printf("wrote %zu tensors (%zu int4 modules), %.1f MB, in %zu file%s: %s\n", r.num_tensors, r.quantized_modules,
              r.output_bytes / 1e6, r.weight_files.size(), r.weight_files.size() == 1 ? "" : "s",
              Join(r.weight_files).c_str());
  std::printf("time: %.1f s\n", r.seconds);
}

void RunQuantize(const QuantizeArgs& args) {
  if (args.to == "awq" || args.to == "int4-rtn") return RunQuantizeInt4(args);
  if (args.to != "mxfp4") Fail("unsupported target format ", Quote(args.to), " (supported: mxfp4, awq, int4-rtn)");
  QuantizeOptions options;
  options.to = args.to;  // checked by QuantizeCheckpoint: one-line error for anything but mxfp4
  options.overwrite = args.force;
  if (isatty(STDERR_FILENO)) {
    options.progress = [last = -1](uint64_t done, uint64_t total) mutable {
      const int percent = total == 0 ? 100 : static_cast<int>(done * 100 / total);
      if (percent == last) return;
      last = percent;
      std::fprintf(stderr, "\rquantize: %3d%% (%.2f / %.2f GB)", percent, done / 1e9, total / 1e9);
      if (done == total) std::fprintf(stderr, "\n");
    };
  }
  const QuantizeResult r = QuantizeCheckpoint(args.model, args.out, options);
  std::printf("quantize: %s -> %s (%s)\n", args.model.c_str(), args.out.c_str(), args.to.c_str());
  std::printf("wrote %zu tensors (%zu expert matrices as MXFP4 blocks + scales), %.1f MB from %.1f MB, in %zu file%s: %s\n",
              r.num_tensors, r.quantized_matrices, r.output_bytes / 1e6, r.input_bytes / 1e6, r.weight_files.size(),
              r.weight_files.size() == 1 ? "" : "s", Join(r.weight_files).c_str());
  std::printf("plus config.json%s%s\n", r.copied_files.empty() ? "" : ", ", Join(r.copied_files).c_str());
  if (!r.skipped.empty()) std::printf("not copied (not regular files): %s\n", Join(r.skipped).c_str());
  std::printf("time: %.1f s\n", r.seconds);
}

}  // namespace

void RegisterQuantize(CLI::App& app) {
  auto args = std::make_shared<QuantizeArgs>();
  auto* cmd = app.add_subcommand(
      "quantize",
      "quantize a checkpoint: gpt-oss dense experts to MXFP4 (--to mxfp4), or a dense family's linear layers to "
      "int4 (--to int4-rtn, --to awq)");
  cmd->add_option("-m,--model", args->model, "input model directory (Hugging Face layout, experts unquantized)")
      ->required();
  cmd->add_option("--to", args->to,
                  "target format: mxfp4 (gpt-oss experts: OCP MX E2M1 codes, E8M0 scales, blocks of 32); awq "
                  "(dense families: activation-aware int4, needs --calib); int4-rtn (round-to-nearest int4)")
      ->required();
  cmd->add_option("--group", args->group, "int4: inputs per quantization group (-1: one per row; default 128)");
  cmd->add_option("--format", args->format, "int4: checkpoint form written: autoawq (GEMM) or compressed-tensors")
      ->check(CLI::IsMember({"autoawq", "compressed-tensors"}));
  cmd->add_option("--calib", args->calib, "awq: calibration text file (tokenized with the model's tokenizer)");
  cmd->add_option("--samples", args->samples, "awq: calibration windows of 512 tokens (default 128)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("-o,--out", args->out, "output directory (created; must be empty unless --force)")->required();
  cmd->add_flag("-f,--force", args->force, "replace the model files of a non-empty output directory");
  cmd->callback([args] { RunQuantize(*args); });
}

}  // namespace tessera::cli
