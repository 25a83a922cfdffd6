// GGUF models end to end (issue 30 points 2-4): checkpoints written as llama.cpp's converter writes
// them (tests/gguf_convert.h) run through Model::Load like a checkpoint directory.
//   - Against transformers: the dense goldens (tests/data/dense_golden, transformers float32) as
//     F32, F16 and BF16 GGUFs give the goldens' logits (<= 1e-4 of max |ref|; F16/BF16 files hold
//     rounded weights, so those runs are held to the rounded checkpoint instead) and greedy ids.
//     llama_a carries Llama 3 rope scaling, which a GGUF stores only as the rope_freqs tensor.
//     Left out, with the reason: mistral_a and qwen2_a (sliding windows, which llama.cpp's llama
//     and qwen2 graphs do not apply and no GGUF key records) and the two Qwen3-MoE goldens (a
//     dense layer among sparse ones: mlp_only_layers / decoder_sparse_step, likewise unrecorded).
//   - Every block type against its dequantized weights: tiny-llama and a synthetic Qwen3-MoE with
//     every matrix (embedding included) in q8_0, q4_0, ..., q6_K random blocks, against a float32
//     twin checkpoint holding exactly ggml's dequantized values: the same logits.
//   - gpt-oss's MXFP4 experts, split and repacked by the converter, give the checkpoint's logits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/gguf.h"
#include "io/safetensors.h"
#include "model/model.h"
#include "model/synth.h"
#include "gguf_convert.h"
#include "golden_checks.h"
#include "test_util.h"
#include "scratch_dir.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

const std::string kGoldens = std::string(TESSERA_TEST_DATA) + "/dense_golden/";
const std::string kModels = std::string(TESSERA_SOURCE_DIR) + "/models/";

std::vector<float> PrefillLogits(const Model& model, const std::vector<int32_t>& ids) {
  KvCache cache(model.cache_config(), static_cast<int64_t>(ids.size()), KvType::kF32);
  std::vector<float> logits;
  model.Forward(ids, 0, cache, LogitsMode::kAll, logits);
  return logits;
}

double MaxRelativeDifference(const std::vector<float>& got, const std::vector<float>& ref) {
  EXPECT_EQ(got.size(), ref.size());
  double diff = 0.0, scale = 0.0;
  for (size_t i = 0; i < got.size() && i < ref.size(); ++i) {
    diff = std::max(diff, static_cast<double>(std::fabs(got[i] - ref[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(ref[i])));
  }
  return diff / std::max(scale, 1e-30);
}

class GgufDenseGolden : public ::testing::TestWithParam<std::string> {};

// A golden checkpoint written as an F32 GGUF gives its transformers logits and greedy ids; returns
// the GGUF tensor names written.
std::vector<std::string> ExpectGoldenThroughGguf(const std::string& golden_dir, const std::string& name) {
  const ScratchDir dir;
  const std::string gguf = dir / "model-f32.gguf";
  const std::vector<std::string> names = test::WriteGgufLikeLlamaCpp(golden_dir + name, gguf);
  const auto model = Model::Load(gguf);
  const ModelGolden golden = LoadModelGolden(golden_dir + name);
  EXPECT_LE(PrefillErrorAgainstGolden(*model, golden, name + " (GGUF f32)"), 1e-4);
  EXPECT_EQ(GreedyAgainstGolden(*model, golden, 1e-4), golden.greedy);
  return names;
}

TEST_P(GgufDenseGolden, F32FileGivesTheTransformersLogits) { ExpectGoldenThroughGguf(kGoldens, GetParam()); }

// F16 and BF16 files hold the weights rounded once more (the goldens' checkpoints are BF16 or
// F32): the logits equal those of the rounded float32 twin.
TEST_P(GgufDenseGolden, HalfFilesGiveTheirRoundedWeightsLogits) {
  const ScratchDir dir;
  const std::vector<int32_t> ids = LoadModelGolden(kGoldens + GetParam()).sequence();
  for (const uint32_t type : {1u, 30u}) {
    test::GgufConvertOptions options;
    options.matrix_type = type;
    options.twin_dir = dir / StrCat("twin", type);
    const std::string gguf = dir / StrCat("model-", type, ".gguf");
    test::WriteGgufLikeLlamaCpp(kGoldens + GetParam(), gguf, options);
    const double diff = MaxRelativeDifference(PrefillLogits(*Model::Load(gguf), ids),
                                              PrefillLogits(*Model::Load(options.twin_dir), ids));
    EXPECT_LE(diff, 1e-4) << FindGgmlType(type)->name;
  }
}

INSTANTIATE_TEST_SUITE_P(Families, GgufDenseGolden,
                         ::testing::Values("llama_a", "llama_b", "mistral_b", "qwen2_b", "qwen3_a", "qwen3_b"));

// max |logit - twin| / max |twin| of `gguf` over golden `name`'s sequence, the twin being the
// golden's checkpoint with its config.json edited to what the file means to llama.cpp (the
// choices its graph fixes rather than reads); written into `dir`.
double DifferenceToEditedTwin(const std::string& name, const std::string& gguf, const ScratchDir& dir,
                              const std::function<void(nlohmann::json&)>& edit) {
  const std::string twin = dir / "twin";
  fs::create_directories(twin);
  for (const char* f : {"model.safetensors", "generation_config.json"}) fs::copy_file(kGoldens + name + "/" + f, twin + "/" + f);
  nlohmann::json json = nlohmann::json::parse(std::ifstream(kGoldens + name + "/config.json"));
  edit(json);
  std::ofstream(twin + "/config.json") << json.dump();
  const std::vector<int32_t> ids = LoadModelGolden(kGoldens + name).sequence();
  return MaxRelativeDifference(PrefillLogits(*Model::Load(gguf), ids), PrefillLogits(*Model::Load(twin), ids));
}

// Phi-3 / Phi-4-mini as Phi3MiniModel writes them (attn_qkv, ffn_up holding gate | up, the longrope
// lists as rope_factors_long / _short, rope.dimension_count): phi3_a (partial rotary 0.75, long
// factors past the original 32 positions) gives its transformers logits; phi3_b's sliding window,
// which llama.cpp's phi3 graph disables, is not in effect (its twin has none).
TEST(GgufPhi3, ReadAsLlamaCppReadsIt) {
  const std::vector<std::string> names = ExpectGoldenThroughGguf(kGoldens, "phi3_a");
  EXPECT_NE(std::find(names.begin(), names.end(), "rope_factors_long.weight"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "blk.0.attn_qkv.weight"), names.end());
  const ScratchDir dir;
  const std::string gguf = dir / "phi3_b.gguf";
  test::WriteGgufLikeLlamaCpp(kGoldens + "phi3_b", gguf);
  const ModelConfig config = LoadModelConfig(gguf);
  EXPECT_FALSE(config.sliding_window.has_value());
  EXPECT_LE(DifferenceToEditedTwin("phi3_b", gguf, dir, [](nlohmann::json& json) {
    json["sliding_window"] = nullptr;
  }), 1e-5);
}

// GLM-4.5 as llama.cpp's converter writes it (Glm4MoeModel: experts stacked, exp_probs_b, the
// rotated width as rope.dimension_count, groups as expert_group_count): glm4_moe_a's transformers
// logits through an F32 file.
TEST(GgufGlm4Moe, F32FileGivesTheTransformersLogits) {
  const std::vector<std::string> names = ExpectGoldenThroughGguf(kGoldens, "glm4_moe_a");
  EXPECT_NE(std::find(names.begin(), names.end(), "blk.1.exp_probs_b.bias"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "blk.1.ffn_gate_exps.weight"), names.end());
}

// SmolLM3 as llama.cpp reads a smollm3 file: Llama's permuted q/k undone, and every 4th layer
// without RoPE (llama.cpp fixes the step; smollm3_a's own list [1, 0, 1, 1] is not in the file),
// so the file equals the checkpoint with that default.
TEST(GgufSmolLm3, ReadAsLlamaCppReadsIt) {
  const ScratchDir dir;
  const std::string gguf = dir / "smollm3_a.gguf";
  test::WriteGgufLikeLlamaCpp(kGoldens + "smollm3_a", gguf);
  const ModelConfig config = LoadModelConfig(gguf);
  EXPECT_EQ(config.model_type, "smollm3");
  EXPECT_EQ(config.no_rope_layers, (std::vector<int64_t>{1, 1, 1, 0}));
  EXPECT_LE(DifferenceToEditedTwin("smollm3_a", gguf, dir, [](nlohmann::json& json) {
    json.erase("no_rope_layers");
    json["no_rope_layer_interval"] = 4;
  }), 1e-5);
}

// Gemma 3 as llama.cpp reads a gemma3 file (src/models/gemma3.cpp): norms stored with Gemma's + 1
// (read back as 1 + w, not 2 + w), 5 sliding : 1 global unless the file says otherwise, the
// local rope base 10000, and the attention scale of head_dim (hidden / heads on the 27B), which
// the file cannot store: gemma3_a's query_pre_attn_scalar 24 (head_dim 32) becomes 32, so its
// logits are llama.cpp's, not transformers'. (gemma3_b's explicit layer_types [full, sliding,
// full] are not written by the converter either: llama.cpp runs its three layers all sliding.)
TEST(GgufGemma3, ReadAsLlamaCppReadsIt) {
  const ScratchDir dir;
  const std::string gguf = dir / "gemma3_a.gguf";
  const std::vector<std::string> names = test::WriteGgufLikeLlamaCpp(kGoldens + "gemma3_a", gguf);
  EXPECT_NE(std::find(names.begin(), names.end(), "blk.0.post_ffw_norm.weight"), names.end());
  const ModelConfig config = LoadModelConfig(gguf);
  EXPECT_EQ(config.model_type, "gemma3_text");
  EXPECT_EQ(config.query_pre_attn_scalar, 32.0);
  EXPECT_EQ(config.stored_norm_offset, 1.0);
  EXPECT_EQ(config.rope_local_base_freq, 10000.0);
  ASSERT_EQ(config.layer_types.size(), 6u);
  for (size_t l = 0; l < 6; ++l) EXPECT_EQ(config.layer_types[l] == LayerType::kSlidingAttention, l != 5) << l;
  ASSERT_TRUE(config.rope_scaling.has_value());
  EXPECT_EQ(config.rope_scaling->rope_type, "linear");
  // The same model in safetensors with query_pre_attn_scalar set to head_dim gives the GGUF's logits.
  EXPECT_LE(DifferenceToEditedTwin("gemma3_a", gguf, dir, [](nlohmann::json& json) {
    json["query_pre_attn_scalar"] = 32;
  }), 1e-5);
}

// Every block type tessera reads, in every matrix of a model, against the float32 twin holding
// ggml's dequantized values (io/ggml_quants.h, equal to gguf-py's: tests/gguf_test.cpp).
class GgufBlockTypes : public ::testing::TestWithParam<uint32_t> {};

void ExpectTwinLogits(const std::string& hf_dir, uint32_t type, const std::vector<int32_t>& ids) {
  const ScratchDir dir("_twin");
  test::GgufConvertOptions options;
  options.matrix_type = type;
  options.twin_dir = dir / "twin";
  const std::string gguf = dir / "model.gguf";
  test::WriteGgufLikeLlamaCpp(hf_dir, gguf, options);
  const auto model = Model::Load(gguf);
  const double diff = MaxRelativeDifference(PrefillLogits(*model, ids), PrefillLogits(*Model::Load(options.twin_dir), ids));
  std::printf("%s %s: max |logit - twin| / max |twin| = %.3g\n", model->config().model_type.c_str(),
              std::string(FindGgmlType(type)->name).c_str(), diff);
  EXPECT_LE(diff, 1e-5);
}

TEST_P(GgufBlockTypes, TinyLlamaEqualsItsDequantizedTwin) {
  ExpectTwinLogits(kModels + "tiny-llama", GetParam(), RandomTokens(24, 4096, 7));
}

TEST_P(GgufBlockTypes, Qwen3MoeEqualsItsDequantizedTwin) {
  const ScratchDir dir;
  SynthOptions options;
  options.config_json = SynthPresetConfigJson("tiny-qwen3-moe");
  options.config_json["hidden_size"] = 256;  // whole k-quant blocks in every matrix
  options.config_json["moe_intermediate_size"] = 256;
  options.config_json["intermediate_size"] = 256;
  options.config_json["num_hidden_layers"] = 2;
  options.config_json["mlp_only_layers"] = nlohmann::json::array();  // every layer sparse, as GGUF records
  WriteSyntheticModel(dir / "hf", options);
  ExpectTwinLogits(dir / "hf", GetParam(), RandomTokens(16, options.config_json["vocab_size"].get<int64_t>(), 3));
}

INSTANTIATE_TEST_SUITE_P(Types, GgufBlockTypes, ::testing::Values(8u, 2u, 3u, 6u, 7u, 10u, 11u, 12u, 13u, 14u, 39u),
                         [](const ::testing::TestParamInfo<uint32_t>& info) {
                           return std::string(FindGgmlType(info.param)->name);
                         });

// DeepSeek-V2/V3 as llama.cpp's converter writes them (deepseek2: kv_b_proj split into attn_k_b,
// each head's key rows transposed, and attn_v_b; experts stacked; shared experts, the V3
// correction bias as exp_probs_b): the transformers goldens (tests/data/deepseek_golden, README
// there): v2_a (softmax, no groups, YaRN with mscale = mscale_all_dim), v2_b (group-limited
// greedy, no rope scaling, rms_norm_eps 1e-5 beside the latent norms' 1e-6, which transformers
// fixes and so does the config read here), v3_a (noaux_tc over 2 groups) and v3_long (sigmoid
// with the correction bias, one group, YaRN past the original context). The groups are recorded
// as later converters write them (expert_group_count / _used_count; llama-cpp-python 0.3.16's
// writes none, and its files route over all experts, as llama.cpp does). v3_b is left out: its
// mscale differs from mscale_all_dim, and a deepseek2 file keeps only 0.1 mscale_all_dim.
const std::string kDeepseekGoldens = std::string(TESSERA_TEST_DATA) + "/deepseek_golden/";

class GgufDeepseekGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(GgufDeepseekGolden, F32FileGivesTheTransformersLogits) {
  const std::vector<std::string> names = ExpectGoldenThroughGguf(kDeepseekGoldens, GetParam());
  EXPECT_NE(std::find(names.begin(), names.end(), "blk.0.attn_k_b.weight"), names.end());
}

// Files written before llama.cpp split kv_b (one attn_kv_b tensor, key_length / value_length the
// per-head sizes) read the same.
TEST_P(GgufDeepseekGolden, UnsplitKvBFileReadsTheSame) {
  const ScratchDir dir;
  const std::string split = dir / "split.gguf", whole = dir / "whole.gguf";
  test::WriteGgufLikeLlamaCpp(kDeepseekGoldens + GetParam(), split);
  const auto file = GgufFile::Open(split);
  const WeightStore hf = WeightStore::Open(kDeepseekGoldens + GetParam());
  std::vector<GgufTensorToWrite> tensors;
  for (const GgufTensorInfo& t : file->tensors()) {
    if (t.name.ends_with("attn_v_b.weight")) continue;
    if (t.name.ends_with("attn_k_b.weight")) {
      const std::string layer = t.name.substr(4, t.name.find('.', 4) - 4);
      const TensorView kv_b = hf.Get("model.layers." + layer + ".self_attn.kv_b_proj.weight");
      std::string bytes(kv_b.numel() * 4, '\0');
      for (size_t i = 0; i < kv_b.numel(); ++i) {
        const float v = ElementToF32(kv_b.dtype(), kv_b.data + i * DTypeSize(kv_b.dtype()));
        std::memcpy(&bytes[4 * i], &v, 4);
      }
      tensors.push_back({"blk." + layer + ".attn_kv_b.weight",
                         {static_cast<uint64_t>(kv_b.shape()[1]), static_cast<uint64_t>(kv_b.shape()[0])}, 0, bytes});
      continue;
    }
    tensors.push_back({t.name, t.ne, t.type->id, std::string(reinterpret_cast<const char*>(file->Data(t)), t.nbytes)});
  }
  std::vector<std::pair<std::string, GgufValue>> meta;
  const uint64_t key_mla = file->GetUint("deepseek2.attention.key_length_mla"), value_mla = file->GetUint("deepseek2.attention.value_length_mla");
  for (const auto& [key, value] : file->metadata()) {
    if (key.ends_with("_length_mla")) continue;
    if (key == "deepseek2.attention.key_length") meta.emplace_back(key, GgufUint32(static_cast<uint32_t>(key_mla)));
    else if (key == "deepseek2.attention.value_length") meta.emplace_back(key, GgufUint32(static_cast<uint32_t>(value_mla)));
    else meta.emplace_back(key, value);
  }
  WriteGguf(whole, meta, tensors);
  const std::vector<int32_t> ids = LoadModelGolden(kDeepseekGoldens + GetParam()).sequence();
  EXPECT_EQ(PrefillLogits(*Model::Load(whole), ids), PrefillLogits(*Model::Load(split), ids));
}

INSTANTIATE_TEST_SUITE_P(Models, GgufDeepseekGolden, ::testing::Values("v2_a", "v2_b", "v3_a", "v3_long"));

// Every block type in a DeepSeek-V3 model whose rows fit the blocks (hidden, latent and q_lora
// 256; nope 32, so attn_k_b takes the 32-value types and stays F32 for the k-quants, as
// llama-quantize falls back), against its dequantized twin: k_b and v_b are decoded and merged.
TEST_P(GgufBlockTypes, DeepseekEqualsItsDequantizedTwin) {
  const ScratchDir dir;
  SynthOptions options;
  options.config_json = SynthPresetConfigJson("tiny-deepseek-v3");
  options.config_json.update({{"hidden_size", 256}, {"intermediate_size", 256}, {"moe_intermediate_size", 256},
                              {"kv_lora_rank", 256}, {"q_lora_rank", 256}, {"qk_nope_head_dim", 32}, {"v_head_dim", 32},
                              {"num_hidden_layers", 2}, {"n_group", 1}, {"topk_group", 1}});
  WriteSyntheticModel(dir / "hf", options);
  ExpectTwinLogits(dir / "hf", GetParam(), RandomTokens(16, options.config_json["vocab_size"].get<int64_t>(), 5));
}

// gpt-oss: experts split into gate/up and repacked into ggml's MXFP4 blocks by the converter come
// back as the checkpoint's (the same logits, bit for bit: same values, same kernels).
TEST(GgufGptOss, MxfpExpertsGiveTheCheckpointsLogits) {
  const ScratchDir dir;
  const std::string gguf = dir / "gpt-oss.gguf";
  test::WriteGgufLikeLlamaCpp(kModels + "tiny-gpt-oss", gguf);
  const std::vector<int32_t> ids = RandomTokens(20, 4096, 11);
  for (const Precision precision : {Precision::kExact, Precision::kFast}) {
    ModelOptions options;
    options.precision = precision;
    EXPECT_EQ(PrefillLogits(*Model::Load(gguf, options), ids),
              PrefillLogits(*Model::Load(kModels + "tiny-gpt-oss", options), ids));
  }
}

// A split set (gguf-split's naming and split.* keys; the metadata in the first file) loads as the
// single file does; a missing part is a one-line error.
TEST(GgufSplit, ASplitSetLoadsAsTheWholeFile) {
  const ScratchDir dir;
  const std::string whole = dir / "model.gguf";
  test::WriteGgufLikeLlamaCpp(kGoldens + "qwen3_a", whole);
  const auto file = GgufFile::Open(whole);
  std::vector<GgufTensorToWrite> parts[2];
  for (size_t i = 0; i < file->tensors().size(); ++i) {
    const GgufTensorInfo& t = file->tensors()[i];
    parts[i % 2].push_back({t.name, t.ne, t.type->id, std::string(reinterpret_cast<const char*>(file->Data(t)), t.nbytes)});
  }
  for (int k = 0; k < 2; ++k) {
    std::vector<std::pair<std::string, GgufValue>> meta = k == 0 ? file->metadata() : decltype(meta){};
    meta.emplace_back("split.no", GgufUint32(static_cast<uint32_t>(k)));
    meta.emplace_back("split.count", GgufUint32(2));
    WriteGguf(dir / StrCat("model-0000", k + 1, "-of-00002.gguf"), meta, parts[k]);
  }
  const std::vector<int32_t> ids = LoadModelGolden(kGoldens + "qwen3_a").sequence();
  EXPECT_EQ(PrefillLogits(*Model::Load(dir / "model-00001-of-00002.gguf"), ids), PrefillLogits(*Model::Load(whole), ids));
  fs::remove(dir / "model-00002-of-00002.gguf");
  EXPECT_NE(ErrorOf([&] { Model::Load(dir / "model-00001-of-00002.gguf"); }).find("split 2 of 2 is missing"),
            std::string::npos);
}

TEST(GgufModelErrors, UnmappedTensorsAndMixedPairsAreOneLineErrors) {
  const ScratchDir dir;
  const std::string gguf = dir / "model.gguf";
  test::WriteGgufLikeLlamaCpp(kGoldens + "llama_b", gguf);
  // An extra tensor llama.cpp's llama graph would not read either.
  {
    auto file = GgufFile::Open(gguf);
    std::vector<GgufTensorToWrite> tensors;
    for (const GgufTensorInfo& t : file->tensors()) {
      tensors.push_back({t.name, t.ne, t.type->id, std::string(reinterpret_cast<const char*>(file->Data(t)), t.nbytes)});
    }
    WriteGguf(dir / "mixed.gguf", file->metadata(), [&] {
      // gate and up of one MLP in different types: they are one matrix here.
      auto mixed = tensors;
      for (GgufTensorToWrite& t : mixed) {
        if (t.name != "blk.0.ffn_up.weight") continue;
        std::string half(t.bytes.size() / 2, '\0');
        for (size_t i = 0; i < half.size() / 2; ++i) {
          float v;
          std::memcpy(&v, &t.bytes[4 * i], 4);
          const uint16_t h = F32ToF16(v);
          std::memcpy(&half[2 * i], &h, 2);
        }
        t.type = 1;
        t.bytes = half;
      }
      return mixed;
    }());
    tensors.push_back({"blk.0.attn_bogus.weight", {4}, 0, std::string(16, '\0')});
    WriteGguf(dir / "extra.gguf", file->metadata(), tensors);
  }
  EXPECT_NE(ErrorOf([&] { Model::Load(dir / "extra.gguf"); }).find("'blk.0.attn_bogus.weight' has no Hugging Face counterpart"),
            std::string::npos);
  EXPECT_NE(ErrorOf([&] { Model::Load(dir / "mixed.gguf"); }).find("must be stored alike (F32 vs F16)"), std::string::npos);
}

}  // namespace
}  // namespace tessera
