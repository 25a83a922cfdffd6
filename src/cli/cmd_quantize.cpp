// `tessera quantize`: convert a checkpoint with dense (BF16) experts into the gpt-oss MXFP4
// layout (see model/quantize.h).
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "model/quantize.h"

namespace tessera::cli {

namespace {

struct QuantizeArgs {
  std::string model;
  std::string to;
  std::string out;
  bool force = false;
};

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

void RunQuantize(const QuantizeArgs& args) {
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
      "quantize", "convert a gpt-oss checkpoint with dense BF16 experts into the MXFP4 layout of the real checkpoints");
  cmd->add_option("-m,--model", args->model, "input model directory (Hugging Face layout, experts unquantized)")
      ->required();
  cmd->add_option("--to", args->to, "target format: mxfp4 (OCP MX: E2M1 codes, E8M0 scales, blocks of 32)")
      ->required();
  cmd->add_option("-o,--out", args->out, "output directory (created; must be empty unless --force)")->required();
  cmd->add_flag("-f,--force", args->force, "replace the model files of a non-empty output directory");
  cmd->callback([args] { RunQuantize(*args); });
}

}  // namespace tessera::cli
