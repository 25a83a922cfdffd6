// The shipped trained models (models/tiny-gpt-oss, models/tiny-llama, models/tiny-deepseek;
// tools/train_tiny_models.py)
// against Hugging Face transformers float32 eager references made by
// tools/make_trained_goldens.py (tests/data/trained/): issue 15 points 3, 4 and 6.
//  - Perplexity of tests/data/trained/heldout_sample.txt (held-out Python standard library
//    sources) with the windows of `tessera perplexity`: the exact path equals transformers'
//    to 1e-4 relative, window and token counts identical.
//  - Logits of a Python prompt plus its 32-token greedy continuation: max |logit - ref| <=
//    1e-4 max |ref| on the exact path, greedy tokens identical (trained weights give peaked
//    distributions and large activations, a different regime from the random goldens).
//  - The fast paths' perplexity within the bounds recorded in docs/ACCURACY.md.
//  - Greedy output with --spec ngram equals plain greedy decoding on a prompt that copies.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/mapped_file.h"
#include "engine/generator.h"
#include "engine/perplexity.h"
#include "engine/sampler.h"
#include "engine/speculative.h"
#include "golden_checks.h"
#include "model/model.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace tessera {
namespace {

const std::string kModels = std::string(TESSERA_SOURCE_DIR) + "/models/";
const std::string kData = std::string(TESSERA_TEST_DATA) + "/trained/";

std::vector<int32_t> HeldoutTokens(const std::string& model) {
  const Tokenizer tok = Tokenizer::FromModelDir(kModels + model);
  return tok.Encode(ReadFile(kData + "heldout_sample.txt"));
}

nlohmann::json PerplexityGolden(const std::string& model) {
  std::ifstream in(kData + model + "/perplexity.json");
  return nlohmann::json::parse(in);
}

ModelOptions Fast(bool int8) {
  ModelOptions o;
  o.precision = Precision::kFast;
  o.dense = int8 ? DenseWeights::kInt8 : DenseWeights::kBf16;
  return o;
}

// docs/ACCURACY.md, "Trained models": the measured figures with headroom for other ISA paths.
constexpr double kFastPplRatio = 0.005, kFastMeanKl = 1e-3, kFastTop1 = 0.98;
constexpr double kInt8PplRatio = 0.01, kInt8MeanKl = 2e-3, kInt8Top1 = 0.97;

class TrainedModel : public ::testing::TestWithParam<std::string> {};

TEST_P(TrainedModel, ExactPerplexityMatchesTransformers) {
  const auto model = Model::Load(kModels + GetParam());
  const std::vector<int32_t> tokens = HeldoutTokens(GetParam());
  const nlohmann::json golden = PerplexityGolden(GetParam());
  ASSERT_EQ(static_cast<int64_t>(tokens.size()), golden.at("tokens").get<int64_t>()) << "tokenization differs";
  for (const auto& ref : golden.at("results")) {
    PerplexityOptions options;
    options.context = ref.at("context").get<int64_t>();
    options.stride = ref.at("stride").get<int64_t>();
    const PerplexityResult got = EvaluatePerplexity(*model, tokens, options);
    const double want = ref.at("perplexity").get<double>();
    std::printf("%s ctx %lld stride %lld: perplexity %.6f (transformers %.6f), %lld windows\n", GetParam().c_str(),
                static_cast<long long>(options.context), static_cast<long long>(options.stride), got.perplexity(),
                want, static_cast<long long>(got.windows));
    EXPECT_EQ(got.windows, ref.at("windows").get<int64_t>());
    EXPECT_EQ(got.scored, ref.at("scored").get<int64_t>());
    EXPECT_LE(std::fabs(got.perplexity() - want) / want, 1e-4);
  }
}

TEST_P(TrainedModel, LogitsAndGreedyMatchTransformers) {
  const auto model = Model::Load(kModels + GetParam());
  const ModelGolden g = LoadModelGolden(kData + GetParam());
  const std::vector<int32_t> seq = g.sequence();
  ASSERT_EQ(g.logits.shape[0], static_cast<int64_t>(seq.size()));
  KvCache cache(model->cache_config(), static_cast<int64_t>(seq.size()), KvType::kF32);
  std::vector<float> logits;
  model->Forward(seq, 0, cache, LogitsMode::kAll, logits);
  const double err = RelativeToGolden(logits.data(), g.logits, 0, static_cast<int64_t>(seq.size()));
  std::printf("%s: max |logit - ref| / max |ref| = %.3g over %zu positions\n", GetParam().c_str(), err, seq.size());
  EXPECT_LE(err, 1e-4);
  EXPECT_EQ(GreedyAgainstGolden(*model, g, 1e-4), g.greedy);
}

// The fast paths on real text: perplexity, mean KL to the exact path and top-1 agreement over
// the sample's windows (ctx 256), within the bounds docs/ACCURACY.md records for the shipped
// models ("Trained models").
struct FastBound {
  bool int8;
  double max_ppl_ratio;  // fast ppl / exact ppl - 1
  double max_mean_kl;
  double min_top1;
};

TEST_P(TrainedModel, FastPathsStayWithinTheRecordedBounds) {
  const auto exact = Model::Load(kModels + GetParam());
  const std::vector<int32_t> tokens = HeldoutTokens(GetParam());
  const PerplexityResult ref = EvaluatePerplexity(*exact, tokens, {.context = 256});
  for (const FastBound& b : {FastBound{false, kFastPplRatio, kFastMeanKl, kFastTop1},
                             FastBound{true, kInt8PplRatio, kInt8MeanKl, kInt8Top1}}) {
    const auto fast = Model::Load(kModels + GetParam(), Fast(b.int8));
    const PerplexityResult got = EvaluatePerplexity(*fast, tokens, {.context = 256, .reference = exact.get()});
    const double ratio = got.perplexity() / ref.perplexity() - 1.0;
    std::printf("%s fast%s: perplexity %.4f (exact %.4f, %+.3f %%), mean KL %.2e, max KL %.2e, top-1 %.4f\n",
                GetParam().c_str(), b.int8 ? " + int8 dense" : "", got.perplexity(), ref.perplexity(), 100 * ratio,
                got.mean_kl, got.max_kl, got.top1_agreement);
    EXPECT_LE(std::fabs(ratio), b.max_ppl_ratio);
    EXPECT_LE(got.mean_kl, b.max_mean_kl);
    EXPECT_GE(got.top1_agreement, b.min_top1);
  }
}

// Speculation is lossless on a trained model: greedy output with --spec ngram equals plain greedy
// decoding, on a prompt that invites copying (a block quoted twice) and one that does not, and
// the copying prompt proposes drafts (and, for the models that copy, accepts some).
TEST_P(TrainedModel, NgramSpeculationKeepsGreedyOutput) {
  const auto model = Model::Load(kModels + GetParam(), Fast(false));
  const Tokenizer tok = Tokenizer::FromModelDir(kModels + GetParam());
  const std::string block = "    def __repr__(self):\n        return '%s(%r)' % (self.__class__.__name__, self.name)\n";
  const std::string copying = "class A:\n" + block + "\n\nclass B:\n" + block + "\n\nclass C:\n";
  for (const std::string& text : {copying, std::string("import sys\n\n\ndef main():\n")}) {
    const std::vector<int32_t> prompt = tok.Encode(text);
    SamplingParams greedy;
    greedy.temperature = 0.0f;
    std::vector<int32_t> plain, spec_tokens;
    SpecStats stats;
    for (const bool spec : {false, true}) {
      Generator g(*model, 512, KvType::kF32);
      Sampler sampler(greedy);
      StopCondition stop({}, 64);
      SpecOptions o;
      if (spec) o.method = SpecMethod::kNgram;
      const GenerationResult r = g.Generate(prompt, sampler, stop, {}, o);
      (spec ? spec_tokens : plain) = r.tokens;
      if (spec) stats = r.spec;
    }
    EXPECT_EQ(spec_tokens, plain);
    if (text == copying) {
      EXPECT_GT(stats.proposed, 0) << "no draft proposed on a copying prompt";
      // tiny-deepseek does not continue class C with the quoted block (its greedy reply is a
      // docstring), so its drafts are rightly refused; the other two copy it.
      if (GetParam() != "tiny-deepseek") {
        EXPECT_GT(stats.accepted, 0) << "no draft accepted on a copying prompt";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shipped, TrainedModel, ::testing::Values("tiny-gpt-oss", "tiny-llama", "tiny-deepseek"),
                         [](const auto& info) {
                           return info.param == "tiny-gpt-oss" ? "GptOss" : info.param == "tiny-llama" ? "Llama" : "Deepseek";
                         });

}  // namespace
}  // namespace tessera
