// Checks shared by the golden tests of every architecture (gpt_oss_golden_test.cpp,
// dense_golden_test.cpp): the model against a ModelGolden (test_util.h).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "model/model.h"
#include "test_util.h"

namespace tessera {

// Greedy decoding token by token from the golden's prompt: every step's logits within `tolerance`
// (relative to max |ref|) of the golden row, and the tokens it picks; returns them.
inline std::vector<int32_t> GreedyAgainstGolden(const Model& model, const ModelGolden& g, double tolerance) {
  const int64_t V = model.vocab_size(), P = static_cast<int64_t>(g.prompt.size());
  // Small rollback slack: decoding goes one token at a time through the sliding rings.
  KvCache cache(model.cache_config(), P + static_cast<int64_t>(g.greedy.size()), KvType::kF32, /*rollback=*/2);
  std::vector<float> logits;
  model.Forward(g.prompt, 0, cache, LogitsMode::kLast, logits);
  std::vector<int32_t> generated;
  for (size_t step = 0; step < g.greedy.size(); ++step) {
    EXPECT_LE(RelativeToGolden(logits.data(), g.logits, P - 1 + static_cast<int64_t>(step), 1), tolerance)
        << "step " << step;
    const int32_t next = ArgmaxOf(logits.data(), V);
    generated.push_back(next);
    const int32_t token[1] = {next};
    model.Forward(token, P + static_cast<int64_t>(step), cache, LogitsMode::kLast, logits);
  }
  return generated;
}

// One prefill of the golden's whole sequence (prompt + greedy continuation) on an f32 cache: the
// largest |logit - ref| relative to max |ref| over every position (printed with `label`).
inline double PrefillErrorAgainstGolden(const Model& model, const ModelGolden& g, const std::string& label) {
  const std::vector<int32_t> seq = g.sequence();
  EXPECT_EQ(g.logits.shape[0], static_cast<int64_t>(seq.size()));
  EXPECT_EQ(g.logits.shape[1], model.vocab_size());
  KvCache cache(model.cache_config(), static_cast<int64_t>(seq.size()), KvType::kF32);
  std::vector<float> logits;
  model.Forward(seq, 0, cache, LogitsMode::kAll, logits);
  const double err = RelativeToGolden(logits.data(), g.logits, 0, static_cast<int64_t>(seq.size()));
  std::printf("%s (%s): max |logit - ref| / max |ref| = %.3g over %zu positions\n", label.c_str(),
              model.config().model_type.c_str(), err, seq.size());
  return err;
}

// The golden's sequence in one pass on a cache of `type`, against the golden logits: mean and
// largest KL(ref || model) over the positions and the top-1 agreement (printed with `label`).
struct GoldenDistance {
  double mean_kl = 0.0, max_kl = 0.0, top1 = 0.0;
};
inline GoldenDistance DistanceToGolden(const Model& model, const ModelGolden& g, KvType type, const std::string& label) {
  const std::vector<int32_t> seq = g.sequence();
  const int64_t T = static_cast<int64_t>(seq.size()), V = model.vocab_size();
  KvCache cache(model.cache_config(), T, type);
  std::vector<float> logits;
  model.Forward(seq, 0, cache, LogitsMode::kAll, logits);
  GoldenDistance d;
  int64_t agree = 0;
  for (int64_t t = 0; t < T; ++t) {
    const double kl = KlDivergence(&g.logits.data[t * V], &logits[t * V], V);
    d.max_kl = std::max(d.max_kl, kl);
    d.mean_kl += kl / static_cast<double>(T);
    agree += ArgmaxOf(&g.logits.data[t * V], V) == ArgmaxOf(&logits[t * V], V);
  }
  d.top1 = static_cast<double>(agree) / static_cast<double>(T);
  std::printf("%s fast int8, %s KV: mean KL %.3g, max KL %.3g, top-1 agreement %.3f\n", label.c_str(),
              KvTypeName(type), d.mean_kl, d.max_kl, d.top1);
  return d;
}

// The sequence through the cache in uneven chunks (1, 7, 2, 19 tokens, then the rest) gives the
// logits of one pass bit for bit, with a cache of `type` (what speculation and chunked prefill
// rely on).
inline void ExpectChunkedPrefillMatchesOnePass(const Model& model, const std::vector<int32_t>& seq, KvType type) {
  const int64_t T = static_cast<int64_t>(seq.size());
  KvCache one(model.cache_config(), T, type), chunked(model.cache_config(), T, type);
  std::vector<float> all, part, stitched;
  model.Forward(seq, 0, one, LogitsMode::kAll, all);
  int64_t pos = 0;
  for (int64_t len : {1, 7, 2, 19, 1000}) {
    const int64_t n = std::min(len, T - pos);
    if (n <= 0) break;
    model.Forward(std::span<const int32_t>(seq).subspan(pos, n), pos, chunked, LogitsMode::kAll, part);
    stitched.insert(stitched.end(), part.begin(), part.end());
    pos += n;
  }
  ASSERT_EQ(stitched.size(), all.size());
  EXPECT_TRUE(std::equal(all.begin(), all.end(), stitched.begin())) << KvTypeName(type);
}

}  // namespace tessera
