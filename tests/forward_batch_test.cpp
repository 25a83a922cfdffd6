// Model::ForwardBatch (several sequences, one pass): each sequence gets bit for bit what
// Forward gives it alone, whatever else shares the pass (prefill chunks, single decode tokens,
// multi-token verification, a roll back, an empty sequence), and every cache ends as it would
// alone. This is the engine step a continuous-batching server runs; batch invariance of every
// kernel is what makes it exact.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <span>
#include <vector>

#include "core/fail_point.h"
#include "model/model.h"
#include "model/kv_cache.h"
#include "test_util.h"

namespace tessera {
namespace {

const std::string kGoldenDir = std::string(TESSERA_TEST_DATA) + "/gpt_oss_golden/";


struct Case {
  std::vector<int32_t> history;  // already in the cache
  int64_t start;                 // where this step's tokens go (< history: roll back)
  std::vector<int32_t> tokens;
  LogitsMode mode;
};

void ExpectBatchEqualsAlone(const Model& model, KvType kv) {
  const int64_t V = model.vocab_size();
  const std::vector<Case> cases = {
      {{}, 0, RandomTokens(5, V, 1), LogitsMode::kAll},                       // a prefill chunk
      {RandomTokens(17, V, 2), 17, RandomTokens(1, V, 3), LogitsMode::kLast},  // decode
      {RandomTokens(9, V, 4), 9, RandomTokens(3, V, 5), LogitsMode::kAll},     // verification
      {RandomTokens(12, V, 6), 8, RandomTokens(2, V, 7), LogitsMode::kLast},   // roll back, then two
      {RandomTokens(4, V, 8), 4, {}, LogitsMode::kLast},                       // nothing this step
      {RandomTokens(30, V, 9), 30, RandomTokens(1, V, 10), LogitsMode::kNone}, // no logits wanted
  };
  std::vector<KvCache> alone, batched;
  for (const Case& c : cases) {
    alone.emplace_back(model.cache_config(), 64, kv);
    std::vector<float> ignored;
    model.Forward(c.history, 0, alone.back(), LogitsMode::kNone, ignored);
    batched.push_back(alone.back());
  }
  std::vector<std::vector<float>> want(cases.size()), got(cases.size());
  for (size_t i = 0; i < cases.size(); ++i) model.Forward(cases[i].tokens, cases[i].start, alone[i], cases[i].mode, want[i]);
  std::vector<ForwardSequence> batch;
  for (size_t i = 0; i < cases.size(); ++i) {
    batch.push_back({cases[i].tokens, cases[i].start, &batched[i], cases[i].mode, &got[i]});
  }
  model.ForwardBatch(batch);
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(i);
    ASSERT_EQ(got[i].size(), want[i].size());
    // (memcmp of empty rows would pass null pointers: undefined even for zero bytes.)
    EXPECT_TRUE(got[i].empty() || std::memcmp(got[i].data(), want[i].data(), got[i].size() * sizeof(float)) == 0);
    EXPECT_EQ(batched[i].length(), alone[i].length());
    // The caches hold the same rows: the next token gives the same logits.
    const int32_t next[1] = {static_cast<int32_t>(i)};
    std::vector<float> a, b;
    model.Forward(next, alone[i].length(), alone[i], LogitsMode::kLast, a);
    model.Forward(next, batched[i].length(), batched[i], LogitsMode::kLast, b);
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
  }
}

TEST(ForwardBatch, EachSequenceGetsItsAloneBits) {
  for (const char* name : {"tiny_a", "tiny_b", "tiny_c"}) {
    for (const Precision precision : {Precision::kExact, Precision::kFast}) {
      SCOPED_TRACE(std::string(name) + (precision == Precision::kFast ? " fast" : " exact"));
      const auto model = Model::Load(kGoldenDir + name, ModelOptions{.precision = precision});
      ExpectBatchEqualsAlone(*model, precision == Precision::kFast ? KvType::kBF16 : KvType::kF32);
      if (precision == Precision::kFast) ExpectBatchEqualsAlone(*model, KvType::kInt8);
    }
  }
}

TEST(ForwardBatch, RefusesASharedCacheBeforeAnyWork) {
  const auto model = Model::Load(kGoldenDir + "tiny_a");
  KvCache cache(model->cache_config(), 32, KvType::kF32);
  std::vector<float> a, b;
  const std::vector<int32_t> tokens = RandomTokens(4, model->vocab_size(), 1);
  model->Forward(tokens, 0, cache, LogitsMode::kNone, a);
  const std::vector<ForwardSequence> batch = {{tokens, 4, &cache, LogitsMode::kLast, &a},
                                              {tokens, 4, &cache, LogitsMode::kLast, &b}};
  EXPECT_NE(ErrorOf([&] { model->ForwardBatch(batch); }).find("same KV cache for sequences 0 and 1"), std::string::npos);
  EXPECT_EQ(cache.length(), 4);
}

// A failure partway through a batched pass leaves every cache with intact positions only.
TEST(ForwardBatch, FailurePartwayLeavesEveryCacheConsistent) {
  const auto model = Model::Load(kGoldenDir + "tiny_a");
  const int64_t V = model->vocab_size();
  const std::vector<int32_t> seq_a = RandomTokens(40, V, 3), seq_b = RandomTokens(40, V, 4);
  KvCache a(model->cache_config(), 64, KvType::kF32, 4), b(model->cache_config(), 64, KvType::kF32, 4);
  std::vector<float> la, lb;
  model->Forward(std::span(seq_a).first(20), 0, a, LogitsMode::kNone, la);
  model->Forward(std::span(seq_b).first(20), 0, b, LogitsMode::kNone, lb);
  ArmFailPoint("forward.after_attention", 3);
  const std::vector<ForwardSequence> batch = {{std::span(seq_a).subspan(20, 20), 20, &a, LogitsMode::kLast, &la},
                                              {std::span(seq_b).subspan(20, 2), 20, &b, LogitsMode::kLast, &lb}};
  EXPECT_NE(ErrorOf([&] { model->ForwardBatch(batch); }).find("fail point"), std::string::npos);
  DisarmFailPoint();
  EXPECT_LT(a.length(), 20);  // 20 rows overwrote every slot of its rings
  EXPECT_EQ(b.length(), 20);  // 2 rows fit the rollback room
  for (auto [seq, cache] : {std::pair{&seq_a, &a}, std::pair{&seq_b, &b}}) {
    KvCache fresh(model->cache_config(), 64, KvType::kF32, 4);
    std::vector<float> want, got;
    model->Forward(*seq, 0, fresh, LogitsMode::kLast, want);
    model->Forward(std::span(*seq).subspan(cache->length()), cache->length(), *cache, LogitsMode::kLast, got);
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)));
  }
}

}  // namespace
}  // namespace tessera
