// Sampler: greedy, temperature, top-k / top-p / min-p with Hugging Face semantics and order
// (transformers generation/logits_process.py), the seeded generator, the sampling frequencies,
// and the stop condition (generation_config.json eos ids, /work/shared/reference/gpt-oss.md §1.3).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "engine/sampler.h"
#include "io/config.h"

namespace tessera {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

SamplingParams Params(float temperature, int64_t top_k = 0, float top_p = 1.0f, float min_p = 0.0f,
                      uint64_t seed = 0) {
  SamplingParams p;
  p.temperature = temperature;
  p.top_k = top_k;
  p.top_p = top_p;
  p.min_p = min_p;
  p.seed = seed;
  return p;
}

std::vector<float> RandomLogits(size_t n, uint64_t seed, float scale = 2.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> logits(n);
  for (float& v : logits) v = normal(rng);
  return logits;
}

// Logits whose softmax is `probs` (at temperature 1).
std::vector<float> LogitsOf(const std::vector<double>& probs) {
  std::vector<float> logits;
  for (double p : probs) logits.push_back(p > 0 ? static_cast<float>(std::log(p)) : -kInf);
  return logits;
}

std::set<int32_t> Ids(const std::vector<TokenProb>& dist) {
  std::set<int32_t> ids;
  for (const TokenProb& t : dist) ids.insert(t.id);
  return ids;
}

// The plain reference of the filter chain, written from HF's warpers: full sorts, no partial
// selection, no histogram, no vectors. Weights use SamplerExp like the sampler, so the kept sets
// must agree exactly (sums are taken in another order: probabilities agree to rounding).
std::vector<TokenProb> ReferenceDistribution(const std::vector<float>& logits, const SamplingParams& p) {
  const size_t n = logits.size();
  const float max = *std::max_element(logits.begin(), logits.end());
  if (p.temperature == 0.0f) {
    return {{static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin()), 1.0}};
  }
  struct C {
    int32_t id;
    float w;
  };
  // Top-k: sort all logits, the k-th is the threshold.
  float threshold = -kInf;
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < n) {
    std::vector<float> sorted = logits;
    std::sort(sorted.begin(), sorted.end(), std::greater<float>());
    threshold = sorted[static_cast<size_t>(p.top_k) - 1];
  }
  std::vector<C> c;
  for (size_t i = 0; i < n; ++i) {
    const float w = SamplerExp((logits[i] - max) / p.temperature);
    if (logits[i] >= threshold && w > 0.0f) c.push_back({static_cast<int32_t>(i), w});
  }
  if (p.top_p < 1.0f) {
    double total = 0;
    for (const C& x : c) total += x.w;
    std::sort(c.begin(), c.end(), [](const C& a, const C& b) { return a.w > b.w || (a.w == b.w && a.id < b.id); });
    double before = 0;
    size_t keep = 0;
    while (keep < c.size() && before < p.top_p * total) before += c[keep++].w;
    c.resize(std::max<size_t>(keep, 1));
    std::sort(c.begin(), c.end(), [](const C& a, const C& b) { return a.id < b.id; });
  }
  if (p.min_p > 0.0f) {
    float wmax = 0;
    for (const C& x : c) wmax = std::max(wmax, x.w);
    std::vector<C> kept;
    for (const C& x : c) {
      if (static_cast<double>(x.w) >= static_cast<double>(p.min_p) * wmax) kept.push_back(x);
    }
    c = kept;
  }
  double total = 0;
  for (const C& x : c) total += x.w;
  std::vector<TokenProb> out;
  for (const C& x : c) out.push_back({x.id, x.w / total});
  return out;
}

// ---- generator ---------------------------------------------------------------------------------

// Published xoshiro256** outputs for the state {1, 2, 3, 4} (the reference C code's test vector,
// also rand_xoshiro's), SplitMix64 from 0, and xoshiro256** seeded from 42 through SplitMix64.
TEST(SamplerRng, MatchesPublishedVectors) {
  Xoshiro256 rng = Xoshiro256::FromState(1, 2, 3, 4);
  const uint64_t expected[] = {11520u,
                               0u,
                               1509978240u,
                               1215971899390074240u,
                               1216172134540287360u,
                               607988272756665600u,
                               16172922978634559625u,
                               8476171486693032832u,
                               10595114339597558777u,
                               2904607092377533576u};
  for (uint64_t e : expected) EXPECT_EQ(rng.Next(), e);
  uint64_t state = 0;
  EXPECT_EQ(SplitMix64(state), 0xE220A8397B1DCDAFull);
  EXPECT_EQ(SplitMix64(state), 0x6E789E6AA1B965F4ull);
  EXPECT_EQ(SplitMix64(state), 0x06C45D188009454Full);
  Xoshiro256 seeded(42);
  EXPECT_EQ(seeded.Next(), 1546998764402558742ull);
  EXPECT_EQ(seeded.Next(), 6990951692964543102ull);
  EXPECT_EQ(seeded.Next(), 12544586762248559009ull);
  Xoshiro256 unit(7);
  for (int i = 0; i < 1000; ++i) {
    const double u = unit.NextDouble();
    EXPECT_GE(u, 0.0);
    EXPECT_LT(u, 1.0);
  }
}

TEST(SamplerExp, MatchesExpWithinTwoUlp) {
  EXPECT_EQ(SamplerExp(0.0f), 1.0f);
  EXPECT_EQ(SamplerExp(-0.0f), 1.0f);
  EXPECT_EQ(SamplerExp(-kInf), 0.0f);
  EXPECT_EQ(SamplerExp(-87.34f), 0.0f);
  EXPECT_EQ(SamplerExp(-1000.0f), 0.0f);
  EXPECT_GT(SamplerExp(-87.33f), 0.0f);
  double worst = 0;
  float prev = 0.0f;
  for (float x = -87.33654f; x <= 0.0f; x += 0.000731f) {
    const double ref = std::exp(static_cast<double>(x));
    const float got = SamplerExp(x);
    const double ulp = std::nextafter(static_cast<float>(ref), kInf) - static_cast<float>(ref);
    worst = std::max(worst, std::fabs(got - ref) / ulp);
    EXPECT_GE(got, prev) << x;  // monotonic on this grid
    prev = got;
  }
  EXPECT_LT(worst, 2.0);
}

// ---- greedy ------------------------------------------------------------------------------------

TEST(Sampler, GreedyIsArgmaxWithLowestIdOnTies) {
  EXPECT_EQ(Argmax(std::vector<float>{1, 3, 2}), 1);
  EXPECT_EQ(Argmax(std::vector<float>{5, 5, 5}), 0);
  EXPECT_EQ(Argmax(std::vector<float>{-kInf, 2, 7, 7, 1}), 2);
  EXPECT_EQ(Argmax(std::vector<float>{-kInf, -kInf, -1e30f}), 2);
  EXPECT_EQ(Argmax(std::vector<float>{-3}), 0);
  Sampler greedy(Params(0.0f, 5, 0.5f, 0.5f, 99));
  for (uint64_t seed = 0; seed < 20; ++seed) {
    std::vector<float> logits = RandomLogits(1001 + seed, seed);
    const int32_t best = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    EXPECT_EQ(greedy.Sample(logits), best);
    EXPECT_EQ(Argmax(logits), best);
    logits.push_back(logits[best]);  // a tie after it: still the first
    EXPECT_EQ(greedy.Sample(logits), best);
    EXPECT_EQ(greedy.Distribution(logits), (std::vector<TokenProb>{{best, 1.0}}));
  }
}

TEST(Sampler, BadLogitsAreClearErrors) {
  Sampler sampler(Params(1.0f));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (Sampler* s : {&sampler}) {
    try {
      s->Sample(std::vector<float>{0, 1, nan, 2});
      FAIL();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("logit 2 is NaN"), std::string::npos) << e.what();
    }
    EXPECT_THROW(s->Sample(std::vector<float>{0, kInf}), Error);
    EXPECT_THROW(s->Sample(std::vector<float>{-kInf, -kInf}), Error);
    EXPECT_THROW(s->Sample(std::vector<float>{}), Error);
    EXPECT_THROW(s->Distribution(std::vector<float>{nan}), Error);
  }
  EXPECT_THROW(Argmax(std::vector<float>{nan, 1}), Error);
  EXPECT_THROW(Argmax(std::vector<float>{}), Error);
  Sampler greedy(Params(0.0f));
  EXPECT_THROW(greedy.Sample(std::vector<float>{1, nan}), Error);
}

TEST(Sampler, InvalidParamsAreClearErrors) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const SamplingParams& p :
       {Params(-0.5f), Params(nan), Params(kInf), Params(1.0f, -1), Params(1.0f, 0, 0.0f),
        Params(1.0f, 0, -0.1f), Params(1.0f, 0, 1.5f), Params(1.0f, 0, nan), Params(1.0f, 0, 1.0f, -0.1f),
        Params(1.0f, 0, 1.0f, 1.1f), Params(1.0f, 0, 1.0f, nan)}) {
    EXPECT_THROW(ValidateSamplingParams(p), Error);
    EXPECT_THROW(Sampler{p}, Error);
  }
  try {
    Sampler{Params(1.0f, 0, 2.0f)};
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("top_p"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(ValidateSamplingParams(Params(0.0f, 0, 1.0f, 0.0f)));
  EXPECT_NO_THROW(ValidateSamplingParams(Params(2.0f, 201088, 1e-6f, 1.0f)));
}

// ---- filters -----------------------------------------------------------------------------------

TEST(Sampler, LowTemperatureTendsToGreedy) {
  for (uint64_t seed = 0; seed < 10; ++seed) {
    const std::vector<float> logits = RandomLogits(5000, seed);
    const int32_t best = Argmax(logits);
    std::vector<float> sorted = logits;
    std::sort(sorted.begin(), sorted.end(), std::greater<float>());
    ASSERT_GT(sorted[0] - sorted[1], 1e-4f);  // gap / T >= 1e2: the runner-up has weight < e^-100
    Sampler sampler(Params(1e-6f, 0, 1.0f, 0.0f, seed));
    for (int i = 0; i < 50; ++i) EXPECT_EQ(sampler.Sample(logits), best);
    const std::vector<TokenProb> dist = sampler.Distribution(logits);
    double p_best = 0;
    for (const TokenProb& t : dist) {
      EXPECT_TRUE(std::isfinite(t.prob));
      if (t.id == best) p_best = t.prob;
    }
    EXPECT_EQ(p_best, 1.0);
  }
  // A tiny temperature with huge logits overflows nothing.
  Sampler tiny(Params(1e-30f));
  EXPECT_EQ(tiny.Sample(std::vector<float>{3e38f, -3e38f, 1e38f}), 0);
}

TEST(Sampler, TopKOneEqualsGreedyAndTiesAtTheBoundaryStay) {
  for (uint64_t seed = 0; seed < 20; ++seed) {
    const std::vector<float> logits = RandomLogits(777, seed);
    Sampler sampler(Params(1.5f, 1, 1.0f, 0.0f, seed));
    for (int i = 0; i < 10; ++i) EXPECT_EQ(sampler.Sample(logits), Argmax(logits));
  }
  // HF removes tokens strictly below the k-th value: every token equal to it stays.
  Sampler top2(Params(1.0f, 2));
  EXPECT_EQ(Ids(top2.Distribution(std::vector<float>{1, 3, 2, 2, 0})), (std::set<int32_t>{1, 2, 3}));
  EXPECT_EQ(Ids(top2.Distribution(std::vector<float>{1, 3, 2, 0.5f, 0})), (std::set<int32_t>{1, 2}));
  // k beyond the vocabulary, or beyond the finite logits: every finite token.
  Sampler top9(Params(1.0f, 9));
  EXPECT_EQ(Ids(top9.Distribution(std::vector<float>{1, -kInf, 2})), (std::set<int32_t>{0, 2}));
  Sampler top2_of_masked(Params(1.0f, 2));
  EXPECT_EQ(Ids(top2_of_masked.Distribution(std::vector<float>{-kInf, 1, -kInf})), (std::set<int32_t>{1}));
}

// Hand-made distribution, ids deliberately not in probability order.
//   id:    0     1     2     3     4
//   prob:  0.15  0.05  0.5   0.3   0 (masked)
const std::vector<double> kProbs = {0.15, 0.05, 0.5, 0.3, 0.0};

TEST(Sampler, TopPKeepsTheSmallestPrefixReachingP) {
  const std::vector<float> logits = LogitsOf(kProbs);
  auto kept = [&](float top_p) {
    Sampler s(Params(1.0f, 0, top_p));
    return Ids(s.Distribution(logits));
  };
  EXPECT_EQ(kept(0.4f), (std::set<int32_t>{2}));           // 0.5 >= 0.4
  EXPECT_EQ(kept(0.75f), (std::set<int32_t>{2, 3}));       // 0.8 >= 0.75
  EXPECT_EQ(kept(0.85f), (std::set<int32_t>{0, 2, 3}));    // 0.95 >= 0.85
  EXPECT_EQ(kept(0.97f), (std::set<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(kept(1.0f), (std::set<int32_t>{0, 1, 2, 3}));  // off; the masked id never survives
  EXPECT_EQ(kept(1e-7f), (std::set<int32_t>{2}));          // at least one token
  // Exact boundary (equal weights are exact): four ties, top_p 0.5. HF removes tokens whose
  // ascending cumulative probability is <= 1 - top_p, i.e. keeps exactly two; ties go to the
  // lower ids.
  Sampler half(Params(1.0f, 0, 0.5f));
  EXPECT_EQ(Ids(half.Distribution(std::vector<float>{0.5f, 0.5f, 0.5f, 0.5f})), (std::set<int32_t>{0, 1}));
  Sampler tie_break(Params(1.0f, 0, 0.4f));  // two heavy ties hold 0.476 each: the first suffices
  EXPECT_EQ(Ids(tie_break.Distribution(std::vector<float>{-1.0f, 2.0f, -1.0f, 2.0f})), (std::set<int32_t>{1}));
  // Renormalised over the survivors.
  Sampler s(Params(1.0f, 0, 0.75f));
  const std::vector<TokenProb> dist = s.Distribution(logits);
  ASSERT_EQ(dist.size(), 2u);
  EXPECT_EQ(dist[0].id, 2);
  EXPECT_NEAR(dist[0].prob, 0.5 / 0.8, 1e-6);
  EXPECT_NEAR(dist[1].prob, 0.3 / 0.8, 1e-6);
}

TEST(Sampler, MinPKeepsTokensAboveAFractionOfTheMax) {
  const std::vector<float> logits = LogitsOf(kProbs);
  auto kept = [&](float min_p, float temperature = 1.0f) {
    Sampler s(Params(temperature, 0, 1.0f, min_p));
    return Ids(s.Distribution(logits));
  };
  EXPECT_EQ(kept(0.05f), (std::set<int32_t>{0, 1, 2, 3}));  // >= 0.025
  EXPECT_EQ(kept(0.2f), (std::set<int32_t>{0, 2, 3}));      // >= 0.1
  EXPECT_EQ(kept(0.5f), (std::set<int32_t>{2, 3}));         // >= 0.25
  EXPECT_EQ(kept(0.7f), (std::set<int32_t>{2}));            // >= 0.35
  EXPECT_EQ(kept(1.0f), (std::set<int32_t>{2}));
  // Temperature comes first (HF): at T = 2 the ratios are sqrt(p / 0.5), so 0.05 passes 0.2.
  EXPECT_EQ(kept(0.2f, 2.0f), (std::set<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(kept(0.2f, 0.5f), (std::set<int32_t>{2, 3}));  // (0.15 / 0.5)^2 = 0.09 < 0.2
}

TEST(Sampler, FiltersRunInHuggingFaceOrder) {
  //   probs 0.4, 0.3, 0.2, 0.1: top-k 3 renormalises to 0.444, 0.333, 0.222 before top-p, so top-p
  //   0.75 stops after two tokens (0.778 >= 0.75); on the raw distribution it would need three.
  const std::vector<float> logits = LogitsOf({0.1, 0.4, 0.2, 0.3});
  Sampler k_then_p(Params(1.0f, 3, 0.75f));
  EXPECT_EQ(Ids(k_then_p.Distribution(logits)), (std::set<int32_t>{1, 3}));
  Sampler p_only(Params(1.0f, 0, 0.75f));
  EXPECT_EQ(Ids(p_only.Distribution(logits)), (std::set<int32_t>{1, 2, 3}));
  // min-p after top-p: top-p 0.75 leaves {0.4, 0.3, 0.2}; min-p 0.6 then keeps >= 0.24.
  Sampler p_then_min(Params(1.0f, 0, 0.75f, 0.6f));
  EXPECT_EQ(Ids(p_then_min.Distribution(logits)), (std::set<int32_t>{1, 3}));
}

// The partial-selection paths against the plain full-sort reference on random rows of awkward
// sizes, including flat rows where the top-p prefix has to grow past 64, 512 and 4096.
TEST(Sampler, DistributionMatchesFullSortReference) {
  std::mt19937_64 rng(12345);
  const size_t sizes[] = {1, 2, 7, 63, 64, 65, 1000, 5000, 201088};
  int cases = 0;
  for (size_t n : sizes) {
    for (int trial = 0; trial < (n > 10000 ? 3 : 12); ++trial) {
      const float scale = trial % 3 == 0 ? 0.01f : (trial % 3 == 1 ? 1.0f : 4.0f);  // flat .. peaked
      std::vector<float> logits = RandomLogits(n, rng(), scale);
      if (n > 3 && trial % 4 == 1) {
        for (size_t i = 0; i < n; i += 3) logits[i] = -kInf;  // masked tokens
        logits[1] = 0.5f;
      }
      if (n > 5 && trial % 4 == 2) {
        for (size_t i = 0; i < n; i += 2) logits[i] = logits[0];  // many ties
      }
      const float temps[] = {0.3f, 1.0f, 1.7f};
      const int64_t ks[] = {0, 1, 5, 100};
      const float ps[] = {1.0f, 0.9f, 0.5f, 0.99f};
      const float mins[] = {0.0f, 0.05f, 0.3f};
      const SamplingParams p = Params(temps[rng() % 3], ks[rng() % 4], ps[rng() % 4], mins[rng() % 3]);
      Sampler sampler(p);
      const std::vector<TokenProb> got = sampler.Distribution(logits);
      const std::vector<TokenProb> want = ReferenceDistribution(logits, p);
      ASSERT_EQ(got.size(), want.size()) << "n=" << n << " trial=" << trial;
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_EQ(got[i].id, want[i].id);
        ASSERT_NEAR(got[i].prob, want[i].prob, 1e-12 + 1e-9 * want[i].prob);
      }
      ++cases;
    }
  }
  EXPECT_GT(cases, 90);
}

// ---- draws -------------------------------------------------------------------------------------

// Upper 0.999 quantiles of the chi-square distribution for 1..9 degrees of freedom.
constexpr double kChiSquare999[] = {0, 10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32, 26.12, 27.88};

double ChiSquare(const std::vector<int64_t>& counts, const std::vector<TokenProb>& dist, int64_t draws,
                 int64_t* outside) {
  double chi = 0;
  int64_t inside = 0;
  for (const TokenProb& t : dist) {
    const double expected = t.prob * static_cast<double>(draws);
    const double d = static_cast<double>(counts[t.id]) - expected;
    chi += d * d / expected;
    inside += counts[t.id];
  }
  *outside = draws - inside;
  return chi;
}

// Frequencies of many draws match the filtered softmax (chi-square at the 0.999 level, fixed
// seed: the test is deterministic), and never leave the filtered set.
TEST(Sampler, FrequenciesMatchTheFilteredDistribution) {
  const std::vector<float> logits = {0.3f, -1.0f, 1.2f, 0.0f, 2.0f, -0.5f, 1.0f, -kInf, 0.7f, -2.5f};
  struct Case {
    SamplingParams params;
    size_t expected_support;
  };
  const Case cases[] = {
      {Params(1.0f, 0, 1.0f, 0.0f, 1), 9},
      {Params(0.7f, 0, 1.0f, 0.0f, 2), 9},
      {Params(1.3f, 6, 1.0f, 0.0f, 3), 6},
      {Params(1.0f, 0, 0.8f, 0.0f, 4), 4},   // cumulative 0.39, 0.57, 0.71, 0.82
      {Params(1.0f, 0, 1.0f, 0.2f, 5), 4},   // logit >= 2 + ln 0.2
      {Params(0.8f, 8, 0.9f, 0.05f, 6), 5},
  };
  const int64_t draws = 200000;
  for (const Case& c : cases) {
    Sampler sampler(c.params);
    const std::vector<TokenProb> dist = sampler.Distribution(logits);
    ASSERT_EQ(dist.size(), c.expected_support);
    std::vector<int64_t> counts(logits.size(), 0);
    for (int64_t i = 0; i < draws; ++i) ++counts[static_cast<size_t>(sampler.Sample(logits))];
    int64_t outside = 0;
    const double chi = ChiSquare(counts, dist, draws, &outside);
    EXPECT_EQ(outside, 0);
    EXPECT_LT(chi, kChiSquare999[dist.size() - 1]) << "seed " << c.params.seed;
    // The same counts against the unfiltered softmax fail: the check has teeth.
    if (dist.size() < 9) {
      Sampler plain(Params(c.params.temperature));
      int64_t plain_outside = 0;
      const double plain_chi = ChiSquare(counts, plain.Distribution(logits), draws, &plain_outside);
      EXPECT_GT(plain_chi, 1000.0);
    }
  }
}

// The full vocabulary of gpt-oss, top-k 3: a few thousand draws still match.
TEST(Sampler, FrequenciesOnTheFullVocabulary) {
  std::vector<float> logits = RandomLogits(201088, 77);
  Sampler sampler(Params(1.0f, 3, 1.0f, 0.0f, 2024));
  const std::vector<TokenProb> dist = sampler.Distribution(logits);
  ASSERT_EQ(dist.size(), 3u);
  const int64_t draws = 2000;
  std::vector<int64_t> counts(logits.size(), 0);
  for (int64_t i = 0; i < draws; ++i) ++counts[static_cast<size_t>(sampler.Sample(logits))];
  int64_t outside = 0;
  EXPECT_LT(ChiSquare(counts, dist, draws, &outside), kChiSquare999[2]);
  EXPECT_EQ(outside, 0);
}

// The documented draw: one NextDouble() per token, survivors walked in increasing id order.
TEST(Sampler, DrawFollowsTheDocumentedProcedure) {
  const std::vector<float> logits = RandomLogits(300, 5);
  const SamplingParams p = Params(0.9f, 40, 0.95f, 0.01f, 31337);
  Sampler sampler(p);
  Sampler probe(p);
  const std::vector<TokenProb> dist = probe.Distribution(logits);
  Xoshiro256 rng(p.seed);
  for (int i = 0; i < 500; ++i) {
    const double u = rng.NextDouble();
    double sum = 0;
    int32_t expected = dist.back().id;
    for (const TokenProb& t : dist) {
      sum += t.prob;
      if (u < sum) {
        expected = t.id;
        break;
      }
    }
    // Comparing u against normalised sums may differ from the sampler's u * total only for a u
    // within rounding of a boundary, which these 500 draws do not hit.
    EXPECT_EQ(sampler.Sample(logits), expected) << i;
  }
}

TEST(Sampler, SeedsReproduce) {
  const std::vector<float> logits = RandomLogits(50000, 9);
  const SamplingParams p = Params(1.0f, 0, 0.98f, 0.0f, 123);
  auto run = [&](Sampler& s) {
    std::vector<int32_t> out;
    for (int i = 0; i < 200; ++i) out.push_back(s.Sample(logits));
    return out;
  };
  Sampler a(p);
  Sampler b(p);
  const std::vector<int32_t> first = run(a);
  EXPECT_EQ(first, run(b));
  EXPECT_GT(std::set<int32_t>(first.begin(), first.end()).size(), 50u);  // it does sample
  SamplingParams other = p;
  other.seed = 124;
  Sampler c(other);
  EXPECT_NE(first, run(c));
  a.Reseed(123);
  EXPECT_EQ(run(a), first);
  EXPECT_EQ(a.params().seed, 123u);
  // Distribution() consumes no draw.
  Sampler d(p);
  d.Distribution(logits);
  EXPECT_EQ(run(d), first);
}

// ---- configuration and stop condition ----------------------------------------------------------

// tests/data/gpt_oss_generation_config.json: the Hub file of gpt-oss (gpt-oss.md §1.3).
GenerationConfig GptOssGenerationConfig() {
  const std::string path = std::string(TESSERA_TEST_DATA) + "/gpt_oss_generation_config.json";
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  std::stringstream text;
  text << in.rdbuf();
  return ParseGenerationConfig(text.str(), path);
}

TEST(Sampler, ParamsFromGenerationConfig) {
  const GenerationConfig gpt_oss = GptOssGenerationConfig();
  SamplingParams p = SamplingParamsFromGenerationConfig(gpt_oss, 7);
  EXPECT_EQ(p.temperature, 1.0f);
  EXPECT_EQ(p.top_p, 1.0f);
  EXPECT_EQ(p.top_k, 50);  // HF GenerationConfig default
  EXPECT_EQ(p.min_p, 0.0f);
  EXPECT_EQ(p.seed, 7u);
  GenerationConfig greedy = gpt_oss;
  greedy.do_sample = false;
  EXPECT_EQ(SamplingParamsFromGenerationConfig(greedy, 0).temperature, 0.0f);
  GenerationConfig tuned = gpt_oss;
  tuned.temperature = 0.6;
  tuned.top_p = 0.9;
  tuned.top_k = 0;
  p = SamplingParamsFromGenerationConfig(tuned, 0);
  EXPECT_FLOAT_EQ(p.temperature, 0.6f);
  EXPECT_FLOAT_EQ(p.top_p, 0.9f);
  EXPECT_EQ(p.top_k, 0);
  tuned.top_p = 1.5;
  EXPECT_THROW(SamplingParamsFromGenerationConfig(tuned, 0), Error);
}

// gpt-oss.md §1.3: generate() stops on <|return|>, <|endoftext|> and <|call|>, not on <|end|>.
TEST(StopCondition, StopsOnGenerationConfigEosIds) {
  StopCondition stop = StopCondition::FromGenerationConfig(GptOssGenerationConfig(), -1);
  EXPECT_EQ(stop.stop_tokens(), (std::vector<int32_t>{199999, 200002, 200012}));
  EXPECT_FALSE(stop.done());
  EXPECT_FALSE(stop.Accept(13225));
  EXPECT_FALSE(stop.Accept(200007));  // <|end|> closes a message, not the reply
  EXPECT_EQ(stop.reason(), StopCondition::Reason::kNone);
  EXPECT_TRUE(stop.Accept(200012));
  EXPECT_TRUE(stop.done());
  EXPECT_EQ(stop.reason(), StopCondition::Reason::kStopToken);
  EXPECT_EQ(stop.generated(), 3);
  for (int32_t id : {200002, 199999, 200012}) EXPECT_TRUE(stop.IsStopToken(id));
  EXPECT_FALSE(stop.IsStopToken(200007));
}

TEST(StopCondition, TokenLimit) {
  const std::vector<int32_t> eos = {2};
  StopCondition stop(eos, 3);
  EXPECT_FALSE(stop.Accept(5));
  EXPECT_FALSE(stop.Accept(6));
  EXPECT_TRUE(stop.Accept(7));
  EXPECT_EQ(stop.reason(), StopCondition::Reason::kLength);
  StopCondition both(eos, 2);
  both.Accept(1);
  EXPECT_TRUE(both.Accept(2));
  EXPECT_EQ(both.reason(), StopCondition::Reason::kStopToken);  // the stop token wins
  StopCondition none(eos, 0);
  EXPECT_TRUE(none.done());
  EXPECT_EQ(none.reason(), StopCondition::Reason::kLength);
  StopCondition unlimited(std::vector<int32_t>{}, -1);
  for (int i = 0; i < 10000; ++i) EXPECT_FALSE(unlimited.Accept(i % 5));
  unlimited.AddStopTokens(std::vector<int32_t>{4, 4, 3});
  EXPECT_EQ(unlimited.stop_tokens(), (std::vector<int32_t>{3, 4}));
  EXPECT_TRUE(unlimited.Accept(4));
  EXPECT_THROW(StopCondition(std::vector<int32_t>{-1}, 5), Error);
  GenerationConfig bad;
  bad.eos_token_ids = {int64_t{1} << 40};
  EXPECT_THROW(StopCondition::FromGenerationConfig(bad, 1), Error);
}

}  // namespace
}  // namespace tessera
