#include "cli/model_options.h"

namespace tessera::cli {

void AddModelOptions(CLI::App* cmd, ModelArgs& args, const char* default_precision) {
  args.precision = default_precision;
  cmd->add_option("--precision", args.precision,
                  "exact: float32 activations everywhere, as the reference implementation; fast: "
                  "int8 activations against MXFP4 experts (and int8 dense weights), see docs/ACCURACY.md")
      ->capture_default_str()
      ->check(CLI::IsMember({"exact", "fast"}));
  cmd->add_option("--dense", args.dense,
                  "attention, router and lm_head weights: bf16 (as in the checkpoint) or int8 "
                  "(per-row scales, made at load; needs --precision fast)")
      ->capture_default_str()
      ->check(CLI::IsMember({"bf16", "int8"}));
}

ModelOptions ToModelOptions(const ModelArgs& args) {
  ModelOptions o;
  o.precision = args.precision == "exact" ? Precision::kExact : Precision::kFast;
  o.dense = args.dense == "int8" ? DenseWeights::kInt8 : DenseWeights::kBf16;
  return o;
}

}  // namespace tessera::cli
