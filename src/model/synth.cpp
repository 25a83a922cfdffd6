#include "model/synth.h"


#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "core/dtype.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "core/thread_pool.h"
#include "io/config.h"
#include "io/output_dir.h"
#include "io/safetensors.h"
#include "kernels/mxfp4.h"
#include "tokenizer/embedded_assets.h"

namespace tessera {

// ---- presets ----------------------------------------------------------------------------------

const std::vector<std::string>& SynthPresetNames() {
  static const std::vector<std::string> names = {"tiny",      "gpt-oss-20b", "gpt-oss-120b",  "llama-3.1-8b",
                                                 "mistral-7b", "qwen2.5-7b", "qwen3-8b",      "qwen3-30b-a3b",
                                                 "tiny-llama", "tiny-qwen3", "tiny-qwen3-moe", "deepseek-v2-lite",
                                                 "deepseek-v3",      "kimi-k2",   "tiny-deepseek-v2", "tiny-deepseek-v3",
                                                 "gemma-3-1b", "gemma-3-4b", "gemma-3-12b", "gemma-3-27b", "tiny-gemma3",
                                                 "phi-4-mini", "smollm3-3b", "glm-4.5-air"};
  return names;
}

namespace {

// The Hub config.json of gpt-oss (gpt-oss.md §1.1) with the dimensions that differ between
// presets as parameters. Every key of the real file is present; nlohmann::json keeps keys sorted,
// as HF's to_json_file does.
nlohmann::json GptOssConfig(int64_t layers, int64_t experts) {
  nlohmann::json layer_types = nlohmann::json::array();
  for (int64_t i = 0; i < layers; ++i) {
    layer_types.push_back(i % 2 == 0 ? "sliding_attention" : "full_attention");  // even = sliding
  }
  return nlohmann::json{
      {"architectures", {"GptOssForCausalLM"}},
      {"attention_bias", true},
      {"attention_dropout", 0.0},
      {"eos_token_id", 200002},
      {"experts_per_token", 4},
      {"head_dim", 64},
      {"hidden_act", "silu"},
      {"hidden_size", 2880},
      {"initial_context_length", 4096},
      {"initializer_range", 0.02},
      {"intermediate_size", 2880},
      {"layer_types", layer_types},
      {"max_position_embeddings", 131072},
      {"model_type", "gpt_oss"},
      {"num_attention_heads", 64},
      {"num_experts_per_tok", 4},
      {"num_hidden_layers", layers},
      {"num_key_value_heads", 8},
      {"num_local_experts", experts},
      {"output_router_logits", false},
      {"pad_token_id", 199999},
      {"quantization_config",
       {{"modules_to_not_convert",
         {"model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"}},
        {"quant_method", "mxfp4"}}},
      {"rms_norm_eps", 1e-05},
      {"rope_scaling",
       {{"beta_fast", 32.0},
        {"beta_slow", 1.0},
        {"factor", 32.0},
        {"original_max_position_embeddings", 4096},
        {"rope_type", "yarn"},
        {"truncate", false}}},
      {"rope_theta", 150000},
      {"router_aux_loss_coef", 0.9},
      {"sliding_window", 128},
      {"swiglu_limit", 7.0},
      {"tie_word_embeddings", false},
      {"transformers_version", "4.55.0.dev0"},
      {"use_cache", true},
      {"vocab_size", 201088},
  };
}

// The dense families' and Qwen3-MoE's config.json (dense-decoders.md §4, v4 spelling as the Hub
// files have it).
nlohmann::json LlamaConfig() {
  return nlohmann::json{
      {"architectures", {"LlamaForCausalLM"}},
      {"attention_bias", false},
      {"attention_dropout", 0.0},
      {"bos_token_id", 128000},
      {"eos_token_id", 128001},
      {"head_dim", 128},
      {"hidden_act", "silu"},
      {"hidden_size", 4096},
      {"initializer_range", 0.02},
      {"intermediate_size", 14336},
      {"max_position_embeddings", 131072},
      {"mlp_bias", false},
      {"model_type", "llama"},
      {"num_attention_heads", 32},
      {"num_hidden_layers", 32},
      {"num_key_value_heads", 8},
      {"pretraining_tp", 1},
      {"rms_norm_eps", 1e-05},
      {"rope_scaling",
       {{"factor", 8.0},
        {"high_freq_factor", 4.0},
        {"low_freq_factor", 1.0},
        {"original_max_position_embeddings", 8192},
        {"rope_type", "llama3"}}},
      {"rope_theta", 500000.0},
      {"tie_word_embeddings", false},
      {"torch_dtype", "bfloat16"},
      {"transformers_version", "4.43.0.dev0"},
      {"use_cache", true},
      {"vocab_size", 128256},
  };
}

// Gemma 3's language models (families-2026.md "Gemma 3"; the Gemma 3 report's sizes): 1b is
// text-only as released; 4b / 12b / 27b are the text_config of their multimodal checkpoints,
// written here as gemma3_text configs (synth writes the text model's tensors only).
nlohmann::json Gemma3Config(int64_t hidden, int64_t layers, int64_t heads, int64_t kv_heads, int64_t head_dim,
                            int64_t intermediate, int64_t query_pre_attn_scalar, int64_t window, bool scaled) {
  nlohmann::json c{
      {"architectures", {"Gemma3ForCausalLM"}},
      {"attention_bias", false},
      {"attention_dropout", 0.0},
      {"attn_logit_softcapping", nullptr},
      {"bos_token_id", 2},
      {"eos_token_id", {1, 106}},
      {"final_logit_softcapping", nullptr},
      {"head_dim", head_dim},
      {"hidden_activation", "gelu_pytorch_tanh"},
      {"hidden_size", hidden},
      {"initializer_range", 0.02},
      {"intermediate_size", intermediate},
      {"max_position_embeddings", scaled ? 131072 : 32768},
      {"model_type", "gemma3_text"},
      {"num_attention_heads", heads},
      {"num_hidden_layers", layers},
      {"num_key_value_heads", kv_heads},
      {"pad_token_id", 0},
      {"query_pre_attn_scalar", query_pre_attn_scalar},
      {"rms_norm_eps", 1e-06},
      {"rope_local_base_freq", 10000.0},
      {"rope_scaling", nullptr},
      {"rope_theta", 1000000.0},
      {"sliding_window", window},
      {"sliding_window_pattern", 6},
      {"torch_dtype", "bfloat16"},
      {"transformers_version", "4.50.0.dev0"},
      {"use_cache", true},
      {"vocab_size", scaled ? 262208 : 262144},
  };
  if (scaled) c["rope_scaling"] = {{"factor", 8.0}, {"rope_type", "linear"}};
  return c;
}

// microsoft/Phi-4-mini-instruct's shapes (families-2026.md "Phi-3 / Phi-4-mini"): fused q|k|v
// and gate|up, partial rotary 0.75, tied. Its longrope factor lists are not reproduced (they do
// not change a step's work): rope_scaling is null here.
nlohmann::json Phi4MiniConfig() {
  return nlohmann::json{
      {"architectures", {"Phi3ForCausalLM"}},
      {"attention_bias", false},
      {"attention_dropout", 0.0},
      {"bos_token_id", 199999},
      {"eos_token_id", 199999},
      {"hidden_act", "silu"},
      {"hidden_size", 3072},
      {"initializer_range", 0.02},
      {"intermediate_size", 8192},
      {"max_position_embeddings", 131072},
      {"model_type", "phi3"},
      {"num_attention_heads", 24},
      {"num_hidden_layers", 32},
      {"num_key_value_heads", 8},
      {"original_max_position_embeddings", 4096},
      {"pad_token_id", 199999},
      {"partial_rotary_factor", 0.75},
      {"rms_norm_eps", 1e-05},
      {"rope_scaling", nullptr},
      {"rope_theta", 10000.0},
      {"sliding_window", 262144},
      {"tie_word_embeddings", true},
      {"torch_dtype", "bfloat16"},
      {"transformers_version", "4.45.0"},
      {"use_cache", true},
      {"vocab_size", 200064},
  };
}

// HuggingFaceTB/SmolLM3-3B's shapes: Llama layers, every 4th layer without RoPE.
nlohmann::json SmolLm3Config() {
  return nlohmann::json{
      {"architectures", {"SmolLM3ForCausalLM"}},
      {"attention_bias", false},
      {"attention_dropout", 0.0},
      {"bos_token_id", nullptr},
      {"eos_token_id", 128012},
      {"hidden_act", "silu"},
      {"hidden_size", 2048},
      {"initializer_range", 0.02},
      {"intermediate_size", 11008},
      {"max_position_embeddings", 65536},
      {"mlp_bias", false},
      {"model_type", "smollm3"},
      {"no_rope_layer_interval", 4},
      {"num_attention_heads", 16},
      {"num_hidden_layers", 36},
      {"num_key_value_heads", 4},
      {"pad_token_id", 128004},
      {"rms_norm_eps", 1e-06},
      {"rope_scaling", nullptr},
      {"rope_theta", 5000000.0},
      {"tie_word_embeddings", true},
      {"torch_dtype", "bfloat16"},
      {"transformers_version", "4.53.0"},
      {"use_cache", true},
      {"vocab_size", 128256},
  };
}

// zai-org/GLM-4.5-Air's shapes (families-2026.md "GLM-4.5"): 128 routed experts, top 8, one shared,
// the first layer dense, q/k/v biases, partial rotary 0.5; its MTP layer is not written.
nlohmann::json Glm45AirConfig() {
  return nlohmann::json{
      {"architectures", {"Glm4MoeForCausalLM"}},
      {"attention_bias", true},
      {"attention_dropout", 0.0},
      {"eos_token_id", {151329, 151336, 151338}},
      {"first_k_dense_replace", 1},
      {"head_dim", 128},
      {"hidden_act", "silu"},
      {"hidden_size", 4096},
      {"initializer_range", 0.02},
      {"intermediate_size", 10944},
      {"max_position_embeddings", 131072},
      {"model_type", "glm4_moe"},
      {"moe_intermediate_size", 1408},
      {"n_group", 1},
      {"n_routed_experts", 128},
      {"n_shared_experts", 1},
      {"norm_topk_prob", true},
      {"num_attention_heads", 96},
      {"num_experts_per_tok", 8},
      {"num_hidden_layers", 46},
      {"num_key_value_heads", 8},
      {"pad_token_id", 151329},
      {"partial_rotary_factor", 0.5},
      {"rms_norm_eps", 1e-05},
      {"rope_scaling", nullptr},
      {"rope_theta", 1000000},
      {"routed_scaling_factor", 1.0},
      {"tie_word_embeddings", false},
      {"topk_group", 1},
      {"torch_dtype", "bfloat16"},
      {"transformers_version", "4.54.0.dev0"},
      {"use_cache", true},
      {"use_qk_norm", false},
      {"vocab_size", 151552},
  };
}

nlohmann::json MistralConfig() {
  return nlohmann::json{
      {"architectures", {"MistralForCausalLM"}},
      {"attention_dropout", 0.0},
      {"bos_token_id", 1},
      {"eos_token_id", 2},
      {"hidden_act", "silu"},
      {"hidden_size", 4096},
      {"initializer_range", 0.02},
      {"intermediate_size", 14336},
      {"max_position_embeddings", 32768},
      {"model_type", "mistral"},
      {"num_attention_heads", 32},
      {"num_hidden_layers", 32},
      {"num_key_value_heads", 8},
      {"rms_norm_eps", 1e-05},
      {"rope_theta", 1000000.0},
      {"sliding_window", nullptr},
      {"tie_word_embeddings", false},
      {"torch_dtype", "bfloat16"},
      {"transformers_version", "4.42.0.dev0"},
      {"use_cache", true},
      {"vocab_size", 32768},
  };
}

nlohmann::json QwenConfig(std::string_view type) {
  nlohmann::json c{
      {"attention_dropout", 0.0},
      {"bos_token_id", 151643},
      {"eos_token_id", 151643},
      {"hidden_act", "silu"},
      {"initializer_range", 0.02},
      {"max_window_layers", 28},
      {"model_type", type},
      {"rope_scaling", nullptr},
      {"rope_theta", 1000000.0},
      {"sliding_window", 131072},
      {"tie_word_embeddings", false},
      {"torch_dtype", "bfloat16"},
      {"transformers_version", "4.51.0"},
      {"use_cache", true},
      {"use_sliding_window", false},
  };
  if (type == "qwen2") {
    c.update({{"architectures", {"Qwen2ForCausalLM"}}, {"hidden_size", 3584}, {"intermediate_size", 18944},
              {"max_position_embeddings", 131072}, {"num_attention_heads", 28}, {"num_hidden_layers", 28},
              {"num_key_value_heads", 4}, {"rms_norm_eps", 1e-06}, {"vocab_size", 152064}});
  } else if (type == "qwen3") {
    c.update({{"architectures", {"Qwen3ForCausalLM"}}, {"attention_bias", false}, {"eos_token_id", 151645},
              {"head_dim", 128}, {"hidden_size", 4096}, {"intermediate_size", 12288},
              {"max_position_embeddings", 40960}, {"max_window_layers", 36}, {"num_attention_heads", 32},
              {"num_hidden_layers", 36}, {"num_key_value_heads", 8}, {"rms_norm_eps", 1e-06},
              {"sliding_window", nullptr}, {"vocab_size", 151936}});
  } else {
    c.update({{"architectures", {"Qwen3MoeForCausalLM"}}, {"attention_bias", false}, {"decoder_sparse_step", 1},
              {"eos_token_id", 151645}, {"head_dim", 128}, {"hidden_size", 2048}, {"intermediate_size", 6144},
              {"max_position_embeddings", 40960}, {"max_window_layers", 48}, {"mlp_only_layers", nlohmann::json::array()},
              {"moe_intermediate_size", 768}, {"norm_topk_prob", true}, {"num_attention_heads", 32},
              {"num_experts", 128}, {"num_experts_per_tok", 8}, {"num_hidden_layers", 48},
              {"num_key_value_heads", 4}, {"output_router_logits", false}, {"rms_norm_eps", 1e-06},
              {"router_aux_loss_coef", 0.001}, {"sliding_window", nullptr}, {"vocab_size", 151936}});
  }
  return c;
}

// DeepSeek-V2-Lite's config.json (deepseek.md §1: the DSV3 config_16B.json values and the HF
// V2 keys): MLA without q_lora, 64 routed experts top-6 plus 2 shared, layer 0 dense, YaRN 40.
nlohmann::json DeepseekV2LiteConfig() {
  return nlohmann::json{
      {"architectures", {"DeepseekV2ForCausalLM"}},
      {"attention_bias", false},
      {"attention_dropout", 0.0},
      {"bos_token_id", 100000},
      {"eos_token_id", 100001},
      {"first_k_dense_replace", 1},
      {"hidden_act", "silu"},
      {"hidden_size", 2048},
      {"initializer_range", 0.02},
      {"intermediate_size", 10944},
      {"kv_lora_rank", 512},
      {"max_position_embeddings", 163840},
      {"model_type", "deepseek_v2"},
      {"moe_intermediate_size", 1408},
      {"moe_layer_freq", 1},
      {"n_group", 1},
      {"n_routed_experts", 64},
      {"n_shared_experts", 2},
      {"norm_topk_prob", false},
      {"num_attention_heads", 16},
      {"num_experts_per_tok", 6},
      {"num_hidden_layers", 27},
      {"num_key_value_heads", 16},
      {"q_lora_rank", nullptr},
      {"qk_nope_head_dim", 128},
      {"qk_rope_head_dim", 64},
      {"rms_norm_eps", 1e-06},
      {"rope_scaling",
       {{"beta_fast", 32}, {"beta_slow", 1}, {"factor", 40}, {"mscale", 0.707}, {"mscale_all_dim", 0.707},
        {"original_max_position_embeddings", 4096}, {"type", "yarn"}}},
      {"rope_theta", 10000},
      {"routed_scaling_factor", 1.0},
      {"scoring_func", "softmax"},
      {"tie_word_embeddings", false},
      {"topk_group", 1},
      {"topk_method", "greedy"},
      {"torch_dtype", "bfloat16"},
      {"transformers_version", "4.57.1"},
      {"use_cache", true},
      {"v_head_dim", 128},
      {"vocab_size", 102400},
  };
}

// DeepSeek-V3's config.json (deepseek.md §1, DSV3 config_671B.json): MLA with q_lora 1536, 256
// routed experts top-8 in 8 groups (4 chosen) plus 1 shared, layers 0-2 dense, FP8 blocks of
// 128 x 128. The checkpoint's MTP layer (model.layers.61) is not written.
nlohmann::json DeepseekV3Config() {
  nlohmann::json c = DeepseekV2LiteConfig();
  c.update({{"architectures", {"DeepseekV3ForCausalLM"}}, {"model_type", "deepseek_v3"}, {"hidden_size", 7168},
            {"intermediate_size", 18432}, {"moe_intermediate_size", 2048}, {"num_hidden_layers", 61},
            {"num_attention_heads", 128}, {"num_key_value_heads", 128}, {"q_lora_rank", 1536},
            {"n_routed_experts", 256}, {"n_shared_experts", 1}, {"num_experts_per_tok", 8}, {"first_k_dense_replace", 3},
            {"n_group", 8}, {"topk_group", 4}, {"topk_method", "noaux_tc"}, {"scoring_func", "sigmoid"},
            {"norm_topk_prob", true}, {"routed_scaling_factor", 2.5}, {"vocab_size", 129280}, {"bos_token_id", 0},
            {"eos_token_id", 1}, {"num_nextn_predict_layers", 1}, {"ep_size", 1}});
  c["rope_scaling"] = {{"beta_fast", 32}, {"beta_slow", 1}, {"factor", 40}, {"mscale", 1.0}, {"mscale_all_dim", 1.0},
                       {"original_max_position_embeddings", 4096}, {"type", "yarn"}};
  c["quantization_config"] = {{"activation_scheme", "dynamic"}, {"fmt", "e4m3"}, {"quant_method", "fp8"},
                              {"weight_block_size", {128, 128}}};
  return c;
}

// Kimi-K2-Instruct (deepseek.md §1): DeepSeek-V3's code under model_type "kimi_k2" with 64 heads,
// 384 experts without groups, one dense layer, YaRN factor 32 with beta_fast 1 (the July
// release; the 0905 one has factor 64 over 262144 positions), rope theta 50000, a 163840-entry
// vocabulary, FP8 blocks as DeepSeek-V3. Values the reference marks unverified are these
// single-sourced ones: the factor, max_position_embeddings and rms_norm_eps (1e-6 here).
nlohmann::json KimiK2Config() {
  nlohmann::json c = DeepseekV3Config();
  c.update({{"model_type", "kimi_k2"}, {"num_attention_heads", 64}, {"num_key_value_heads", 64},
            {"n_routed_experts", 384}, {"first_k_dense_replace", 1}, {"n_group", 1}, {"topk_group", 1},
            {"routed_scaling_factor", 2.827}, {"rope_theta", 50000.0}, {"max_position_embeddings", 131072},
            {"vocab_size", 163840}, {"bos_token_id", 163584}, {"eos_token_id", 163585},
            {"num_nextn_predict_layers", 0}});
  c["auto_map"] = {{"AutoConfig", "configuration_deepseek.DeepseekV3Config"},
                   {"AutoModel", "modeling_deepseek.DeepseekV3Model"},
                   {"AutoModelForCausalLM", "modeling_deepseek.DeepseekV3ForCausalLM"}};
  c["rope_scaling"] = {{"beta_fast", 1.0}, {"beta_slow", 1.0}, {"factor", 32.0}, {"mscale", 1.0},
                       {"mscale_all_dim", 1.0}, {"original_max_position_embeddings", 4096}, {"type", "yarn"}};
  return c;
}

// Tiny DeepSeek models for tests and the CLI: every switch of the family at test sizes. v2:
// group_limited_greedy over 2 groups, no q_lora; v3: q_lora, sigmoid noaux_tc routing with 2
// groups, renormalised weights scaled by 2.5.
nlohmann::json TinyDeepseek(bool v3) {
  nlohmann::json c = DeepseekV2LiteConfig();
  c.update({{"hidden_size", 64}, {"intermediate_size", 96}, {"moe_intermediate_size", 32}, {"num_hidden_layers", 3},
            {"num_attention_heads", 4}, {"num_key_value_heads", 4}, {"kv_lora_rank", 32}, {"qk_nope_head_dim", 16},
            {"qk_rope_head_dim", 8}, {"v_head_dim", 16}, {"n_routed_experts", 8}, {"n_shared_experts", 1},
            {"num_experts_per_tok", 2}, {"n_group", 2}, {"topk_group", 1}, {"topk_method", "group_limited_greedy"},
            {"vocab_size", 2048}, {"bos_token_id", 2000}, {"eos_token_id", 2001}, {"max_position_embeddings", 4096}});
  c["rope_scaling"]["original_max_position_embeddings"] = 64;
  if (v3) {
    c.update({{"architectures", {"DeepseekV3ForCausalLM"}}, {"model_type", "deepseek_v3"}, {"q_lora_rank", 24},
              {"topk_method", "noaux_tc"}, {"scoring_func", "sigmoid"}, {"norm_topk_prob", true},
              {"routed_scaling_factor", 2.5}});
    c["rope_scaling"]["mscale"] = 1.0;
    c["rope_scaling"]["mscale_all_dim"] = 1.0;
  }
  return c;
}

// Tiny variants of a family: every structural switch kept (GQA, head_dim != hidden / heads for
// Qwen3, llama3 rope with a short original context, experts with a dense layer between), sizes a
// test loads in milliseconds; vocabulary 2048 (room for the small family tokenizers of the tests).
nlohmann::json Tiny(nlohmann::json c) {
  c.update({{"hidden_size", 64}, {"intermediate_size", 128}, {"num_attention_heads", 4}, {"num_key_value_heads", 2},
            {"num_hidden_layers", 4}, {"vocab_size", 2048}, {"bos_token_id", 2000}, {"eos_token_id", 2001},
            {"max_position_embeddings", 4096}});
  if (c.contains("head_dim")) c["head_dim"] = c["model_type"] == "llama" ? 16 : 32;
  if (c["model_type"] == "llama") c["rope_scaling"]["original_max_position_embeddings"] = 64;
  if (c["model_type"] == "qwen3_moe") {
    c.update({{"num_experts", 8}, {"num_experts_per_tok", 2}, {"moe_intermediate_size", 64},
              {"mlp_only_layers", {1}}, {"max_window_layers", 4}});
  }
  if (c["model_type"] == "qwen3") c["max_window_layers"] = 4;
  return c;
}

// generation_config.json of each family's instruct release (dense-decoders.md §8.5).
nlohmann::json FamilyGenerationConfig(const nlohmann::json& config) {
  const std::string type = config.at("model_type").get<std::string>();
  const nlohmann::json bos = config.value("bos_token_id", nlohmann::json());
  // Phi-4-mini, SmolLM3, GLM-4.5: the ids config.json gives (their generation configs repeat them).
  if (type == "phi3" || type == "smollm3" || type == "glm4_moe") {
    nlohmann::json g{{"eos_token_id", config.at("eos_token_id")}};
    if (!bos.is_null()) g["bos_token_id"] = bos;
    return g;
  }
  if (type == "llama") {
    const int64_t b = bos.get<int64_t>();
    return {{"bos_token_id", b}, {"do_sample", true}, {"eos_token_id", {b + 1, b + 8, b + 9}},
            {"temperature", 0.6}, {"top_p", 0.9}};
  }
  if (type == "mistral") return {{"bos_token_id", bos}, {"eos_token_id", config.at("eos_token_id")}};
  // DeepSeek: bos and eos as in config.json (deepseek.md §8).
  if (type.rfind("deepseek", 0) == 0) return {{"bos_token_id", bos}, {"eos_token_id", config.at("eos_token_id")}};
  // Gemma 3 instruct: stops on <eos> (1) and <end_of_turn> (106).
  if (type == "gemma3_text") {
    return {{"bos_token_id", bos}, {"cache_implementation", "hybrid"}, {"do_sample", true},
            {"eos_token_id", config.at("eos_token_id")}, {"pad_token_id", 0}, {"top_k", 64}, {"top_p", 0.95}};
  }
  const int64_t b = bos.get<int64_t>();
  return {{"bos_token_id", b}, {"do_sample", true}, {"eos_token_id", {b + 2, b}}, {"pad_token_id", b},
          {"temperature", type == "qwen2" ? 0.7 : 0.6}, {"top_k", 20}, {"top_p", type == "qwen2" ? 0.8 : 0.95}};
}

}  // namespace

nlohmann::json SynthPresetConfigJson(std::string_view preset) {
  if (preset == "llama-3.1-8b") return LlamaConfig();
  if (preset == "mistral-7b") return MistralConfig();
  if (preset == "qwen2.5-7b") return QwenConfig("qwen2");
  if (preset == "qwen3-8b") return QwenConfig("qwen3");
  if (preset == "qwen3-30b-a3b") return QwenConfig("qwen3_moe");
  if (preset == "tiny-llama") return Tiny(LlamaConfig());
  if (preset == "tiny-qwen3") return Tiny(QwenConfig("qwen3"));
  if (preset == "tiny-qwen3-moe") return Tiny(QwenConfig("qwen3_moe"));
  if (preset == "deepseek-v2-lite") return DeepseekV2LiteConfig();
  if (preset == "deepseek-v3") return DeepseekV3Config();
  if (preset == "kimi-k2") return KimiK2Config();
  if (preset == "tiny-deepseek-v2") return TinyDeepseek(false);
  if (preset == "tiny-deepseek-v3") return TinyDeepseek(true);
  if (preset == "gemma-3-1b") return Gemma3Config(1152, 26, 4, 1, 256, 6912, 256, 512, false);
  if (preset == "gemma-3-4b") return Gemma3Config(2560, 34, 8, 4, 256, 10240, 256, 1024, true);
  if (preset == "gemma-3-12b") return Gemma3Config(3840, 48, 16, 8, 256, 15360, 256, 1024, true);
  if (preset == "gemma-3-27b") return Gemma3Config(5376, 62, 32, 16, 128, 21504, 168, 1024, true);
  if (preset == "tiny-gemma3") {
    // Every Gemma 3 feature at test size: 5 sliding : 1 global, head_dim 32 != hidden / heads,
    // query_pre_attn_scalar != head_dim, linear rope scaling on the global layers only.
    nlohmann::json c = Gemma3Config(64, 6, 4, 2, 32, 128, 24, 16, true);
    c.update({{"vocab_size", 2048}, {"bos_token_id", 2}, {"eos_token_id", {1, 106}}, {"max_position_embeddings", 4096}});
    return c;
  }
  if (preset == "phi-4-mini") return Phi4MiniConfig();
  if (preset == "smollm3-3b") return SmolLm3Config();
  if (preset == "glm-4.5-air") return Glm45AirConfig();
  if (preset == "gpt-oss-20b") return GptOssConfig(24, 32);
  if (preset == "gpt-oss-120b") return GptOssConfig(36, 128);
  if (preset == "tiny") {
    // Small enough for tests and the demo, yet every structural feature of the real model:
    // head_dim (32) != hidden / heads (16), GQA (2 query heads per KV head), alternating
    // sliding/full layers with a window tests can exceed, top-4 of 8 experts, a down_proj with an
    // odd number of MXFP4 blocks per row (96 / 32 = 3), the real vocabulary.
    nlohmann::json config = GptOssConfig(4, 8);
    config["hidden_size"] = 64;
    config["intermediate_size"] = 96;
    config["num_attention_heads"] = 4;
    config["num_key_value_heads"] = 2;
    config["head_dim"] = 32;
    config["sliding_window"] = 16;
    return config;
  }
  std::string known;
  for (const std::string& name : SynthPresetNames()) known += (known.empty() ? "" : ", ") + name;
  Fail("unknown preset '", preset, "' (known: ", known, ")");
}

nlohmann::json ShallowerConfig(nlohmann::json config, int64_t layers) {
  const int64_t full = config.at("num_hidden_layers").get<int64_t>();
  if (layers < 1 || layers > full) Fail("synth: --layers ", layers, " is outside 1..", full, " for this preset");
  config["num_hidden_layers"] = layers;
  if (config.contains("layer_types")) {
    nlohmann::json kept = nlohmann::json::array();
    for (int64_t i = 0; i < layers; ++i) kept.push_back(config["layer_types"].at(i));
    config["layer_types"] = kept;
  }
  if (config.contains("mlp_only_layers")) {
    nlohmann::json kept = nlohmann::json::array();
    for (const auto& i : config["mlp_only_layers"]) {
      if (i.get<int64_t>() < layers) kept.push_back(i);
    }
    config["mlp_only_layers"] = kept;
  }
  if (config.contains("max_window_layers")) {
    config["max_window_layers"] = std::min(config["max_window_layers"].get<int64_t>(), layers);
  }
  return config;
}

nlohmann::json GptOssGenerationConfigJson() {
  return nlohmann::json{
      {"bos_token_id", 199998},
      {"do_sample", true},
      {"eos_token_id", {200002, 199999, 200012}},
      {"pad_token_id", 199999},
      {"transformers_version", "4.55.0.dev0"},
  };
}

// ---- values -----------------------------------------------------------------------------------

namespace {

constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ull;

// SplitMix64's output function: a bijective 64-bit mixer.
inline uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t Fnv1a64(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// Per-tensor stream key; draw i of the stream is Mix64(key + (i + 1) * kGolden), i.e. the i-th
// SplitMix64 output from state `key`.
uint64_t StreamKey(uint64_t seed, std::string_view name) {
  return Mix64(Mix64(seed + kGolden) ^ Fnv1a64(name));
}

inline uint64_t Draw(uint64_t key, uint64_t i) { return Mix64(key + (i + 1) * kGolden); }

// Irwin-Hall(4) of 16-bit uniforms, centred and scaled to unit variance.
inline float StandardDraw(uint64_t bits) {
  const uint32_t sum = static_cast<uint32_t>(bits & 0xffff) + static_cast<uint32_t>((bits >> 16) & 0xffff) +
                       static_cast<uint32_t>((bits >> 32) & 0xffff) + static_cast<uint32_t>(bits >> 48);
  // Each 16-bit uniform has variance (65536^2 - 1) / 12; four of them, (65536^2 - 1) / 3.
  constexpr float kMean = 2.0f * 65535.0f;
  const float kInvStd = static_cast<float>(1.0 / std::sqrt((65536.0 * 65536.0 - 1.0) / 3.0));
  return (static_cast<float>(sum) - kMean) * kInvStd;
}

// Inputs summed per output: the scale of a weight matrix follows 1/sqrt(fan_in).
int64_t FanIn(const TensorSpec& spec) {
  switch (spec.kind) {
    case TensorKind::kLinearWeight:
    case TensorKind::kRouterWeight:
    case TensorKind::kLmHead:
    case TensorKind::kExpertLinear:  // [out, in]
    case TensorKind::kExpertWeight:  // [E, in, out]
      return spec.shape.at(1);
    case TensorKind::kInt4Codes:
    case TensorKind::kInt4Zeros:
    case TensorKind::kInt4Scales:
    case TensorKind::kInt4Shape:
    case TensorKind::kNmValues:
    case TensorKind::kNmBitmask:
    case TensorKind::kNmShape:
    case TensorKind::kFp8Scales:
      return spec.module_shape.at(1);
    case TensorKind::kExpertBlocks:  // [E, out, in/32, 16]
    case TensorKind::kExpertScales:  // [E, out, in/32]
      return spec.shape.at(2) * kMxfp4BlockSize;
    default:
      return 0;
  }
}

constexpr float kSmallStd = 0.02f;  // the checkpoint's initializer_range

}  // namespace

SynthInit SynthInitFor(const TensorSpec& spec) {
  SynthInit init;
  switch (spec.kind) {
    case TensorKind::kEmbedding: init.std = kSmallStd; break;
    case TensorKind::kNorm: init.mean = 1.0f; init.std = kSmallStd; break;
    case TensorKind::kLinearWeight:
    case TensorKind::kRouterWeight:
    case TensorKind::kExpertLinear:
    case TensorKind::kExpertWeight:
      init.std = static_cast<float>(1.0 / std::sqrt(static_cast<double>(FanIn(spec))));
      break;
    case TensorKind::kNmValues:  // half the inputs kept: the same output scale
      init.std = static_cast<float>(std::sqrt(2.0 / static_cast<double>(FanIn(spec))));
      break;
    case TensorKind::kNmBitmask:  // 2 of every 4 bits, drawn
    case TensorKind::kNmShape: break;
    case TensorKind::kLmHead:
      init.std = static_cast<float>(2.0 / std::sqrt(static_cast<double>(FanIn(spec))));
      break;
    case TensorKind::kLinearBias:
    case TensorKind::kRouterBias:
    case TensorKind::kExpertBias: init.std = kSmallStd; break;
    // DeepSeek-V3's choice-only router bias: comparable to the gaps between sigmoid scores.
    case TensorKind::kRouterCorrectionBias: init.std = 0.1f; break;
    case TensorKind::kAttentionSinks: init.std = 1.0f; break;
    case TensorKind::kExpertBlocks: break;  // uniform random codes
    case TensorKind::kInt4Codes:            // uniform random codes
    case TensorKind::kInt4Zeros:            // zero points 7 .. 9
    case TensorKind::kInt4Shape: break;
    case TensorKind::kInt4Scales:
      // W = (q - z) s with q uniform in 0 .. 15 and z near 8: std(q - z) is about 4.6.
      init.std = static_cast<float>(1.0 / std::sqrt(static_cast<double>(FanIn(spec))) / 4.6);
      break;
    case TensorKind::kFp8Scales:
      // W = e4m3(16 z) * scale with z a unit draw: scale = std / 16 (varied per block below).
      init.std = static_cast<float>(1.0 / std::sqrt(static_cast<double>(FanIn(spec))) / 16.0);
      break;
    case TensorKind::kExpertScales: {
      // Decoded value = E2M1 * 2^(e + j), codes uniform (E[E2M1^2] = 68.5 / 8), j uniform in
      // {-1, 0, 1} (E[4^j] = 1.75): std = sqrt(8.5625 * 1.75) * 2^e. Pick e nearest (in log2) to
      // the target 1/sqrt(fan_in).
      const double target = 1.0 / std::sqrt(static_cast<double>(FanIn(spec)));
      const double e = std::round(std::log2(target / std::sqrt(8.5625 * 1.75)));
      const double byte = std::clamp(kE8M0Bias + e, 1.0, 253.0);  // keeps c +- 1 in 0..254
      init.scale_center = static_cast<uint8_t>(byte);
      break;
    }
  }
  return init;
}

void FillSyntheticTensor(const TensorSpec& spec, uint64_t seed, uint8_t* dst, size_t nbytes) {
  TESSERA_CHECK(nbytes == spec.nbytes());
  const uint64_t key = StreamKey(seed, spec.name);
  const SynthInit init = SynthInitFor(spec);
  ThreadPool& pool = GlobalPool();
  constexpr size_t kGrain = size_t{1} << 16;
  if (spec.kind == TensorKind::kExpertBlocks) {
    // Eight random bytes per draw; draw w covers bytes [8w, 8w + 8).
    const size_t words = (nbytes + 7) / 8;
    pool.ParallelFor(words, kGrain, [&](size_t begin, size_t end) {
      for (size_t w = begin; w < end; ++w) {
        const uint64_t bits = Draw(key, w);
        std::memcpy(dst + 8 * w, &bits, std::min<size_t>(8, nbytes - 8 * w));
      }
    });
    return;
  }
  if (spec.kind == TensorKind::kInt4Codes || spec.kind == TensorKind::kInt4Zeros) {
    const bool zeros = spec.kind == TensorKind::kInt4Zeros;
    pool.ParallelFor(nbytes / 4, kGrain, [&](size_t begin, size_t end) {
      for (size_t w = begin; w < end; ++w) {
        uint64_t bits = Draw(key, w);
        uint32_t word = static_cast<uint32_t>(bits);
        if (zeros) {
          word = 0;
          for (int i = 0; i < 8; ++i, bits /= 3) word |= static_cast<uint32_t>(7 + bits % 3) << (4 * i);
        }
        std::memcpy(dst + 4 * w, &word, 4);
      }
    });
    return;
  }
  if (spec.kind == TensorKind::kNmBitmask) {
    // Each nibble one of the six 2-of-4 patterns; bits past the module's columns stay 0.
    static constexpr uint8_t kPatterns[6] = {0x3, 0x5, 0x6, 0x9, 0xA, 0xC};
    const size_t in = static_cast<size_t>(spec.module_shape.at(1)), row_bytes = (in + 7) / 8;
    pool.ParallelFor(nbytes, kGrain, [&](size_t begin, size_t end) {
      for (size_t i = begin; i < end; ++i) {
        const uint64_t bits = Draw(key, i);
        uint8_t byte = static_cast<uint8_t>(kPatterns[bits % 6] | kPatterns[(bits / 6) % 6] << 4);
        const size_t col = i % row_bytes * 8;
        if (col + 8 > in) byte &= static_cast<uint8_t>((1u << (in - col)) - 1);
        dst[i] = byte;
      }
    });
    return;
  }
  if (spec.kind == TensorKind::kInt4Shape || spec.kind == TensorKind::kNmShape) {
    TESSERA_CHECK(spec.module_shape.size() == 2 && nbytes == 2 * DTypeSize(spec.dtype));
    for (size_t i = 0; i < 2; ++i) {
      const int64_t v = spec.module_shape[i];
      std::memcpy(dst + i * DTypeSize(spec.dtype), &v, DTypeSize(spec.dtype));  // little-endian I64 (or I32)
    }
    return;
  }
  if (spec.kind == TensorKind::kInt4Scales) {
    // Magnitudes around the target with either sign (AWQ scales are positive; a negative scale is
    // the same weight distribution), never zero.
    const size_t elem = DTypeSize(spec.dtype);
    pool.ParallelFor(nbytes / elem, kGrain, [&](size_t begin, size_t end) {
      for (size_t i = begin; i < end; ++i) {
        const float v = init.std * (0.75f + 0.5f * static_cast<float>(Draw(key, i) % 1024) / 1024.0f);
        const uint16_t h = spec.dtype == DType::kF16 ? F32ToF16(v) : F32ToBf16(v);
        if (elem == 2) std::memcpy(dst + 2 * i, &h, 2); else std::memcpy(dst + 4 * i, &v, 4);
      }
    });
    return;
  }
  if (spec.kind == TensorKind::kFp8Scales) {
    pool.ParallelFor(nbytes / 4, kGrain, [&](size_t begin, size_t end) {
      for (size_t i = begin; i < end; ++i) {
        const float v = init.std * (0.75f + 0.5f * static_cast<float>(Draw(key, i) % 1024) / 1024.0f);
        std::memcpy(dst + 4 * i, &v, 4);
      }
    });
    return;
  }
  if (spec.dtype == DType::kF8E4M3) {
    // FP8 weights (their scales above): codes of 16 z, |16 z| <= 55.4, well inside e4m3's range.
    pool.ParallelFor(nbytes, kGrain, [&](size_t begin, size_t end) {
      for (size_t i = begin; i < end; ++i) dst[i] = F32ToF8E4M3(16.0f * StandardDraw(Draw(key, i)));
    });
    return;
  }
  if (spec.kind == TensorKind::kExpertScales) {
    pool.ParallelFor(nbytes, kGrain, [&](size_t begin, size_t end) {
      for (size_t i = begin; i < end; ++i) {
        dst[i] = static_cast<uint8_t>(init.scale_center - 1 + static_cast<int>(Draw(key, i) % 3));
      }
    });
    return;
  }
  const size_t elem = DTypeSize(spec.dtype);
  TESSERA_CHECK(spec.dtype == DType::kBF16 || spec.dtype == DType::kF16 || spec.dtype == DType::kF32);
  pool.ParallelFor(nbytes / elem, kGrain, [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) {
      const float v = init.mean + init.std * StandardDraw(Draw(key, i));
      // Unaligned stores: a tensor may start at any byte offset of its shard.
      if (spec.dtype == DType::kBF16) {
        const uint16_t h = F32ToBf16(v);
        std::memcpy(dst + 2 * i, &h, 2);
      } else if (spec.dtype == DType::kF16) {
        const uint16_t h = F32ToF16(v);
        std::memcpy(dst + 2 * i, &h, 2);
      } else {
        std::memcpy(dst + 4 * i, &v, 4);
      }
    }
  });
}

// ---- writing ----------------------------------------------------------------------------------

namespace {

namespace fs = std::filesystem;

// Files a model directory written by synth may hold; --force replaces exactly these.
bool IsModelFile(const std::string& name) {
  if (name == "config.json" || name == "generation_config.json" || name == "tokenizer.json" ||
      name == "tokenizer_config.json" || name == "special_tokens_map.json" ||
      name == "model.safetensors" || name == "model.safetensors.index.json") {
    return true;
  }
  // model-00001-of-00003.safetensors
  return name.size() > 12 && name.rfind("model-", 0) == 0 &&
         name.compare(name.size() - 12, 12, ".safetensors") == 0;
}

void WriteJson(const std::string& path, const nlohmann::json& json) { WriteFile(path, json.dump(2) + "\n"); }

}  // namespace

SynthResult WriteSyntheticModel(const std::string& dir, const SynthOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  const std::string config_source = dir + "/config.json";
  const ModelConfig config = ParseModelConfig(options.config_json.dump(), config_source);
  ValidateModelConfig(config, config_source);
  const std::vector<TensorSpec> specs = CheckpointOrder(config, ModelTensorSpecs(config, config_source));
  if (options.max_shard_bytes == 0) Fail(dir, ": the maximum shard size must be positive");

  SynthResult result;
  result.num_tensors = specs.size();
  for (const TensorSpec& s : specs) {
    result.tensor_bytes += s.nbytes();
    result.parameters += s.parameters();
  }
  // gpt-oss directories carry the real o200k_harmony tokenizer (built in); the other families'
  // cannot be made offline.
  const bool gpt_oss = config.model_type == "gpt_oss";
  const std::string empty;
  const std::string& tokenizer_json = gpt_oss ? EmbeddedTokenizerJson() : empty;
  const std::string_view tokenizer_config = EmbeddedTokenizerConfigJson();

  // Headers, the index and the small JSON files are far below this margin.
  constexpr uint64_t kMarginBytes = uint64_t{64} << 20;
  const OutputDirPlan plan = PlanOutputDir(dir, options.overwrite, IsModelFile);
  RequireDiskSpace(dir, result.tensor_bytes + tokenizer_json.size() + kMarginBytes, plan.stale_bytes, "the model");
  plan.Apply();

  std::atomic<uint64_t> done{0};
  std::vector<TensorToWrite> tensors;
  tensors.reserve(specs.size());
  for (const TensorSpec& spec : specs) {
    tensors.push_back(TensorToWrite{spec.name, spec.dtype, spec.shape,
                                    [&, spec](uint8_t* dst, size_t nbytes) {
                                      FillSyntheticTensor(spec, options.seed, dst, nbytes);
                                      const uint64_t now = done += nbytes;
                                      if (options.progress) options.progress(now, result.tensor_bytes);
                                    }});
  }
  for (std::string& name : WriteShardedSafetensors(dir, tensors, options.max_shard_bytes)) {
    if (name != "model.safetensors.index.json") result.weight_files.push_back(std::move(name));
  }

  if (gpt_oss) {
    WriteJson(dir + "/generation_config.json", GptOssGenerationConfigJson());
    WriteFile(dir + "/tokenizer.json", tokenizer_json);
    WriteFile(dir + "/tokenizer_config.json", std::string(tokenizer_config));
    WriteJson(dir + "/special_tokens_map.json",
              nlohmann::json{{"bos_token", "<|startoftext|>"}, {"eos_token", "<|return|>"},
                             {"pad_token", "<|endoftext|>"}});
  } else {
    // The families' real tokenizers cannot be made offline: these directories are for shapes
    // and speed (tessera bench, logits on ids); see docs/ARCHITECTURE.md.
    WriteJson(dir + "/generation_config.json", FamilyGenerationConfig(options.config_json));
  }
  WriteJson(dir + "/config.json", options.config_json);  // last: marks the directory complete
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace tessera
