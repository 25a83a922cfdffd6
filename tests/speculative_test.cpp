// Speculative decoding (engine/speculative.h, engine/generator.h): the upstream greedy rejection
// cases (../shared/reference/speculative-ngram.md §3), the lossless rule for point-mass drafts
// (§4) on toy distributions, the byte and cost model (§7), the controller, and end-to-end
// exactness: greedy output with n-gram speculation equals plain greedy output on the golden tiny
// models and a synthetic one (prompts with and without repetition, both KV types, sliding rings,
// stop tokens inside accepted runs, prefix reuse across calls), sampled output equals plain
// sampled output for the same seed, and a chi-square test over 10,000 seeds finds no difference
// between the speculative and plain distributions of the first generated tokens.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "engine/generator.h"
#include "engine/sampler.h"
#include "engine/speculative.h"
#include "io/config.h"
#include "model/model.h"
#include "model/synth.h"
#include "test_util.h"

namespace tessera {
namespace {

using Tokens = std::vector<int32_t>;

const std::string kGoldenDir = std::string(TESSERA_TEST_DATA) + "/gpt_oss_golden/";

// Upper 0.999 quantile of chi-square with `df` degrees of freedom (Wilson-Hilferty; within 1 %
// of the exact quantile for df >= 3, conservative below).
double ChiSquare999(int64_t df) {
  const double d = static_cast<double>(df);
  const double a = 2.0 / (9.0 * d);
  return d * std::pow(1.0 - a + 3.0902 * std::sqrt(a), 3.0);
}

// ---- §3: greedy rejection, upstream cases ------------------------------------------------------

struct GreedyCase {
  Tokens drafts, target;
  std::vector<int64_t> per_request;
  Tokens bonus;
  std::vector<Tokens> expected;
};

// tests/layers/jax/sample/test_rejection_sampler.py (tpu-inference), §3 rows 1-12. Drafts and
// target argmaxes are flattened over the requests; each request is verified on its own.
TEST(SpecVerify, UpstreamGreedyCases) {
  const std::vector<GreedyCase> cases = {
      {{1, 2, 3}, {1, 2, 3}, {3}, {4}, {{1, 2, 3, 4}}},
      {{1, 2, 3}, {1, 5, 3}, {3}, {4}, {{1, 5}}},
      {{1, 2, 3, 4}, {1, 2, 3, 7}, {2, 2}, {5, 6}, {{1, 2, 5}, {3, 7}}},
      {{1}, {1}, {1}, {2}, {{1, 2}}},
      {{}, {}, {0}, {5}, {{5}}},
      {{1, 2, 3}, {1, 5, 3}, {2, 1}, {6, 7}, {{1, 5}, {3, 7}}},
      {{1, 2, 3, 4, 5, 6}, {1, 2, 3, 4, 5, 6}, {1, 2, 3}, {7, 9, 10}, {{1, 7}, {2, 3, 9}, {4, 5, 6, 10}}},
      {{1, 2, 3, 4, 5}, {1, 2, 3, 7, 5}, {2, 3}, {6, 8}, {{1, 2, 6}, {3, 7}}},
      {{1, 2}, {1, 2}, {0, 2}, {5, 6}, {{5}, {1, 2, 6}}},
      {{}, {}, {0, 0}, {5, 6}, {{5}, {6}}},
      {{1, 2, 3, 4, 5, 6}, {9, 2, 3, 4, 5, 6}, {3, 2, 1}, {10, 11, 12}, {{9}, {4, 5, 11}, {6, 12}}},
      {{1}, {2}, {1}, {3}, {{2}}},
  };
  for (size_t c = 0; c < cases.size(); ++c) {
    const GreedyCase& gc = cases[c];
    size_t offset = 0;
    ASSERT_EQ(gc.per_request.size(), gc.expected.size());
    for (size_t r = 0; r < gc.per_request.size(); ++r) {
      const size_t k = static_cast<size_t>(gc.per_request[r]);
      const std::span<const int32_t> drafts(gc.drafts.data() + offset, k);
      const std::span<const int32_t> target(gc.target.data() + offset, k);
      Tokens out;
      int64_t calls = 0;
      const VerifyResult v = VerifyDrafts(
          drafts,
          [&](int64_t i) {
            ++calls;
            return i < static_cast<int64_t>(k) ? target[static_cast<size_t>(i)] : gc.bonus[r];
          },
          [&](int32_t t) {
            out.push_back(t);
            return true;
          });
      EXPECT_EQ(out, gc.expected[r]) << "§3 case " << c + 1 << " request " << r;
      EXPECT_EQ(v.emitted, static_cast<int64_t>(out.size()));
      EXPECT_EQ(v.accepted, v.emitted - 1) << "§3 case " << c + 1;
      EXPECT_EQ(calls, v.emitted) << "rows after the first mismatch are never evaluated";
      offset += k;
    }
  }
}

TEST(SpecVerify, EmitCanStopInsideTheAcceptedRun) {
  const Tokens drafts = {4, 5, 6, 7};
  const Tokens target = {4, 5, 6, 7, 8};
  Tokens out;
  const VerifyResult v = VerifyDrafts(
      drafts, [&](int64_t i) { return target[static_cast<size_t>(i)]; },
      [&](int32_t t) {
        out.push_back(t);
        return t != 5;  // a stop token
      });
  EXPECT_EQ(out, (Tokens{4, 5}));
  EXPECT_EQ(v.emitted, 2);
  EXPECT_EQ(v.accepted, 2);
}

// ---- §4: the lossless rule for a point-mass draft ----------------------------------------------

std::vector<float> LogitsOf(const std::vector<double>& probs) {
  std::vector<float> logits;
  for (double p : probs) logits.push_back(static_cast<float>(std::log(p)));
  return logits;
}

// One draft x at row 0, bonus at row 1, through the ordinary sampler's transform: accepted with
// probability p0(x); on rejection the token follows p0 without x, renormalised; after an
// acceptance the bonus follows p1.
TEST(SpecVerify, PointMassDraftIsLossless) {
  const std::vector<float> row0 = LogitsOf({0.30, 0.22, 0.15, 0.11, 0.08, 0.06, 0.05, 0.03});
  const std::vector<float> row1 = LogitsOf({0.05, 0.10, 0.40, 0.05, 0.20, 0.10, 0.06, 0.04});
  const size_t V = row0.size();
  struct Case {
    SamplingParams params;
    int32_t draft;
  };
  std::vector<Case> cases;
  for (int32_t draft : {0, 1, 3}) {
    SamplingParams p;
    p.seed = 100 + static_cast<uint64_t>(draft);
    cases.push_back({p, draft});  // T = 1
    p.temperature = 0.8f;
    p.top_k = 5;
    cases.push_back({p, draft});
    p.temperature = 1.3f;
    p.top_k = 0;
    p.top_p = 0.85f;
    cases.push_back({p, draft});
  }
  const int64_t trials = 20000;
  for (const Case& c : cases) {
    Sampler sampler(c.params);
    const std::vector<TokenProb> p0 = sampler.Distribution(row0);
    const std::vector<TokenProb> p1 = sampler.Distribution(row1);
    double px = 0.0;
    for (const TokenProb& t : p0) px = t.id == c.draft ? t.prob : px;
    std::vector<int64_t> rejected(V, 0), bonus(V, 0);
    int64_t accepted = 0;
    for (int64_t n = 0; n < trials; ++n) {
      Tokens out;
      const Tokens drafts = {c.draft};
      const VerifyResult v = VerifyDrafts(
          drafts, [&](int64_t i) { return sampler.Sample(i == 0 ? row0 : row1); },
          [&](int32_t t) {
            out.push_back(t);
            return true;
          });
      if (v.accepted == 1) {
        ++accepted;
        ASSERT_EQ(out.size(), 2u);
        ++bonus[static_cast<size_t>(out[1])];
      } else {
        ASSERT_EQ(out.size(), 1u);
        ASSERT_NE(out[0], c.draft);
        ++rejected[static_cast<size_t>(out[0])];
      }
    }
    const std::string label = "draft " + std::to_string(c.draft) + " T " + std::to_string(c.params.temperature);
    // Acceptance ~ Binomial(trials, p0(x)).
    const double sd = std::sqrt(trials * px * (1.0 - px));
    EXPECT_LT(std::fabs(static_cast<double>(accepted) - trials * px), 4.5 * std::max(sd, 1.0)) << label;
    // Rejected branch: p0 with x removed.
    const int64_t rejections = trials - accepted;
    double chi = 0.0;
    int64_t support = 0, outside = rejections;
    for (const TokenProb& t : p0) {
      if (t.id == c.draft) continue;
      const double expected = rejections * t.prob / (1.0 - px);
      const double d = static_cast<double>(rejected[static_cast<size_t>(t.id)]) - expected;
      chi += d * d / expected;
      outside -= rejected[static_cast<size_t>(t.id)];
      ++support;
    }
    EXPECT_EQ(outside, 0) << label;
    ASSERT_GT(support, 1) << label;
    EXPECT_LT(chi, ChiSquare999(support - 1)) << label;
    // The same counts against p itself (x not removed) fail: the check has teeth.
    double chi_p = 0.0;
    for (const TokenProb& t : p0) {
      const double expected = rejections * t.prob;
      const double d = static_cast<double>(rejected[static_cast<size_t>(t.id)]) - expected;
      chi_p += d * d / expected;
    }
    EXPECT_GT(chi_p, 10.0 * ChiSquare999(support)) << label;
    // Accepted branch: the bonus follows p1.
    chi = 0.0;
    for (const TokenProb& t : p1) {
      const double expected = accepted * t.prob;
      const double d = static_cast<double>(bonus[static_cast<size_t>(t.id)]) - expected;
      chi += d * d / expected;
    }
    ASSERT_GT(p1.size(), 1u) << label;
    EXPECT_LT(chi, ChiSquare999(static_cast<int64_t>(p1.size()) - 1)) << label;
  }
}

// ---- §7: byte model and cost-aware k ------------------------------------------------------------

TEST(SpecCost, ExpectedDistinctExpertsMatchesTheReference) {
  // §7: gpt-oss-20b (E = 32, top-4): n = 1 -> 4, 2 -> 7.5, 4 -> 13.2, 8 -> 21.0.
  EXPECT_NEAR(ExpectedDistinctExperts(32, 4, 1), 4.0, 1e-12);
  EXPECT_NEAR(ExpectedDistinctExperts(32, 4, 2), 7.5, 1e-12);
  EXPECT_NEAR(ExpectedDistinctExperts(32, 4, 4), 13.2, 0.05);
  EXPECT_NEAR(ExpectedDistinctExperts(32, 4, 8), 21.0, 0.05);
  EXPECT_EQ(ExpectedDistinctExperts(32, 4, 0), 0.0);
  EXPECT_NEAR(ExpectedDistinctExperts(8, 8, 3), 8.0, 1e-12);
  EXPECT_NEAR(ExpectedTokensIid(0.5, 0), 1.0, 1e-12);
  EXPECT_NEAR(ExpectedTokensIid(0.5, 3), 1.875, 1e-12);
  EXPECT_NEAR(ExpectedTokensIid(1.0, 3), 4.0, 1e-12);
  const double a[] = {0.5, 0.5, 0.5};
  EXPECT_NEAR(ExpectedTokens(a, 3), 1.875, 1e-12);
  EXPECT_NEAR(ExpectedTokens(a, 0), 1.0, 1e-12);
}

TEST(SpecCost, ByteModelOfGptOss20b) {
  const ModelConfig config = ParseModelConfig(SynthPresetConfigJson("gpt-oss-20b").dump(), "test");
  const DecodeByteModel m = DecodeBytesOf(config, ModelOptions{});
  // performance.md / §7: 1.27 GB of active expert weights per token (4 experts x 24 layers).
  EXPECT_NEAR(m.per_expert * 4 * 24 / 1e9, 1.27, 0.01);
  // BF16 attention (24 x 53.1 MB) + lm_head (1.158 GB) + router: about 2.44 GB read once.
  EXPECT_NEAR(m.shared / 1e9, 2.44, 0.02);
  EXPECT_EQ(m.per_token, 2880 * 2);
  const DecodeByteModel q = DecodeBytesOf(config, ModelOptions{.precision = Precision::kFast, .dense = DenseWeights::kInt8});
  EXPECT_NEAR(q.shared / m.shared, 0.5, 0.01);
  EXPECT_EQ(q.per_expert, m.per_expert);
  const std::vector<double> c = ByteCostRatios(m, 8);
  ASSERT_EQ(c.size(), 9u);
  EXPECT_EQ(c[0], 1.0);
  for (int k = 1; k <= 8; ++k) EXPECT_GT(c[k], c[k - 1]);
  // Four positions: (2.44 + 13.2 / 4 x 1.27) / (2.44 + 1.27) ~ 1.79.
  EXPECT_NEAR(c[3], (m.shared + 13.2 / 4 * 1.2724e9) / (m.shared + 1.2724e9), 0.01);
}

TEST(SpecController, ChoosesTheLengthThatMaximisesTokensPerSecond) {
  // Free verification (a dense model's ideal): every draft is worth trying.
  SpecController free_ride(8, true, std::vector<double>(9, 1.0), true);
  EXPECT_EQ(free_ride.Choose(8), 8);
  EXPECT_EQ(free_ride.Choose(3), 3);
  EXPECT_EQ(free_ride.Choose(0), 0);

  // c(k) = 1 + 0.4 k with the prior a_i = 1/2: E(1)/c(1) = 1.5/1.4 beats k = 0, E(2)/c(2) =
  // 1.75/1.8 does not beat k = 1.
  std::vector<double> dear;
  for (int k = 0; k <= 8; ++k) dear.push_back(1.0 + 0.4 * k);
  SpecController c(8, true, dear, true);
  EXPECT_DOUBLE_EQ(c.acceptance(1), 0.5);
  EXPECT_EQ(c.Choose(8), 1);
  // Rejections at the first draft: speculation stops, except one probe per interval.
  for (int i = 0; i < 60; ++i) c.RecordOutcome(1, 0);
  EXPECT_LT(c.acceptance(1), 0.1);
  EXPECT_DOUBLE_EQ(c.acceptance(2), 0.5);  // never tried: the prior
  int probes = 0;
  for (int64_t i = 0; i < 4 * SpecController::kProbeInterval; ++i) {
    const int64_t k = c.Choose(8);
    EXPECT_LE(k, 1);
    probes += k > 0 ? 1 : 0;
  }
  EXPECT_EQ(probes, 4);

  // c(k) = 1 + 0.05 k: with the prior, E(3)/c(3) = 1.875/1.15 is the best rate (E(2)/c(2) =
  // 1.59, E(4)/c(4) = 1.615); after a long run of full acceptances (a_i ~ 0.91) the longest
  // draft pays.
  std::vector<double> cheap;
  for (int k = 0; k <= 8; ++k) cheap.push_back(1.0 + 0.05 * k);
  SpecController d(8, true, cheap, true);
  EXPECT_EQ(d.Choose(8), 3);
  for (int i = 0; i < 30; ++i) d.RecordOutcome(8, 8);
  EXPECT_GT(d.acceptance(8), 0.9);
  EXPECT_EQ(d.Choose(8), 8);
  EXPECT_EQ(d.Choose(5), 5);
  // A rejection at the third draft lowers a_3 only.
  d.RecordOutcome(8, 2);
  EXPECT_LT(d.acceptance(3), d.acceptance(2));
  EXPECT_NEAR(d.acceptance(4), d.acceptance(8), 1e-12);

  // Non-adaptive: always every draft.
  SpecController fixed(4, false, std::vector<double>(5, 10.0), true);
  EXPECT_EQ(fixed.Choose(9), 4);
  EXPECT_EQ(fixed.Choose(2), 2);
}

TEST(SpecController, MeasuredTimesReplaceThePrior) {
  std::vector<double> prior = {1.0, 2.0, 3.0};
  SpecController c(2, true, prior, false);
  EXPECT_DOUBLE_EQ(c.cost(1), 2.0);
  c.RecordTime(0, 0.1);
  c.RecordTime(1, 0.12);  // measured c(1) = 1.2; the prior's scale follows (0.6 for this sample)
  EXPECT_NEAR(c.cost(1), 1.2, 1e-12);
  EXPECT_NEAR(c.cost(2), 3.0 * (0.75 + 0.25 * 0.6), 1e-12);
  SpecController fixed(2, true, prior, true);
  fixed.RecordTime(0, 0.1);
  fixed.RecordTime(1, 0.5);
  EXPECT_DOUBLE_EQ(fixed.cost(1), 2.0);
}

TEST(SpecOptions, BadOptionsAreOneLineErrors) {
  SpecOptions o;
  o.method = SpecMethod::kNgram;
  o.k = -1;
  EXPECT_NE(ErrorOf([&] { ValidateSpecOptions(o); }).find("k must be >= 0"), std::string::npos);
  o.k = 2;
  o.min_n = 4;
  o.max_n = 3;
  EXPECT_NE(ErrorOf([&] { ValidateSpecOptions(o); }).find("larger than max_n"), std::string::npos);
  o.min_n = 1;
  o.cost = {1.0, 2.0};
  EXPECT_NE(ErrorOf([&] { ValidateSpecOptions(o); }).find("k + 1 = 3"), std::string::npos);
  o.cost = {1.0, 2.0, -1.0};
  EXPECT_NE(ErrorOf([&] { ValidateSpecOptions(o); }).find("c(2)"), std::string::npos);
  EXPECT_NE(ErrorOf([] { ParseSpecMethod("eagle"); }).find("unknown speculation method 'eagle'"), std::string::npos);
  EXPECT_EQ(ParseSpecMethod("ngram"), SpecMethod::kNgram);
  EXPECT_EQ(ParseSpecMethod("none"), SpecMethod::kNone);
}

// ---- end to end ----------------------------------------------------------------------------------

struct GenRun {
  Tokens tokens;
  StopCondition::Reason reason;
  SpecStats spec;
};

SpecOptions Ngram(int64_t k, bool adaptive = false, int64_t min_n = 2, int64_t max_n = 5) {
  SpecOptions o;
  o.method = SpecMethod::kNgram;
  o.k = k;
  o.adaptive = adaptive;
  o.min_n = min_n;
  o.max_n = max_n;
  return o;
}

GenRun Generate(Generator& g, const Tokens& prompt, Sampler& sampler, int64_t n, const SpecOptions& spec,
             const Tokens& stops = {}) {
  StopCondition stop(stops, n);
  const GenerationResult r = g.Generate(prompt, sampler, stop, {}, spec);
  return {r.tokens, r.reason, r.spec};
}

GenRun Generate(const Model& m, const Tokens& prompt, const SamplingParams& params, int64_t n,
             const SpecOptions& spec, KvType kv = KvType::kF32, const Tokens& stops = {}) {
  Generator g(m, 256, kv);
  Sampler sampler(params);
  return Generate(g, prompt, sampler, n, spec, stops);
}

SamplingParams Greedy() {
  SamplingParams p;
  p.temperature = 0.0f;
  return p;
}

// A prompt with repetition (a random phrase three times and its start) and one without.
Tokens RepetitivePrompt(int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Tokens phrase;
  for (int i = 0; i < 7; ++i) phrase.push_back(static_cast<int32_t>(rng() % vocab));
  Tokens p;
  for (int r = 0; r < 3; ++r) p.insert(p.end(), phrase.begin(), phrase.end());
  p.insert(p.end(), phrase.begin(), phrase.begin() + 3);
  return p;
}

Tokens PlainPrompt(int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Tokens p;
  for (int i = 0; i < 20; ++i) p.push_back(static_cast<int32_t>(rng() % vocab));
  return p;
}

// `text` preceded by a "dictionary" that pairs each token x the sampler (top-k) may draw first
// with the model's most likely token after x, iterated until the pairs no longer change. With
// min_n = max_n = 1 the draft after any first token is its pair, then the next pair: drafts are
// tried at once, and accepted and rejected often even though the tiny models' distributions
// are flat.
Tokens DictionaryPrompt(const Model& model, const SamplingParams& params, const Tokens& text) {
  Tokens dict, prompt;
  std::vector<float> logits;
  Sampler filter(params);
  for (int iteration = 0; iteration < 8; ++iteration) {
    prompt = dict;
    prompt.insert(prompt.end(), text.begin(), text.end());
    KvCache cache(model.config(), 256, KvType::kF32);
    model.Forward(prompt, 0, cache, LogitsMode::kLast, logits);
    Tokens next_dict;
    for (const TokenProb& first : filter.Distribution(logits)) {
      const int32_t x[1] = {first.id};
      model.Forward(x, static_cast<int64_t>(prompt.size()), cache, LogitsMode::kLast, logits);
      next_dict.push_back(first.id);
      next_dict.push_back(Argmax(logits));
    }
    if (next_dict == dict) break;
    dict = next_dict;
  }
  return prompt;
}

// Greedy with speculation == greedy without, over draft lengths, adaptive k, KV types and both
// kinds of prompt. Returns the summed statistics so callers can check that drafts were both
// accepted and rejected.
SpecStats ExpectGreedyExact(const Model& m, const std::string& label, int64_t n = 40) {
  SpecStats total;
  const int64_t V = m.vocab_size();
  for (const Tokens& prompt : {RepetitivePrompt(V, 1), RepetitivePrompt(V, 2), PlainPrompt(V, 3)}) {
    for (KvType kv : {KvType::kF32, KvType::kBF16}) {
      const GenRun plain = Generate(m, prompt, Greedy(), n, SpecOptions{}, kv);
      for (const SpecOptions& spec : {Ngram(1), Ngram(3), Ngram(8), Ngram(8, true), Ngram(4, false, 1, 1)}) {
        const GenRun s = Generate(m, prompt, Greedy(), n, spec, kv);
        EXPECT_EQ(s.tokens, plain.tokens) << label << " k " << spec.k << " adaptive " << spec.adaptive << " kv "
                                          << KvTypeName(kv);
        EXPECT_EQ(s.reason, plain.reason) << label;
        EXPECT_LE(s.spec.accepted, s.spec.proposed);
        total.proposed += s.spec.proposed;
        total.accepted += s.spec.accepted;
        total.verify_steps += s.spec.verify_steps;
        total.decode_steps += s.spec.decode_steps;
      }
    }
  }
  return total;
}

class SpecGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(SpecGolden, GreedyIsTokenIdenticalToPlainGreedy) {
  const auto model = Model::Load(kGoldenDir + GetParam());
  // Generation runs well past the sliding window (8 or 16), so rejected drafts are rolled back
  // out of the rings.
  ASSERT_LT(model->config().sliding_window.value(), 40);
  const SpecStats s = ExpectGreedyExact(*model, GetParam());
  std::printf("%s: %lld proposed, %lld accepted over %lld verifications\n", GetParam().c_str(),
              static_cast<long long>(s.proposed), static_cast<long long>(s.accepted),
              static_cast<long long>(s.verify_steps));
  EXPECT_GT(s.accepted, 0);
  EXPECT_GT(s.proposed - s.accepted, 0);
}

TEST_P(SpecGolden, FastPrecisionGreedyIsTokenIdenticalToItsPlainGreedy) {
  const auto model = Model::Load(kGoldenDir + GetParam(), ModelOptions{.precision = Precision::kFast});
  const SpecStats s = ExpectGreedyExact(*model, GetParam() + " fast", 24);
  EXPECT_GT(s.accepted, 0);
}

// Stop tokens and limits inside an accepted run, then prefix reuse on the same generator: the
// cache is left exactly as plain decoding leaves it.
TEST_P(SpecGolden, StopsInsideAcceptedRunsAndReusesTheCache) {
  const auto model = Model::Load(kGoldenDir + GetParam());
  const int64_t V = model->vocab_size();
  Tokens prompt = RepetitivePrompt(V, 5);
  const GenRun reference = Generate(*model, prompt, Greedy(), 30, SpecOptions{});
  ASSERT_GE(reference.tokens.size(), 12u);
  const Tokens stops = {reference.tokens[9]};  // stops at its first occurrence, at index <= 9
  for (const SamplingParams& params : {Greedy(), SamplingParams{1.0f, 0, 1.0f, 0.0f, 42}}) {
    Generator plain(*model, 256, KvType::kF32);
    Generator spec(*model, 256, KvType::kF32);
    Sampler plain_sampler(params), spec_sampler(params);
    Tokens p_prompt = prompt, s_prompt = prompt;
    for (int turn = 0; turn < 4; ++turn) {
      const int64_t n = 7 + 3 * turn;
      const GenRun a = Generate(plain, p_prompt, plain_sampler, n, SpecOptions{}, stops);
      const GenRun b = Generate(spec, s_prompt, spec_sampler, n, Ngram(6), stops);
      ASSERT_EQ(b.tokens, a.tokens) << GetParam() << " turn " << turn << " T " << params.temperature;
      ASSERT_EQ(b.reason, a.reason);
      ASSERT_EQ(spec.cached_tokens(), plain.cached_tokens()) << "turn " << turn;
      ASSERT_EQ(spec.cache().length(), static_cast<int64_t>(spec.cached_tokens().size()));
      // Next turn: the conversation so far plus the start of the prompt again (copyable).
      for (Tokens* p : {&p_prompt, &s_prompt}) {
        p->insert(p->end(), a.tokens.begin(), a.tokens.end());
        p->insert(p->end(), prompt.begin(), prompt.begin() + 4);
      }
    }
  }
}

// Sampling: the same seed gives the same tokens with and without speculation (one draw per
// emitted token in both), for several transforms.
TEST_P(SpecGolden, SampledOutputEqualsPlainForTheSameSeed) {
  const auto model = Model::Load(kGoldenDir + GetParam());
  const int64_t V = model->vocab_size();
  int64_t proposed = 0, accepted = 0;
  const SamplingParams params[] = {{1.0f, 3, 1.0f, 0.0f, 1}, {0.7f, 20, 0.9f, 0.0f, 2}, {0.3f, 0, 1.0f, 0.05f, 3}};
  const Tokens dictionary = DictionaryPrompt(*model, params[0], PlainPrompt(V, 13));
  for (const SamplingParams& p : params) {
    for (const Tokens& prompt : {RepetitivePrompt(V, 11), PlainPrompt(V, 12), dictionary}) {
      const GenRun plain = Generate(*model, prompt, p, 48, SpecOptions{});
      for (const SpecOptions& spec : {Ngram(2), Ngram(8), Ngram(8, true), Ngram(3, false, 1, 1)}) {
        const GenRun s = Generate(*model, prompt, p, 48, spec);
        EXPECT_EQ(s.tokens, plain.tokens) << GetParam() << " T " << p.temperature << " k " << spec.k;
        proposed += s.spec.proposed;
        accepted += s.spec.accepted;
      }
    }
  }
  EXPECT_GT(accepted, 0);
  EXPECT_GT(proposed - accepted, 0);
}

INSTANTIATE_TEST_SUITE_P(TinyModels, SpecGolden, ::testing::Values("tiny_a", "tiny_b", "tiny_c"));

// The synthetic tiny preset: the real 201088-entry vocabulary, MXFP4 experts.
class SpecSynth : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = ::testing::TempDir() + "tessera_spec_synth_" + std::to_string(::getpid());
    SynthOptions o;
    o.config_json = SynthPresetConfigJson("tiny");
    o.seed = 3;
    o.overwrite = true;
    WriteSyntheticModel(dir_, o);
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(dir_); }
  static std::string dir_;
};
std::string SpecSynth::dir_;

TEST_F(SpecSynth, GreedyIsTokenIdenticalToPlainGreedy) {
  const auto model = Model::Load(dir_);
  const SpecStats s = ExpectGreedyExact(*model, "synth tiny", 32);
  EXPECT_GT(s.verify_steps, 0);
}

// A prohibitive fixed cost keeps only the probes; free verification tries every draft; the
// output never changes.
TEST(SpecGenerator, CostAwareChoiceKeepsTheOutput) {
  const auto model = Model::Load(kGoldenDir + "tiny_a");
  const Tokens prompt = RepetitivePrompt(model->vocab_size(), 1);
  const GenRun plain = Generate(*model, prompt, Greedy(), 60, SpecOptions{});
  SpecOptions dear = Ngram(8, true, 1, 4);
  for (int k = 0; k <= 8; ++k) dear.cost.push_back(1.0 + 100.0 * k);
  const GenRun a = Generate(*model, prompt, Greedy(), 60, dear);
  EXPECT_EQ(a.tokens, plain.tokens);
  EXPECT_LE(a.spec.verify_steps, a.spec.decode_steps / SpecController::kProbeInterval + 1);
  EXPECT_LE(a.spec.proposed, a.spec.verify_steps);  // probes draft one token
  SpecOptions free_ride = Ngram(8, true, 1, 4);
  free_ride.cost.assign(9, 1.0);
  const GenRun b = Generate(*model, prompt, Greedy(), 60, free_ride);
  EXPECT_EQ(b.tokens, plain.tokens);
  EXPECT_GT(b.spec.verify_steps, a.spec.verify_steps);
  EXPECT_GT(b.spec.accepted, 0);
  EXPECT_LT(b.spec.decode_steps, 59);  // accepted drafts saved forward passes
}

TEST(SpecGenerator, RejectsDraftsBeyondTheRollbackCapacity) {
  const auto model = Model::Load(kGoldenDir + "tiny_a");
  Generator g(*model, 128, KvType::kF32);
  Sampler sampler(Greedy());
  StopCondition stop({}, 4);
  const Tokens prompt = {1, 2, 3};
  SpecOptions spec = Ngram(g.cache().rollback() + 1);
  const std::string msg = ErrorOf([&] { g.Generate(prompt, sampler, stop, {}, spec); });
  EXPECT_NE(msg.find("can roll back only 64 positions"), std::string::npos) << msg;
  spec = Ngram(4);
  spec.min_n = 0;
  EXPECT_NE(ErrorOf([&] { g.Generate(prompt, sampler, stop, {}, spec); }).find("min_n must be >= 1"),
            std::string::npos);
  // k at the capacity itself works.
  const GenRun r = Generate(g, RepetitivePrompt(model->vocab_size(), 4), sampler, 8, Ngram(g.cache().rollback()));
  EXPECT_EQ(r.tokens.size(), 8u);
}

// Drafts never push a step past the context: with a context of prompt + 12 tokens and no token
// limit, generation fills the context exactly as plain decoding does.
TEST(SpecGenerator, DraftsStayInsideTheContext) {
  const auto model = Model::Load(kGoldenDir + "tiny_b");
  const Tokens prompt = RepetitivePrompt(model->vocab_size(), 21);
  const int64_t context = static_cast<int64_t>(prompt.size()) + 12;
  Generator plain(*model, context, KvType::kF32), spec(*model, context, KvType::kF32);
  Sampler s1(Greedy()), s2(Greedy());
  const GenRun a = Generate(plain, prompt, s1, -1, SpecOptions{});
  const GenRun b = Generate(spec, prompt, s2, -1, Ngram(8));
  EXPECT_EQ(b.tokens, a.tokens);
  EXPECT_EQ(static_cast<int64_t>(b.tokens.size()), 13);  // the last token is never fed
  EXPECT_EQ(b.reason, a.reason);
}

// ---- sampling: distributions over many seeds ----------------------------------------------------

// 10,000 seeds with speculation and 10,000 other seeds without: the joint distribution of the
// first four generated tokens (top-3 sampling) is the same (two-sample chi-square, cells with
// fewer than 10 observations pooled). The dictionary prompt makes every run verify drafts at
// the second and third positions, accepting and rejecting them thousands of times.
TEST(SpecSampling, SpeculativeAndPlainDistributionsAgree) {
  const auto model = Model::Load(kGoldenDir + "tiny_a");
  SamplingParams params;
  params.temperature = 1.0f;
  params.top_k = 3;
  const Tokens prompt = DictionaryPrompt(*model, params, PlainPrompt(model->vocab_size(), 31));
  ASSERT_EQ(prompt.size(), 26u);
  const int64_t samples = 10000;
  Generator plain_gen(*model, 256, KvType::kF32), spec_gen(*model, 256, KvType::kF32);
  std::map<Tokens, std::pair<int64_t, int64_t>> cells;
  SpecStats stats;
  for (int64_t i = 0; i < samples; ++i) {
    params.seed = static_cast<uint64_t>(i);
    Sampler spec_sampler(params);
    const GenRun s = Generate(spec_gen, prompt, spec_sampler, 4, Ngram(3, false, 1, 1));
    params.seed = static_cast<uint64_t>(i + 1000000);
    Sampler plain_sampler(params);
    const GenRun p = Generate(plain_gen, prompt, plain_sampler, 4, SpecOptions{});
    ++cells[s.tokens].first;
    ++cells[p.tokens].second;
    stats.proposed += s.spec.proposed;
    stats.accepted += s.spec.accepted;
    stats.verify_steps += s.spec.verify_steps;
  }
  std::printf("speculative sampling: %lld proposed, %lld accepted over %lld verifications, %zu outcomes\n",
              static_cast<long long>(stats.proposed), static_cast<long long>(stats.accepted),
              static_cast<long long>(stats.verify_steps), cells.size());
  // Both branches occur often.
  EXPECT_GT(stats.accepted, samples / 10);
  EXPECT_GT(stats.proposed - stats.accepted, samples / 10);
  double chi = 0.0;
  int64_t df = -1, pooled_a = 0, pooled_b = 0;
  for (const auto& [tokens, ab] : cells) {
    const auto [a, b] = ab;
    if (a + b < 10) {
      pooled_a += a;
      pooled_b += b;
      continue;
    }
    const double d = static_cast<double>(a - b);
    chi += d * d / static_cast<double>(a + b);
    ++df;
  }
  if (pooled_a + pooled_b > 0) {
    const double d = static_cast<double>(pooled_a - pooled_b);
    chi += d * d / static_cast<double>(pooled_a + pooled_b);
    ++df;
  }
  ASSERT_GE(df, 5);
  EXPECT_LT(chi, ChiSquare999(df)) << df << " degrees of freedom";
}

}  // namespace
}  // namespace tessera
