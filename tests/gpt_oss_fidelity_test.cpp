// Accuracy cost of the fast paths (model/model.h Precision::kFast, DenseWeights::kInt8)
// against the Hugging Face float32 goldens, and the properties the fast path must keep.
//
// Measured per golden model (tests/data/gpt_oss_golden, see gpt_oss_golden_test.cpp), teacher-
// forced over prompt + golden greedy tokens: max |logit - ref| / max |ref|, the mean KL(ref || fast)
// of the next-token distributions, top-1 agreement; and free-running greedy decoding of 32 tokens
// from the prompt: how many match the golden continuation. The bounds asserted here are the ones
// docs/ACCURACY.md documents: the largest of the three models' measured values x 1.25 (relative
// error) or x 1.5 (KL), the same rule as the accuracy sweep. They hold for these three
// checkpoints only; the distributions over 72 other tiny checkpoints of two weight-statistics
// families, and their bounds, are in gpt_oss_accuracy_sweep_test.cpp. The exact path is held to
// 1e-4 by gpt_oss_golden_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <span>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/npy.h"
#include "model/model.h"
#include "test_util.h"

namespace tessera {
namespace {

const std::string kGoldenDir = std::string(TESSERA_TEST_DATA) + "/gpt_oss_golden/";

struct FidelityCase {
  const char* model;
  DenseWeights dense;
};

std::string CaseName(const ::testing::TestParamInfo<FidelityCase>& info) {
  return std::string(info.param.model) + (info.param.dense == DenseWeights::kInt8 ? "_int8" : "_bf16");
}

class GptOssFidelity : public ::testing::TestWithParam<FidelityCase> {};

int32_t Argmax(const float* v, int64_t n) { return static_cast<int32_t>(std::max_element(v, v + n) - v); }


TEST_P(GptOssFidelity, FastPathStaysWithinDocumentedBounds) {
  const FidelityCase fc = GetParam();
  std::ifstream in(kGoldenDir + fc.model + "/golden.json");
  const auto j = nlohmann::json::parse(in);
  const auto prompt = j.at("prompt_ids").get<std::vector<int32_t>>();
  const auto greedy = j.at("greedy_ids").get<std::vector<int32_t>>();
  const NpyArray ref = ReadNpyF32(kGoldenDir + fc.model + "/logits.npy");
  const auto model = Model::Load(kGoldenDir + fc.model, ModelOptions{.precision = Precision::kFast, .dense = fc.dense});
  const int64_t V = model->vocab_size();

  std::vector<int32_t> seq = prompt;
  seq.insert(seq.end(), greedy.begin(), greedy.end());
  const int64_t T = static_cast<int64_t>(seq.size());
  KvCache cache(model->config(), T, KvType::kF32);
  std::vector<float> logits;
  model->Forward(seq, 0, cache, LogitsMode::kAll, logits);
  double max_ref = 0.0, max_err = 0.0, kl_sum = 0.0;
  int64_t top1 = 0;
  for (float r : ref.data) max_ref = std::max(max_ref, static_cast<double>(std::fabs(r)));
  for (int64_t t = 0; t < T; ++t) {
    const float* got = &logits[t * V];
    const float* want = &ref.data[t * V];
    for (int64_t v = 0; v < V; ++v) max_err = std::max(max_err, static_cast<double>(std::fabs(got[v] - want[v])));
    kl_sum += KlDivergence(want, got, V);
    top1 += Argmax(got, V) == Argmax(want, V);
  }
  const double rel = max_err / max_ref, kl = kl_sum / T, agree = static_cast<double>(top1) / T;

  // Free-running greedy continuation.
  const int64_t P = static_cast<int64_t>(prompt.size()), N = static_cast<int64_t>(greedy.size());
  KvCache run(model->config(), P + N, KvType::kF32);
  model->Forward(prompt, 0, run, LogitsMode::kLast, logits);
  int64_t prefix = 0;
  bool diverged = false;
  double margin = 0.0;  // golden logit margin of the golden token over ours where they first differ
  for (int64_t step = 0; step < N; ++step) {
    const int32_t next = Argmax(logits.data(), V);
    if (next != greedy[step] && !diverged) {
      diverged = true;
      const float* row = &ref.data[(P - 1 + step) * V];  // same history up to here
      margin = row[greedy[step]] - row[next];
    }
    if (!diverged) ++prefix;
    const int32_t tok[1] = {next};
    if (step + 1 < N) model->Forward(tok, P + step, run, LogitsMode::kLast, logits);
  }
  std::printf("fidelity %s dense=%s: max|dlogit|/max|ref| %.3g, mean KL %.3g, top-1 agreement %.3f, "
              "greedy prefix %lld/%lld (golden margin where it differs %.3g = %.3g of max|ref|)\n",
              fc.model, fc.dense == DenseWeights::kInt8 ? "int8" : "bf16", rel, kl, agree,
              static_cast<long long>(prefix), static_cast<long long>(N), margin, margin / max_ref);
  RecordProperty("relative_logit_error", std::to_string(rel));
  RecordProperty("mean_kl", std::to_string(kl));
  RecordProperty("greedy_prefix", std::to_string(prefix));

  // docs/ACCURACY.md bounds for the tiny golden models: measured maxima over the three (bf16:
  // 0.022, 7.7e-6; int8: 0.033, 1.15e-4) x 1.25 / x 1.5; top-1 measured minima 1.000 and 0.972.
  // Greedy decoding may only leave the golden path where the golden's own margin is within the
  // logit error just measured, i.e. at a near-tie.
  const bool int8 = fc.dense == DenseWeights::kInt8;
  EXPECT_LE(rel, int8 ? 0.042 : 0.028);
  EXPECT_LE(kl, int8 ? 1.8e-4 : 1.2e-5);
  EXPECT_GE(agree, int8 ? 0.95 : 0.99);
  if (!int8) {
    EXPECT_EQ(prefix, N);
  }
  if (diverged) {
    EXPECT_LE(margin, 2.0 * max_err) << "diverged at a clear (not near-tie) step";
  }
}

INSTANTIATE_TEST_SUITE_P(TinyModels, GptOssFidelity,
                         ::testing::Values(FidelityCase{"tiny_a", DenseWeights::kBf16},
                                           FidelityCase{"tiny_b", DenseWeights::kBf16},
                                           FidelityCase{"tiny_c", DenseWeights::kBf16},
                                           FidelityCase{"tiny_a", DenseWeights::kInt8},
                                           FidelityCase{"tiny_b", DenseWeights::kInt8},
                                           FidelityCase{"tiny_c", DenseWeights::kInt8}),
                         CaseName);

// The fast path keeps batch invariance (kernels/q8.h): prefill in one call, in chunks, and token
// by token give bit-identical logits, which lossless speculative decoding relies on.
TEST(GptOssFastPath, ChunkedPrefillIsBatchInvariant) {
  for (DenseWeights dense : {DenseWeights::kBf16, DenseWeights::kInt8}) {
    const auto model = Model::Load(kGoldenDir + "tiny_b", ModelOptions{.precision = Precision::kFast, .dense = dense});
    std::ifstream in(kGoldenDir + "tiny_b/golden.json");
    const auto prompt = nlohmann::json::parse(in).at("prompt_ids").get<std::vector<int32_t>>();
    const int64_t T = static_cast<int64_t>(prompt.size()), V = model->vocab_size();
    KvCache one(model->config(), T, KvType::kBF16), chunked(model->config(), T, KvType::kBF16);
    std::vector<float> all, part;
    model->Forward(prompt, 0, one, LogitsMode::kAll, all);
    for (int64_t pos = 0; pos < T;) {
      const int64_t n = std::min<int64_t>(pos < 8 ? 1 : 5, T - pos);
      model->Forward(std::span<const int32_t>(prompt).subspan(pos, n), pos, chunked, LogitsMode::kAll, part);
      ASSERT_EQ(0, std::memcmp(part.data(), &all[pos * V], n * V * sizeof(float))) << "position " << pos;
      pos += n;
    }
  }
}

TEST(GptOssFastPath, Int8DenseNeedsTheFastPrecision) {
  try {
    Model::Load(kGoldenDir + "tiny_a", ModelOptions{.precision = Precision::kExact, .dense = DenseWeights::kInt8});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("int8 dense weights need the fast precision"), std::string::npos);
  }
}

}  // namespace
}  // namespace tessera
