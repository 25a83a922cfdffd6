// Perplexity in fixed-length windows (engine/perplexity.h): against the transformers float32
// logits of the golden checkpoints (one window over the whole sequence: the mean NLL matches to
// 1e-4 relative on the exact path), the windowing itself (each scored token's NLL equals the last
// row of a forward over exactly the window that scores it), and its errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <span>
#include <vector>

#include "engine/perplexity.h"
#include "io/npy.h"
#include "model/model.h"
#include "test_util.h"

namespace tessera {
namespace {

const std::string kGoldenDir = std::string(TESSERA_TEST_DATA) + "/gpt_oss_golden/";

TEST(Perplexity, MatchesTransformersFloat32OnTheGoldens) {
  for (const char* name : {"tiny_a", "tiny_b", "tiny_c"}) {
    SCOPED_TRACE(name);
    const std::vector<int32_t> seq = GoldenSequence(name);
    const NpyArray ref = ReadNpyF32(kGoldenDir + name + "/logits.npy");  // [T, V] of seq
    const int64_t T = static_cast<int64_t>(seq.size()), V = ref.shape[1];
    double want = 0.0;
    for (int64_t t = 1; t < T; ++t) want += TokenNll(std::span<const float>(ref.data).subspan((t - 1) * V, V), seq[t]);
    want /= static_cast<double>(T - 1);
    const auto model = Model::Load(kGoldenDir + name);
    const PerplexityResult got = EvaluatePerplexity(*model, seq, {.context = T});
    std::printf("perplexity %s: tessera exact %.9g, transformers float32 %.9g (mean NLL relative difference %.2g)\n",
                name, got.perplexity(), std::exp(want), std::fabs(got.mean_nll - want) / want);
    EXPECT_EQ(got.windows, 1);
    EXPECT_EQ(got.scored, T - 1);
    EXPECT_NEAR(got.mean_nll, want, 1e-4 * want);
    EXPECT_NEAR(got.perplexity(), std::exp(want), 1e-4 * std::exp(want));
    EXPECT_GT(got.nll_stderr, 0.0);
  }
}

// Every scored token's NLL is that of a forward over the window that scores it, from its start to
// the token (the model is batch-invariant, so that is the window's own row); the mean of those
// is the reported mean, and no token is scored twice.
TEST(Perplexity, WindowsScoreEachTokenOnceWithTheirOwnContext) {
  const auto model = Model::Load(kGoldenDir + "tiny_a", ModelOptions{.precision = Precision::kFast});
  const std::vector<int32_t> seq = GoldenSequence("tiny_a");
  const int64_t n = static_cast<int64_t>(seq.size());
  for (const auto& [context, stride] : std::vector<std::pair<int64_t, int64_t>>{{16, 8}, {16, 16}, {24, 5}, {7, 1}}) {
    SCOPED_TRACE(testing::Message() << "context " << context << " stride " << stride);
    std::vector<int64_t> seen;
    const PerplexityResult got = EvaluatePerplexity(*model, seq, {.context = context, .stride = stride});
    double sum = 0.0;
    int64_t scored = 0, scored_end = 1;
    std::vector<float> logits;
    for (int64_t begin = 0;; begin += stride) {
      const int64_t end = std::min(begin + context, n);
      for (int64_t t = std::max(scored_end, begin + 1); t < end; ++t) {
        KvCache cache(model->cache_config(), context, KvType::kF32);
        model->Forward(std::span<const int32_t>(seq).subspan(begin, t - begin), 0, cache, LogitsMode::kLast, logits);
        sum += TokenNll(logits, seq[t]);
        ++scored;
      }
      scored_end = std::max(scored_end, end);
      if (end == n) break;
    }
    EXPECT_EQ(got.scored, scored);
    EXPECT_EQ(got.scored, stride < context ? n - 1 : n - got.windows);
    EXPECT_NEAR(got.mean_nll, sum / static_cast<double>(scored), 1e-9 * got.mean_nll);
  }
}

// Against a reference model: the model against itself gives KL 0 and full agreement; the fast
// path against the exact one gives the mean over the scored positions of RowKl, computed here
// from one forward per window of each, and RowKl itself is KL(p || q) in closed form.
TEST(Perplexity, ComparesWithAReferenceModelOverTheSameWindows) {
  const std::vector<float> p = {0.0f, 1.0f, -2.0f}, q = {0.5f, 0.5f, 0.0f};
  const std::vector<double> pd(p.begin(), p.end()), qd(q.begin(), q.end());
  double want = 0.0, zp = 0.0, zq = 0.0;
  for (int i = 0; i < 3; ++i) zp += std::exp(pd[i]), zq += std::exp(qd[i]);
  for (int i = 0; i < 3; ++i) want += std::exp(pd[i]) / zp * ((pd[i] - std::log(zp)) - (qd[i] - std::log(zq)));
  EXPECT_NEAR(RowKl(p, q), want, 1e-12);
  EXPECT_EQ(RowKl(p, p), 0.0);

  const auto exact = Model::Load(kGoldenDir + "tiny_a");
  const auto fast = Model::Load(kGoldenDir + "tiny_a", ModelOptions{.precision = Precision::kFast});
  const std::vector<int32_t> seq = GoldenSequence("tiny_a");
  const PerplexityResult self = EvaluatePerplexity(*exact, seq, {.context = 16, .reference = exact.get()});
  EXPECT_EQ(self.mean_kl, 0.0);
  EXPECT_EQ(self.top1_agreement, 1.0);
  const PerplexityResult got = EvaluatePerplexity(*fast, seq, {.context = 16, .stride = 8, .reference = exact.get()});
  const int64_t n = static_cast<int64_t>(seq.size()), V = exact->vocab_size();
  double kl = 0.0, max_kl = 0.0;
  int64_t scored = 0, agree = 0, scored_end = 1;
  std::vector<float> a, b;
  for (int64_t begin = 0;; begin += 8) {
    const int64_t end = std::min<int64_t>(begin + 16, n);
    KvCache ca(exact->cache_config(), 16, KvType::kF32), cb(fast->cache_config(), 16, KvType::kF32);
    exact->Forward(std::span<const int32_t>(seq).subspan(begin, end - begin), 0, ca, LogitsMode::kAll, a);
    fast->Forward(std::span<const int32_t>(seq).subspan(begin, end - begin), 0, cb, LogitsMode::kAll, b);
    for (int64_t t = std::max(scored_end, begin + 1); t < end; ++t) {
      const std::span<const float> ra = std::span<const float>(a).subspan((t - 1 - begin) * V, V);
      const std::span<const float> rb = std::span<const float>(b).subspan((t - 1 - begin) * V, V);
      const double d = RowKl(ra, rb);
      kl += d;
      max_kl = std::max(max_kl, d);
      agree += ArgmaxOf(ra.data(), V) == ArgmaxOf(rb.data(), V);
      ++scored;
    }
    scored_end = std::max(scored_end, end);
    if (end == n) break;
  }
  ASSERT_EQ(got.scored, scored);
  EXPECT_GT(got.mean_kl, 0.0);
  EXPECT_NEAR(got.mean_kl, kl / static_cast<double>(scored), 1e-12);
  EXPECT_EQ(got.max_kl, max_kl);
  EXPECT_EQ(got.top1_agreement, static_cast<double>(agree) / static_cast<double>(scored));
}

TEST(Perplexity, BadOptionsAreOneLineErrors) {
  const auto model = Model::Load(kGoldenDir + "tiny_a");
  const std::vector<int32_t> seq = GoldenSequence("tiny_a");
  EXPECT_NE(ErrorOf([&] { EvaluatePerplexity(*model, std::span(seq).first(1), {.context = 8}); }).find("at least 2 tokens"),
            std::string::npos);
  EXPECT_NE(ErrorOf([&] { EvaluatePerplexity(*model, seq, {.context = 8, .stride = 9}); }).find("stride 9"),
            std::string::npos);
  EXPECT_NE(ErrorOf([&] { EvaluatePerplexity(*model, seq, {.context = 1 << 20}); }).find("max_position_embeddings"),
            std::string::npos);
}

}  // namespace
}  // namespace tessera
