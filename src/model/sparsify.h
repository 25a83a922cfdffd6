// N:M pruning of a dense family's checkpoint (issue 18 point 4): every linear weight of the
// decoder layers (q/k/v/o, gate/up/down, Qwen3-MoE's experts; not the router, the embedding or
// lm_head) keeps, in each output row and each group of `group` consecutive input columns, the
// `kept` entries of highest score and is zero elsewhere (sparsity.md §1, §12: N is the number
// KEPT). Scores:
//   magnitude  |W_ij|;
//   wanda      |W_ij| · ‖X_j‖₂, with X_j the j-th input feature of that module over the
//              calibration tokens, recorded by the engine's own exact forward (Wanda, arXiv
//              2306.11695; MoE experts, whose inputs are not recorded, fall back to magnitude).
// Ties go to the lower column (deterministic). Input columns past the last whole group are left
// dense (none for the published shapes, which are multiples of 16). gpt-oss is accepted too: its
// attention as above, its MXFP4 experts by the magnitude of their E2M1 codes (a group of M lies in
// one 32-value block, whose shared scale does not change the order), pruned codes set to +0, so
// the experts stay MXFP4 (there is no sparse MXFP4 format yet; docs/ACCURACY.md measures what
// the pattern costs). `layers`, `attention` and `mlp` restrict the pruning; config.json then
// lists the pruned modules by name ("module_names").
//
// The output is the dense-with-zeros form: the same tensors, dtypes and shapes (kept weights are
// copied bit for bit), so tessera and transformers load it as any dense checkpoint; config.json
// records the pattern as "tessera_sparsity": {"kept", "group", "method", "modules"}. With
// bitmask24 (2:4 only) the pruned modules are written as compressed-tensors sparse-24-bitmask
// instead (model/sparse_scheme.h: <module>.compressed / .bitmask / .shape, and a
// quantization_config.sparsity_config naming the pruned modules), about 9/16 of the bytes for
// bf16. The directory rules are quantize.h's (checked before writing, weights first, config.json
// last, temporary files removed on errors).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace tessera {

struct SparsifyOptions {
  int kept = 2, group = 4;  // N:M, 1 <= kept < group <= 16
  bool wanda = false;       // false: magnitude
  std::string calib_file;   // wanda: calibration text
  int64_t samples = 32;     // wanda: windows of `window` tokens
  int64_t window = 512;
  bool overwrite = false;
  bool bitmask24 = false;  // compressed-tensors sparse-24-bitmask output (2:4 only)
  // Which decoder layers and which of their modules to prune (empty: all layers; both kinds).
  std::vector<int64_t> layers;
  bool attention = true, mlp = true;  // q/k/v/o; gate/up/down and experts
  std::function<void(const std::string&)> progress;
};

struct SparsifyResult {
  std::vector<std::string> weight_files;
  size_t num_tensors = 0;
  size_t pruned_modules = 0;
  uint64_t weights_in_pruned = 0, zeros_after = 0;  // over the pruned modules
  int64_t calibration_tokens = 0;
  double seconds = 0.0;
};

// Throws one-line tessera::Errors: a bad pattern, gpt-oss (MXFP4 experts), a quantized
// checkpoint, tensors that do not match the config, wanda without calibration text.
SparsifyResult SparsifyCheckpoint(const std::string& in_dir, const std::string& out_dir, const SparsifyOptions& options);

// One row's group selection: for each group of `group` columns of `scores` (n values), the
// `kept` highest (ties: lower column) are marked 1 in `keep`; a tail shorter than a group is kept.
void SelectNm(const float* scores, size_t n, int kept, int group, uint8_t* keep);

}  // namespace tessera
