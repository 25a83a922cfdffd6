// GGUF metadata to a Hugging Face config (gguf_config.h). Key names as llama.cpp's converter writes
// them (gguf-py constants: LLM_KV_*), read back into the config.json keys of each family.
#include "io/gguf_config.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cmath>
#include <cstring>
#include <functional>
#include <charconv>
#include <optional>
#include <string>
#include <string_view>

#include "core/error.h"
#include "io/json_util.h"
#include "io/model_limits.h"

namespace tessera {
namespace {

struct ArchRow {
  std::string_view gguf;        // general.architecture
  std::string_view model_type;  // config.json model_type
  std::string_view hf_class;
  std::string_view experts_key;  // config key of the routed expert count ("" for dense rows)
  // What the converter adds to every "*norm.weight" (Gemma3Model.norm_shift: 1, the (1 + w) of
  // Gemma's RMSNorm already added); ModelConfig::stored_norm_offset.
  double norm_shift = 0.0;
};

constexpr std::array kArchRows = {
    ArchRow{"llama", "llama", "LlamaForCausalLM", ""},
    ArchRow{"qwen2", "qwen2", "Qwen2ForCausalLM", ""},
    ArchRow{"qwen3", "qwen3", "Qwen3ForCausalLM", ""},
    ArchRow{"qwen3moe", "qwen3_moe", "Qwen3MoeForCausalLM", "num_experts"},
    ArchRow{"gpt-oss", "gpt_oss", "GptOssForCausalLM", "num_local_experts"},
    // V2, V2-Lite, V3, R1 and Kimi-K2 share llama.cpp's arch; the model_type follows the router
    // (DeepseekConfig below).
    ArchRow{"deepseek2", "deepseek_v2", "DeepseekV2ForCausalLM", "n_routed_experts"},
    ArchRow{"gemma3", "gemma3_text", "Gemma3ForCausalLM", "", 1.0},
    // SmolLM3: Llama's tensors (q/k permuted); llama.cpp fixes the NoPE step at 4, the config's
    // default when no_rope_layers is absent.
    ArchRow{"smollm3", "smollm3", "SmolLM3ForCausalLM", ""},
    ArchRow{"glm4moe", "glm4_moe", "Glm4MoeForCausalLM", "n_routed_experts"},
    ArchRow{"phi3", "phi3", "Phi3ForCausalLM", ""},
};

enum class Kind { kCount, kFloat };

struct KeyRow {
  std::string_view gguf;  // after "<arch>."
  std::string_view hf;    // config.json key ("" = the row's experts_key)
  Kind kind;
  bool required;
  int64_t max = 0;  // counts: the budget of io/model_limits.h, checked before the value is used
};

constexpr std::array kKeys = {
    KeyRow{"block_count", "num_hidden_layers", Kind::kCount, true, kMaxConfigLayers},
    KeyRow{"embedding_length", "hidden_size", Kind::kCount, true, kMaxConfigWidth},
    KeyRow{"feed_forward_length", "intermediate_size", Kind::kCount, false, kMaxConfigWidth},
    KeyRow{"context_length", "max_position_embeddings", Kind::kCount, true, kMaxConfigContext},
    KeyRow{"attention.head_count", "num_attention_heads", Kind::kCount, true, kMaxConfigHeads},
    KeyRow{"attention.head_count_kv", "num_key_value_heads", Kind::kCount, false, kMaxConfigHeads},
    KeyRow{"attention.key_length", "head_dim", Kind::kCount, false, kMaxConfigWidth},
    KeyRow{"attention.layer_norm_rms_epsilon", "rms_norm_eps", Kind::kFloat, true},
    KeyRow{"rope.freq_base", "rope_theta", Kind::kFloat, false},
    KeyRow{"attention.sliding_window", "sliding_window", Kind::kCount, false, kMaxConfigContext},
    KeyRow{"expert_count", "", Kind::kCount, false, kMaxConfigExperts},
    KeyRow{"expert_used_count", "num_experts_per_tok", Kind::kCount, false, kMaxConfigExperts},
    KeyRow{"expert_feed_forward_length", "moe_intermediate_size", Kind::kCount, false, kMaxConfigWidth},
    // DeepSeek (DeepseekV2Model.set_gguf_parameters).
    KeyRow{"leading_dense_block_count", "first_k_dense_replace", Kind::kCount, false, kMaxConfigLayers},
    KeyRow{"attention.q_lora_rank", "q_lora_rank", Kind::kCount, false, kMaxConfigWidth},
    KeyRow{"attention.kv_lora_rank", "kv_lora_rank", Kind::kCount, false, kMaxConfigWidth},
    KeyRow{"rope.dimension_count", "qk_rope_head_dim", Kind::kCount, false, kMaxConfigWidth},
    KeyRow{"expert_shared_count", "n_shared_experts", Kind::kCount, false, kMaxConfigExperts},
    KeyRow{"expert_weights_scale", "routed_scaling_factor", Kind::kFloat, false},
    KeyRow{"expert_group_count", "n_group", Kind::kCount, false, kMaxConfigExperts},
    KeyRow{"expert_group_used_count", "topk_group", Kind::kCount, false, kMaxConfigExperts},
    // Gemma 3 (Gemma3Model.set_gguf_parameters; rope.freq_base_swa only in later converters).
    KeyRow{"final_logit_softcapping", "final_logit_softcapping", Kind::kFloat, false},
    KeyRow{"rope.freq_base_swa", "rope_local_base_freq", Kind::kFloat, false},
};

// A count of the metadata, at most `max` (issue 44: before anything is sized by it).
uint64_t BoundedCount(const GgufFile& file, const std::string& key, int64_t max) {
  const uint64_t value = file.GetUint(key);
  if (value > static_cast<uint64_t>(max)) {
    Fail(file.path(), ": metadata ", Quote(key), " is ", value, ", more than the limit of ", max);
  }
  return value;
}

// The layer index of a "blk.N." tensor name, or -1.
int64_t BlockOf(std::string_view name) {
  if (!name.starts_with("blk.")) return -1;
  name.remove_prefix(4);
  int64_t layer = -1;
  const auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), layer);
  if (ec != std::errc() || end == name.data() || end == name.data() + name.size() || *end != '.') return -1;
  return layer;
}

// The layer count against the tensors the set holds: no "blk.N." tensor may lie at or past it,
// and a complete set (one file, or every split of a split set) must hold its last layer. A file
// without per-layer tensors (metadata only) is held to the budget alone.
void CheckLayerTensors(const GgufFile& file, const std::vector<std::unique_ptr<GgufFile>>& split, uint64_t layers) {
  int64_t last = -1;
  const GgufFile* last_file = nullptr;
  const GgufTensorInfo* last_tensor = nullptr;
  auto scan = [&](const GgufFile& f) {
    for (const GgufTensorInfo& t : f.tensors()) {
      const int64_t block = BlockOf(t.name);
      if (block > last) last = block, last_file = &f, last_tensor = &t;
    }
  };
  scan(file);
  for (const auto& other : split) {
    if (other.get() != &file) scan(*other);
  }
  if (last < 0) return;
  const std::string key = StrCat(file.GetString("general.architecture"), ".block_count");
  if (static_cast<uint64_t>(last) >= layers) {
    Fail(last_file->path(), ": tensor ", Quote(last_tensor->name), " lies past the ", layers, " layers of metadata ", Quote(key));
  }
  const uint64_t splits = file.Find("split.count") != nullptr ? file.GetUint("split.count") : 1;
  const bool complete = splits <= 1 || split.size() >= splits;
  if (complete && static_cast<uint64_t>(last) + 1 < layers) {
    Fail(file.path(), ": metadata ", Quote(key), " declares ", layers, " layers, but the tensors stop at layer ", last);
  }
}

// A float32 metadata value as the shortest decimal that reads back to the same float (1e-05,
// not 9.99999975e-06), as config.json spells it.
double ShortestFloat(double value) {
  const auto f = static_cast<float>(value);
  char buf[32];
  const auto end = std::to_chars(buf, buf + sizeof(buf), f).ptr;
  return std::stod(std::string(buf, end));
}

// DeepSeek-V2/V3 (deepseek.md §1-5) from the deepseek2 keys. llama.cpp runs MLA as MQA over the
// latent: head_count_kv is 1 and key_length / value_length describe the latent (kv_lora + rope,
// kv_lora), the per-head sizes being key_length_mla / value_length_mla; files written before
// those keys existed carry the per-head sizes in key_length / value_length.
void DeepseekConfig(const GgufFile& file, nlohmann::json& c) {
  const std::string arch = "deepseek2.";
  auto count = [&](const std::string& key) -> std::optional<uint64_t> {
    if (file.Find(arch + key) == nullptr) return std::nullopt;
    return BoundedCount(file, arch + key, kMaxConfigWidth);
  };
  const std::optional<uint64_t> rope = count("rope.dimension_count");
  const std::optional<uint64_t> key = count("attention.key_length_mla") ? count("attention.key_length_mla")
                                                                        : count("attention.key_length");
  const std::optional<uint64_t> value = count("attention.value_length_mla") ? count("attention.value_length_mla")
                                                                            : count("attention.value_length");
  for (const auto& [what, v] : {std::pair{"rope.dimension_count", rope}, {"attention.key_length_mla", key},
                                {"attention.value_length_mla", value}, {"attention.kv_lora_rank", count("attention.kv_lora_rank")}}) {
    if (!v) Fail(file.path(), ": metadata ", Quote(arch + what), " is missing");
  }
  if (*key <= *rope) Fail(file.path(), ": metadata ", Quote(arch + "attention.key_length_mla"), " (", *key,
                          ") must exceed the rope dimension (", *rope, ")");
  c["qk_nope_head_dim"] = *key - *rope;
  c["v_head_dim"] = *value;
  c.erase("head_dim");
  c["num_key_value_heads"] = c["num_attention_heads"];
  if (!c.contains("first_k_dense_replace")) c["first_k_dense_replace"] = 0;
  if (!c.contains("n_shared_experts")) c["n_shared_experts"] = 0;
  // Group-limited routing is stored only by converters that write expert_group_count; without it
  // llama.cpp chooses among all experts, and so does this config.
  if (!c.contains("n_group")) c["n_group"] = 1;
  if (!c.contains("topk_group")) c["topk_group"] = 1;
  c["norm_topk_prob"] = file.Find(arch + "expert_weights_norm") != nullptr && file.GetBool(arch + "expert_weights_norm");
  // expert_gating_func: 1 softmax (V2: "greedy", or "group_limited_greedy" over groups), 2 sigmoid
  // (V3: "noaux_tc" with the exp_probs_b correction bias). Absent: softmax, as llama.cpp reads it.
  const uint64_t gating = count("expert_gating_func").value_or(1);
  if (gating == 2) {
    c["model_type"] = "deepseek_v3";
    c["architectures"] = {"DeepseekV3ForCausalLM"};
    c["topk_method"] = "noaux_tc";
    c["scoring_func"] = "sigmoid";
  } else if (gating == 1) {
    c["topk_method"] = c["n_group"].get<uint64_t>() > 1 ? "group_limited_greedy" : "greedy";
    c["scoring_func"] = "softmax";
  } else {
    Fail(file.path(), ": metadata ", Quote(arch + "expert_gating_func"), " is ", gating, " (1 softmax or 2 sigmoid)");
  }
  // YaRN: llama.cpp keeps 0.1 mscale_all_dim as yarn_log_multiplier and applies the same factor
  // to cos/sin as it removes again (mscale = mscale_all_dim in transformers' terms: cos and sin
  // unscaled, the softmax scale times mscale²).
  if (c.contains("rope_scaling") && c["rope_scaling"].value("rope_type", "") == "yarn") {
    nlohmann::json& rope_scaling = c["rope_scaling"];
    const std::string mul = arch + "rope.scaling.yarn_log_multiplier";
    const double mscale = file.Find(mul) != nullptr ? ShortestFloat(file.GetFloat(mul)) / 0.1 : 0.0;
    rope_scaling["mscale"] = mscale;
    rope_scaling["mscale_all_dim"] = mscale;
    rope_scaling["beta_fast"] = file.Find(arch + "rope.scaling.yarn_beta_fast") != nullptr
                                    ? ShortestFloat(file.GetFloat(arch + "rope.scaling.yarn_beta_fast")) : 32.0;
    rope_scaling["beta_slow"] = file.Find(arch + "rope.scaling.yarn_beta_slow") != nullptr
                                    ? ShortestFloat(file.GetFloat(arch + "rope.scaling.yarn_beta_slow")) : 1.0;
  }
}

// Gemma 3 as llama.cpp's gemma3 graph reads the file (src/models/gemma3.cpp): sliding layers only
// when attention.sliding_window is present, in the pattern of attention.sliding_window_pattern
// (a count, or one bool per layer; default 6: every 6th layer global); local rope base
// rope.freq_base_swa (default 10000, unscaled); and the attention scale fixed in the graph, not
// stored: 1/sqrt(hidden / heads) on the 62-layer 27B, 1/sqrt(head_dim) otherwise (the released
// models' query_pre_attn_scalar; a file converted from another value is read as llama.cpp reads it).
void Gemma3Config(const GgufFile& file, nlohmann::json& c) {
  const std::string arch = "gemma3.";
  const uint64_t layers = c["num_hidden_layers"].get<uint64_t>();
  nlohmann::json types = nlohmann::json::array();
  if (!c.contains("sliding_window")) {
    for (uint64_t i = 0; i < layers; ++i) types.push_back("full_attention");
  } else {
    const std::string key = arch + "attention.sliding_window_pattern";
    const GgufValue* pattern = file.Find(key);
    if (pattern != nullptr && std::holds_alternative<std::vector<bool>>(pattern->value)) {
      const auto& per_layer = std::get<std::vector<bool>>(pattern->value);
      if (per_layer.size() != layers) Fail(file.path(), ": metadata ", Quote(key), " has ", per_layer.size(), " entries for ", layers, " layers");
      for (const bool sliding : per_layer) types.push_back(sliding ? "sliding_attention" : "full_attention");
    } else {
      const uint64_t n = pattern != nullptr ? BoundedCount(file, key, kMaxConfigLayers) : 6;
      // llama_hparams::set_swa_pattern: layer i slides iff n == 0 or i % n < n - 1.
      for (uint64_t i = 0; i < layers; ++i) types.push_back(n == 0 || i % n < n - 1 ? "sliding_attention" : "full_attention");
    }
  }
  c["layer_types"] = types;
  const uint64_t heads = c["num_attention_heads"].get<uint64_t>(), hidden = c["hidden_size"].get<uint64_t>();
  const uint64_t head_dim = c.contains("head_dim") ? c["head_dim"].get<uint64_t>() : 256;
  c["query_pre_attn_scalar"] = layers == 62 && heads > 0 ? hidden / heads : head_dim;
}

// The rotated width a converter stores as rope.dimension_count (read into qk_rope_head_dim) as the
// config's partial_rotary_factor of head_dim (Phi-3, GLM-4.5); head_dim written out.
void PartialRotaryFromDimensionCount(nlohmann::json& c) {
  const uint64_t head_dim = c.contains("head_dim") ? c["head_dim"].get<uint64_t>()
                                                   : c["hidden_size"].get<uint64_t>() / c["num_attention_heads"].get<uint64_t>();
  c["head_dim"] = head_dim;
  if (c.contains("qk_rope_head_dim")) {
    c["partial_rotary_factor"] = static_cast<double>(c["qk_rope_head_dim"].get<uint64_t>()) / static_cast<double>(head_dim);
    c.erase("qk_rope_head_dim");
  }
}

// GLM-4.5 (Glm4MoeModel.set_gguf_parameters; llama.cpp's glm4-moe graph): block_count counts the
// MTP layers (nextn_predict_layers) after the trunk's, which the config calls
// num_nextn_predict_layers and a text engine skips; the rotated width is rope.dimension_count of
// head_dim (key_length); q/k norms and q/k/v biases are what the file holds; routing is sigmoid
// with the exp_probs_b correction bias, over groups only where the converter wrote them.
void Glm4MoeConfig(const GgufFile& file, nlohmann::json& c, const std::function<bool(std::string_view)>& has_tensor) {
  const std::string arch = "glm4moe.";
  const uint64_t blocks = c["num_hidden_layers"].get<uint64_t>();
  const uint64_t nextn = file.Find(arch + "nextn_predict_layers") != nullptr
                             ? BoundedCount(file, arch + "nextn_predict_layers", kMaxConfigLayers) : 0;
  if (nextn >= blocks) Fail(file.path(), ": metadata ", Quote(arch + "nextn_predict_layers"), " (", nextn, ") leaves no trunk layers of ", blocks);
  c["num_hidden_layers"] = blocks - nextn;
  if (nextn > 0) c["num_nextn_predict_layers"] = nextn;
  PartialRotaryFromDimensionCount(c);
  c["use_qk_norm"] = has_tensor("blk.0.attn_q_norm.weight");
  c["attention_bias"] = has_tensor("blk.0.attn_q.bias");
  c["norm_topk_prob"] = file.Find(arch + "expert_weights_norm") != nullptr && file.GetBool(arch + "expert_weights_norm");
  if (!c.contains("n_group")) c["n_group"] = 1;
  if (!c.contains("topk_group")) c["topk_group"] = 1;
  if (!c.contains("first_k_dense_replace")) c["first_k_dense_replace"] = 0;
  if (!c.contains("n_shared_experts")) c["n_shared_experts"] = 0;
}

}  // namespace

std::string_view GgufFileTypeName(uint64_t file_type) {
  // llama.h's llama_ftype values; retired ones (4-6, 33-35) are left out.
  static constexpr std::pair<uint64_t, std::string_view> kNames[] = {
      {0, "all F32"},        {1, "F16"},           {2, "Q4_0"},          {3, "Q4_1"},
      {7, "Q8_0"},           {8, "Q5_0"},          {9, "Q5_1"},          {10, "Q2_K - Medium"},
      {11, "Q3_K - Small"},  {12, "Q3_K - Medium"}, {13, "Q3_K - Large"}, {14, "Q4_K - Small"},
      {15, "Q4_K - Medium"}, {16, "Q5_K - Small"},  {17, "Q5_K - Medium"}, {18, "Q6_K"},
      {21, "Q2_K - Small"},  {32, "BF16"},          {38, "MXFP4 MoE"},
  };
  for (const auto& [id, name] : kNames) {
    if (id == file_type) return name;
  }
  return "";
}

std::string GgufModelLabel(const GgufFile& file, uint64_t parameters) {
  const std::string arch = file.Find("general.architecture") ? file.GetString("general.architecture") : "unknown";
  const double p = static_cast<double>(parameters);
  char size[32];
  if (p >= 1e9) std::snprintf(size, sizeof(size), "%.0fB", p / 1e9);
  else std::snprintf(size, sizeof(size), "%.0fM", p / 1e6);
  std::string type = "unknown type";
  if (file.Find("general.file_type") != nullptr) {
    const std::string_view name = GgufFileTypeName(file.GetUint("general.file_type"));
    type = name.empty() ? StrCat("file type ", file.GetUint("general.file_type")) : std::string(name);
  }
  return StrCat(arch, " ", size, " ", type);
}

nlohmann::json GgufConfigJson(const GgufFile& file, const std::vector<std::unique_ptr<GgufFile>>& split) {
  // A tensor of the set: in the metadata file or any other split.
  auto tensor = [&](std::string_view name) -> std::pair<const GgufFile*, const GgufTensorInfo*> {
    if (const GgufTensorInfo* t = file.FindTensor(name)) return {&file, t};
    for (const auto& other : split) {
      if (const GgufTensorInfo* t = other->FindTensor(name)) return {other.get(), t};
    }
    return {nullptr, nullptr};
  };
  const std::string arch = file.GetString("general.architecture");
  const ArchRow* row = nullptr;
  for (const ArchRow& r : kArchRows) {
    if (r.gguf == arch) row = &r;
  }
  if (row == nullptr) {
    std::string known;
    for (const ArchRow& r : kArchRows) known += StrCat(known.empty() ? "" : ", ", r.gguf);
    Fail(file.path(), ": general.architecture ", Quote(arch), " has no row here (known: ", known, ")");
  }
  nlohmann::json c;
  c["model_type"] = row->model_type;
  c["architectures"] = {row->hf_class};
  for (const KeyRow& k : kKeys) {
    const std::string key = StrCat(arch, ".", k.gguf);
    if (file.Find(key) == nullptr) {
      if (k.required) Fail(file.path(), ": metadata ", Quote(key), " is missing");
      continue;
    }
    const std::string hf(k.hf.empty() ? row->experts_key : k.hf);
    if (hf.empty()) Fail(file.path(), ": metadata ", Quote(key), " on the dense architecture ", Quote(arch));
    if (k.kind == Kind::kCount) c[hf] = BoundedCount(file, key, k.max);
    else c[hf] = ShortestFloat(file.GetFloat(key));
  }
  CheckLayerTensors(file, split, c["num_hidden_layers"].get<uint64_t>());
  // The vocabulary: <arch>.vocab_size, else the token list, else the embedding's rows.
  if (file.Find(arch + ".vocab_size") != nullptr) {
    c["vocab_size"] = BoundedCount(file, arch + ".vocab_size", kMaxConfigVocab);
  } else if (file.Find("tokenizer.ggml.tokens") != nullptr) {
    c["vocab_size"] = file.GetStrings("tokenizer.ggml.tokens").size();
  } else if (const GgufTensorInfo* embed = tensor("token_embd.weight").second; embed != nullptr && embed->ne.size() == 2) {
    c["vocab_size"] = embed->ne[1];
  }
  c["tie_word_embeddings"] = tensor("output.weight").second == nullptr;
  for (const char* id : {"bos", "eos", "padding"}) {
    const std::string key = StrCat("tokenizer.ggml.", id, "_token_id");
    if (file.Find(key) != nullptr) c[std::string(id) == "padding" ? "pad_token_id" : StrCat(id, "_token_id")] = file.GetUint(key);
  }
  // A rope factor tensor of the set: F32 [pairs], every entry finite (JSON has no NaN: it would
  // reach the config as null, and the factor be lost).
  auto factors_of = [&](std::string_view name) -> std::optional<std::vector<double>> {
    const auto [owner, t] = tensor(name);
    if (t == nullptr) return std::nullopt;
    if (t->type->id != 0 || t->ne.size() != 1) Fail(file.path(), ": tensor ", Quote(name), " must be F32 [pairs]");
    std::vector<double> factors(t->ne[0]);  // ne[0] floats the file holds
    for (size_t i = 0; i < factors.size(); ++i) {
      float f;
      std::memcpy(&f, owner->Data(*t) + 4 * i, 4);
      if (!std::isfinite(f)) Fail(owner->path(), ": tensor ", Quote(name), ": entry ", i, " is ", f, " (a finite number is required)");
      factors[i] = f;
    }
    return factors;
  };
  if (const auto factors = factors_of("rope_freqs.weight")) {
    // Llama 3 rope scaling: the converter stores only the per-pair divisors it computed.
    double largest = 1.0;
    for (const double f : *factors) largest = std::max(largest, f);
    c["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", largest}, {"freq_factors", *factors}};
  }
  if (arch == "phi3") {
    // Phi3MiniModel: longrope as the rope_factors_long / _short tensors beside
    // rope.scaling.original_context_length (the Phi-3 config's top-level key).
    const auto long_factors = factors_of("rope_factors_long.weight"), short_factors = factors_of("rope_factors_short.weight");
    if (long_factors.has_value() != short_factors.has_value()) {
      Fail(file.path(), ": tensors 'rope_factors_long.weight' and 'rope_factors_short.weight' come together");
    }
    if (long_factors) c["rope_scaling"] = {{"type", "longrope"}, {"long_factor", *long_factors}, {"short_factor", *short_factors}};
    if (const std::string orig = "phi3.rope.scaling.original_context_length"; file.Find(orig) != nullptr) {
      c["original_max_position_embeddings"] = BoundedCount(file, orig, kMaxConfigContext);
    }
  }
  if (arch == "llama") {
    if (tensor("blk.0.attn_q.bias").second != nullptr) c["attention_bias"] = true;
    if (tensor("blk.0.ffn_up.bias").second != nullptr) c["mlp_bias"] = true;
  }
  const std::string scaling_key = arch + ".rope.scaling.type";
  if (file.Find(scaling_key) != nullptr && file.GetString(scaling_key) != "none") {
    const std::string type = file.GetString(scaling_key);
    if (type != "yarn" && type != "linear") Fail(file.path(), ": metadata ", Quote(scaling_key), " is ", Quote(type), " (yarn, linear or none)");
    nlohmann::json rope = {{"rope_type", type}, {"factor", file.GetFloat(arch + ".rope.scaling.factor")}};
    if (const std::string orig = arch + ".rope.scaling.original_context_length"; file.Find(orig) != nullptr) {
      rope["original_max_position_embeddings"] = BoundedCount(file, orig, kMaxConfigContext);
    }
    if (arch == "gpt-oss") rope.update({{"beta_fast", 32.0}, {"beta_slow", 1.0}, {"truncate", false}});
    c["rope_scaling"] = rope;
  }
  if (arch == "gpt-oss") {
    // Fixed in llama.cpp's openai-moe graph rather than stored: the SwiGLU clamp, attention
    // biases, and sliding attention on even layers (gpt-oss.md §2.4).
    c["swiglu_limit"] = 7.0;
    c["attention_bias"] = true;
    nlohmann::json layers = nlohmann::json::array();
    for (uint64_t i = 0; i < c["num_hidden_layers"].get<uint64_t>(); ++i) {
      layers.push_back(i % 2 == 0 ? "sliding_attention" : "full_attention");
    }
    c["layer_types"] = layers;
    // Experts kept MXFP4 (as the converter writes them) read as the MXFP4 checkpoint's.
    if (const GgufTensorInfo* experts = tensor("blk.0.ffn_gate_exps.weight").second;
        experts != nullptr && experts->type->id == 39) {
      c["quantization_config"] = {{"quant_method", "mxfp4"}};
    }
    if (c.contains("moe_intermediate_size")) c["intermediate_size"] = c["moe_intermediate_size"];
    c.erase("moe_intermediate_size");
  }
  if (arch == "qwen3moe") c["norm_topk_prob"] = true;  // Qwen3-MoE's routing (llama.cpp hardcodes it)
  if (arch == "deepseek2") DeepseekConfig(file, c);
  if (arch == "gemma3") Gemma3Config(file, c);
  if (arch == "phi3") {
    // llama.cpp's phi3 graph runs every layer full (its sliding window disabled: PR 13676); the
    // rotated width is rope.dimension_count of head_dim.
    c.erase("sliding_window");
    PartialRotaryFromDimensionCount(c);
  }
  if (arch == "glm4moe") Glm4MoeConfig(file, c, [&](std::string_view name) { return tensor(name).second != nullptr; });
  return c;
}

ModelConfig GgufModelConfig(const GgufFile& file, const std::vector<std::unique_ptr<GgufFile>>& split) {
  ModelConfig config = ParseModelConfig(GgufConfigJson(file, split).dump(), file.path());
  ValidateModelConfig(config, file.path());
  for (const ArchRow& r : kArchRows) {
    if (r.gguf == file.GetString("general.architecture")) config.stored_norm_offset = r.norm_shift;
  }
  return config;
}

}  // namespace tessera
