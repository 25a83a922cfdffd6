// A Hugging Face checkpoint written as llama.cpp's convert_hf_to_gguf.py writes it (llama-cpp-python
// 0.3.16's copy), restated independently of io/gguf_tensors.cpp so that the loader is tested
// against the converter's rules rather than against itself:
//   names   gguf-py's tensor map (token_embd, blk.N.attn_q, ffn_gate_exps, output_norm, ...);
//   llama   q/k rows permuted for ggml's rope (LlamaModel.permute), Llama 3 rope scaling as the
//           rope_freqs tensor (LlamaModel.generate_extra_tensors);
//   MoE     Qwen3-MoE experts stacked into [E, out, in]; gpt-oss MXFP4 experts split into gate
//           and up and repacked into ggml's block (scale byte, then byte j = elements j, j + 16);
//   config  the `<arch>.*` keys of each family's set_gguf_parameters.
//   gemma3  Gemma3Model (llama-cpp-python 0.3.36's conversion/gemma.py): every "*norm.weight" + 1
//           (norm_shift), the sandwich norms as post_attention_norm / ffn_norm / post_ffw_norm,
//           key/value_length, sliding_window, the global rope base and linear scaling.
// Matrices (and the embedding) are written in `matrix_type`: f32 as stored, or a block type whose
// blocks are random (scales small and finite); `twin_dir`, when given, receives a float32
// safetensors checkpoint of exactly the dequantized weights (io/ggml_quants.h), so the GGUF
// and the twin must give the same logits.
#pragma once

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "core/error.h"
#include "io/gguf.h"
#include "io/safetensors.h"
#include "io/ggml_quants.h"

namespace tessera::test {

struct GgufConvertOptions {
  uint32_t matrix_type = 0;  // ggml type id of matrices: 0 f32, 1 f16, 30 bf16, or a block type
  std::string twin_dir;      // "" or a directory for the dequantized float32 twin
  uint32_t seed = 1;
};

namespace gguf_convert_detail {

inline std::vector<float> ToF32(const TensorView& t) {
  std::vector<float> out(t.numel());
  for (size_t i = 0; i < out.size(); ++i) out[i] = ElementToF32(t.dtype(), t.data + i * DTypeSize(t.dtype()));
  return out;
}

inline std::string Bytes(const void* p, size_t n) { return std::string(static_cast<const char*>(p), n); }

// Offsets of the binary16 scale fields in a block of each type (ggml-common.h).
inline std::vector<size_t> HalfFields(uint32_t type) {
  switch (type) {
    case 2: case 6: case 8: return {0};    // q4_0, q5_0, q8_0: d
    case 3: case 7: return {0, 2};         // q4_1, q5_1: d, m
    case 10: return {80, 82};              // q2_K: d, dmin
    case 11: return {108};                 // q3_K: d
    case 12: case 13: return {0, 2};       // q4_K, q5_K: d, dmin
    case 14: return {208};                 // q6_K: d
    default: return {};
  }
}

}  // namespace gguf_convert_detail

// Writes `hf_dir` (config.json + safetensors) to `out` (a .gguf path). Returns the GGUF tensor
// names written, for tests that want to check them.
inline std::vector<std::string> WriteGgufLikeLlamaCpp(const std::string& hf_dir, const std::string& out,
                                                      const GgufConvertOptions& options = {}) {
  using namespace gguf_convert_detail;
  namespace fs = std::filesystem;
  const nlohmann::json config = nlohmann::json::parse(std::ifstream(fs::path(hf_dir) / "config.json"));
  const std::string model_type = config.at("model_type");
  const std::map<std::string, std::string> arch_of = {{"llama", "llama"}, {"mistral", "llama"}, {"qwen2", "qwen2"},
                                                      {"qwen3", "qwen3"}, {"qwen3_moe", "qwen3moe"},
                                                      {"gpt_oss", "gpt-oss"}, {"deepseek_v2", "deepseek2"},
                                                      {"deepseek_v3", "deepseek2"}, {"gemma3_text", "gemma3"},
                                                      {"smollm3", "smollm3"}, {"glm4_moe", "glm4moe"}, {"phi3", "phi3"}};
  const std::string arch = arch_of.at(model_type);
  const int64_t heads = config.at("num_attention_heads");
  const int64_t kv_heads = config.value("num_key_value_heads", heads);
  const int64_t hidden = config.at("hidden_size");
  const int64_t head_dim = config.contains("head_dim") && !config["head_dim"].is_null() ? config["head_dim"].get<int64_t>()
                                                                                        : hidden / heads;
  std::vector<std::pair<std::string, GgufValue>> meta;
  auto key = [&](const std::string& k, GgufValue v) { meta.emplace_back(k, std::move(v)); };
  key("general.architecture", GgufString(arch));
  key("general.name", GgufString("test"));
  key(arch + ".block_count", GgufUint32(config.at("num_hidden_layers")));
  key(arch + ".context_length", GgufUint32(config.at("max_position_embeddings")));
  key(arch + ".embedding_length", GgufUint32(static_cast<uint32_t>(hidden)));
  if (arch == "phi3") {
    // Phi3MiniModel.set_gguf_parameters / generate_extra_tensors.
    const double partial = config.value("partial_rotary_factor", 1.0);
    key(arch + ".rope.dimension_count", GgufUint32(static_cast<uint32_t>(static_cast<int64_t>(partial * hidden) / heads)));
    key(arch + ".rope.scaling.original_context_length",
        GgufUint32(config.value("original_max_position_embeddings", config.at("max_position_embeddings").get<int64_t>())));
    key(arch + ".attention.sliding_window",
        GgufUint32(config.contains("sliding_window") && !config["sliding_window"].is_null() ? config["sliding_window"].get<uint32_t>() : 0));
  }
  if (arch == "glm4moe") {
    // Glm4MoeModel.set_gguf_parameters (no MTP layer written here).
    key(arch + ".rope.dimension_count",
        GgufUint32(static_cast<uint32_t>(head_dim * config.value("partial_rotary_factor", 0.5))));
    key(arch + ".expert_count", GgufUint32(config.at("n_routed_experts")));
    key(arch + ".expert_shared_count", GgufUint32(config.at("n_shared_experts")));
    key(arch + ".leading_dense_block_count", GgufUint32(config.at("first_k_dense_replace")));
    key(arch + ".expert_gating_func", GgufUint32(2));
    key(arch + ".expert_weights_scale", GgufFloat32(config.at("routed_scaling_factor")));
    key(arch + ".expert_weights_norm", GgufBool(config.at("norm_topk_prob")));
    key(arch + ".expert_group_count", GgufUint32(config.at("n_group")));
    key(arch + ".expert_group_used_count", GgufUint32(config.at("topk_group")));
  }
  if (arch == "gpt-oss" || arch == "qwen3moe" || arch == "glm4moe") {
    key(arch + ".expert_feed_forward_length",
        GgufUint32(config.value(arch == "gpt-oss" ? "intermediate_size" : "moe_intermediate_size", 0)));
  }
  key(arch + ".feed_forward_length", GgufUint32(config.at("intermediate_size")));
  key(arch + ".attention.head_count", GgufUint32(static_cast<uint32_t>(heads)));
  // DeepseekV2Model: MLA written as MQA over the latent (one kv head of kv_lora + rope).
  key(arch + ".attention.head_count_kv", GgufUint32(static_cast<uint32_t>(arch == "deepseek2" ? 1 : kv_heads)));
  // transformers v5 writes rope_theta inside rope_parameters.
  const double rope_theta = config.contains("rope_theta")          ? config["rope_theta"].get<double>()
                            : config.contains("rope_parameters") ? config["rope_parameters"].value("rope_theta", 10000.0)
                                                                 : 10000.0;
  key(arch + ".rope.freq_base", GgufFloat32(static_cast<float>(rope_theta)));
  key(arch + ".attention.layer_norm_rms_epsilon", GgufFloat32(config.at("rms_norm_eps")));
  if (arch == "deepseek2") {
    const uint32_t latent = config.at("kv_lora_rank"), rope_dim = config.at("qk_rope_head_dim");
    key(arch + ".leading_dense_block_count", GgufUint32(config.at("first_k_dense_replace")));
    key(arch + ".vocab_size", GgufUint32(config.at("vocab_size")));
    if (config.contains("q_lora_rank") && !config["q_lora_rank"].is_null()) {
      key(arch + ".attention.q_lora_rank", GgufUint32(config["q_lora_rank"]));
    }
    key(arch + ".attention.kv_lora_rank", GgufUint32(latent));
    key(arch + ".attention.key_length", GgufUint32(latent + rope_dim));
    key(arch + ".attention.value_length", GgufUint32(latent));
    key(arch + ".attention.key_length_mla", GgufUint32(config.at("qk_nope_head_dim").get<uint32_t>() + rope_dim));
    key(arch + ".attention.value_length_mla", GgufUint32(config.at("v_head_dim")));
    key(arch + ".expert_feed_forward_length", GgufUint32(config.at("moe_intermediate_size")));
    key(arch + ".expert_count", GgufUint32(config.at("n_routed_experts")));
    key(arch + ".expert_shared_count", GgufUint32(config.at("n_shared_experts")));
    key(arch + ".expert_weights_scale", GgufFloat32(config.at("routed_scaling_factor")));
    key(arch + ".expert_weights_norm", GgufBool(config.value("norm_topk_prob", false)));
    key(arch + ".expert_gating_func", GgufUint32(config.value("scoring_func", "softmax") == "sigmoid" ? 2 : 1));
    // Written by later converters (TextModel.set_gguf_parameters, after llama-cpp-python 0.3.16's).
    if (config.contains("n_group")) key(arch + ".expert_group_count", GgufUint32(config["n_group"]));
    if (config.contains("topk_group")) key(arch + ".expert_group_used_count", GgufUint32(config["topk_group"]));
    key(arch + ".rope.dimension_count", GgufUint32(rope_dim));
    if (config.contains("rope_scaling") && config["rope_scaling"].is_object() && config["rope_scaling"].contains("factor")) {
      const nlohmann::json& rope = config["rope_scaling"];
      key(arch + ".rope.scaling.type", GgufString("yarn"));
      key(arch + ".rope.scaling.factor", GgufFloat32(rope.at("factor")));
      key(arch + ".rope.scaling.original_context_length", GgufUint32(rope.at("original_max_position_embeddings")));
      key(arch + ".rope.scaling.yarn_log_multiplier", GgufFloat32(0.1 * rope.at("mscale_all_dim").get<double>()));
    }
  } else {
    key(arch + ".attention.key_length", GgufUint32(static_cast<uint32_t>(head_dim)));
    key(arch + ".attention.value_length", GgufUint32(static_cast<uint32_t>(head_dim)));
  }
  if (config.contains("num_experts")) key(arch + ".expert_count", GgufUint32(config["num_experts"]));
  if (config.contains("num_local_experts")) key(arch + ".expert_count", GgufUint32(config["num_local_experts"]));
  if (config.contains("num_experts_per_tok")) key(arch + ".expert_used_count", GgufUint32(config["num_experts_per_tok"]));
  if (arch == "gemma3") {
    if (config.contains("sliding_window") && !config["sliding_window"].is_null()) {
      key(arch + ".attention.sliding_window", GgufUint32(config["sliding_window"]));
    }
    if (config.contains("final_logit_softcapping") && !config["final_logit_softcapping"].is_null()) {
      key(arch + ".final_logit_softcapping", GgufFloat32(config["final_logit_softcapping"]));
    }
    if (config.contains("rope_scaling") && config["rope_scaling"].is_object()) {
      key(arch + ".rope.scaling.type", GgufString("linear"));
      key(arch + ".rope.scaling.factor", GgufFloat32(config["rope_scaling"].at("factor")));
    }
  }
  if (arch == "gpt-oss") {
    key(arch + ".attention.sliding_window", GgufUint32(config.at("sliding_window")));
    const nlohmann::json& rope = config.at("rope_scaling");
    key(arch + ".rope.scaling.type", GgufString("yarn"));
    key(arch + ".rope.scaling.factor", GgufFloat32(rope.at("factor")));
    key(arch + ".rope.scaling.original_context_length", GgufUint32(rope.at("original_max_position_embeddings")));
  }
  key("general.file_type", GgufUint32(options.matrix_type == 0 ? 0 : 7));

  const WeightStore store = WeightStore::Open(hf_dir);
  std::vector<GgufTensorToWrite> tensors;
  std::vector<TensorToWrite> twin;
  std::vector<std::vector<float>> twin_data;  // kept alive until the twin is written
  std::mt19937 rng(options.seed);
  auto f32_tensor = [&](const std::string& name, const std::vector<float>& values, std::vector<uint64_t> ne) {
    tensors.push_back({name, std::move(ne), 0, Bytes(values.data(), values.size() * 4)});
  };
  // A matrix [rows, cols] in the chosen type; returns the values the GGUF holds (as float32).
  auto matrix = [&](const std::string& name, std::vector<float> values, std::vector<uint64_t> ne) {
    const uint32_t type = options.matrix_type;
    const GgmlTypeInfo& info = *FindGgmlType(type);
    const uint64_t cols = ne[0];
    if (type == 0 || cols % info.block_size != 0) {
      f32_tensor(name, values, std::move(ne));
      return values;
    }
    if (type == 1 || type == 30) {
      std::string bytes(values.size() * 2, '\0');
      for (size_t i = 0; i < values.size(); ++i) {
        const uint16_t h = type == 1 ? F32ToF16(values[i]) : F32ToBf16(values[i]);
        std::memcpy(&bytes[2 * i], &h, 2);
        values[i] = type == 1 ? F16ToF32(h) : Bf16ToF32(h);
      }
      tensors.push_back({name, std::move(ne), type, bytes});
      return values;
    }
    const size_t blocks = values.size() / info.block_size;
    std::string bytes(blocks * info.block_bytes, '\0');
    std::uniform_int_distribution<int> byte(0, 255), half(0x1c00, 0x2400);  // scales ~0.004 .. 0.016
    for (size_t b = 0; b < blocks; ++b) {
      char* block = &bytes[b * info.block_bytes];
      for (size_t i = 0; i < info.block_bytes; ++i) block[i] = static_cast<char>(byte(rng));
      for (const size_t at : HalfFields(type)) {
        const auto h = static_cast<uint16_t>(half(rng));
        std::memcpy(block + at, &h, 2);
      }
      if (type == 39) block[0] = static_cast<char>(118 + byte(rng) % 8);  // mxfp4: 2^-10 .. 2^-3
    }
    EXPECT_TRUE(DequantizeGgmlRow(type, reinterpret_cast<const uint8_t*>(bytes.data()), values.data(), values.size()));
    tensors.push_back({name, std::move(ne), type, bytes});
    return values;
  };
  auto keep_twin = [&](const std::string& name, std::vector<float> values, std::vector<int64_t> shape) {
    twin_data.push_back(std::move(values));
    const std::vector<float>* data = &twin_data.back();
    twin.push_back({name, DType::kF32, std::move(shape),
                    [data](uint8_t* dst, size_t n) { std::memcpy(dst, data->data(), n); }});
  };
  twin_data.reserve(store.num_tensors() + 8);

  // LlamaModel.permute: rows of head h, half j, index i go to h D + 2 i + j (inverse: back).
  auto permute = [](const std::vector<float>& w, int64_t n_head, int64_t cols, bool inverse = false) {
    const int64_t rows = static_cast<int64_t>(w.size()) / cols, D = rows / n_head, half = D / 2;
    std::vector<float> out(w.size());
    for (int64_t h = 0; h < n_head; ++h) {
      for (int64_t j = 0; j < 2; ++j) {
        for (int64_t i = 0; i < half; ++i) {
          const int64_t hf = h * D + j * half + i, gguf = h * D + 2 * i + j;
          std::memcpy(&out[static_cast<size_t>((inverse ? hf : gguf) * cols)],
                      &w[static_cast<size_t>((inverse ? gguf : hf) * cols)], static_cast<size_t>(cols) * 4);
        }
      }
    }
    return out;
  };

  const std::map<std::string, std::string> layer_names = {
      {"input_layernorm.weight", "attn_norm.weight"},
      {"post_attention_layernorm.weight",
       arch == "gpt-oss" || arch == "gemma3" ? "post_attention_norm.weight" : "ffn_norm.weight"},
      {"pre_feedforward_layernorm.weight", "ffn_norm.weight"},
      {"self_attn.qkv_proj.weight", "attn_qkv.weight"}, {"mlp.gate_up_proj.weight", "ffn_up.weight"},
      {"post_feedforward_layernorm.weight", "post_ffw_norm.weight"},
      {"self_attn.q_proj.weight", "attn_q.weight"}, {"self_attn.q_proj.bias", "attn_q.bias"},
      {"self_attn.k_proj.weight", "attn_k.weight"}, {"self_attn.k_proj.bias", "attn_k.bias"},
      {"self_attn.v_proj.weight", "attn_v.weight"}, {"self_attn.v_proj.bias", "attn_v.bias"},
      {"self_attn.o_proj.weight", "attn_output.weight"}, {"self_attn.o_proj.bias", "attn_output.bias"},
      {"self_attn.q_norm.weight", "attn_q_norm.weight"}, {"self_attn.k_norm.weight", "attn_k_norm.weight"},
      {"self_attn.sinks", "attn_sinks.weight"},
      {"mlp.gate_proj.weight", "ffn_gate.weight"}, {"mlp.up_proj.weight", "ffn_up.weight"},
      {"mlp.down_proj.weight", "ffn_down.weight"}, {"mlp.gate_proj.bias", "ffn_gate.bias"},
      {"mlp.up_proj.bias", "ffn_up.bias"}, {"mlp.down_proj.bias", "ffn_down.bias"},
      {"mlp.gate.weight", "ffn_gate_inp.weight"}, {"mlp.router.weight", "ffn_gate_inp.weight"},
      {"mlp.router.bias", "ffn_gate_inp.bias"},
      // deepseek2 (gguf-py tensor_mapping; kv_b_proj is split below)
      {"self_attn.q_a_proj.weight", "attn_q_a.weight"}, {"self_attn.q_a_layernorm.weight", "attn_q_a_norm.weight"},
      {"self_attn.q_b_proj.weight", "attn_q_b.weight"},
      {"self_attn.kv_a_proj_with_mqa.weight", "attn_kv_a_mqa.weight"},
      {"self_attn.kv_a_layernorm.weight", "attn_kv_a_norm.weight"},
      {"mlp.shared_experts.gate_proj.weight", "ffn_gate_shexp.weight"},
      {"mlp.shared_experts.up_proj.weight", "ffn_up_shexp.weight"},
      {"mlp.shared_experts.down_proj.weight", "ffn_down_shexp.weight"},
      {"mlp.gate.e_score_correction_bias", "exp_probs_b.bias"},
  };
  std::map<std::string, std::vector<std::vector<float>>> experts;  // "blk.N.ffn_gate_exps.weight" -> rows per expert
  std::map<std::string, std::vector<int64_t>> expert_shape;
  std::vector<std::string> names;
  for (const std::string& name : store.names()) {
    const TensorView t = store.Get(name);
    std::vector<int64_t> shape = t.shape();
    std::vector<uint64_t> ne(shape.rbegin(), shape.rend());
    if (name == "model.embed_tokens.weight" || name == "lm_head.weight") {
      const std::string gguf = name == "lm_head.weight" ? "output.weight" : "token_embd.weight";
      keep_twin(name, matrix(gguf, ToF32(t), ne), shape);
      names.push_back(gguf);
      continue;
    }
    // Gemma3Model.norm_shift: the (1 + w) of Gemma's RMSNorm stored with the 1 added.
    const float norm_shift = arch == "gemma3" && name.ends_with("norm.weight") ? 1.0f : 0.0f;
    auto shifted = [&](std::vector<float> v) {
      for (float& x : v) x += norm_shift;
      return v;
    };
    if (name == "model.norm.weight") {
      f32_tensor("output_norm.weight", shifted(ToF32(t)), ne);
      keep_twin(name, ToF32(t), shape);
      names.push_back("output_norm.weight");
      continue;
    }
    const std::string prefix = "model.layers.";
    EXPECT_EQ(name.rfind(prefix, 0), 0u) << name;
    const size_t dot = name.find('.', prefix.size());
    const std::string layer = name.substr(prefix.size(), dot - prefix.size()), rest = name.substr(dot + 1);
    const std::string blk = "blk." + layer + ".";
    if (rest == "self_attn.kv_b_proj.weight") {
      // DeepseekV2Model.modify_tensors: kv_b [H (nope + v), C] viewed per head, split into the
      // key rows (transposed: attn_k_b [H, C, nope]) and the value rows (attn_v_b [H, v, C]).
      const int64_t nope = config.at("qk_nope_head_dim"), value = config.at("v_head_dim"), C = shape[1];
      const int64_t per_head = nope + value;
      const std::vector<float> kv_b = ToF32(t);
      std::vector<float> k_b(static_cast<size_t>(heads * C * nope)), v_b(static_cast<size_t>(heads * value * C));
      for (int64_t h = 0; h < heads; ++h) {
        for (int64_t c = 0; c < C; ++c) {
          for (int64_t i = 0; i < nope; ++i) k_b[(h * C + c) * nope + i] = kv_b[(h * per_head + i) * C + c];
          for (int64_t j = 0; j < value; ++j) v_b[(h * value + j) * C + c] = kv_b[(h * per_head + nope + j) * C + c];
        }
      }
      const auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
      const std::vector<float> held_k = matrix(blk + "attn_k_b.weight", k_b, {u(nope), u(C), u(heads)});
      const std::vector<float> held_v = matrix(blk + "attn_v_b.weight", v_b, {u(C), u(value), u(heads)});
      std::vector<float> held(kv_b.size());
      for (int64_t h = 0; h < heads; ++h) {
        for (int64_t c = 0; c < C; ++c) {
          for (int64_t i = 0; i < nope; ++i) held[(h * per_head + i) * C + c] = held_k[(h * C + c) * nope + i];
          for (int64_t j = 0; j < value; ++j) held[(h * per_head + nope + j) * C + c] = held_v[(h * value + j) * C + c];
        }
      }
      keep_twin(name, held, shape);
      names.push_back(blk + "attn_k_b.weight");
      names.push_back(blk + "attn_v_b.weight");
      continue;
    }
    if (rest.starts_with("mlp.experts.") && (arch == "qwen3moe" || arch == "deepseek2" || arch == "glm4moe")) {
      // mlp.experts.E.gate_proj.weight -> stacked later.
      const size_t e_end = rest.find('.', 12);
      const int64_t e = std::stoll(rest.substr(12, e_end - 12));
      const std::string proj = rest.substr(e_end + 1, rest.find('_', e_end) - e_end - 1);  // gate / up / down
      const std::string gguf = blk + "ffn_" + proj + "_exps.weight";
      auto& list = experts[gguf];
      if (list.size() <= static_cast<size_t>(e)) list.resize(static_cast<size_t>(e) + 1);
      list[static_cast<size_t>(e)] = ToF32(t);
      expert_shape[gguf] = shape;
      continue;
    }
    if (rest.starts_with("mlp.experts.") && arch == "gpt-oss") {
      if (rest == "mlp.experts.gate_up_proj_bias") {
        const std::vector<float> both = ToF32(t);
        std::vector<float> gate, up;
        for (size_t i = 0; i < both.size(); i += 2) gate.push_back(both[i]), up.push_back(both[i + 1]);
        f32_tensor(blk + "ffn_gate_exps.bias", gate, {ne[0] / 2, ne[1]});
        f32_tensor(blk + "ffn_up_exps.bias", up, {ne[0] / 2, ne[1]});
        names.push_back(blk + "ffn_gate_exps.bias");
        names.push_back(blk + "ffn_up_exps.bias");
      } else if (rest == "mlp.experts.down_proj_bias") {
        f32_tensor(blk + "ffn_down_exps.bias", ToF32(t), ne);
        names.push_back(blk + "ffn_down_exps.bias");
      } else if (rest.ends_with("_blocks")) {
        const bool gate_up = rest.starts_with("mlp.experts.gate_up");
        const TensorView scales = store.Get(name.substr(0, name.size() - 7) + "_scales");
        const int64_t E = shape[0], rows = shape[1], nb = shape[2];
        const int64_t parts = gate_up ? 2 : 1;
        for (int64_t part = 0; part < parts; ++part) {
          std::string bytes;
          for (int64_t e = 0; e < E; ++e) {
            for (int64_t r = part; r < rows; r += parts) {
              for (int64_t b = 0; b < nb; ++b) {
                const uint8_t* src = t.data + ((e * rows + r) * nb + b) * 16;
                uint8_t block[17];
                block[0] = scales.data[(e * rows + r) * nb + b];
                uint8_t elems[32];
                for (int i = 0; i < 16; ++i) elems[2 * i] = src[i] & 15, elems[2 * i + 1] = src[i] >> 4;
                for (int j = 0; j < 16; ++j) block[1 + j] = static_cast<uint8_t>(elems[j] | (elems[j + 16] << 4));
                bytes.append(reinterpret_cast<const char*>(block), 17);
              }
            }
          }
          const std::string gguf = blk + (gate_up ? (part == 0 ? "ffn_gate_exps.weight" : "ffn_up_exps.weight")
                                                  : "ffn_down_exps.weight");
          tensors.push_back({gguf, {static_cast<uint64_t>(nb * 32), static_cast<uint64_t>(rows / parts), static_cast<uint64_t>(E)},
                             39, bytes});
          names.push_back(gguf);
        }
      }
      continue;  // _scales: written with the blocks
    }
    const auto it = layer_names.find(rest);
    EXPECT_NE(it, layer_names.end()) << name;
    if (it == layer_names.end()) continue;
    const std::string gguf = blk + it->second;
    names.push_back(gguf);
    std::vector<float> values = ToF32(t);
    const bool is_matrix = shape.size() == 2 && !rest.ends_with("norm.weight");
    const bool permuted = (arch == "llama" || arch == "smollm3") &&
                          (rest.starts_with("self_attn.q_proj.") || rest.starts_with("self_attn.k_proj."));
    const int64_t n_head = rest.starts_with("self_attn.q_proj.") ? heads : kv_heads;
    const int64_t cols = shape.size() == 2 ? shape[1] : 1;
    if (permuted) values = permute(values, n_head, cols);
    if (!is_matrix) {
      f32_tensor(gguf, shifted(values), ne);
      keep_twin(name, ToF32(t), shape);
      continue;
    }
    std::vector<float> held = matrix(gguf, values, ne);
    keep_twin(name, permuted ? permute(held, n_head, cols, true) : held, shape);
  }
  for (auto& [gguf, list] : experts) {
    std::vector<float> stacked;
    for (const auto& one : list) stacked.insert(stacked.end(), one.begin(), one.end());
    const std::vector<int64_t>& shape = expert_shape[gguf];
    const std::vector<float> held = matrix(gguf, stacked, {static_cast<uint64_t>(shape[1]), static_cast<uint64_t>(shape[0]),
                                                            static_cast<uint64_t>(list.size())});
    names.push_back(gguf);
    // The twin's per-expert tensors.
    const std::string layer = gguf.substr(4, gguf.find('.', 4) - 4);
    const std::string proj = gguf.substr(gguf.find("ffn_") + 4, gguf.find("_exps") - gguf.find("ffn_") - 4);
    const size_t per = static_cast<size_t>(shape[0] * shape[1]);
    for (size_t e = 0; e < list.size(); ++e) {
      keep_twin("model.layers." + layer + ".mlp.experts." + std::to_string(e) + "." + proj + "_proj.weight",
                std::vector<float>(held.begin() + static_cast<ptrdiff_t>(e * per), held.begin() + static_cast<ptrdiff_t>((e + 1) * per)),
                shape);
    }
  }
  if (config.contains("rope_scaling") && config["rope_scaling"].is_object() &&
      config["rope_scaling"].value("rope_type", "") == "llama3") {
    // LlamaModel.generate_extra_tensors: one divisor per pair.
    const nlohmann::json& rs = config["rope_scaling"];
    const double base = rope_theta, factor = rs.at("factor");
    const double lo = rs.at("low_freq_factor"), hi = rs.at("high_freq_factor");
    const double old_ctx = rs.at("original_max_position_embeddings");
    std::vector<float> factors;
    for (int64_t i = 0; i < head_dim; i += 2) {
      const auto freq = static_cast<double>(1.0f / std::pow(static_cast<float>(base), static_cast<float>(i) / head_dim));
      const double wavelen = 2 * std::numbers::pi / freq;
      if (wavelen < old_ctx / hi) {
        factors.push_back(1.0f);
      } else if (wavelen > old_ctx / lo) {
        factors.push_back(static_cast<float>(factor));
      } else {
        const double smooth = (old_ctx / wavelen - lo) / (hi - lo);
        factors.push_back(static_cast<float>(1.0 / ((1 - smooth) / factor + smooth)));
      }
    }
    f32_tensor("rope_freqs.weight", factors, {factors.size()});
    names.push_back("rope_freqs.weight");
  }
  if (arch == "phi3" && config.contains("rope_scaling") && config["rope_scaling"].is_object() &&
      config["rope_scaling"].contains("long_factor")) {
    // Phi3MiniModel.generate_extra_tensors: the longrope lists as two F32 tensors.
    for (const char* which : {"long", "short"}) {
      std::vector<float> values;
      for (const auto& v : config["rope_scaling"].at(std::string(which) + "_factor")) values.push_back(v.get<float>());
      const std::string name = std::string("rope_factors_") + which + ".weight";
      f32_tensor(name, values, {values.size()});
      names.push_back(name);
    }
  }
  WriteGguf(out, meta, tensors);
  if (!options.twin_dir.empty()) {
    fs::create_directories(options.twin_dir);
    nlohmann::json twin_config = config;
    std::ofstream(fs::path(options.twin_dir) / "config.json") << twin_config.dump(1);
    WriteSafetensors((fs::path(options.twin_dir) / "model.safetensors").string(), twin);
  }
  return names;
}

}  // namespace tessera::test
