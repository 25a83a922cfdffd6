// `tessera sparsify`: N:M pruning of a dense family's checkpoint (model/sparsify.h), by magnitude
// or by Wanda's |W| x ||X|| with activation norms from calibration text.
#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "core/error.h"
#include "model/sparsify.h"

namespace tessera::cli {
namespace {

struct SparsifyArgs {
  std::string model, out, pattern = "2:4", method = "magnitude", calib, format = "dense", layers, modules = "all";
  int64_t samples = 32;
  bool force = false;
};

void RunSparsify(const SparsifyArgs& a) {
  SparsifyOptions o;
  const size_t colon = a.pattern.find(':');
  try {
    if (colon == std::string::npos) throw std::invalid_argument("no colon");
    size_t used = 0;
    o.kept = std::stoi(a.pattern.substr(0, colon), &used);
    if (used != colon) throw std::invalid_argument("junk");
    o.group = std::stoi(a.pattern.substr(colon + 1), &used);
    if (used != a.pattern.size() - colon - 1) throw std::invalid_argument("junk");
  } catch (const std::exception&) {
    Fail("--pattern '", a.pattern, "': expected N:M (N kept of every M, e.g. 2:4)");
  }
  o.wanda = a.method == "wanda";
  if (!o.wanda && !a.calib.empty()) Fail("--calib is for --method wanda");
  o.calib_file = a.calib;
  o.samples = a.samples;
  o.overwrite = a.force;
  o.bitmask24 = a.format == "sparse-24-bitmask";
  o.attention = a.modules != "mlp";
  o.mlp = a.modules != "attention";
  // --layers: comma-separated indices and ranges ("0-3,7").
  for (size_t pos = 0; pos < a.layers.size();) {
    const size_t comma = std::min(a.layers.find(',', pos), a.layers.size());
    const std::string item = a.layers.substr(pos, comma - pos);
    try {
      size_t used = 0;
      const size_t dash = item.find('-');
      const int64_t first = std::stoll(item.substr(0, dash), &used);
      if (used != std::min(dash, item.size())) throw std::invalid_argument("junk");
      int64_t last = first;
      if (dash != std::string::npos) {
        last = std::stoll(item.substr(dash + 1), &used);
        if (used != item.size() - dash - 1) throw std::invalid_argument("junk");
      }
      if (first < 0 || last < first) throw std::invalid_argument("range");
      for (int64_t l = first; l <= last; ++l) o.layers.push_back(l);
    } catch (const std::exception&) {
      Fail("--layers '", a.layers, "': expected layer indices and ranges such as 0-3,7");
    }
    pos = comma + 1;
  }
  o.progress = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
  const SparsifyResult r = SparsifyCheckpoint(a.model, a.out, o);
  std::printf("sparsify: %s -> %s (%d:%d, %s, %s)\n", a.model.c_str(), a.out.c_str(), o.kept, o.group, a.method.c_str(),
              a.format.c_str());
  if (r.calibration_tokens > 0) std::printf("calibration: %lld tokens\n", static_cast<long long>(r.calibration_tokens));
  std::printf("pruned %zu modules: %llu of %llu weights zeroed (%.1f %%); wrote %zu tensors in %zu file%s\n",
              r.pruned_modules, static_cast<unsigned long long>(r.zeros_after),
              static_cast<unsigned long long>(r.weights_in_pruned),
              r.weights_in_pruned ? 100.0 * static_cast<double>(r.zeros_after) / static_cast<double>(r.weights_in_pruned) : 0.0,
              r.num_tensors, r.weight_files.size(), r.weight_files.size() == 1 ? "" : "s");
  std::printf("time: %.1f s\n", r.seconds);
}

}  // namespace

void RegisterSparsify(CLI::App& app) {
  auto args = std::make_shared<SparsifyArgs>();
  auto* cmd = app.add_subcommand("sparsify", "N:M-prune a dense family's linear layers into a checkpoint tessera runs sparse");
  cmd->add_option("-m,--model", args->model, "input model directory (Llama, Mistral, Qwen2/3, Qwen3-MoE unquantized; gpt-oss with MXFP4 experts)")
      ->required();
  cmd->add_option("--pattern", args->pattern, "N:M: keep N of every M consecutive inputs per output row")
      ->capture_default_str();
  cmd->add_option("--method", args->method, "magnitude (|W|) or wanda (|W| x input norm, needs --calib)")
      ->capture_default_str()->check(CLI::IsMember({"magnitude", "wanda"}));
  cmd->add_option("--calib", args->calib, "wanda: calibration text file (tokenized with the model's tokenizer)");
  cmd->add_option("--samples", args->samples, "wanda: calibration windows of 512 tokens")->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--layers", args->layers, "decoder layers to prune, e.g. 0-3,7 (default: all)");
  cmd->add_option("--modules", args->modules, "which modules: attention (q/k/v/o), mlp (gate/up/down, experts) or all")
      ->capture_default_str()->check(CLI::IsMember({"all", "attention", "mlp"}));
  cmd->add_option("--format", args->format,
                  "dense: the same tensors with zeros (transformers loads it as is); sparse-24-bitmask: "
                  "compressed-tensors' 2:4 form (kept values + bitmask, 9/16 of the bf16 bytes)")
      ->capture_default_str()->check(CLI::IsMember({"dense", "sparse-24-bitmask"}));
  cmd->add_option("-o,--out", args->out, "output directory (created; must be empty unless --force)")->required();
  cmd->add_flag("-f,--force", args->force, "replace the model files of a non-empty output directory");
  cmd->callback([args] { RunSparsify(*args); });
}

}  // namespace tessera::cli
