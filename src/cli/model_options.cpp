#include "cli/model_options.h"

#include <cstdio>

#include "core/error.h"
#include "parallel/communicator.h"
#include "parallel/tp_group.h"

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
  cmd->add_option("--exact-layers", args.exact_layers,
                  "with --precision fast: run the first N layers as exact (float32 activations, BF16 "
                  "attention and router); less error for a little speed, see docs/ACCURACY.md")
      ->capture_default_str()
      ->check(CLI::Range(0, 1024));
  cmd->add_option("--tp", args.tp,
                  "tensor-parallel degree: split heads, experts and lm_head over the ranks of an MPI job "
                  "(mpirun -np P tessera ... --tp P, ranks on one or several hosts)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--tp-experts", args.tp_experts,
                  "how --tp splits the MoE experts: tensor (a slice of every expert on every rank: balanced "
                  "whatever the routing, docs/BENCHMARKS.md) or expert (whole experts per rank; needs P to "
                  "divide the experts)")
      ->capture_default_str()
      ->check(CLI::IsMember({"tensor", "expert"}));
  cmd->add_option("--sparse", args.sparse,
                  "checkpoints whose config records an N:M pattern (tessera sparsify, compressed-tensors "
                  "sparsity_config): on holds those weights as kept values + masks and runs the sparse "
                  "kernels; off runs dense-with-zeros weights dense (bitmask-compressed ones stay sparse)")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  cmd->add_option("--mla", args.mla,
                  "DeepSeek attention: absorbed (attend over the cached latent rows, kv_b_proj folded into the "
                  "query and output) or naive (decompress every cached position's per-head keys and values, "
                  "as transformers does); the same logits to rounding, docs/BENCHMARKS.md compares their speed")
      ->capture_default_str()
      ->check(CLI::IsMember({"absorbed", "naive"}));
}

ModelOptions ToModelOptions(const ModelArgs& args) {
  ModelOptions o;
  o.precision = args.precision == "exact" ? Precision::kExact : Precision::kFast;
  o.dense = args.dense == "int8" ? DenseWeights::kInt8 : DenseWeights::kBf16;
  o.exact_layers = args.exact_layers;
  o.sparse_kernels = args.sparse == "on";
  o.mla = args.mla == "naive" ? MlaForm::kNaive : MlaForm::kAbsorbed;
  o.tp_experts = args.tp_experts == "expert" ? TpExperts::kExpert : TpExperts::kTensor;
  o.tp = MakeTensorParallelGroup(args.tp);
  if (o.tp && o.tp->rank() != 0 && std::freopen("/dev/null", "w", stdout) == nullptr) {
    Fail("rank ", o.tp->rank(), ": cannot silence stdout");
  }
  return o;
}

uint64_t AgreeAcrossRanks(const ModelOptions& options, uint64_t value) {
  if (options.tp) World().Broadcast(&value, sizeof(value), 0);
  return value;
}

bool ReadLineAcrossRanks(const ModelOptions& options, std::istream& in, std::string& line) {
  if (!options.tp) return static_cast<bool>(std::getline(in, line));
  uint64_t header[2] = {0, 0};  // got a line, its size
  if (options.tp->rank() == 0 && std::getline(in, line)) {
    header[0] = 1;
    header[1] = line.size();
  }
  World().Broadcast(header, sizeof(header), 0);
  if (header[0] == 0) return false;
  line.resize(header[1]);
  if (header[1] > 0) World().Broadcast(line.data(), header[1], 0);
  return true;
}

bool PrintsForTheJob(const ModelOptions& options) { return !options.tp || options.tp->rank() == 0; }

}  // namespace tessera::cli
