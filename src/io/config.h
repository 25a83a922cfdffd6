// Typed model configuration read from a Hugging Face `config.json`, plus
// `generation_config.json`.
//
// One description drives everything: config.cpp lists every field once (JSON key, member,
// default, whether it is required for an architecture), and parsing, validation, writing
// (ModelConfigToJson, used by `tessera synth`) and printing all walk that list. gpt_oss is fully
// supported now; the same structure accepts llama / qwen2 / qwen3 / deepseek_v3 keys so that
// later architectures only add fields.
//
// Errors are tessera::Error with one line: "<path>: <key>: <problem>" (nested keys dotted, e.g.
// "rope_scaling.factor", list entries by index, e.g. "layer_types.3"). A JSON null counts as an
// absent key; duplicate keys are an error. Keys with two spellings (experts_per_token,
// n_routed_experts, rope_parameters, rope_parameters.rope_theta, rope "type", AWQ w_bit /
// q_group_size) must agree when both are present.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace tessera {

// `rope_scaling` (transformers <= 4.x) or `rope_parameters` (v5, which also folds rope_theta
// in). Field meanings: ../shared/reference/rope.md.
struct RopeScaling {
  std::string rope_type = "default";  // default|linear|dynamic|yarn|longrope|llama3
  double factor = 1.0;
  std::optional<int64_t> original_max_position_embeddings;
  // yarn
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  bool truncate = true;  // absent means true; gpt-oss sets false
  std::optional<double> attention_factor;
  std::optional<double> mscale;          // deepseek
  std::optional<double> mscale_all_dim;  // deepseek
  // llama3
  std::optional<double> low_freq_factor;
  std::optional<double> high_freq_factor;
  // llama3 as a GGUF file stores it (tessera's key, io/gguf_config.h): one divisor per rotated
  // pair, inv_freq[i] / freq_factors[i] (llama.cpp's rope_freqs tensor), in place of the three
  // parameters above
  std::vector<double> freq_factors;
  // longrope
  std::vector<double> short_factor;
  std::vector<double> long_factor;
};

enum class LayerType { kFullAttention, kSlidingAttention };

// One entry of a compressed-tensors `config_groups` (dense-decoders.md §10): which modules it
// covers and how their weights are quantized.
struct QuantGroup {
  std::string name;                  // the entry's key, e.g. "group_0"
  std::vector<std::string> targets;  // module class names ("Linear") or "re:" name patterns
  std::string format;                // e.g. "pack-quantized"
  // weights.*
  std::optional<int64_t> num_bits;
  std::string type;  // "int", "float"
  std::optional<bool> symmetric;
  std::string strategy;  // "group", "channel", "tensor", "block"
  std::optional<int64_t> group_size;
  std::string actorder;  // "" when null or false
  std::optional<bool> dynamic;
  bool quantized_activations = false;  // input_activations or output_activations not null
};

struct QuantizationConfig {
  std::string quant_method;  // "" when the checkpoint is not quantized; "mxfp4", "awq", ...
  std::vector<std::string> modules_to_not_convert;
  // AWQ
  std::optional<int64_t> bits;
  std::optional<int64_t> group_size;
  std::optional<bool> zero_point;
  std::string version;  // "gemm", "gemv", ...
  // compressed-tensors
  std::string format;  // "pack-quantized", ...
  std::string quantization_status;
  std::vector<std::string> ignore;  // module names or "re:" patterns left unquantized
  std::vector<QuantGroup> config_groups;
  // fp8 block quantization (DeepSeek-V3)
  std::vector<int64_t> weight_block_size;  // [rows, columns] per scale
  std::string fmt;                         // "e4m3"
  std::string activation_scheme;           // "dynamic" (activations stay float32 here)
};

struct ModelConfig {
  std::string model_type;  // "gpt_oss", "llama", "qwen2", "qwen3", "deepseek_v3", ...
  std::vector<std::string> architectures;

  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;  // defaults to num_attention_heads when absent
  int64_t head_dim = 0;             // read when present (required for gpt_oss); else
                                    // hidden_size / num_attention_heads (deepseek_v3:
                                    // qk_rope_head_dim, as HF's DeepseekV3Config)
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  std::optional<RopeScaling> rope_scaling;
  bool attention_bias = false;
  bool tie_word_embeddings = false;
  std::string hidden_act = "silu";
  bool mlp_bias = false;  // llama: biases on gate/up/down

  // Qwen2/Qwen3: layers from max_window_layers on slide when use_sliding_window (a
  // sliding_window value alone is a decoy, dense-decoders.md §2.3); folded into layer_types.
  bool use_sliding_window = false;
  int64_t max_window_layers = 0;

  // Attention layout per layer (size num_hidden_layers). From `layer_types` when present;
  // gpt_oss without it: even index sliding, odd full; qwen2/qwen3 with use_sliding_window:
  // sliding from max_window_layers on; otherwise all full.
  std::vector<LayerType> layer_types;
  std::optional<int64_t> sliding_window;

  // Gemma 3 (families-2026.md): the sliding layers' rope base (unscaled), the attention scale
  // query_pre_attn_scalar ** -0.5 (absent: head_dim ** -0.5), the local:global pattern layer_types
  // is derived from when absent, and the soft-caps (final: logits = cap tanh(logits / cap)).
  double rope_local_base_freq = 0.0;
  std::optional<double> query_pre_attn_scalar;
  int64_t sliding_window_pattern = 0;
  std::optional<double> final_logit_softcapping;
  std::optional<double> attn_logit_softcapping;

  // SmolLM3: per layer 1 = RoPE, 0 = no position encoding (NoPE); empty: every layer RoPE.
  std::vector<int64_t> no_rope_layers;
  int64_t no_rope_layer_interval = 0;

  // Mixture of experts.
  int64_t num_local_experts = 0;    // gpt_oss "num_local_experts"; deepseek "n_routed_experts"
  int64_t num_experts_per_tok = 0;  // "num_experts_per_tok" (or legacy "experts_per_token")
  double swiglu_limit = 0.0;        // gpt_oss
  double router_aux_loss_coef = 0.0;
  // Qwen3-MoE (dense-decoders.md §2.5): expert width, renormalised top-k weights, and which
  // layers are sparse (i not in mlp_only_layers and (i + 1) % decoder_sparse_step == 0).
  int64_t moe_intermediate_size = 0;
  bool norm_topk_prob = false;
  int64_t decoder_sparse_step = 0;  // absent: 1 for qwen3_moe
  std::vector<int64_t> mlp_only_layers;

  // DeepSeek-V2/V3 (deepseek.md §1): Multi-head Latent Attention sizes (q_lora_rank absent or
  // null: a plain q_proj), the DeepSeekMoE layout (shared experts, dense first layers) and its
  // routing (topk_method greedy / group_limited_greedy for V2, noaux_tc for V3).
  std::optional<int64_t> q_lora_rank;
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;
  int64_t n_shared_experts = 0;
  int64_t first_k_dense_replace = 0;
  int64_t moe_layer_freq = 1;
  int64_t n_group = 0;     // 0: no expert groups
  int64_t topk_group = 0;
  std::string topk_method;
  double routed_scaling_factor = 1.0;
  bool use_qk_norm = false;  // GLM-4.5: q/k norms (Architecture::qk_norm_when_config)
  // The latent cache's width per position (kv_lora_rank + qk_rope_head_dim; 0 for other families).
  int64_t latent_dim() const { return kv_lora_rank > 0 ? kv_lora_rank + qk_rope_head_dim : 0; }

  std::optional<int64_t> bos_token_id;
  std::vector<int64_t> eos_token_ids;  // config.json may hold an int or a list
  std::optional<int64_t> pad_token_id;

  QuantizationConfig quantization;

  nlohmann::json raw;  // the parsed file (a multimodal one's text_config), for keys no field covers yet
  // "gemma3" when config.json is a multimodal checkpoint's whose text_config this is ("" otherwise):
  // its weights hold the language model under a prefix beside towers a text engine ignores.
  std::string multimodal_type;
  // What the weights' RMSNorm vectors already include of the architecture's norm offset (a GGUF
  // gemma3 file stores Gemma's 1 + w): the loader adds only the rest. Not a config.json key.
  double stored_norm_offset = 0.0;
};

// Parses config.json text. `source` names the file in errors. Checks types, limits, the keys
// model_type requires, and relations that hold for every architecture (head count divisible by
// the KV head count, layer_types length); an unknown model_type is not an error here.
ModelConfig ParseModelConfig(const std::string& json_text, const std::string& source);
// Reads `<dir>/config.json` (dir may be a hub-cache repository directory, io/model_dir.h). When
// the config has no quantization_config, an AutoAWQ `quant_config.json` beside it is read instead.
ModelConfig LoadModelConfig(const std::string& dir);
// The inverse of ParseModelConfig for every described field (what `tessera synth` writes). Starts
// from `raw`, so undescribed keys survive and each key keeps the spelling and number form (int or
// float) the source used; a parsed gpt-oss config.json is reproduced exactly.
nlohmann::json ModelConfigToJson(const ModelConfig& config);
// Whether the engine can run this config: model_type must be one it supports
// ("unsupported model_type 'phi3' (supported: gpt_oss, llama, ...)"), and the architecture's
// config checks hold (required keys, even head_dim, layer_types of the right length; gpt_oss: yarn
// or no rope scaling, mxfp4 or no quantization; the others: silu, unquantized; token ids inside
// the vocabulary). Also re-checks the limits parsing applies, for configs built in code. Throws
// tessera::Error naming `source`. The tensors each type implies are model/architecture.h's.
void ValidateModelConfig(const ModelConfig& config, const std::string& source);
// The model_types ValidateModelConfig accepts, in the order errors list them.
const std::vector<std::string_view>& SupportedModelTypes();

struct GenerationConfig {
  std::optional<int64_t> bos_token_id;
  std::vector<int64_t> eos_token_ids;  // int or list in the file
  std::optional<int64_t> pad_token_id;
  bool do_sample = false;
  std::optional<double> temperature;
  std::optional<double> top_p;
  std::optional<int64_t> top_k;
};

GenerationConfig ParseGenerationConfig(const std::string& json_text, const std::string& source);
// Reads `<dir>/generation_config.json`; a missing file yields a default config (no error).
GenerationConfig LoadGenerationConfig(const std::string& dir);
nlohmann::json GenerationConfigToJson(const GenerationConfig& config);

}  // namespace tessera
