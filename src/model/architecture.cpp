#include "model/architecture.h"

#include <algorithm>
#include <array>

#include "core/error.h"
#include "io/json_util.h"

namespace tessera {
namespace {

// One row per model_type (dense-decoders.md §2 table; gpt-oss.md §2-3); unstated columns keep
// architecture.h's defaults.
constexpr std::array kArchitectures = {
    // deepseek.md §1-6: no attention biases in released checkpoints (config validation refuses
    // attention_bias), per-expert tensors, the router under mlp.gate.
    Architecture{.model_type = "deepseek_v2",
                 .hf_class = "DeepseekV2ForCausalLM",
                 .qkv_bias = BiasRule::kNever,
                 .o_bias = BiasRule::kNever,
                 .attention = AttentionKind::kMla,
                 .mlp = MlpKind::kMoeAfterDense,
                 .router = RouterKind::kSoftmaxGroupMax,
                 .shared_experts = true},
    Architecture{.model_type = "deepseek_v3",
                 .hf_class = "DeepseekV3ForCausalLM",
                 .qkv_bias = BiasRule::kNever,
                 .o_bias = BiasRule::kNever,
                 .attention = AttentionKind::kMla,
                 .mlp = MlpKind::kMoeAfterDense,
                 .router = RouterKind::kSigmoidNoauxTc,
                 .router_correction_bias = true,
                 .shared_experts = true},
    // families-2026.md "Gemma 3": q/k norms, (1 + w) norms, scaled embeddings, sandwich norms,
    // gelu-tanh; the sliding layers' own rope base and query_pre_attn_scalar come from the config.
    Architecture{.model_type = "gemma3_text",
                 .hf_class = "Gemma3ForCausalLM",
                 .qkv_bias = BiasRule::kNever,
                 .o_bias = BiasRule::kNever,
                 .qk_norm = true,
                 .mlp_activation = Activation::kGeluTanh,
                 .norm_offset = 1.0f,
                 .embed_scale = true,
                 .sandwich_norms = true},
    // families-2026.md "GLM-4.5": DeepSeek-V3's MoE (sigmoid router with correction bias, groups,
    // shared experts, dense first layers) with GQA attention, q/k/v biases, optional q/k norm
    // and partial rotary (config).
    Architecture{.model_type = "glm4_moe",
                 .hf_class = "Glm4MoeForCausalLM",
                 .o_bias = BiasRule::kNever,
                 .mlp = MlpKind::kMoeAfterDense,
                 .router = RouterKind::kSigmoidNoauxTc,
                 .router_correction_bias = true,
                 .shared_experts = true,
                 .qk_norm_when_config = true},
    Architecture{.model_type = "gpt_oss",
                 .hf_class = "GptOssForCausalLM",
                 .sinks = true,
                 .mlp = MlpKind::kMoe,
                 .router = RouterKind::kTopKThenSoftmax,
                 .router_name = "mlp.router",
                 .router_bias = true,
                 .expert_activation = Activation::kSwigluOai,
                 .experts = ExpertLayout::kFusedInterleaved,
                 .expert_bias = true,
                 .checkpoint_layer_order = true},
    Architecture{.model_type = "llama", .hf_class = "LlamaForCausalLM", .mlp_bias = BiasRule::kMlpBias},
    Architecture{.model_type = "mistral",
                 .hf_class = "MistralForCausalLM",
                 .qkv_bias = BiasRule::kNever,
                 .o_bias = BiasRule::kNever},
    // families-2026.md "Phi-3": fused q | k | v and gate | up, no biases; partial rotary and
    // longrope come from the config (model/rope.h).
    Architecture{.model_type = "phi3",
                 .hf_class = "Phi3ForCausalLM",
                 .qkv_bias = BiasRule::kNever,
                 .o_bias = BiasRule::kNever,
                 .fused_qkv = true,
                 .fused_gate_up = true},
    // Qwen2: q/k/v biases always, o_proj never (HF's Qwen2Attention has no config switch for them).
    Architecture{.model_type = "qwen2",
                 .hf_class = "Qwen2ForCausalLM",
                 .qkv_bias = BiasRule::kAlways,
                 .o_bias = BiasRule::kNever},
    Architecture{.model_type = "qwen3", .hf_class = "Qwen3ForCausalLM", .qk_norm = true},
    Architecture{.model_type = "qwen3_moe",
                 .hf_class = "Qwen3MoeForCausalLM",
                 .qk_norm = true,
                 .mlp = MlpKind::kMoeWhereSparse,
                 .router = RouterKind::kSoftmaxThenTopK},
    // SmolLM3: Llama's layers; the NoPE layers (config.no_rope_layers) skip RoPE.
    Architecture{.model_type = "smollm3", .hf_class = "SmolLM3ForCausalLM", .mlp_bias = BiasRule::kMlpBias},
};

}  // namespace

std::span<const Architecture> Architectures() { return kArchitectures; }

const Architecture& ArchitectureOf(const ModelConfig& config, const std::string& source) {
  for (const Architecture& arch : kArchitectures) {
    if (arch.model_type == config.model_type) return arch;
  }
  std::string list;
  for (const Architecture& arch : kArchitectures) list += StrCat(list.empty() ? "" : ", ", arch.model_type);
  Fail(source, ": model_type: unsupported model_type ", Quote(config.model_type), " (supported: ", list, ")");
}

bool HasBias(BiasRule rule, const ModelConfig& config) {
  switch (rule) {
    case BiasRule::kNever: return false;
    case BiasRule::kAlways: return true;
    case BiasRule::kAttentionBias: return config.attention_bias;
    case BiasRule::kMlpBias: return config.mlp_bias;
  }
  return false;
}

MlaDims MlaDimsOf(const ModelConfig& config, const std::string& source) {
  auto positive = [&](const char* key, int64_t value) {
    if (value <= 0 || value > (int64_t{1} << 31)) Fail(source, ": ", key, ": must be positive, got ", value);
    return value;
  };
  MlaDims d;
  d.q_lora = config.q_lora_rank ? positive("q_lora_rank", *config.q_lora_rank) : 0;
  d.latent = positive("kv_lora_rank", config.kv_lora_rank);
  d.nope = positive("qk_nope_head_dim", config.qk_nope_head_dim);
  d.rope = positive("qk_rope_head_dim", config.qk_rope_head_dim);
  d.value = positive("v_head_dim", config.v_head_dim);
  return d;
}

LayerPlan PlanLayer(const Architecture& arch, const ModelConfig& config, int64_t layer) {
  LayerPlan plan;
  plan.sliding = config.layer_types.at(static_cast<size_t>(layer)) == LayerType::kSlidingAttention;
  plan.qkv_bias = HasBias(arch.qkv_bias, config);
  plan.o_bias = HasBias(arch.o_bias, config);
  plan.mlp_bias = HasBias(arch.mlp_bias, config);
  plan.qk_norm = arch.qk_norm || (arch.qk_norm_when_config && config.use_qk_norm);
  switch (arch.mlp) {
    case MlpKind::kGated: plan.moe = false; break;
    case MlpKind::kMoe: plan.moe = true; break;
    case MlpKind::kMoeWhereSparse: {
      const auto& dense = config.mlp_only_layers;
      const int64_t step = config.decoder_sparse_step > 0 ? config.decoder_sparse_step : 1;
      plan.moe = std::find(dense.begin(), dense.end(), layer) == dense.end() && config.num_local_experts > 0 &&
                 (layer + 1) % step == 0;
      break;
    }
    case MlpKind::kMoeAfterDense: {
      // HF reads first_k_dense_replace alone; the original code also moe_layer_freq (deepseek.md §5).
      const int64_t freq = config.moe_layer_freq > 0 ? config.moe_layer_freq : 1;
      plan.moe = config.num_local_experts > 0 && layer >= config.first_k_dense_replace && layer % freq == 0;
      break;
    }
  }
  const bool expert_width = arch.mlp == MlpKind::kMoeWhereSparse || arch.mlp == MlpKind::kMoeAfterDense;
  plan.intermediate = plan.moe && expert_width ? config.moe_intermediate_size : config.intermediate_size;
  if (plan.moe && arch.shared_experts) plan.shared_intermediate = config.n_shared_experts * config.moe_intermediate_size;
  return plan;
}

}  // namespace tessera
