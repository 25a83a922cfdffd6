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

LayerPlan PlanLayer(const Architecture& arch, const ModelConfig& config, int64_t layer) {
  LayerPlan plan;
  plan.sliding = config.layer_types.at(static_cast<size_t>(layer)) == LayerType::kSlidingAttention;
  plan.qkv_bias = HasBias(arch.qkv_bias, config);
  plan.o_bias = HasBias(arch.o_bias, config);
  plan.mlp_bias = HasBias(arch.mlp_bias, config);
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
  }
  plan.intermediate = plan.moe && arch.mlp == MlpKind::kMoeWhereSparse ? config.moe_intermediate_size
                                                                        : config.intermediate_size;
  return plan;
}

}  // namespace tessera
