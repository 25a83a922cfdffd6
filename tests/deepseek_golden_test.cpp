// DeepSeek-V2 / V3 (MLA + DeepSeekMoE) against Hugging Face transformers float32 eager goldens
// (issue 29; ../shared/reference/deepseek.md §2-5, §9).
//
// tests/data/deepseek_golden/<model>/ holds a tiny random checkpoint with logits.npy and
// golden.json made by tools/make_deepseek_golden.py (transformers 4.57.1, float32, eager; the V2
// references patched with the YaRN mscale² softmax factor that 4.57.1's V2 class leaves out and
// DeepSeek's code applies, deepseek.md §3; cross-checked there against a float64 forward pass in
// the absorbed form). tests/data/deepseek_golden/README.md lists what each model covers.
// Acceptance as for every family: max |logit - ref| <= 1e-4 max |ref| and identical greedy
// continuations on the exact path.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "io/npy.h"
#include "model/model.h"
#include "golden_checks.h"
#include "test_util.h"

namespace tessera {
namespace {

const std::string kDir = std::string(TESSERA_TEST_DATA) + "/deepseek_golden/";

class DeepseekGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(DeepseekGolden, PrefillLogitsMatchTransformers) {
  const auto model = Model::Load(kDir + GetParam());
  const ModelGolden g = LoadModelGolden(kDir + GetParam());
  const std::vector<int32_t> seq = g.sequence();
  ASSERT_EQ(g.logits.shape[0], static_cast<int64_t>(seq.size()));
  ASSERT_EQ(g.logits.shape[1], model->vocab_size());
  KvCache cache(model->cache_config(), static_cast<int64_t>(seq.size()), KvType::kF32);
  std::vector<float> logits;
  model->Forward(seq, 0, cache, LogitsMode::kAll, logits);
  const double err = RelativeToGolden(logits.data(), g.logits, 0, static_cast<int64_t>(seq.size()));
  std::printf("%s (%s): max |logit - ref| / max |ref| = %.3g over %zu positions\n", GetParam().c_str(),
              model->config().model_type.c_str(), err, seq.size());
  EXPECT_LE(err, 1e-4);
}

// Token by token through the latent cache (the absorbed decode) from the golden's prompt.
TEST_P(DeepseekGolden, GreedyDecodeMatchesTransformers) {
  const auto model = Model::Load(kDir + GetParam());
  const ModelGolden g = LoadModelGolden(kDir + GetParam());
  EXPECT_EQ(GreedyAgainstGolden(*model, g, 1e-4), g.greedy);
}

TEST_P(DeepseekGolden, ChunkedPrefillIsBatchInvariant) {
  const auto model = Model::Load(kDir + GetParam());
  const std::vector<int32_t> seq = LoadModelGolden(kDir + GetParam()).sequence();
  for (KvType type : {KvType::kF32, KvType::kBF16, KvType::kInt8}) ExpectChunkedPrefillMatchesOnePass(*model, seq, type);
}

// The naive form (decompressed per-head keys and values, MlaForm::kNaive) against the absorbed
// one (the 1e-5) and against transformers, in one pass and token by token.
TEST_P(DeepseekGolden, NaiveFormAgreesWithAbsorbed) {
  ModelOptions naive;
  naive.mla = MlaForm::kNaive;
  const auto absorbed_model = Model::Load(kDir + GetParam()), naive_model = Model::Load(kDir + GetParam(), naive);
  const ModelGolden g = LoadModelGolden(kDir + GetParam());
  const std::vector<int32_t> seq = g.sequence();
  const int64_t T = static_cast<int64_t>(seq.size());
  std::vector<float> a, n;
  KvCache ca(absorbed_model->cache_config(), T, KvType::kF32), cn(naive_model->cache_config(), T, KvType::kF32);
  absorbed_model->Forward(seq, 0, ca, LogitsMode::kAll, a);
  naive_model->Forward(seq, 0, cn, LogitsMode::kAll, n);
  double scale = 0.0, diff = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    scale = std::max(scale, static_cast<double>(std::fabs(a[i])));
    diff = std::max(diff, static_cast<double>(std::fabs(a[i] - n[i])));
  }
  std::printf("%s: naive vs absorbed max |diff| / max |logit| = %.3g\n", GetParam().c_str(), diff / scale);
  EXPECT_LE(diff / scale, 1e-5);
  EXPECT_LE(RelativeToGolden(n.data(), g.logits, 0, T), 1e-4);
  EXPECT_EQ(GreedyAgainstGolden(*naive_model, g, 1e-4), g.greedy);
}

INSTANTIATE_TEST_SUITE_P(Tiny, DeepseekGolden, ::testing::Values("v2_a", "v2_b", "v3_a", "v3_b", "v3_long", "v3_fp8"));

// The latent cache holds kv_lora_rank + qk_rope_head_dim values per position and layer, shared by
// every head (deepseek.md §4): 40 floats here against 4 heads x (24 + 16) for per-head K and V.
TEST(DeepseekCache, HoldsOneLatentRowPerPosition) {
  const auto model = Model::Load(kDir + "v3_a");
  const ModelConfig& c = model->cache_config();
  EXPECT_TRUE(KvCache(c, 64, KvType::kF32).values_are_keys());
  EXPECT_EQ(KvCache::BytesFor(c, 100, KvType::kF32), 3u * 100 * 40 * 4);
  EXPECT_EQ(KvCache::BytesFor(c, 100, KvType::kBF16), 3u * 100 * 40 * 2);
  // The decode byte model counts the same rows.
  EXPECT_DOUBLE_EQ(model->DecodeBytes(99, KvType::kBF16) - model->DecodeBytes(99), 3.0 * 100 * 40 * 2);
}

}  // namespace
}  // namespace tessera
