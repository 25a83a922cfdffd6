// config.json and generation_config.json: the gpt-oss-20b/-120b files of gpt-oss.md §1.1/§1.3,
// the transformers v5 `rope_parameters` spelling, Llama 3 and DeepSeek-V3 rope variants
// (rope.md §7, §8), AWQ settings (quantization.md B.1), and one-line errors for bad input.
// Fixtures: tests/data/io/configs/, written by tools/make_io_fixtures.py.
#include "io/config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "core/error.h"
#include "core/mapped_file.h"
#include "io/json_util.h"
#include "test_util.h"
#include "scratch_dir.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

const std::string kConfigs = std::string(TESSERA_TEST_DATA) + "/io/configs";

json LoadJson(const std::string& path) { return ParseJsonText(ReadFile(path), path); }

// Parses `j` as config.json text and expects an error "cfg.json: <substring>...".
void ExpectConfigError(const json& j, const std::string& substring) {
  const std::string msg = ErrorOf([&] { ParseModelConfig(j.dump(), "cfg.json"); });
  EXPECT_EQ(msg.rfind("cfg.json: ", 0), 0u) << msg;
  EXPECT_NE(msg.find(substring), std::string::npos) << "message: " << msg << "\nexpected: " << substring;
}

// The gpt-oss-20b config with one edit applied.
json Gpt20bWith(const std::function<void(json&)>& edit) {
  json j = LoadJson(kConfigs + "/gpt-oss-20b/config.json");
  edit(j);
  return j;
}

void WriteText(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

std::vector<LayerType> Alternating(int n) {
  std::vector<LayerType> out;
  for (int i = 0; i < n; ++i) out.push_back(i % 2 == 0 ? LayerType::kSlidingAttention : LayerType::kFullAttention);
  return out;
}

// ---- gpt-oss (gpt-oss.md §1) -----------------------------------------------------------------

void ExpectGptOss(const ModelConfig& c, int layers, int experts) {
  EXPECT_EQ(c.model_type, "gpt_oss");
  EXPECT_EQ(c.architectures, std::vector<std::string>{"GptOssForCausalLM"});
  EXPECT_EQ(c.vocab_size, 201088);
  EXPECT_EQ(c.hidden_size, 2880);
  EXPECT_EQ(c.intermediate_size, 2880);
  EXPECT_EQ(c.num_hidden_layers, layers);
  EXPECT_EQ(c.num_attention_heads, 64);
  EXPECT_EQ(c.num_key_value_heads, 8);
  EXPECT_EQ(c.head_dim, 64);  // read, never 2880 / 64 = 45
  EXPECT_EQ(c.max_position_embeddings, 131072);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_DOUBLE_EQ(c.rope_theta, 150000.0);
  ASSERT_TRUE(c.rope_scaling.has_value());
  EXPECT_EQ(c.rope_scaling->rope_type, "yarn");
  EXPECT_DOUBLE_EQ(c.rope_scaling->factor, 32.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling->beta_fast, 32.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling->beta_slow, 1.0);
  EXPECT_EQ(c.rope_scaling->original_max_position_embeddings, 4096);
  EXPECT_FALSE(c.rope_scaling->truncate);  // unfloored YaRN correction dims
  EXPECT_FALSE(c.rope_scaling->attention_factor.has_value());
  EXPECT_TRUE(c.attention_bias);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.hidden_act, "silu");
  EXPECT_EQ(c.layer_types, Alternating(layers));
  EXPECT_EQ(c.sliding_window, 128);
  EXPECT_EQ(c.num_local_experts, experts);
  EXPECT_EQ(c.num_experts_per_tok, 4);
  EXPECT_DOUBLE_EQ(c.swiglu_limit, 7.0);
  EXPECT_DOUBLE_EQ(c.router_aux_loss_coef, 0.9);
  EXPECT_FALSE(c.bos_token_id.has_value());
  EXPECT_EQ(c.eos_token_ids, std::vector<int64_t>{200002});
  EXPECT_EQ(c.pad_token_id, 199999);
  EXPECT_EQ(c.quantization.quant_method, "mxfp4");
  EXPECT_EQ(c.quantization.modules_to_not_convert,
            (std::vector<std::string>{"model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens",
                                      "lm_head"}));
  EXPECT_FALSE(c.quantization.bits.has_value());
  EXPECT_EQ(c.raw.at("initial_context_length"), 4096);  // kept though no field covers it
}

TEST(ModelConfig, GptOss20bAnd120b) {
  const ModelConfig c20 = LoadModelConfig(kConfigs + "/gpt-oss-20b");
  ExpectGptOss(c20, 24, 32);
  ValidateModelConfig(c20, "20b");
  const ModelConfig c120 = LoadModelConfig(kConfigs + "/gpt-oss-120b");
  ExpectGptOss(c120, 36, 128);
  ValidateModelConfig(c120, "120b");
}

// Writing back a parsed gpt-oss config reproduces the file exactly: every described key in its
// original spelling and number form (rope_theta stays an integer, factor a float), the legacy
// experts_per_token kept in step, undescribed keys untouched.
TEST(ModelConfig, GptOssWritesBackExactly) {
  for (const char* model : {"gpt-oss-20b", "gpt-oss-120b", "gpt-oss-20b-v5"}) {
    const std::string path = kConfigs + "/" + model + "/config.json";
    const ModelConfig c = LoadModelConfig(kConfigs + "/" + model);
    EXPECT_EQ(ModelConfigToJson(c), LoadJson(path)) << model;
    EXPECT_EQ(ModelConfigToJson(c).dump(2) + "\n", ReadFile(path)) << model;
  }
}

TEST(ModelConfig, TransformersV5RopeParameters) {
  const ModelConfig v4 = LoadModelConfig(kConfigs + "/gpt-oss-20b");
  const ModelConfig v5 = LoadModelConfig(kConfigs + "/gpt-oss-20b-v5");
  ExpectGptOss(v5, 24, 32);  // rope_theta read from inside rope_parameters
  ValidateModelConfig(v5, "v5");
  // Same values in both spellings; only the layout of the written JSON differs.
  json a = ModelConfigToJson(v4), b = ModelConfigToJson(v5);
  EXPECT_TRUE(b.contains("rope_parameters"));
  EXPECT_FALSE(b.contains("rope_scaling"));
  EXPECT_FALSE(b.contains("rope_theta"));
  EXPECT_EQ(b["rope_parameters"]["rope_theta"], 150000);
  EXPECT_EQ(b["rope_parameters"]["truncate"], false);

  // v5 with plain RoPE: rope_parameters holds only the type and theta; no scaling.
  const json plain = Gpt20bWith([](json& j) {
    j.erase("rope_scaling");
    j.erase("rope_theta");
    j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 10000}};
  });
  const ModelConfig p = ParseModelConfig(plain.dump(), "plain");
  EXPECT_FALSE(p.rope_scaling.has_value());
  EXPECT_DOUBLE_EQ(p.rope_theta, 10000.0);
  EXPECT_EQ(ModelConfigToJson(p)["rope_parameters"], (json{{"rope_type", "default"}, {"rope_theta", 10000}}));

  // Both spellings present: they must agree (rope_theta aside).
  const json both = Gpt20bWith([](json& j) {
    j["rope_parameters"] = j["rope_scaling"];
    j["rope_parameters"]["rope_theta"] = 150000;
  });
  EXPECT_TRUE(ParseModelConfig(both.dump(), "both").rope_scaling.has_value());
  ExpectConfigError(Gpt20bWith([](json& j) {
                      j["rope_parameters"] = j["rope_scaling"];
                      j["rope_parameters"]["factor"] = 16.0;
                    }),
                    "rope_scaling: disagrees with rope_parameters");
  ExpectConfigError(Gpt20bWith([](json& j) {
                      j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 10000}};
                    }),
                    "rope_scaling: disagrees with rope_parameters");
  ExpectConfigError(Gpt20bWith([](json& j) {
                      j.erase("rope_scaling");
                      j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 20000}};
                    }),
                    "rope_theta: disagrees with rope_parameters.rope_theta (integer 150000 vs integer 20000)");
}

TEST(ModelConfig, GptOssLayerTypesDerivedWhenAbsent) {
  const ModelConfig c = ParseModelConfig(Gpt20bWith([](json& j) { j.erase("layer_types"); }).dump(), "x");
  EXPECT_EQ(c.layer_types, Alternating(24));  // even index sliding (gpt-oss.md §1.1)
  EXPECT_EQ(ModelConfigToJson(c)["layer_types"], LoadJson(kConfigs + "/gpt-oss-20b/config.json")["layer_types"]);
}

// A config built in code (what `tessera synth` does) survives ToJson -> Parse -> Validate.
TEST(ModelConfig, BuiltInCodeRoundTrips) {
  ModelConfig c;
  c.model_type = "gpt_oss";
  c.architectures = {"GptOssForCausalLM"};
  c.vocab_size = 1024;
  c.hidden_size = 64;
  c.intermediate_size = 96;
  c.num_hidden_layers = 3;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 16;
  c.max_position_embeddings = 4096;
  c.rms_norm_eps = 1e-5;
  c.rope_theta = 150000;
  c.rope_scaling = RopeScaling{};
  c.rope_scaling->rope_type = "yarn";
  c.rope_scaling->factor = 32;
  c.rope_scaling->original_max_position_embeddings = 128;
  c.rope_scaling->truncate = false;
  c.attention_bias = true;
  c.layer_types = Alternating(3);
  c.sliding_window = 8;
  c.num_local_experts = 4;
  c.num_experts_per_tok = 2;
  c.swiglu_limit = 7.0;
  c.eos_token_ids = {1000, 1001};
  c.pad_token_id = 999;
  c.quantization.quant_method = "mxfp4";
  c.quantization.modules_to_not_convert = {"lm_head"};
  ValidateModelConfig(c, "synth");

  const json j = ModelConfigToJson(c);
  EXPECT_EQ(j["rope_scaling"], (json{{"rope_type", "yarn"},
                                     {"factor", 32.0},
                                     {"beta_fast", 32.0},
                                     {"beta_slow", 1.0},
                                     {"original_max_position_embeddings", 128},
                                     {"truncate", false}}));
  EXPECT_EQ(j["eos_token_id"], (json{1000, 1001}));
  EXPECT_EQ(j["layer_types"], (json{"sliding_attention", "full_attention", "sliding_attention"}));
  EXPECT_EQ(j["quantization_config"], (json{{"quant_method", "mxfp4"}, {"modules_to_not_convert", {"lm_head"}}}));
  EXPECT_FALSE(j.contains("bos_token_id"));

  const ModelConfig back = ParseModelConfig(j.dump(), "synth.json");
  ValidateModelConfig(back, "synth.json");
  EXPECT_EQ(ModelConfigToJson(back), j);
  EXPECT_EQ(back.head_dim, 16);
  EXPECT_EQ(back.layer_types, c.layer_types);
  EXPECT_EQ(back.rope_scaling->original_max_position_embeddings, 128);
  EXPECT_EQ(back.eos_token_ids, c.eos_token_ids);
}

// ---- other architectures ----------------------------------------------------------------------

TEST(ModelConfig, Llama31WithLlama3Rope) {
  const ModelConfig c = LoadModelConfig(kConfigs + "/llama-3.1-8b");
  EXPECT_EQ(c.model_type, "llama");
  EXPECT_EQ(c.head_dim, 128);  // 4096 / 32, derived
  EXPECT_EQ(c.num_key_value_heads, 8);
  EXPECT_DOUBLE_EQ(c.rope_theta, 500000.0);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);
  ASSERT_TRUE(c.rope_scaling.has_value());
  EXPECT_EQ(c.rope_scaling->rope_type, "llama3");
  EXPECT_DOUBLE_EQ(c.rope_scaling->factor, 8.0);
  EXPECT_EQ(c.rope_scaling->low_freq_factor, 1.0);
  EXPECT_EQ(c.rope_scaling->high_freq_factor, 4.0);
  EXPECT_EQ(c.rope_scaling->original_max_position_embeddings, 8192);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{128001, 128008, 128009}));
  EXPECT_EQ(c.bos_token_id, 128000);
  EXPECT_EQ(c.layer_types, std::vector<LayerType>(32, LayerType::kFullAttention));
  EXPECT_FALSE(c.sliding_window.has_value());
  EXPECT_FALSE(c.attention_bias);
  EXPECT_EQ(c.num_local_experts, 0);
  EXPECT_EQ(c.quantization.quant_method, "");
  EXPECT_NO_THROW(ValidateModelConfig(c, "llama.json"));
  // Written back: the same values parse again; no layer_types invented for Llama.
  const json j = ModelConfigToJson(c);
  EXPECT_FALSE(j.contains("layer_types"));
  EXPECT_EQ(j["rope_scaling"], LoadJson(kConfigs + "/llama-3.1-8b/config.json")["rope_scaling"]);
  EXPECT_EQ(ModelConfigToJson(ParseModelConfig(j.dump(), "again")), j);
}

TEST(ModelConfig, DeepseekV3KeysAndYarnMscale) {
  const ModelConfig c = LoadModelConfig(kConfigs + "/deepseek-v3");
  EXPECT_EQ(c.model_type, "deepseek_v3");
  EXPECT_EQ(c.num_local_experts, 256);  // from n_routed_experts
  EXPECT_EQ(c.num_experts_per_tok, 8);
  EXPECT_EQ(c.head_dim, 64);  // DeepseekV3Config: head_dim = qk_rope_head_dim
  EXPECT_EQ(c.num_key_value_heads, 128);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  ASSERT_TRUE(c.rope_scaling.has_value());
  // rope.md §7: legacy "type" spelling, factor 40, mscale = mscale_all_dim = 1.
  EXPECT_EQ(c.rope_scaling->rope_type, "yarn");
  EXPECT_DOUBLE_EQ(c.rope_scaling->factor, 40.0);
  EXPECT_EQ(c.rope_scaling->mscale, 1.0);
  EXPECT_EQ(c.rope_scaling->mscale_all_dim, 1.0);
  EXPECT_EQ(c.rope_scaling->original_max_position_embeddings, 4096);
  EXPECT_TRUE(c.rope_scaling->truncate);  // absent means true
  EXPECT_EQ(c.quantization.quant_method, "fp8");
  EXPECT_EQ(c.bos_token_id, 0);
  EXPECT_EQ(c.eos_token_ids, std::vector<int64_t>{1});
  EXPECT_EQ(c.raw.at("kv_lora_rank"), 512);
  // The MLA and routing keys (deepseek.md §1).
  EXPECT_EQ(c.q_lora_rank, 1536);
  EXPECT_EQ(c.kv_lora_rank, 512);
  EXPECT_EQ(c.qk_nope_head_dim, 128);
  EXPECT_EQ(c.qk_rope_head_dim, 64);
  EXPECT_EQ(c.v_head_dim, 128);
  EXPECT_EQ(c.latent_dim(), 576);
  EXPECT_EQ(c.n_shared_experts, 1);
  EXPECT_EQ(c.first_k_dense_replace, 3);
  EXPECT_EQ(c.n_group, 8);
  EXPECT_EQ(c.topk_group, 4);
  EXPECT_EQ(c.topk_method, "noaux_tc");
  EXPECT_DOUBLE_EQ(c.routed_scaling_factor, 2.5);
  EXPECT_TRUE(c.norm_topk_prob);
  // FP8 block weights (deepseek.md §7).
  EXPECT_EQ(c.quantization.weight_block_size, (std::vector<int64_t>{128, 128}));
  EXPECT_NO_THROW(ValidateModelConfig(c, "ds.json"));
  ModelConfig bad = c;
  bad.quantization.weight_block_size = {128};
  EXPECT_EQ(ErrorOf([&] { ValidateModelConfig(bad, "ds.json"); }),
            "ds.json: quantization_config.weight_block_size: must be two positive integers [rows, columns]");
  bad.quantization.weight_block_size = {128, 128};
  bad.quantization.quant_method = "awq";
  EXPECT_NE(ErrorOf([&] { ValidateModelConfig(bad, "ds.json"); }).find("'awq' is not supported for deepseek_v3"),
            std::string::npos);
  bad.quantization = {};
  EXPECT_NO_THROW(ValidateModelConfig(bad, "ds.json"));
  bad.topk_method = "greedy";
  EXPECT_EQ(ErrorOf([&] { ValidateModelConfig(bad, "ds.json"); }),
            "ds.json: topk_method: 'greedy' is not supported for deepseek_v3 (supported: noaux_tc)");
  bad.topk_method = "noaux_tc";
  bad.n_group = 7;
  EXPECT_EQ(ErrorOf([&] { ValidateModelConfig(bad, "ds.json"); }),
            "ds.json: n_group: 7 must be positive and divide the 256 routed experts");
  bad.n_group = 8;
  bad.attention_bias = true;
  EXPECT_NE(ErrorOf([&] { ValidateModelConfig(bad, "ds.json"); }).find("attention_bias"), std::string::npos);

  // Written back in DeepSeek's own spellings.
  const json j = ModelConfigToJson(c);
  EXPECT_EQ(j["n_routed_experts"], 256);
  EXPECT_FALSE(j.contains("num_local_experts"));
  EXPECT_EQ(j["rope_scaling"]["type"], "yarn");
  EXPECT_EQ(j["rope_scaling"]["factor"], 40);
  EXPECT_EQ(j["quantization_config"]["weight_block_size"], (json{128, 128}));
  // Built from scratch, a deepseek config also uses n_routed_experts.
  ModelConfig fresh = c;
  fresh.raw = json();
  EXPECT_EQ(ModelConfigToJson(fresh)["n_routed_experts"], 256);
}

TEST(ModelConfig, Qwen3AndQwen2SlidingLayers) {
  const ModelConfig c = LoadModelConfig(kConfigs + "/qwen3-8b");
  EXPECT_EQ(c.model_type, "qwen3");
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_FALSE(c.rope_scaling.has_value());    // null
  EXPECT_FALSE(c.sliding_window.has_value());  // null
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.layer_types, std::vector<LayerType>(36, LayerType::kFullAttention));
  EXPECT_EQ(c.raw.at("use_sliding_window"), false);

  // Qwen2 with use_sliding_window: layers from max_window_layers on slide.
  const json qwen2 = {{"model_type", "qwen2"},    {"vocab_size", 1000},
                      {"hidden_size", 64},        {"intermediate_size", 128},
                      {"num_hidden_layers", 4},   {"num_attention_heads", 4},
                      {"num_key_value_heads", 2}, {"max_position_embeddings", 512},
                      {"sliding_window", 256},    {"use_sliding_window", true},
                      {"max_window_layers", 2},   {"rope_scaling", nullptr}};
  const ModelConfig q = ParseModelConfig(qwen2.dump(), "qwen2.json");
  EXPECT_EQ(q.layer_types, (std::vector<LayerType>{LayerType::kFullAttention, LayerType::kFullAttention,
                                                   LayerType::kSlidingAttention, LayerType::kSlidingAttention}));
  EXPECT_EQ(q.head_dim, 16);
  EXPECT_EQ(q.sliding_window, 256);
}

// Unknown architectures parse (raw keeps everything); only validation refuses them.
TEST(ModelConfig, UnknownArchitectureIsNotAParseError) {
  const ModelConfig c = ParseModelConfig(R"({"model_type": "mamba", "d_model": 768})", "m.json");
  EXPECT_EQ(c.model_type, "mamba");
  EXPECT_EQ(c.raw.at("d_model"), 768);
  // No head_dim is invented for an unknown architecture whose sizes do not divide.
  EXPECT_EQ(ParseModelConfig(R"({"model_type": "x", "hidden_size": 10, "num_attention_heads": 3})", "x").head_dim, 0);
  EXPECT_EQ(ErrorOf([&] { ValidateModelConfig(c, "m.json"); }),
            "m.json: model_type: unsupported model_type 'mamba' (supported: deepseek_v2, deepseek_v3, gemma3_text, glm4_moe, gpt_oss, llama, mistral, phi3, qwen2, qwen3, qwen3_moe, smollm3)");
  EXPECT_EQ(ErrorOf([] { ValidateModelConfig(ParseModelConfig("{}", "e.json"), "e.json"); }),
            "e.json: model_type: missing");
}

// ---- quantization_config (quantization.md B.1) ------------------------------------------------

TEST(ModelConfig, AwqSettingsAndLegacyQuantConfigJson) {
  const json awq = Gpt20bWith([](json& j) {
    j["quantization_config"] = {
        {"quant_method", "awq"}, {"bits", 4}, {"group_size", 128}, {"zero_point", true}, {"version", "GEMM"}};
  });
  const ModelConfig c = ParseModelConfig(awq.dump(), "awq.json");
  EXPECT_EQ(c.quantization.quant_method, "awq");
  EXPECT_EQ(c.quantization.bits, 4);
  EXPECT_EQ(c.quantization.group_size, 128);
  EXPECT_EQ(c.quantization.zero_point, true);
  EXPECT_EQ(c.quantization.version, "gemm");
  EXPECT_NE(ErrorOf([&] {
              ValidateModelConfig(c, "awq.json");
            }).find("awq.json: quantization_config.quant_method: 'awq' is not supported for gpt_oss"),
            std::string::npos);
  EXPECT_EQ(ParseModelConfig(Gpt20bWith([](json& j) {
                               j["quantization_config"] = {{"quant_method", "awq"}, {"group_size", -1}};
                             }).dump(),
                             "x")
                .quantization.group_size,
            -1);  // one group spanning all of K
  ExpectConfigError(Gpt20bWith([](json& j) {
                      j["quantization_config"] = {{"quant_method", "awq"}, {"group_size", 0}};
                    }),
                    "quantization_config.group_size: must be positive or -1, got 0");
  ExpectConfigError(Gpt20bWith([](json& j) {
                      j["quantization_config"] = {{"quant_method", "awq"}, {"bits", 4}, {"w_bit", 8}};
                    }),
                    "quantization_config.bits: disagrees with quantization_config.w_bit");

  // AutoAWQ's quant_config.json next to a config.json without quantization_config.
  ScratchDir dir;
  json plain = Gpt20bWith([](json& j) { j.erase("quantization_config"); });
  WriteText(dir.path() / "config.json", plain.dump());
  WriteText(dir.path() / "quant_config.json",
            R"({"zero_point": true, "q_group_size": 128, "w_bit": 4, "version": "GEMM"})");
  const ModelConfig legacy = LoadModelConfig(dir.path().string());
  EXPECT_EQ(legacy.quantization.quant_method, "awq");
  EXPECT_EQ(legacy.quantization.bits, 4);
  EXPECT_EQ(legacy.quantization.group_size, 128);
  EXPECT_EQ(legacy.quantization.version, "gemm");
  WriteText(dir.path() / "quant_config.json", R"({"w_bit": "four"})");
  EXPECT_EQ(ErrorOf([&] { LoadModelConfig(dir.path().string()); }),
            (dir.path() / "quant_config.json").string() + ": w_bit: must be an integer, got string \"four\"");
}

// ---- errors ----------------------------------------------------------------------------------

TEST(ModelConfigErrors, SyntaxAndTypes) {
  EXPECT_NE(ErrorOf([] { ParseModelConfig("{\"a\": ", "cfg.json"); }).find("cfg.json: invalid JSON: "),
            std::string::npos);
  EXPECT_NE(ErrorOf([] { ParseModelConfig("{\"a\": 1} trailing", "cfg.json"); }).find("cfg.json: invalid JSON"),
            std::string::npos);
  EXPECT_EQ(ErrorOf([] { ParseModelConfig(std::string("{}\0{", 4), "cfg.json"); }),
            "cfg.json: invalid JSON: NUL byte at offset 2");
  EXPECT_EQ(ErrorOf([] { ParseModelConfig("[1, 2]", "cfg.json"); }),
            "cfg.json: top-level JSON value must be an object, got array");
  EXPECT_EQ(ErrorOf([] { ParseModelConfig(R"({"vocab_size": 1, "vocab_size": 2})", "cfg.json"); }),
            "cfg.json: invalid JSON: duplicate key 'vocab_size'");

  ExpectConfigError(Gpt20bWith([](json& j) { j["hidden_size"] = "2880"; }),
                    "cfg.json: hidden_size: must be an integer, got string \"2880\"");
  ExpectConfigError(Gpt20bWith([](json& j) { j["hidden_size"] = 2880.5; }),
                    "hidden_size: must be an integer, got number 2880.5");
  ExpectConfigError(Gpt20bWith([](json& j) { j["num_hidden_layers"] = -1; }),
                    "num_hidden_layers: must be positive, got -1");
  ExpectConfigError(Gpt20bWith([](json& j) { j["num_hidden_layers"] = 1000000000000; }),
                    "num_hidden_layers: must be at most 1024, got 1000000000000");
  ExpectConfigError(Gpt20bWith([](json& j) { j["vocab_size"] = 9223372036854775808ULL; }), "vocab_size: out of range");
  ExpectConfigError(Gpt20bWith([](json& j) { j["sliding_window"] = 0; }), "sliding_window: must be positive, got 0");
  ExpectConfigError(Gpt20bWith([](json& j) { j["rms_norm_eps"] = "1e-5"; }),
                    "rms_norm_eps: must be a number, got string");
  ExpectConfigError(Gpt20bWith([](json& j) { j["attention_bias"] = 1; }),
                    "attention_bias: must be true or false, got integer 1");
  ExpectConfigError(Gpt20bWith([](json& j) { j["model_type"] = 7; }), "model_type: must be a string, got integer 7");
  ExpectConfigError(Gpt20bWith([](json& j) { j["architectures"] = "GptOss"; }), "architectures: must be an array");
  ExpectConfigError(Gpt20bWith([](json& j) {
                      j["eos_token_id"] = {200002, -5};
                    }),
                    "eos_token_id.1: token id must not be negative, got -5");
  ExpectConfigError(Gpt20bWith([](json& j) { j["eos_token_id"] = "200002"; }),
                    "eos_token_id: must be an integer or a list of integers");
  ExpectConfigError(Gpt20bWith([](json& j) { j["router_aux_loss_coef"] = -0.5; }),
                    "router_aux_loss_coef: must not be negative, got -0.5");
}

TEST(ModelConfigErrors, StructureAndRequiredKeys) {
  ExpectConfigError(Gpt20bWith([](json& j) { j["layer_types"].erase(0); }),
                    "layer_types: has 23 entries but num_hidden_layers is 24");
  ExpectConfigError(
      Gpt20bWith([](json& j) { j["layer_types"][3] = "chunked_attention"; }),
      "layer_types.3: unknown layer type 'chunked_attention' (expected full_attention or sliding_attention)");
  ExpectConfigError(Gpt20bWith([](json& j) { j["layer_types"][3] = 1; }), "layer_types.3: must be a string");
  ExpectConfigError(Gpt20bWith([](json& j) { j["num_key_value_heads"] = 7; }),
                    "num_key_value_heads: num_attention_heads 64 is not divisible by 7");
  ExpectConfigError(Gpt20bWith([](json& j) { j.erase("head_dim"); }),
                    "cfg.json: head_dim: missing (required for model_type 'gpt_oss')");
  ExpectConfigError(Gpt20bWith([](json& j) { j.erase("sliding_window"); }),
                    "sliding_window: missing (required for model_type 'gpt_oss')");
  ExpectConfigError(Gpt20bWith([](json& j) { j.erase("rope_scaling"); }),
                    "rope_scaling: missing (required for model_type 'gpt_oss')");
  ExpectConfigError(Gpt20bWith([](json& j) { j.erase("vocab_size"); }), "vocab_size: missing");
  // The legacy spelling alone is enough; when both are present they must agree.
  EXPECT_EQ(
      ParseModelConfig(Gpt20bWith([](json& j) { j.erase("num_experts_per_tok"); }).dump(), "x").num_experts_per_tok, 4);
  ExpectConfigError(Gpt20bWith([](json& j) { j["experts_per_token"] = 5; }),
                    "num_experts_per_tok: disagrees with experts_per_token (integer 4 vs integer 5)");
  ExpectConfigError(Gpt20bWith([](json& j) { j["num_experts_per_tok"] = j["experts_per_token"] = 40; }),
                    "num_experts_per_tok: 40 exceeds num_local_experts 32");
  // Llama: head_dim may be derived, but only from a divisible hidden_size.
  json llama = LoadJson(kConfigs + "/llama-3.1-8b/config.json");
  llama["num_attention_heads"] = 30;
  llama["num_key_value_heads"] = 6;
  ExpectConfigError(llama, "head_dim: missing, and hidden_size 4096 is not divisible by num_attention_heads 30");
}

TEST(ModelConfigErrors, RopeScaling) {
  ExpectConfigError(
      Gpt20bWith([](json& j) { j["rope_scaling"]["rope_type"] = "ntk"; }),
      "rope_scaling.rope_type: unknown rope type 'ntk' (expected default, linear, dynamic, yarn, longrope or llama3)");
  ExpectConfigError(Gpt20bWith([](json& j) { j["rope_scaling"]["factor"] = "32"; }),
                    "rope_scaling.factor: must be a number, got string \"32\"");
  ExpectConfigError(Gpt20bWith([](json& j) { j["rope_scaling"]["factor"] = -2.0; }),
                    "rope_scaling.factor: must be positive, got -2");
  ExpectConfigError(Gpt20bWith([](json& j) { j["rope_scaling"]["truncate"] = "no"; }),
                    "rope_scaling.truncate: must be true or false");
  ExpectConfigError(Gpt20bWith([](json& j) { j["rope_scaling"].erase("rope_type"); }),
                    "rope_scaling.rope_type: missing");
  ExpectConfigError(Gpt20bWith([](json& j) { j["rope_scaling"] = 32; }),
                    "rope_scaling: must be an object, got integer 32");
  ExpectConfigError(Gpt20bWith([](json& j) { j["rope_scaling"]["type"] = "linear"; }),
                    "rope_scaling.rope_type: disagrees with rope_scaling.type");
  ExpectConfigError(Gpt20bWith([](json& j) {
                      j["rope_parameters"] = {{"rope_type", "yarn"}, {"factor", "x"}};
                      j.erase("rope_scaling");
                    }),
                    "rope_parameters.factor: must be a number");
  // yarn without factor: HF derives max_position_embeddings / original_max_position_embeddings.
  const ModelConfig derived =
      ParseModelConfig(Gpt20bWith([](json& j) { j["rope_scaling"].erase("factor"); }).dump(), "x");
  EXPECT_DOUBLE_EQ(derived.rope_scaling->factor, 131072.0 / 4096.0);
  ExpectConfigError(Gpt20bWith([](json& j) {
                      j["rope_scaling"].erase("factor");
                      j["rope_scaling"].erase("original_max_position_embeddings");
                    }),
                    "rope_scaling.factor: missing, and not derivable");

  json llama = LoadJson(kConfigs + "/llama-3.1-8b/config.json");
  llama["rope_scaling"].erase("low_freq_factor");
  ExpectConfigError(llama, "rope_scaling.low_freq_factor: missing (required for rope type 'llama3')");
  llama = LoadJson(kConfigs + "/llama-3.1-8b/config.json");
  llama["rope_scaling"]["high_freq_factor"] = 0.5;
  ExpectConfigError(llama, "rope_scaling.high_freq_factor: must exceed low_freq_factor (0.5 <= 1)");
  llama = LoadJson(kConfigs + "/llama-3.1-8b/config.json");
  llama["rope_scaling"] = {{"rope_type", "linear"}};
  ExpectConfigError(llama, "rope_scaling.factor: missing (required for rope type 'linear')");
  llama["rope_scaling"] = {{"rope_type", "longrope"}, {"short_factor", {1.0, 1.0}}, {"long_factor", {2.0}}};
  ExpectConfigError(llama, "rope_scaling.long_factor: has 1 entries but short_factor has 2");
  llama["rope_scaling"] = {{"rope_type", "longrope"}, {"short_factor", {1.0, "x"}}, {"long_factor", {2.0, 3.0}}};
  ExpectConfigError(llama, "rope_scaling.short_factor.1: must be a number");
}

TEST(ModelConfigErrors, Quantization) {
  ExpectConfigError(Gpt20bWith([](json& j) { j["quantization_config"] = "mxfp4"; }),
                    "quantization_config: must be an object, got string");
  ExpectConfigError(Gpt20bWith([](json& j) { j["quantization_config"].erase("quant_method"); }),
                    "quantization_config.quant_method: missing");
  ExpectConfigError(Gpt20bWith([](json& j) { j["quantization_config"]["modules_to_not_convert"][1] = 3; }),
                    "quantization_config.modules_to_not_convert.1: must be a string, got integer 3");
}

TEST(ModelConfigErrors, Validation) {
  const ModelConfig good = LoadModelConfig(kConfigs + "/gpt-oss-20b");
  auto expect = [&](const std::function<void(ModelConfig&)>& edit, const std::string& want) {
    ModelConfig c = good;
    edit(c);
    EXPECT_EQ(ErrorOf([&] { ValidateModelConfig(c, "v.json"); }), want);
  };
  expect([](ModelConfig& c) { c.head_dim = 0; }, "v.json: head_dim: must be positive, got 0");
  expect([](ModelConfig& c) { c.head_dim = 63; }, "v.json: head_dim: must be even for rotary embeddings, got 63");
  expect([](ModelConfig& c) { c.sliding_window.reset(); },
         "v.json: sliding_window: missing (required for model_type 'gpt_oss')");
  expect([](ModelConfig& c) { c.num_local_experts = 0; }, "v.json: num_local_experts: must be positive, got 0");
  expect([](ModelConfig& c) { c.num_hidden_layers = -3; }, "v.json: num_hidden_layers: must be positive, got -3");
  expect([](ModelConfig& c) { c.layer_types.pop_back(); },
         "v.json: layer_types: has 23 entries but num_hidden_layers is 24");
  expect([](ModelConfig& c) { c.layer_types.clear(); },
         "v.json: layer_types: has 0 entries but num_hidden_layers is 24");
  expect([](ModelConfig& c) { c.num_key_value_heads = 5; },
         "v.json: num_key_value_heads: num_attention_heads 64 is not divisible by 5");
  expect([](ModelConfig& c) { c.eos_token_ids.push_back(201088); },
         "v.json: eos_token_id: token id 201088 is outside the vocabulary (vocab_size 201088)");
  expect([](ModelConfig& c) { c.rope_scaling->rope_type = "llama3"; },
         "v.json: rope_scaling.rope_type: 'llama3' is not supported for gpt_oss (supported: yarn, or no scaling)");
  expect([](ModelConfig& c) { c.rope_scaling->factor = 0; }, "v.json: rope_scaling.factor: must be positive, got 0");
  expect([](ModelConfig& c) { c.quantization.quant_method = "gptq"; },
         "v.json: quantization_config.quant_method: 'gptq' is not supported for gpt_oss (supported: mxfp4, or "
         "unquantized)");
  expect([](ModelConfig& c) { c.hidden_size = 2880 + 16; },
         "v.json: hidden_size: 2896 is not a multiple of 32 (MXFP4 block size)");
  expect([](ModelConfig& c) { c.model_type = "olmo2"; },
         "v.json: model_type: unsupported model_type 'olmo2' (supported: deepseek_v2, deepseek_v3, gemma3_text, glm4_moe, gpt_oss, llama, mistral, phi3, qwen2, qwen3, qwen3_moe, smollm3)");
  expect([](ModelConfig& c) { c.model_type = "qwen3"; },
         "v.json: quantization_config.quant_method: 'mxfp4' is not supported for qwen3 (supported: awq, "
         "compressed-tensors, or unquantized BF16, F16 or F32 weights)");
  // Unquantized and unscaled gpt_oss configs are fine.
  ModelConfig plain = good;
  plain.quantization = QuantizationConfig{};
  plain.rope_scaling.reset();
  ValidateModelConfig(plain, "v.json");
}

TEST(ModelConfigErrors, Files) {
  ScratchDir dir;
  const std::string config = (dir.path() / "config.json").string();
  EXPECT_NE(ErrorOf([&] { LoadModelConfig(dir.path().string()); }).find(config + ": cannot open"), std::string::npos);
  fs::create_directory(config);
  EXPECT_EQ(ErrorOf([&] { LoadModelConfig(dir.path().string()); }), config + ": not a regular file");
  fs::remove(config);
  WriteText(config, "{\"model_type\": \"gpt_\xff\"}");
  EXPECT_NE(ErrorOf([&] { LoadModelConfig(dir.path().string()); }).find(config + ": invalid JSON"), std::string::npos);
}

// A hub-cache repository directory resolves to the snapshot refs/main names (ecosystem.md §4).
TEST(ModelConfig, HubCacheRepositoryDirectory) {
  ScratchDir dir;
  const fs::path repo = dir.path() / "models--openai--gpt-oss-20b";
  fs::create_directories(repo / "refs");
  fs::create_directories(repo / "snapshots" / "abc123");
  fs::create_directories(repo / "blobs");
  for (const char* name : {"config.json", "generation_config.json"}) {
    fs::copy_file(kConfigs + "/gpt-oss-20b/" + name, repo / "blobs" / name);
    fs::create_symlink(fs::path("../../blobs") / name, repo / "snapshots" / "abc123" / name);
  }
  WriteText(repo / "refs" / "main", "abc123");
  ExpectGptOss(LoadModelConfig(repo.string()), 24, 32);
  EXPECT_EQ(LoadGenerationConfig(repo.string()).eos_token_ids, (std::vector<int64_t>{200002, 199999, 200012}));
}

// ---- generation_config.json (gpt-oss.md §1.3) ------------------------------------------------

TEST(GenerationConfig, GptOss) {
  const GenerationConfig g = LoadGenerationConfig(kConfigs + "/gpt-oss-20b");
  EXPECT_EQ(g.eos_token_ids, (std::vector<int64_t>{200002, 199999, 200012}));  // <|return|>, <|endoftext|>, <|call|>
  EXPECT_EQ(g.bos_token_id, 199998);
  EXPECT_EQ(g.pad_token_id, 199999);
  EXPECT_TRUE(g.do_sample);
  EXPECT_FALSE(g.temperature.has_value());
  EXPECT_FALSE(g.top_p.has_value());
  EXPECT_FALSE(g.top_k.has_value());
  const json j = GenerationConfigToJson(g);
  EXPECT_EQ(j, (json{{"bos_token_id", 199998},
                     {"do_sample", true},
                     {"eos_token_id", {200002, 199999, 200012}},
                     {"pad_token_id", 199999}}));
  const GenerationConfig back = ParseGenerationConfig(j.dump(), "back");
  EXPECT_EQ(back.eos_token_ids, g.eos_token_ids);
  EXPECT_EQ(back.bos_token_id, g.bos_token_id);
}

TEST(GenerationConfig, MissingFileGivesDefaultsAndSamplingFields) {
  ScratchDir dir;
  const GenerationConfig d = LoadGenerationConfig(dir.path().string());
  EXPECT_TRUE(d.eos_token_ids.empty());
  EXPECT_FALSE(d.do_sample);
  EXPECT_FALSE(d.bos_token_id.has_value());

  // HF's converter's instruct branch (gpt-oss.md §1.3): a single eos id and sampling values.
  const GenerationConfig g = ParseGenerationConfig(
      R"({"eos_token_id": 200002, "temperature": 0.6, "top_p": 0.9, "top_k": 0, "do_sample": true, "pad_token_id": null})",
      "g");
  EXPECT_EQ(g.eos_token_ids, std::vector<int64_t>{200002});
  EXPECT_EQ(g.temperature, 0.6);
  EXPECT_EQ(g.top_p, 0.9);
  EXPECT_EQ(g.top_k, 0);
  EXPECT_FALSE(g.pad_token_id.has_value());
  EXPECT_EQ(GenerationConfigToJson(g)["eos_token_id"], 200002);
}

TEST(GenerationConfig, Errors) {
  auto expect = [](const std::string& text, const std::string& want) {
    EXPECT_EQ(ErrorOf([&] { ParseGenerationConfig(text, "gen.json"); }), want);
  };
  expect(R"({"top_p": 1.5})", "gen.json: top_p: must lie in [0, 1], got 1.5");
  expect(R"({"temperature": "hot"})", "gen.json: temperature: must be a number, got string \"hot\"");
  expect(R"({"temperature": -1})", "gen.json: temperature: must not be negative, got -1");
  expect(R"({"top_k": 5.5})", "gen.json: top_k: must be an integer, got number 5.5");
  expect(R"({"eos_token_id": [1, "2"]})", "gen.json: eos_token_id.1: must be an integer, got string \"2\"");
  expect(R"({"do_sample": "yes"})", "gen.json: do_sample: must be true or false, got string \"yes\"");
  expect("[]", "gen.json: top-level JSON value must be an object, got array");
  ScratchDir dir;
  WriteText(dir.path() / "generation_config.json", "{");
  EXPECT_NE(ErrorOf([&] { LoadGenerationConfig(dir.path().string()); }).find("generation_config.json: invalid JSON"),
            std::string::npos);
}

}  // namespace
}  // namespace tessera
