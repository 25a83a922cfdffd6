// Which linear modules of a checkpoint are stored as group-quantized int4 and under which tensor
// names, from config.json's quantization_config (one description that the tensor list, `inspect`,
// the loader and the quantizer's writer share):
//   AutoAWQ GEMM ("quant_method": "awq", ../shared/reference/quantization.md B.1-B.3): every linear
//     module of the decoder layers except those whose name contains an entry of
//     modules_to_not_convert (transformers' rule); lm_head always stays 16-bit. Tensors
//     <module>.qweight I32 [in, out/8], .qzeros I32 [in/G, out/8], .scales F16 [in/G, out].
//   compressed-tensors pack-quantized (dense-decoders.md §10): the modules its config group
//     targets ("Linear": every linear module, lm_head included; "re:" patterns match the start
//     of the name as Python's re.match does) minus `ignore` (names or "re:" patterns). Tensors
//     <module>.weight_packed I32 [out, in/8], .weight_scale [out, in/G], .weight_zero_point I32
//     [ceil(out/8), in/G] (asymmetric only), .weight_shape I64 [2].
// Anything else (other bit widths, AutoAWQ's gemv / exllama / marlin layouts, activation
// quantization, act-order, several differing config groups) is a one-line error.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/config.h"
#include "io/safetensors.h"
#include "model/linear.h"
#include "model/sparse_scheme.h"
#include "model/tensor_specs.h"

namespace tessera {

struct Int4Scheme {
  Int4Layout layout = Int4Layout::kAutoAwqGemm;
  int64_t group_size = 128;  // -1: one group spans the whole input
  bool zero_points = true;   // compressed-tensors: asymmetric; AutoAWQ stores zeros always
  std::vector<std::string> not_converted;  // AutoAWQ: name substrings
  std::vector<std::string> targets;        // compressed-tensors
  std::vector<std::string> ignore;         // compressed-tensors

  bool Quantizes(const std::string& module) const;
  int64_t GroupFor(int64_t in) const { return group_size < 0 ? in : group_size; }
  // "AutoAWQ GEMM int4, group 128" (inspect and bench labels).
  std::string Describe() const;
};

// compressed-tensors' module selection: a module in `targets` ("Linear", module names, or "re:"
// patterns matched as Python's re.match) and not in `ignore` (names or patterns). Shared with
// sparse_scheme.h.
bool CompressedTensorsMatches(const std::vector<std::string>& targets, const std::vector<std::string>& ignore,
                              const std::string& module);

// DeepSeek-V3's FP8 checkpoints ("quant_method": "fp8", deepseek.md §7): every linear module of
// the decoder layers except the router (mlp.gate) and modules_to_not_convert stores
// <module>.weight F8_E4M3 [out, in] and <module>.weight_scale_inv F32 [ceil(out / block_rows),
// ceil(in / block_cols)]; W[i, j] = e4m3fn(code[i, j]) * scale[i / block_rows, j / block_cols].
// Edge blocks are partial (V3's kv_a_proj_with_mqa has 576 rows over blocks of 128).
struct Fp8Scheme {
  int64_t block_rows = 128, block_cols = 128;
  std::vector<std::string> not_converted;  // name substrings left unquantized
  bool Quantizes(const std::string& module) const;
};
// nullopt unless quant_method is fp8 (ValidateModelConfig checks weight_block_size).
std::optional<Fp8Scheme> Fp8SchemeOf(const ModelConfig& config);

// The scheme of a quantized dense checkpoint, nullopt for an unquantized one (or gpt-oss's MXFP4
// experts, which tensor_specs describes itself); throws tessera::Error naming `source` for
// schemes tessera cannot load.
std::optional<Int4Scheme> Int4SchemeOf(const ModelConfig& config, const std::string& source = "config.json");

// The quantization_config a checkpoint of `scheme` carries (what AutoAWQ / llm-compressor write;
// lm_head left 16-bit), for synth and the quantizer.
nlohmann::json Int4QuantizationConfigJson(const Int4Scheme& scheme);

// Tensor names of one int4 module (shape is empty for AutoAWQ).
struct Int4TensorNames {
  std::string codes, zeros, scales, shape;
};
Int4TensorNames Int4Names(const Int4Scheme& scheme, const std::string& module);

// The description of linear module `module` (W [out, in]): `<module>.weight` of `kind`, or its int4
// tensors when the scheme quantizes it. Throws naming the tensor when the shape cannot be
// quantized so (group size not dividing in, a group size that is not a multiple of 8, AutoAWQ's
// out not a multiple of 8).
// With a sparse-24-bitmask scheme (sparse_scheme.h) that covers the module: its .compressed,
// .bitmask and .shape tensors instead (in a multiple of 4, else a one-line error).
// With an FP8 scheme that covers the module: its F8_E4M3 .weight and F32 .weight_scale_inv.
void AddLinearSpecs(std::vector<TensorSpec>& specs, const std::optional<Int4Scheme>& scheme,
                    const std::string& module, int64_t out, int64_t in, TensorKind kind, int layer,
                    const std::string& source, const std::optional<SparseScheme>& sparse = std::nullopt,
                    const std::optional<Fp8Scheme>& fp8 = std::nullopt);

// The stored rows [row0, row0 + rows) and columns [col0, col0 + cols) of linear module `module`
// (its float `.weight`, or its int4 tensors, whose column range must then be whole groups:
// otherwise a one-line error naming the module and the group size).
// Modules a sparse scheme covers carry its pattern (LinearSource::nm_kept / nm_group), read from
// their dense .weight or their sparse-24-bitmask tensors.
// FP8 modules: whole blocks of columns (col0 and the end a multiple of block_cols, or the end).
LinearSource ModuleSource(const WeightStore& store, const std::optional<Int4Scheme>& scheme, const std::string& module,
                          int64_t row0 = 0, int64_t rows = -1, int64_t col0 = 0, int64_t cols = -1,
                          const std::optional<SparseScheme>& sparse = std::nullopt,
                          const std::optional<Fp8Scheme>& fp8 = std::nullopt);

}  // namespace tessera
