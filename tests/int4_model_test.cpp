// int4 (AWQ) checkpoints as downloaded: AutoAWQ GEMM and compressed-tensors pack-quantized
// (issue 16 points 1-2; ../shared/reference/quantization.md B.1-B.3, dense-decoders.md §10).
//
// tests/data/int4/ is made by tools/make_int4_goldens.py: every module quantized and packed by
// AutoAWQ 0.2.9 / compressed-tensors 0.19.0 themselves, references from transformers 4.57.1
// float32 eager with the weights dequantized as (q - z) s in float32 (the script checks that
// reading against each package's own unpacking). Acceptance: max |logit - ref| <= 1e-4 max |ref|
// on the exact path and identical 32-token greedy continuations; the fast path (int4-q8) within
// the bounds docs/ACCURACY.md records; the unpacked layers bit-exact; malformed checkpoints one
// line naming the tensor.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/npy.h"
#include "io/safetensors.h"
#include "model/linear.h"
#include "model/model.h"
#include "model/quant_scheme.h"
#include "golden_checks.h"
#include "test_util.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

const std::string kDir = std::string(TESSERA_TEST_DATA) + "/int4/";

// ---- the models ---------------------------------------------------------------------------------

class Int4Golden : public ::testing::TestWithParam<std::string> {};

std::vector<float> AllLogits(const Model& model, const std::vector<int32_t>& seq) {
  KvCache cache(model.cache_config(), static_cast<int64_t>(seq.size()), KvType::kF32);
  std::vector<float> logits;
  model.Forward(seq, 0, cache, LogitsMode::kAll, logits);
  return logits;
}

TEST_P(Int4Golden, ExactLogitsMatchTransformersOnTheDequantizedWeights) {
  const auto model = Model::Load(kDir + GetParam());
  const ModelGolden g = LoadModelGolden(kDir + GetParam());
  const std::vector<int32_t> seq = g.sequence();
  const std::vector<float> logits = AllLogits(*model, seq);
  const double err = RelativeToGolden(logits.data(), g.logits, 0, static_cast<int64_t>(seq.size()));
  std::printf("%s: max |logit - ref| / max |ref| = %.3g\n", GetParam().c_str(), err);
  EXPECT_LE(err, 1e-4);
}

TEST_P(Int4Golden, GreedyDecodeMatchesTransformers) {
  const auto model = Model::Load(kDir + GetParam());
  const ModelGolden g = LoadModelGolden(kDir + GetParam());
  EXPECT_EQ(GreedyAgainstGolden(*model, g, 1e-4), g.greedy);
}

// The fast path: int8 activations against the int4 codes (int4-q8; groups that are not whole
// q8 blocks keep the exact kernel). Bounds: docs/ACCURACY.md, int4 rows.
TEST_P(Int4Golden, FastPathStaysClose) {
  ModelOptions options;
  options.precision = Precision::kFast;
  const auto model = Model::Load(kDir + GetParam(), options);
  const ModelGolden g = LoadModelGolden(kDir + GetParam());
  const std::vector<int32_t> seq = g.sequence();
  const int64_t T = static_cast<int64_t>(seq.size()), V = model->vocab_size();
  const std::vector<float> logits = AllLogits(*model, seq);
  double max_kl = 0.0, sum_kl = 0.0;
  int64_t agree = 0;
  for (int64_t t = 0; t < T; ++t) {
    const double kl = KlDivergence(&g.logits.data[t * V], &logits[t * V], V);
    max_kl = std::max(max_kl, kl);
    sum_kl += kl;
    agree += ArgmaxOf(&g.logits.data[t * V], V) == ArgmaxOf(&logits[t * V], V);
  }
  const double mean_kl = sum_kl / T, top1 = static_cast<double>(agree) / T;
  std::printf("%s fast: mean KL %.3g, max KL %.3g, top-1 agreement %.3f\n", GetParam().c_str(), mean_kl, max_kl, top1);
  EXPECT_LE(mean_kl, 0.01);
  EXPECT_LE(max_kl, 0.05);
  EXPECT_GE(top1, 0.9);
}

// Uneven chunks through the cache give the logits of one pass bit for bit, on both paths (the
// int4 kernels are batch-invariant, so speculation stays lossless).
TEST_P(Int4Golden, ChunkedPrefillIsBatchInvariant) {
  for (Precision precision : {Precision::kExact, Precision::kFast}) {
    ModelOptions options;
    options.precision = precision;
    const auto model = Model::Load(kDir + GetParam(), options);
    SCOPED_TRACE(precision == Precision::kExact ? "exact" : "fast");
    ExpectChunkedPrefillMatchesOnePass(*model, LoadModelGolden(kDir + GetParam()).sequence(), KvType::kF32);
  }
}

INSTANTIATE_TEST_SUITE_P(Forms, Int4Golden,
                         ::testing::Values("llama_awq", "qwen2_awq", "llama_ct", "qwen3_ct", "qwen3_moe_ct"));

TEST(Int4Model, FormatsAndBytesFollowTheScheme) {
  const auto awq = Model::Load(kDir + "llama_awq");
  ASSERT_TRUE(awq->int4_scheme().has_value());
  EXPECT_EQ(awq->int4_scheme()->Describe(), "AutoAWQ GEMM int4, group 32");
  const auto ct = Model::Load(kDir + "qwen3_moe_ct");
  EXPECT_EQ(ct->int4_scheme()->Describe(), "compressed-tensors int4 (symmetric), one group per row");
  // int4 and int4-q8 hold the same layout: the same bytes per token on both paths.
  ModelOptions fast;
  fast.precision = Precision::kFast;
  EXPECT_EQ(Model::Load(kDir + "llama_awq", fast)->DecodeBytes(0), awq->DecodeBytes(0));
}

// ---- the unpacking of each stored form ----------------------------------------------------------

// Each module of layers.safetensors, loaded through the int4 format's exact path and multiplied by
// the identity (fmaf(w, 1, +0) = w, fmaf(w, 0, acc) = acc), gives back W^T bit for bit: the
// dequantized weights the script computed from the packages' own unpacking.
TEST(Int4Layers, UnpackedWeightsAreBitExact) {
  const WeightStore store = WeightStore::Open(kDir + "layers.safetensors");
  std::ifstream in(kDir + "layers.json");
  const json meta = json::parse(in);
  for (const auto& [name, m] : meta.items()) {
    SCOPED_TRACE(name);
    Int4Scheme scheme;
    scheme.layout = m.at("form") == "awq" ? Int4Layout::kAutoAwqGemm : Int4Layout::kPackQuantized;
    scheme.group_size = m.at("group").get<int64_t>();
    scheme.zero_points = !m.at("symmetric").get<bool>();
    scheme.targets = {"Linear"};
    const int64_t out = m.at("out"), k = m.at("in");
    const LinearSource source = ModuleSource(store, scheme, name);
    ASSERT_EQ(source.rows, out);
    ASSERT_EQ(source.cols, k);
    const auto w = LoadLinear(source, LinearFormat::kInt4, "layers.safetensors");
    std::vector<float> identity(k * k, 0.0f), y(k * out, -1.0f);
    for (int64_t c = 0; c < k; ++c) identity[c * k + c] = 1.0f;
    Q8Activations unused;
    Multiply(*w, identity.data(), static_cast<size_t>(k), unused, nullptr, y.data());
    const TensorView deq = store.Get(name + ".dequantized");
    const float* ref = reinterpret_cast<const float*>(deq.data);
    int64_t mismatches = 0;
    for (int64_t j = 0; j < out; ++j) {
      for (int64_t c = 0; c < k; ++c) mismatches += std::memcmp(&y[c * out + j], &ref[j * k + c], 4) != 0;
    }
    EXPECT_EQ(mismatches, 0);
    EXPECT_EQ(w->BytesPerMatrix(), out * k / 2.0 + out * k / static_cast<double>(scheme.GroupFor(k)) * 5.0);
  }
}

// ---- configs and malformed checkpoints ----------------------------------------------------------

// A copy of `model` with `edit` applied to its config.json and `tensors` (name -> replacement or
// removal) applied to its weights.
std::string EditedCopy(const std::string& model, const std::function<void(json&)>& edit,
                       const std::function<bool(const std::string&, TensorToWrite&)>& tensor_edit = nullptr) {
  // The copies live until the test program ends (tests read them after this returns); the
  // registry's destructor removes them then, so a run leaves the temporary folder as it found it.
  struct Copies {
    std::vector<std::string> dirs;
    ~Copies() {
      std::error_code ignored;
      for (const std::string& dir : dirs) fs::remove_all(dir, ignored);
    }
  };
  static Copies copies;
  const std::string out = ::testing::TempDir() + "int4_" + model + "_" + std::to_string(::getpid()) + "_" +
                          std::to_string(copies.dirs.size());
  copies.dirs.push_back(out);
  fs::remove_all(out);
  fs::create_directories(out);
  fs::copy_file(kDir + model + "/generation_config.json", out + "/generation_config.json");
  std::ifstream in(kDir + model + "/config.json");
  json config = json::parse(in);
  edit(config);
  std::ofstream(out + "/config.json") << config.dump(2);
  const WeightStore store = WeightStore::Open(kDir + model);
  std::vector<TensorToWrite> tensors;
  for (const std::string& name : store.names()) {
    const TensorView t = store.Get(name);
    TensorToWrite w{name, t.dtype(), t.shape(), [t](uint8_t* dst, size_t n) { std::memcpy(dst, t.data, n); }};
    if (tensor_edit && !tensor_edit(name, w)) continue;
    tensors.push_back(std::move(w));
  }
  WriteSafetensors(out + "/model.safetensors", tensors);
  return out;
}

std::string LoadError(const std::string& dir) {
  try {
    Model::Load(dir);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Int4Config, LegacyQuantConfigJsonLoadsTheSameModel) {
  // Older AutoAWQ repositories: no quantization_config, a quant_config.json with w_bit,
  // q_group_size and an upper-case version (quantization.md B.1).
  const std::string dir = EditedCopy("llama_awq", [](json& c) { c.erase("quantization_config"); });
  std::ofstream(dir + "/quant_config.json") << R"({"zero_point": true, "q_group_size": 32, "w_bit": 4, "version": "GEMM"})";
  const ModelGolden g = LoadModelGolden(kDir + "llama_awq");
  const auto a = Model::Load(dir), b = Model::Load(kDir + "llama_awq");
  EXPECT_EQ(AllLogits(*a, g.sequence()), AllLogits(*b, g.sequence()));
}

TEST(Int4Config, UnsupportedSchemesAreOneLineErrors) {
  auto with = [](const std::string& model, const std::function<void(json&)>& edit) {
    return LoadError(EditedCopy(model, edit));
  };
  EXPECT_NE(with("llama_awq", [](json& c) { c["quantization_config"]["version"] = "gemv"; }).find("version: 'gemv' is not supported"),
            std::string::npos);
  EXPECT_NE(with("llama_awq", [](json& c) { c["quantization_config"]["bits"] = 8; }).find("bits: 8 is not supported"),
            std::string::npos);
  EXPECT_NE(with("llama_ct", [](json& c) {
              c["quantization_config"]["config_groups"]["group_0"]["weights"]["actorder"] = "group";
            }).find("actorder"),
            std::string::npos);
  EXPECT_NE(with("llama_ct", [](json& c) {
              c["quantization_config"]["config_groups"]["group_0"]["input_activations"] = {{"num_bits", 8}};
            }).find("activation quantization is not supported"),
            std::string::npos);
  EXPECT_NE(with("llama_ct", [](json& c) { c["quantization_config"]["config_groups"]["group_0"]["weights"]["num_bits"] = 8; })
                .find("num_bits: must be 4"),
            std::string::npos);
  EXPECT_NE(with("llama_awq", [](json& c) { c["quantization_config"]["quant_method"] = "gptq"; }).find("'gptq' is not supported"),
            std::string::npos);
  // A group size that does not divide the input features names the tensor.
  const std::string bad_group = with("llama_awq", [](json& c) { c["quantization_config"]["group_size"] = 48; });
  EXPECT_NE(bad_group.find("model.layers.0.self_attn.q_proj.qweight': group_size 48 does not divide its 64 input features"),
            std::string::npos)
      << bad_group;
}

TEST(Int4Config, MalformedTensorsNameTheTensor) {
  const std::string missing = LoadError(EditedCopy("llama_awq", [](json&) {}, [](const std::string& name, TensorToWrite&) {
    return name != "model.layers.1.mlp.down_proj.qzeros";
  }));
  EXPECT_NE(missing.find("missing tensor 'model.layers.1.mlp.down_proj.qzeros'"), std::string::npos) << missing;
  const std::string shape = LoadError(EditedCopy("llama_ct", [](json&) {}, [](const std::string& name, TensorToWrite& t) {
    if (name == "model.layers.0.self_attn.k_proj.weight_scale") {
      t.shape = {t.shape[0] / 2, t.shape[1] * 2};
    }
    return true;
  }));
  EXPECT_NE(shape.find("tensor 'model.layers.0.self_attn.k_proj.weight_scale': shape"), std::string::npos) << shape;
  // A NaN scale cannot be held.
  const std::string nan = LoadError(EditedCopy("llama_awq", [](json&) {}, [](const std::string& name, TensorToWrite& t) {
    if (name == "model.layers.0.mlp.gate_proj.scales") {
      const TensorFiller inner = t.fill;
      t.fill = [inner](uint8_t* dst, size_t n) {
        inner(dst, n);
        const uint16_t nan16 = 0x7E00;
        std::memcpy(dst + 6, &nan16, 2);
      };
    }
    return true;
  }));
  EXPECT_NE(nan.find("model.layers.0.mlp.gate_proj"), std::string::npos) << nan;
  EXPECT_NE(nan.find("NaN or infinite scale"), std::string::npos) << nan;
}

}  // namespace
}  // namespace tessera
