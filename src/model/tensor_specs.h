// The tensor set of a checkpoint, described once from the architecture row (architecture.h) and
// the config.
//
// ModelTensorSpecs(config) lists every tensor of a Hugging Face checkpoint: name, dtype, shape and
// role. `tessera synth` writes exactly this list, `tessera inspect` checks a directory against it,
// and the model loader maps it (../shared/reference/style.md §7.5: one description, missing or
// unexpected tensors reported by name). Float tensors are described as BF16 (what the real
// checkpoints store and synth writes); F16 and F32 are accepted in their place (DTypeFits).
//
// Every family (prefix `model.layers.{L}.`; H = hidden_size, D = head_dim, Nq / Nkv heads,
// I = the layer's intermediate size, E = experts, V = vocab_size):
//   input_layernorm.weight / post_attention_layernorm.weight   [H]            kNorm
//   self_attn.{q,k,v,o}_proj.weight   [Nq*D, H], [Nkv*D, H] x2, [H, Nq*D]       kLinearWeight
//     (every linear module's .weight: int4 tensors instead when quant_scheme.h's scheme says so)
//   self_attn.{q,k,v,o}_proj.bias     where the row's BiasRule says so          kLinearBias
//   self_attn.{q,k}_norm.weight       [D] (Qwen3, Qwen3-MoE)                    kNorm
//   self_attn.sinks                   [Nq] (gpt-oss)                            kAttentionSinks
//   DeepSeek MLA instead of q/k/v/o (deepseek.md §6; C = kv_lora_rank, R = qk_rope_head_dim,
//   P = qk_nope_head_dim, Vd = v_head_dim, Q = q_lora_rank):
//     self_attn.q_proj [Nq*(P+R), H], or self_attn.q_a_proj [Q, H], q_a_layernorm [Q], q_b_proj [Nq*(P+R), Q]
//     self_attn.kv_a_proj_with_mqa [C+R, H], kv_a_layernorm [C], kv_b_proj [Nq*(P+Vd), C], o_proj [H, Nq*Vd]
//   DeepSeek MoE layers also: mlp.gate.e_score_correction_bias [E] F32 (V3) and
//     mlp.shared_experts.{gate,up}_proj [S, H], down_proj [H, S], S = n_shared_experts * I
//   dense layers: mlp.{gate,up}_proj.weight [I, H], mlp.down_proj.weight [H, I] (+ .bias, Llama mlp_bias)
//   MoE layers:   <router_name>.weight [E, H] (+ .bias for gpt-oss)             kRouterWeight / kRouterBias
//     Qwen3-MoE:  mlp.experts.{e}.{gate,up}_proj.weight [I, H], .down_proj.weight [H, I]
//     gpt-oss (MXFP4, ../shared/reference/gpt-oss.md §2.1, §2.3):
//       mlp.experts.gate_up_proj_bias     [E, 2I]             BF16  kExpertBias
//       mlp.experts.gate_up_proj_blocks   [E, 2I, H/32, 16]   U8    kExpertBlocks
//       mlp.experts.gate_up_proj_scales   [E, 2I, H/32]       U8    kExpertScales
//       mlp.experts.down_proj_{bias,blocks,scales}   [E, H], [E, H, I/32, 16], [E, H, I/32]
//     rows of gate_up alternate gate, up (row 2k = gate_k, 2k + 1 = up_k), and so does its bias.
//     Unquantized gpt-oss checkpoints store the experts dense in HF's x @ W orientation instead:
//       mlp.experts.gate_up_proj [E, H, 2I]  kExpertWeight      mlp.experts.down_proj [E, I, H]
// plus model.embed_tokens.weight [V, H], model.norm.weight [H] and lm_head.weight [V, H]
// (absent when tie_word_embeddings). gpt-oss-20b: 3 + 19 x 24 = 459 tensors.
//
// gpt-oss layers list their tensors in the order of the real checkpoint's index (the HF converter
// walks the original checkpoint's sorted names: attn.norm, attn.out, attn.qkv split in three,
// sinks, mlp.gate, mlp1, mlp2, mlp.norm), and CheckpointOrder() also reproduces its layer order;
// the other families list them in module order, as save_pretrained writes them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "io/config.h"
#include "io/safetensors.h"

namespace tessera {

enum class TensorKind : uint8_t {
  kEmbedding,       // [V, H] token embedding rows
  kNorm,            // [H] RMSNorm weight
  kLinearWeight,    // [out, in] attention projection, y = x W^T
  kLinearBias,      // [out]
  kAttentionSinks,  // [Nq] one extra softmax logit per query head
  kRouterWeight,    // [E, H]
  kRouterBias,      // [E]
  kRouterCorrectionBias,  // [E] DeepSeek-V3 e_score_correction_bias: chooses experts, never weights them
  kExpertBlocks,    // [E, out, in/32, 16] MXFP4 E2M1 codes, raw bytes
  kExpertScales,    // [E, out, in/32] E8M0 scales, raw bytes
  kExpertBias,      // [E, out]
  kExpertWeight,    // [E, in, out] dense expert matrix (unquantized gpt-oss checkpoints)
  kExpertLinear,    // [out, in] one expert's projection (Qwen3-MoE mlp.experts.{e}.*_proj)
  kLmHead,          // [V, H] unembedding (not tied in gpt-oss)
  // A group-quantized 4-bit linear module in place of its .weight (model/quant_scheme.h).
  kInt4Codes,   // I32, 8 codes per element
  kInt4Zeros,   // I32, 8 zero points per element
  kInt4Scales,  // F16 / BF16 / F32 per group
  kInt4Shape,   // I64 [2]: [out, in] (compressed-tensors)
  // A compressed-tensors sparse-24-bitmask module in place of its .weight (model/sparse_scheme.h).
  kNmValues,   // [out, in/2] float: the kept values, row-major
  kNmBitmask,  // U8 [out, ceil(in/8)]: bit c % 8 of byte c / 8 = column c kept
  kNmShape,    // I64 [2, 1]: [out, in]
  // A DeepSeek FP8 module's F32 block scales (weight_scale_inv) beside its F8_E4M3 .weight.
  kFp8Scales,
};

std::string_view TensorKindName(TensorKind kind);

struct TensorSpec {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  TensorKind kind;
  int layer = -1;  // decoder layer index, -1 for global tensors
  std::vector<int64_t> module_shape = {};  // int4 tensors: their module's W [out, in]

  uint64_t numel() const;
  uint64_t nbytes() const { return numel() * DTypeSize(dtype); }
  // Logical model parameters held by the tensor: an MXFP4 code byte holds 2 weights and scale
  // bytes count as none (so gpt-oss-20b totals 20.91 B, as llama-bench reports; see
  // ../shared/reference/performance.md §2); every other tensor counts its elements.
  uint64_t parameters() const;
};

// Logical parameters of a stored tensor of `kind` with `numel` elements (the rule above).
uint64_t LogicalParameters(TensorKind kind, uint64_t numel);

enum class ExpertFormat { kMxfp4, kDense };

// kMxfp4 for quant_method "mxfp4", kDense for an unquantized checkpoint; any other method is a
// tessera::Error naming `source`.
ExpertFormat GptOssExpertFormat(const ModelConfig& config, const std::string& source = "config.json");

// Why Model::Load cannot run a checkpoint of `config` whose tensors all match the
// description (gpt-oss with unquantized experts, which `tessera quantize --to mxfp4` converts), or
// "" when it can. `inspect` reports the same reason, so the two never disagree.
std::string LoadBlocker(const ModelConfig& config, const std::string& source = "config.json");

// Every tensor of a checkpoint for `config`: model.embed_tokens, the layers (per-layer order as in
// the header comment), model.norm, lm_head. Throws tessera::Error naming `source` when the config
// cannot describe a model (unsupported model_type, a non-positive dimension, MXFP4 dimensions
// that are not multiples of 32).
std::vector<TensorSpec> ModelTensorSpecs(const ModelConfig& config, const std::string& source = "config.json");

// The same tensors in the order the architecture's real checkpoints store them. gpt-oss: layers
// sorted by their index as a string (0, 1, 10, 11, ..., 2, 20, ...), then embed_tokens, norm,
// lm_head; greedy sharding in this order with kGptOssMaxShardBytes (synth.h) reproduces the real
// gpt-oss-20b shard assignment. Other architectures: unchanged.
std::vector<TensorSpec> CheckpointOrder(const ModelConfig& config, std::vector<TensorSpec> specs);

// ---- checking stored tensors against the description ---------------------------------------

struct TensorProblem {
  enum class Type { kMissing, kUnexpected, kShape, kDType };
  Type type;
  std::string name;
  std::string detail;  // e.g. "shape [512, 2880], expected [4096, 2880]"

  // One line: "missing tensor 'x'", "unexpected tensor 'x'", "tensor 'x': <detail>".
  std::string ToString() const;
};

// Whether a stored dtype can hold a tensor described as `spec`; the one rule that `inspect`, the
// loader and `quantize` share. Raw-byte tensors (MXFP4 blocks and scales) accept any 1-byte label
// (viewers and converters show U8, I8, F8_E8M0, ...; gpt-oss.md §2.1). Float tensors accept BF16,
// F16 and F32: matrices are held in their stored format (linear.h), vectors widened to float32.
bool DTypeFits(const TensorSpec& spec, DType stored);

// Throws one line naming `source` when the layer and expert counts of `config` describe more
// tensors than `store` holds at all, before ModelTensorSpecs lists them (issue 44: a 6 KB
// config.json of 1024 layers of 4096 experts, inside the config budgets, made 12.6 million
// specs and as many problems, 7 GB and 75 s, before saying that tensors were missing). The
// count is a lower bound (one norm per layer, one tensor per expert of every MoE layer stored
// per expert), so a config this refuses could never have passed CheckTensors.
void RequireTensorsForCounts(const ModelConfig& config, const WeightStore& store, const std::string& source);

// Compares stored tensors with the description. Problems are listed in description order
// (missing, misshapen, wrong dtype), then unexpected tensors sorted by name.
std::vector<TensorProblem> CheckTensors(const std::vector<TensorSpec>& specs,
                                        const std::vector<TensorInfo>& stored);
// With `config`, stored tensors the engine ignores (IgnoredCheckpointTensor) are not unexpected.
std::vector<TensorProblem> CheckTensors(const std::vector<TensorSpec>& specs, const WeightStore& store,
                                        const ModelConfig* config = nullptr);

// Stored tensors a checkpoint may carry that the engine does not run: DeepSeek-V3's
// multi-token-prediction layers, model.layers.{L}.* for L >= num_hidden_layers when the config has
// num_nextn_predict_layers (transformers and DeepSeek's converter drop them too, deepseek.md §6).
bool IgnoredCheckpointTensor(const ModelConfig& config, const std::string& name);

// Throws one line naming `source`, the first problem and how many more there are.
void RequireNoProblems(const std::vector<TensorProblem>& problems, const std::string& source);

// "[4096, 2880]"
std::string ShapeToString(const std::vector<int64_t>& shape);

}  // namespace tessera
