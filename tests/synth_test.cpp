// `tessera synth` (model/synth.h): presets equal the real configs, the tiny preset writes a
// complete directory that loads and validates, values are plausible, output is deterministic for a
// seed whatever the thread count or sharding, and bad requests fail with one-line errors.
// The 20b/120b directories are too large for the suite; their tensor lists are checked against
// the manifests in gpt_oss_weights_test.cpp.
#include <gtest/gtest.h>

#include <stdlib.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "core/thread_pool.h"
#include "io/config.h"
#include "io/safetensors.h"
#include "model/tensor_specs.h"
#include "kernels/mxfp4.h"
#include "model/model.h"
#include "model/synth.h"
#include "tokenizer/embedded_assets.h"
#include "scratch_dir.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

SynthResult Synth(const std::string& dir, const std::string& preset, uint64_t seed,
                  uint64_t max_shard_bytes = kGptOssMaxShardBytes, bool overwrite = false) {
  SynthOptions options;
  options.config_json = SynthPresetConfigJson(preset);
  options.seed = seed;
  options.max_shard_bytes = max_shard_bytes;
  options.overwrite = overwrite;
  return WriteSyntheticModel(dir, options);
}

std::string DataFile(const std::string& name) { return ReadFile(std::string(TESSERA_TEST_DATA) + "/" + name); }

// Values of a float tensor as doubles.
std::vector<double> FloatValues(const TensorView& v) {
  std::vector<double> out(v.numel());
  for (size_t i = 0; i < out.size(); ++i) out[i] = ElementToF32(v.dtype(), v.data + i * DTypeSize(v.dtype()));
  return out;
}

struct Stats {
  double mean = 0, std = 0;
  bool finite = true;
};
Stats StatsOf(const std::vector<double>& x) {
  Stats s;
  double sum = 0, sq = 0;
  for (double v : x) {
    s.finite = s.finite && std::isfinite(v);
    sum += v;
  }
  s.mean = sum / x.size();
  for (double v : x) sq += (v - s.mean) * (v - s.mean);
  s.std = std::sqrt(sq / x.size());
  return s;
}

// One tiny model (seed 0) shared by the read-only tests below.
class TinyModel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScratchDir();
    result_ = new SynthResult(Synth(*dir_ / "tiny", "tiny", 0));
  }
  static void TearDownTestSuite() {
    delete result_;
    delete dir_;
  }
  static std::string model() { return *dir_ / "tiny"; }
  static ScratchDir* dir_;
  static SynthResult* result_;
};
ScratchDir* TinyModel::dir_ = nullptr;
SynthResult* TinyModel::result_ = nullptr;

TEST(SynthPresets, RealSizesEqualTheHubConfigFiles) {
  // tests/data/gpt_oss_20b_config.json is the Hub file (gpt-oss.md §1.1), written by HF with
  // sorted keys and 2-space indent; the preset reproduces it byte for byte.
  for (const auto& [preset, file] : {std::pair<std::string, std::string>{"gpt-oss-20b", "gpt_oss_20b_config.json"},
                                     {"gpt-oss-120b", "gpt_oss_120b_config.json"}}) {
    const std::string text = DataFile(file);
    EXPECT_EQ(SynthPresetConfigJson(preset), nlohmann::json::parse(text)) << preset;
    EXPECT_EQ(SynthPresetConfigJson(preset).dump(2) + "\n", text) << preset;
  }
  const std::string generation = DataFile("gpt_oss_generation_config.json");
  EXPECT_EQ(GptOssGenerationConfigJson().dump(2) + "\n", generation);
  const GenerationConfig g = ParseGenerationConfig(generation, "generation_config.json");
  EXPECT_EQ(g.eos_token_ids, (std::vector<int64_t>{200002, 199999, 200012}));
  EXPECT_EQ(g.bos_token_id, 199998);
  EXPECT_EQ(g.pad_token_id, 199999);
  EXPECT_TRUE(g.do_sample);
}

TEST(SynthPresets, AllParseAndValidate) {
  for (const std::string& preset : SynthPresetNames()) {
    SCOPED_TRACE(preset);
    const ModelConfig c = ParseModelConfig(SynthPresetConfigJson(preset).dump(), preset);
    EXPECT_NO_THROW(ValidateModelConfig(c, preset));
    if (c.model_type != "gpt_oss") continue;  // the other families: SynthFamilies below
    EXPECT_EQ(c.vocab_size, 201088);  // the real tokenizer works with every preset
    EXPECT_EQ(c.quantization.quant_method, "mxfp4");
    ASSERT_TRUE(c.rope_scaling.has_value());
    EXPECT_EQ(c.rope_scaling->rope_type, "yarn");
    EXPECT_FALSE(c.rope_scaling->truncate);
    EXPECT_EQ(c.num_experts_per_tok, 4);
    EXPECT_EQ(c.hidden_size % 32, 0);
    EXPECT_EQ(c.intermediate_size % 32, 0);
    ASSERT_EQ(c.layer_types.size(), static_cast<size_t>(c.num_hidden_layers));
    for (size_t i = 0; i < c.layer_types.size(); ++i) {
      EXPECT_EQ(c.layer_types[i], i % 2 == 0 ? LayerType::kSlidingAttention : LayerType::kFullAttention);
    }
  }
  const ModelConfig tiny = ParseModelConfig(SynthPresetConfigJson("tiny").dump(), "tiny");
  EXPECT_EQ(tiny.num_hidden_layers, 4);
  EXPECT_EQ(tiny.hidden_size, 64);
  EXPECT_EQ(tiny.head_dim, 32);
  EXPECT_NE(tiny.head_dim, tiny.hidden_size / tiny.num_attention_heads);
  EXPECT_EQ(tiny.sliding_window, 16);
  EXPECT_EQ(tiny.num_local_experts, 8);
  // Every key of the real config.json is present in tiny too.
  const nlohmann::json real = SynthPresetConfigJson("gpt-oss-20b");
  for (const auto& item : real.items()) EXPECT_TRUE(SynthPresetConfigJson("tiny").contains(item.key())) << item.key();
}

TEST(SynthPresets, UnknownPresetIsAnError) {
  try {
    SynthPresetConfigJson("gpt-oss-7b");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "unknown preset 'gpt-oss-7b' (known: tiny, gpt-oss-20b, gpt-oss-120b, llama-3.1-8b, mistral-7b, "
                 "qwen2.5-7b, qwen3-8b, qwen3-30b-a3b, tiny-llama, tiny-qwen3, tiny-qwen3-moe, deepseek-v2-lite, deepseek-v3, kimi-k2, tiny-deepseek-v2, tiny-deepseek-v3, "
      "gemma-3-1b, gemma-3-4b, gemma-3-12b, gemma-3-27b, tiny-gemma3, phi-4-mini, smollm3-3b, glm-4.5-air)");
  }
}

TEST(SynthValues, InitScalesFollowFanIn) {
  const std::vector<TensorSpec> specs =
      ModelTensorSpecs(ParseModelConfig(SynthPresetConfigJson("gpt-oss-20b").dump(), "20b"));
  for (const TensorSpec& s : specs) {
    const SynthInit init = SynthInitFor(s);
    switch (s.kind) {
      case TensorKind::kNorm: EXPECT_EQ(init.mean, 1.0f); break;
      case TensorKind::kLinearWeight:
        EXPECT_FLOAT_EQ(init.std, 1.0f / std::sqrt(static_cast<float>(s.shape[1]))) << s.name;
        break;
      case TensorKind::kExpertScales:
        // fan_in 2880: target std 0.0186; 2^(119-127) * sqrt(8.5625 * 1.75) = 0.0151.
        EXPECT_EQ(init.scale_center, 119) << s.name;
        break;
      default: break;
    }
  }
}

TEST(SynthValues, FillIsAPureFunctionOfSeedNameAndIndex) {
  const TensorSpec spec{"model.layers.0.mlp.experts.down_proj_blocks", DType::kU8, {4, 64, 3, 16},
                        TensorKind::kExpertBlocks, 0};
  std::vector<uint8_t> a(spec.nbytes()), b(spec.nbytes()), c(spec.nbytes());
  FillSyntheticTensor(spec, 5, a.data(), a.size());
  FillSyntheticTensor(spec, 5, b.data(), b.size());
  FillSyntheticTensor(spec, 6, c.data(), c.size());
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  // A prefix of a larger tensor of the same name is the smaller tensor: values depend on the
  // element index, not on how the work was split.
  TensorSpec big = spec;
  big.shape = {8, 64, 3, 16};
  std::vector<uint8_t> d(big.nbytes());
  FillSyntheticTensor(big, 5, d.data(), d.size());
  EXPECT_TRUE(std::equal(a.begin(), a.end(), d.begin()));
  // Codes are uniform: every nibble value appears.
  std::set<int> nibbles;
  for (uint8_t byte : a) {
    nibbles.insert(byte & 15);
    nibbles.insert(byte >> 4);
  }
  EXPECT_EQ(nibbles.size(), 16u);
}

TEST_F(TinyModel, WritesACompleteDirectoryThatValidates) {
  EXPECT_EQ(result_->weight_files, std::vector<std::string>{"model.safetensors"});
  EXPECT_EQ(result_->num_tensors, 3u + 19 * 4);
  for (const char* f : {"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
                        "special_tokens_map.json", "model.safetensors"}) {
    EXPECT_TRUE(fs::is_regular_file(model() + "/" + f)) << f;
  }
  EXPECT_FALSE(fs::exists(model() + "/model.safetensors.index.json"));

  const ModelConfig config = LoadModelConfig(model());
  EXPECT_EQ(nlohmann::json::parse(ReadFile(model() + "/config.json")), SynthPresetConfigJson("tiny"));
  const WeightStore store = WeightStore::Open(model());
  const std::vector<TensorSpec> specs = ModelTensorSpecs(config);
  EXPECT_TRUE(CheckTensors(specs, store).empty());
  EXPECT_EQ(store.num_tensors(), specs.size());
  uint64_t bytes = 0;
  for (const TensorSpec& s : specs) bytes += s.nbytes();
  EXPECT_EQ(result_->tensor_bytes, bytes);

  const GenerationConfig g = LoadGenerationConfig(model());
  EXPECT_EQ(g.eos_token_ids, (std::vector<int64_t>{200002, 199999, 200012}));
  EXPECT_TRUE(ReadFile(model() + "/tokenizer.json") == EmbeddedTokenizerJson());
  EXPECT_EQ(ReadFile(model() + "/tokenizer_config.json"), std::string(EmbeddedTokenizerConfigJson()));
  const nlohmann::json special = nlohmann::json::parse(ReadFile(model() + "/special_tokens_map.json"));
  EXPECT_EQ(special.at("eos_token"), "<|return|>");
}

TEST_F(TinyModel, ValuesArePlausible) {
  const WeightStore store = WeightStore::Open(model());
  const std::vector<TensorSpec> specs = ModelTensorSpecs(LoadModelConfig(model()));
  for (const TensorSpec& spec : specs) {
    SCOPED_TRACE(spec.name);
    const TensorView v = store.Get(spec.name);
    if (spec.kind == TensorKind::kExpertScales) {
      // fan_in 64 or 96: centre byte 122, bytes 121..123.
      for (uint64_t i = 0; i < v.nbytes(); ++i) ASSERT_TRUE(v.data[i] >= 121 && v.data[i] <= 123) << i;
      continue;
    }
    if (spec.kind == TensorKind::kExpertBlocks) {
      // Decode every expert row; the std must be 1/sqrt(fan_in) within a factor 1.5.
      const std::string scales_name = spec.name.substr(0, spec.name.size() - 6) + "scales";
      const TensorView s = store.Get(scales_name);
      const int64_t in = spec.shape[2] * kMxfp4BlockSize;
      const int64_t rows = spec.shape[0] * spec.shape[1];
      std::vector<double> values;
      std::vector<float> row(in);
      for (int64_t r = 0; r < rows; ++r) {
        DecodeMxfp4Row(v.data + r * in / 2, s.data + r * in / kMxfp4BlockSize, in, row.data());
        values.insert(values.end(), row.begin(), row.end());
      }
      const Stats st = StatsOf(values);
      const double target = 1.0 / std::sqrt(static_cast<double>(in));
      EXPECT_TRUE(st.finite);
      EXPECT_NEAR(st.mean, 0.0, 0.1 * target);
      EXPECT_GT(st.std, target / 1.5);
      EXPECT_LT(st.std, target * 1.5);
      continue;
    }
    const Stats st = StatsOf(FloatValues(v));
    const SynthInit init = SynthInitFor(spec);
    EXPECT_TRUE(st.finite);
    // Small tensors (sinks: 4 values) only get a loose check.
    const double tol = v.numel() >= 1000 ? 0.1 : 1.5;
    EXPECT_NEAR(st.mean, init.mean, tol * init.std + 1e-3);
    EXPECT_NEAR(st.std, init.std, tol * init.std);
  }
  EXPECT_NEAR(StatsOf(FloatValues(store.Get("model.norm.weight"))).mean, 1.0, 0.01);
  EXPECT_NEAR(StatsOf(FloatValues(store.Get("model.embed_tokens.weight"))).std, 0.02, 0.001);
  EXPECT_NEAR(StatsOf(FloatValues(store.Get("model.layers.0.self_attn.q_proj.weight"))).std, 0.125, 0.01);
}

TEST_F(TinyModel, SameSeedSameBytesAnyThreadCountOtherSeedDiffers) {
  ScratchDir tmp;
  SetGlobalThreadCount(1);
  Synth(tmp / "again", "tiny", 0);
  SetGlobalThreadCount(DefaultThreadCount());
  EXPECT_TRUE(ReadFile(model() + "/model.safetensors") == ReadFile((tmp / "again") + "/model.safetensors"));

  Synth(tmp / "seed1", "tiny", 1);
  const WeightStore a = WeightStore::Open(model());
  const WeightStore b = WeightStore::Open(tmp / "seed1");
  for (const std::string& name : a.names()) {
    const TensorView x = a.Get(name), y = b.Get(name);
    ASSERT_EQ(x.nbytes(), y.nbytes());
    EXPECT_NE(std::memcmp(x.data, y.data, x.nbytes()), 0) << name;
  }
}

TEST_F(TinyModel, ShardedWriteHoldsTheSameTensorsAndReplacesStaleFiles) {
  ScratchDir tmp;
  const std::string dir = tmp / "sharded";
  fs::create_directories(dir);
  WriteFile(dir + "/model-00000-of-00009.safetensors", std::string("stale"));
  WriteFile(dir + "/notes.txt", std::string("kept"));
  try {
    Synth(dir, "tiny", 0, 20'000'000);
    ADD_FAILURE() << "a non-empty directory needs overwrite";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), dir + ": directory is not empty (use --force to replace its model files)");
  }

  // ~52 MB of tensors; the two 25.7 MB embedding matrices each need a shard of their own.
  const SynthResult r = Synth(dir, "tiny", 0, 20'000'000, /*overwrite=*/true);
  ASSERT_GE(r.weight_files.size(), 3u);
  for (size_t i = 0; i < r.weight_files.size(); ++i) {
    char expected[64];
    std::snprintf(expected, sizeof(expected), "model-%05zu-of-%05zu.safetensors", i + 1,
                  r.weight_files.size());
    EXPECT_EQ(r.weight_files[i], expected);
  }
  EXPECT_FALSE(fs::exists(dir + "/model-00000-of-00009.safetensors"));
  EXPECT_EQ(ReadFile(dir + "/notes.txt"), "kept");

  // Greedy packing in checkpoint order, as the real checkpoints were written.
  const nlohmann::json index = nlohmann::json::parse(ReadFile(dir + "/model.safetensors.index.json"));
  const std::vector<TensorSpec> specs = CheckpointOrder(LoadModelConfig(dir), ModelTensorSpecs(LoadModelConfig(dir)));
  size_t shard = 0;
  uint64_t size = 0;
  for (const TensorSpec& s : specs) {
    if (size > 0 && size + s.nbytes() > 20'000'000) {
      ++shard;
      size = 0;
    }
    size += s.nbytes();
    EXPECT_EQ(index.at("weight_map").at(s.name), r.weight_files[shard]) << s.name;
  }
  EXPECT_EQ(index.at("metadata").at("total_size"), r.tensor_bytes);

  const WeightStore sharded = WeightStore::Open(dir);
  const WeightStore single = WeightStore::Open(model());
  EXPECT_TRUE(CheckTensors(specs, sharded).empty());
  for (const std::string& name : single.names()) {
    const TensorView x = single.Get(name), y = sharded.Get(name);
    ASSERT_EQ(x.nbytes(), y.nbytes());
    EXPECT_EQ(std::memcmp(x.data, y.data, x.nbytes()), 0) << name;
  }
}

TEST(SynthErrors, OneLineErrorsBeforeWritingAnything) {
  ScratchDir tmp;
  // Far more than any disk, inside the config budgets (io/model_limits.h): vocab 2^24 x hidden
  // 2^20 x 2 bytes x 2 matrices = 64 TiB.
  SynthOptions options;
  options.config_json = SynthPresetConfigJson("tiny");
  options.config_json["vocab_size"] = int64_t{1} << 24;
  options.config_json["hidden_size"] = int64_t{1} << 20;
  const std::string dir = tmp / "huge";
  try {
    WriteSyntheticModel(dir, options);
    ADD_FAILURE();
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind(dir + ": not enough disk space: the model needs ", 0), 0u) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos);
  }
  EXPECT_FALSE(fs::exists(dir));  // checked before anything is created

  WriteFile(tmp / "file", std::string("x"));
  options.config_json = SynthPresetConfigJson("tiny");
  EXPECT_THROW(WriteSyntheticModel(tmp / "file", options), Error);
  options.max_shard_bytes = 0;
  EXPECT_THROW(WriteSyntheticModel(tmp / "zero", options), Error);
  options.max_shard_bytes = kGptOssMaxShardBytes;
  options.config_json["intermediate_size"] = 100;  // not a multiple of the MXFP4 block
  EXPECT_THROW(WriteSyntheticModel(tmp / "bad", options), Error);
  EXPECT_FALSE(fs::exists(tmp / "bad"));
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

// The dense and Qwen3-MoE presets against the published checkpoints' totals (model cards and
// index files: parameters as HF counts them, tensors in model.safetensors.index.json, all BF16):
// the description (tensor_specs.h) must reproduce them exactly.
TEST(SynthFamilies, RealPresetsMatchThePublishedCheckpoints) {
  struct Expected {
    const char* preset;
    size_t tensors;
    uint64_t parameters;
  };
  for (const Expected& e : {Expected{"llama-3.1-8b", 291, 8'030'261'248}, Expected{"mistral-7b", 291, 7'248'023'552},
                            Expected{"qwen2.5-7b", 339, 7'615'616'512}, Expected{"qwen3-8b", 399, 8'190'735'360},
                            Expected{"qwen3-30b-a3b", 18'867, 30'532'122'624},
                            // google/gemma-3-1b-it: 999,885,952 parameters, tied (families-2026.md).
                            Expected{"gemma-3-1b", 340, 999'885'952}}) {
    const ModelConfig config = ParseModelConfig(SynthPresetConfigJson(e.preset).dump(), e.preset);
    EXPECT_NO_THROW(ValidateModelConfig(config, e.preset));
    const std::vector<TensorSpec> specs = ModelTensorSpecs(config);
    uint64_t params = 0;
    for (const TensorSpec& s : specs) {
      params += s.parameters();
      EXPECT_EQ(s.dtype, DType::kBF16) << s.name;
    }
    EXPECT_EQ(specs.size(), e.tensors) << e.preset;
    EXPECT_EQ(params, e.parameters) << e.preset;
  }
}

// Kimi-K2 loads through the deepseek_v3 row (its model_type "kimi_k2" names DeepSeek-V3's code):
// 1.03 T parameters, about 32.9 B of them read per token (the published "1T total, 32B
// activated"), counted from the row's tensor description.
TEST(SynthFamilies, KimiK2IsTheDeepseekV3Row) {
  const nlohmann::json json = SynthPresetConfigJson("kimi-k2");
  EXPECT_EQ(json["model_type"], "kimi_k2");
  const ModelConfig config = ParseModelConfig(json.dump(), "kimi-k2");
  EXPECT_EQ(config.model_type, "deepseek_v3");
  EXPECT_EQ(ModelConfigToJson(config)["model_type"], "kimi_k2");  // written back as stored
  EXPECT_NO_THROW(ValidateModelConfig(config, "kimi-k2"));
  uint64_t params = 0, fp8 = 0;
  for (const TensorSpec& s : ModelTensorSpecs(config)) {
    if (s.name.ends_with("_scale_inv")) continue;  // FP8 block scales: not weights
    params += s.parameters();
    if (s.dtype == DType::kF8E4M3) fp8 += s.parameters();
  }
  // Embedding + lm_head, 61 MLA layers (q_a, q_b, kv_a, kv_b, o), one dense MLP, 60 MoE layers
  // of 384 routed + 1 shared experts with their routers and biases, norms.
  const uint64_t H = 7168, V = 163840, heads = 64, layers = 61;
  const uint64_t attention = H * 1536 + 1536 * heads * 192 + H * 576 + 512 * heads * 256 + heads * 128 * H;
  const uint64_t norms = layers * (2 * H + 1536 + 512) + H;
  const uint64_t expert = 3 * H * 2048;
  const uint64_t expected = 2 * V * H + layers * attention + 3 * H * 18432 + 60 * (385 * expert + 384 * H + 384) + norms;
  EXPECT_EQ(params, expected);
  EXPECT_GT(params, 1'000'000'000'000u);
  EXPECT_EQ(fp8, layers * attention + 3 * H * 18432 + 60 * 385 * expert);
}

// Every family preset writes a directory the loader takes, and inspect's description agrees.
TEST(SynthFamilies, TinyPresetsLoadAndRun) {
  for (const char* preset : {"tiny-llama", "tiny-qwen3", "tiny-qwen3-moe", "tiny-deepseek-v2", "tiny-deepseek-v3"}) {
    const std::string dir = ::testing::TempDir() + "tessera_synth_" + preset;
    std::filesystem::remove_all(dir);
    SynthOptions options;
    options.config_json = SynthPresetConfigJson(preset);
    options.seed = 7;
    WriteSyntheticModel(dir, options);
    const auto model = Model::Load(dir);
    EXPECT_EQ(model->config().model_type, options.config_json.at("model_type").get<std::string>());
    KvCache cache(model->cache_config(), 8, KvType::kF32);
    std::vector<float> logits;
    model->Forward(std::vector<int32_t>{1, 2, 3, 4}, 0, cache, LogitsMode::kLast, logits);
    ASSERT_EQ(logits.size(), static_cast<size_t>(model->vocab_size()));
    for (float v : logits) ASSERT_TRUE(std::isfinite(v)) << preset;
    std::filesystem::remove_all(dir);
  }
}

// --layers: the first N layers of a preset, with the per-layer lists cut to match and every other
// dimension kept; the cut config still loads (the tiny gpt-oss keeps one sliding and one full
// layer), and a count outside 1..layers is refused by name.
TEST(SynthShallower, CutsThePerLayerListsAndKeepsTheRest) {
  const nlohmann::json oss = SynthPresetConfigJson("gpt-oss-20b");
  const nlohmann::json cut = ShallowerConfig(oss, 3);
  EXPECT_EQ(cut.at("num_hidden_layers"), 3);
  EXPECT_EQ(cut.at("layer_types"), (nlohmann::json{"sliding_attention", "full_attention", "sliding_attention"}));
  for (const char* key : {"hidden_size", "num_attention_heads", "num_key_value_heads", "num_local_experts", "vocab_size"}) {
    EXPECT_EQ(cut.at(key), oss.at(key)) << key;
  }
  const nlohmann::json moe = ShallowerConfig(SynthPresetConfigJson("tiny-qwen3-moe"), 1);
  EXPECT_EQ(moe.at("mlp_only_layers"), nlohmann::json::array());
  EXPECT_EQ(moe.at("max_window_layers"), 1);
  EXPECT_EQ(ShallowerConfig(SynthPresetConfigJson("llama-3.1-8b"), 32), SynthPresetConfigJson("llama-3.1-8b"));
  for (int64_t bad : {0, 33}) {
    try {
      ShallowerConfig(SynthPresetConfigJson("llama-3.1-8b"), bad);
      ADD_FAILURE() << bad << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("outside 1..32"), std::string::npos) << e.what();
    }
  }
  const std::string dir = ::testing::TempDir() + "tessera_synth_shallow";
  std::filesystem::remove_all(dir);
  SynthOptions options;
  options.config_json = ShallowerConfig(SynthPresetConfigJson("tiny"), 2);
  WriteSyntheticModel(dir, options);
  const auto model = Model::Load(dir);
  EXPECT_EQ(model->config().num_hidden_layers, 2);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tessera
