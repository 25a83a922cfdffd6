// The decoder architectures tessera runs, described once: one row per Hugging Face `model_type`
// (architecture.cpp, kArchitectures). Everything that differs between the families is a column
// of that row; the tensor list (tensor_specs.h), the loader and the layers (model.cpp, layers.h),
// `inspect`, `synth` and the decode byte count read the row and the config, never the type name.
// Semantics: ../shared/reference/gpt-oss.md §2-3, dense-decoders.md §1-5 and deepseek.md §1-6.
//
// Common skeleton (all rows): embeddings -> per layer [RMSNorm -> attention -> residual ->
// RMSNorm -> MLP or MoE -> residual] -> RMSNorm -> lm_head (the embedding matrix when
// tie_word_embeddings). Attention: GQA, split-half RoPE from Rope::FromConfig, causal, sliding
// layers (config.layer_types, derived per family by io/config.cpp) see their window.
//
// Adding an architecture: one row here (plus its config keys in io/config.cpp's field table when
// it has new ones); docs/ARCHITECTURE.md lists the steps.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "io/config.h"

namespace tessera {

// Which projections carry a bias.
enum class BiasRule : uint8_t {
  kNever,
  kAlways,
  kAttentionBias,  // config.attention_bias
  kMlpBias,        // config.mlp_bias
};

// The attention block of a layer.
enum class AttentionKind : uint8_t {
  kGqa,  // q/k/v/o projections, grouped key/value heads, split-half (or interleaved) RoPE
  // DeepSeek Multi-head Latent Attention (deepseek.md §2, §4): q through q_proj or the q_lora
  // pair, one compressed [latent | rotary key] row per token shared by every head, kv_b_proj's
  // per-head key and value decompression folded into the query and the output (absorbed form);
  // the cache holds the latent rows only.
  kMla,
};

enum class MlpKind : uint8_t {
  kGated,  // down(act(gate(x)) * up(x)), intermediate_size
  kMoe,    // a router and num_local_experts gated experts on every layer
  // Qwen3-MoE: layer i is sparse iff i is not in mlp_only_layers and (i + 1) % decoder_sparse_step
  // == 0 (moe_intermediate_size experts), otherwise a gated MLP of intermediate_size.
  kMoeWhereSparse,
  // DeepSeek: layer i is sparse iff i >= first_k_dense_replace and i % moe_layer_freq == 0
  // (moe_intermediate_size experts plus n_shared_experts x moe_intermediate_size shared units
  // always added), otherwise a gated MLP of intermediate_size.
  kMoeAfterDense,
};

enum class RouterKind : uint8_t {
  // gpt-oss: top-k of the (biased) logits, then softmax over those k (gpt-oss.md §3.5.1).
  kTopKThenSoftmax,
  // Qwen3-MoE: softmax over all experts in float32, then top-k, renormalised over the k when
  // norm_topk_prob (dense-decoders.md §2.5).
  kSoftmaxThenTopK,
  // DeepSeek-V2 (deepseek.md §5): softmax over all experts; group_limited_greedy keeps the
  // topk_group groups with the largest maximum (the others' scores 0); top-k of the scores,
  // times routed_scaling_factor (never renormalised).
  kSoftmaxGroupMax,
  // DeepSeek-V3 noaux_tc (deepseek.md §5): sigmoid scores; the choice is made on scores plus
  // e_score_correction_bias, within the topk_group groups of largest top-2 sum (the others' 0.0);
  // the weights are the unbiased scores, renormalised when norm_topk_prob (+ 1e-20), times
  // routed_scaling_factor.
  kSigmoidNoauxTc,
};

enum class Activation : uint8_t {
  kSilu,       // silu(gate) * up
  kSwigluOai,  // gpt-oss: gate clamped above at swiglu_limit, up to [-limit, limit],
               // gate * sigmoid(1.702 gate) * (up + 1) (gpt-oss.md §3.5.2)
  kGeluTanh,   // Gemma: gelu_pytorch_tanh(gate) * up, 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3)))
};

// How a checkpoint stores the experts of one layer.
enum class ExpertLayout : uint8_t {
  // gpt-oss: mlp.experts.gate_up_proj_{blocks,scales,bias} [E, 2I, ...] with rows alternating
  // gate, up, and mlp.experts.down_proj_*; MXFP4 blocks and scales.
  kFusedInterleaved,
  // Qwen3-MoE: mlp.experts.{e}.{gate,up,down}_proj.weight [out, in], one tensor per expert.
  kPerExpert,
};

// A row states what differs from the defaults below (a Llama-like dense decoder).
struct Architecture {
  std::string_view model_type;  // config.json "model_type"
  std::string_view hf_class;    // config.json "architectures"[0] as Hugging Face writes it
  BiasRule qkv_bias = BiasRule::kAttentionBias;
  BiasRule o_bias = BiasRule::kAttentionBias;
  BiasRule mlp_bias = BiasRule::kNever;  // gated MLP projections (not experts)
  AttentionKind attention = AttentionKind::kGqa;
  bool qk_norm = false;  // per-head RMSNorm of q and k before RoPE, weight [head_dim]
  bool sinks = false;    // one learned softmax logit per query head (self_attn.sinks)
  MlpKind mlp = MlpKind::kGated;
  // MoE layers only:
  RouterKind router = RouterKind::kTopKThenSoftmax;
  std::string_view router_name = "mlp.gate";  // gpt-oss: "mlp.router"
  bool router_bias = false;
  bool router_correction_bias = false;  // <router_name>.e_score_correction_bias [E], F32 (choice only)
  bool shared_experts = false;          // mlp.shared_experts.{gate,up,down}_proj on MoE layers
  Activation expert_activation = Activation::kSilu;
  ExpertLayout experts = ExpertLayout::kPerExpert;
  bool expert_bias = false;
  // Tensors of a layer listed in the real checkpoint's index order (gpt-oss: attn norm, o, q, k,
  // v, sinks, router, experts, mlp norm) rather than the module order HF's save_pretrained uses.
  bool checkpoint_layer_order = false;
  // Dense MLP activation (Gemma: gelu_pytorch_tanh; config.hidden_act must name it).
  Activation mlp_activation = Activation::kSilu;
  // Every RMSNorm weight w of the model (layer, q/k and final norms) scales as (norm_offset + w):
  // Gemma's (1 + w) (families-2026.md "Pitfalls").
  float norm_offset = 0.0f;
  // Embedding rows times sqrt(hidden_size) (Gemma; in float32 here, as transformers' float32 model).
  bool embed_scale = false;
  // Gemma's four norms per layer: input_layernorm -> attention -> post_attention_layernorm (of the
  // attention's output) -> residual; pre_feedforward_layernorm -> MLP -> post_feedforward_layernorm
  // -> residual. Without: input_layernorm, and post_attention_layernorm before the MLP.
  bool sandwich_norms = false;
  // Phi-3: q | k | v rows in one self_attn.qkv_proj, gate | up rows in one mlp.gate_up_proj.
  bool fused_qkv = false;
  bool fused_gate_up = false;
  // GLM-4.5: q/k norms only when config.use_qk_norm (LayerPlan::qk_norm).
  bool qk_norm_when_config = false;
};

// Every supported row, in SupportedModelTypes() order.
std::span<const Architecture> Architectures();
// The row of config.model_type; an unknown type is one line naming `source` and listing the
// supported ones.
const Architecture& ArchitectureOf(const ModelConfig& config, const std::string& source = "config.json");

bool HasBias(BiasRule rule, const ModelConfig& config);

// The sizes of DeepSeek's Multi-head Latent Attention (deepseek.md §1-2): per head a query and key
// of nope + rope channels and a value of `value`; one latent of `latent` channels plus one shared
// rotary key of `rope` channels per token; q_lora 0 when the query comes from a plain q_proj.
struct MlaDims {
  int64_t q_lora = 0, latent = 0, nope = 0, rope = 0, value = 0;
  int64_t cache_width() const { return latent + rope; }  // one cached row per token and layer
};
// Throws one line naming `source` when a size is missing or not positive.
MlaDims MlaDimsOf(const ModelConfig& config, const std::string& source = "config.json");

// What one decoder layer is, resolved from the row and the config.
struct LayerPlan {
  bool sliding = false;
  bool moe = false;
  bool qkv_bias = false, o_bias = false, mlp_bias = false;
  bool qk_norm = false;  // the row's qk_norm, or GLM's use_qk_norm
  int64_t intermediate = 0;  // per expert on MoE layers, else the gated MLP's
  int64_t shared_intermediate = 0;  // MoE layers with shared experts: their units (else 0)
};
LayerPlan PlanLayer(const Architecture& arch, const ModelConfig& config, int64_t layer);

}  // namespace tessera
