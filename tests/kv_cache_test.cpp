// The KV cache's resource limits, its transactions (issue 13, points 3 and 4) and prefix copies.
//
// Limits: a cache allocates as positions are appended, so a large context costs only what the
// sequence uses; a context beyond max_position_embeddings and an allocation the machine cannot
// hold are refused with one line naming the numbers.
//
// Transactions: a forward pass writes each layer's new key/value rows as it goes, and on a
// sliding layer those rows overwrite the ring slots of older positions. A forward that fails
// partway (here through the fail point after a layer's attention, standing in for an MPI error or
// an allocation failure) must leave a cache whose positions are all intact, so that continuing
// (or prefix reuse in Generator) gives the bits of an uninterrupted run.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <span>
#include <vector>

#include "core/fail_point.h"
#include "engine/generator.h"
#include "model/model.h"
#include "model/kv_cache.h"
#include "test_util.h"

namespace tessera {
namespace {

const std::string kTinyA = std::string(TESSERA_TEST_DATA) + "/gpt_oss_golden/tiny_a";

// A gpt-oss-20b-shaped attention (24 layers alternating sliding 128 / full, 8 key/value heads of
// 64), which is all the cache reads of a config.
ModelConfig TwentyBLikeConfig() {
  ModelConfig c;
  c.num_hidden_layers = 24;
  c.num_attention_heads = 64;
  c.num_key_value_heads = 8;
  c.head_dim = 64;
  c.sliding_window = 128;
  c.max_position_embeddings = int64_t{1} << 31;
  for (int l = 0; l < 24; ++l) c.layer_types.push_back(l % 2 ? LayerType::kFullAttention : LayerType::kSlidingAttention);
  return c;
}

TEST(KvCacheLimits, AllocatesOnlyWhatTheSequenceUses) {
  const ModelConfig c = TwentyBLikeConfig();
  KvCache cache(c, int64_t{1} << 30, KvType::kBF16);  // 96 GiB if allocated up front
  EXPECT_EQ(cache.bytes(), 0u);
  cache.Reserve(1000);
  EXPECT_GE(cache.bytes(), KvCache::BytesFor(c, 1000, KvType::kBF16));
  EXPECT_LE(cache.bytes(), KvCache::BytesFor(c, 2000, KvType::kBF16));
  // Full layers: 12 x 1000 rows; sliding rings: 12 x (128 + 64); K and V; 8 x 64 BF16 per row.
  EXPECT_EQ(KvCache::BytesFor(c, 1000, KvType::kBF16), 2u * (12 * 1000 + 12 * 192) * 8 * 64 * 2);
}

// int8 heads (kernels/kv_int8.h): 64 codes and 2 f32 scales per head of 64.
TEST(KvCacheLimits, Int8BytesFollowTheHeadLayout) {
  const ModelConfig c = TwentyBLikeConfig();
  EXPECT_EQ(KvCache::BytesFor(c, 1000, KvType::kInt8), 2u * (12 * 1000 + 12 * 192) * 8 * (64 + 8));
  KvCache cache(c, int64_t{1} << 30, KvType::kInt8);
  cache.Reserve(1000);
  EXPECT_GE(cache.bytes(), KvCache::BytesFor(c, 1000, KvType::kInt8));
}

TEST(KvCacheLimits, RefusesAContextBeyondTheModelNamingBoth) {
  ModelConfig c = TwentyBLikeConfig();
  c.max_position_embeddings = 131072;
  const std::string msg = ErrorOf([&] { KvCache(c, int64_t{1} << 30, KvType::kBF16); });
  EXPECT_NE(msg.find("1073741824"), std::string::npos) << msg;
  EXPECT_NE(msg.find("max_position_embeddings 131072"), std::string::npos) << msg;
}

TEST(KvCacheLimits, RefusesWhatMemoryCannotHoldNamingTheBytes) {
  const ModelConfig c = TwentyBLikeConfig();
  KvCache cache(c, int64_t{1} << 30, KvType::kF32);
  cache.Reserve(16);
  const size_t before = cache.bytes();
  const std::string msg = ErrorOf([&] { cache.Reserve(int64_t{1} << 30); });
  EXPECT_NE(msg.find("positions needs 49152."), std::string::npos) << msg;  // 12 full layers x 2^30 x 4 KiB
  EXPECT_NE(msg.find("available"), std::string::npos) << msg;
  EXPECT_EQ(cache.bytes(), before);  // unchanged
}


// Storage is head-major (each head's positions one stream for decode's tasks): head h of a
// position lies HeadStride() after head 0, one head's slots are contiguous, and growing a full
// layer moves every head's rows to its new segment.
TEST(KvCacheLayout, HeadsAreSequentialStreamsThatSurviveGrowth) {
  const ModelConfig c = TwentyBLikeConfig();
  KvCache cache(c, 4096, KvType::kBF16);
  const int full = 1, kv_heads = 8;
  const size_t head_bytes = KvHeadBytes(c.head_dim, KvType::kBF16);
  cache.Reserve(10);
  EXPECT_EQ(cache.KeySlot(full, 1) - cache.KeySlot(full, 0), static_cast<ptrdiff_t>(head_bytes));
  auto mark = [&](int64_t pos, int head) { return static_cast<uint8_t>(pos * 8 + head + 1); };
  for (int64_t pos = 0; pos < 10; ++pos) {
    for (int h = 0; h < kv_heads; ++h) {
      std::memset(cache.KeySlot(full, pos) + h * cache.HeadStride(full), mark(pos, h), head_bytes);
      std::memset(cache.ValueSlot(full, pos) + h * cache.HeadStride(full), mark(pos, h) ^ 0xff, head_bytes);
    }
  }
  const size_t before = cache.HeadStride(full);
  cache.Reserve(1000);
  ASSERT_GT(cache.HeadStride(full), before);
  for (int64_t pos = 0; pos < 10; ++pos) {
    for (int h = 0; h < kv_heads; ++h) {
      const uint8_t* key = cache.KeySlot(full, pos) + h * cache.HeadStride(full);
      const uint8_t* value = cache.ValueSlot(full, pos) + h * cache.HeadStride(full);
      for (size_t b = 0; b < head_bytes; ++b) {
        ASSERT_EQ(key[b], mark(pos, h)) << pos << " " << h;
        ASSERT_EQ(value[b], mark(pos, h) ^ 0xff) << pos << " " << h;
      }
    }
  }
}

class KvCacheTransactions : public ::testing::Test {
 protected:
  void TearDown() override { DisarmFailPoint(); }
};

// A failed 80-token forward at position 30 (rollback 4, window 8: the batch's rows fill every ring
// slot) must not leave positions that look intact: continuing from whatever the cache still holds
// gives the logits of one uninterrupted pass, bit for bit (the forward is batch-invariant).
TEST_F(KvCacheTransactions, FailedForwardLeavesOnlyIntactPositions) {
  const auto model = Model::Load(kTinyA);
  const int64_t V = model->vocab_size(), N = 120;
  const std::vector<int32_t> seq = RandomTokens(N, V, 7);
  KvCache whole(model->cache_config(), N, KvType::kF32, /*rollback=*/4);
  std::vector<float> want, got;
  model->Forward(seq, 0, whole, LogitsMode::kAll, want);

  for (const int64_t batch : {80, 3}) {  // 3 <= rollback + 1: the rings keep what position 30 needs
    SCOPED_TRACE(batch);
    KvCache cache(model->cache_config(), N, KvType::kF32, /*rollback=*/4);
    const std::span<const int32_t> all(seq);
    model->Forward(all.first(30), 0, cache, LogitsMode::kNone, got);
    ArmFailPoint("forward.after_attention", 3);  // after layer 2 (sliding) has written its ring
    EXPECT_NE(ErrorOf([&] { model->Forward(all.subspan(30, batch), 30, cache, LogitsMode::kAll, got); })
                  .find("fail point"),
              std::string::npos);
    const int64_t kept = cache.length();
    if (batch == 3) {
      EXPECT_EQ(kept, 30);
    } else {
      EXPECT_LT(kept, 30);  // the rings lost what position 30 needs
    }
    model->Forward(all.subspan(kept), kept, cache, LogitsMode::kAll, got);
    ASSERT_EQ(got.size(), static_cast<size_t>((N - kept) * V));
    EXPECT_EQ(0, std::memcmp(got.data(), &want[kept * V], got.size() * sizeof(float)));
  }
}

// Prompt sharing (BatchEngine's n > 1 choices): a cache that copies another's prefix, from empty
// or after computing a few positions itself, continues with the bits of one uninterrupted pass;
// a prefix the source's rings no longer hold, a longer one than it has, or a different layout
// is refused with one line and the cache left as it was.
TEST(KvCacheSharing, CopiedPrefixContinuesBitForBit) {
  const auto model = Model::Load(kTinyA);  // sliding window 8; rollback 4: rings of 12
  const int64_t V = model->vocab_size(), N = 60;
  const std::vector<int32_t> seq = RandomTokens(N, V, 11);
  const std::span<const int32_t> all(seq);
  KvCache whole(model->cache_config(), N, KvType::kF32, /*rollback=*/4);
  std::vector<float> want, got;
  model->Forward(seq, 0, whole, LogitsMode::kAll, want);
  KvCache source(model->cache_config(), N, KvType::kF32, 4);
  model->Forward(all.first(30), 0, source, LogitsMode::kNone, got);
  for (const int64_t own : {0, 5, 30}) {
    SCOPED_TRACE(own);
    KvCache cache(model->cache_config(), N, KvType::kF32, 4);
    if (own > 0) model->Forward(all.first(own), 0, cache, LogitsMode::kNone, got);
    cache.CopyPrefixFrom(source, 30);
    EXPECT_EQ(cache.length(), 30);
    model->Forward(all.subspan(30), 30, cache, LogitsMode::kAll, got);
    ASSERT_EQ(got.size(), static_cast<size_t>((N - 30) * V));
    EXPECT_EQ(0, std::memcmp(got.data(), &want[30 * V], got.size() * sizeof(float)));
  }
  KvCache cache(model->cache_config(), N, KvType::kF32, 4);
  model->Forward(all.first(5), 0, cache, LogitsMode::kNone, got);
  // A 30-position source keeps positions 18..29 in its rings of 12; copying 18 needs 6..17.
  EXPECT_NE(ErrorOf([&] { cache.CopyPrefixFrom(source, 18); }).find("no longer stores position"), std::string::npos);
  EXPECT_NE(ErrorOf([&] { cache.CopyPrefixFrom(source, 31); }).find("cannot copy 31 positions"), std::string::npos);
  EXPECT_NE(ErrorOf([&] { cache.CopyPrefixFrom(cache, 5); }).find("itself"), std::string::npos);
  KvCache bf16(model->cache_config(), N, KvType::kBF16, 4);
  EXPECT_NE(ErrorOf([&] { bf16.CopyPrefixFrom(source, 10); }).find("different layouts"), std::string::npos);
  EXPECT_EQ(cache.length(), 5);
  model->Forward(all.subspan(5), 5, cache, LogitsMode::kAll, got);
  EXPECT_EQ(0, std::memcmp(got.data(), &want[5 * V], got.size() * sizeof(float)));
}

// Generator: a prompt whose prefill fails, then the same prompt again, gives what a fresh session
// gives (prefix reuse must not read the rows the failed pass overwrote).
TEST_F(KvCacheTransactions, GeneratorRecoversFromAFailedPrefill) {
  const auto model = Model::Load(kTinyA);
  const std::vector<int32_t> first = RandomTokens(40, model->vocab_size(), 11);
  std::vector<int32_t> longer = first;
  const std::vector<int32_t> more = RandomTokens(100, model->vocab_size(), 12);
  longer.insert(longer.end(), more.begin(), more.end());
  auto generate = [&](Generator& g, const std::vector<int32_t>& prompt) {
    Sampler sampler(SamplingParams{.temperature = 0.0f});
    StopCondition stop({}, 12);
    return g.Generate(prompt, sampler, stop);
  };
  Generator fresh(*model, 512, KvType::kF32);
  const GenerationResult want = generate(fresh, longer);

  Generator session(*model, 512, KvType::kF32);
  generate(session, first);
  ArmFailPoint("forward.after_attention", 3);
  EXPECT_NE(ErrorOf([&] { generate(session, longer); }).find("fail point"), std::string::npos);
  EXPECT_LE(static_cast<int64_t>(session.cached_tokens().size()), session.cache().length());
  const GenerationResult got = generate(session, longer);
  EXPECT_EQ(got.tokens, want.tokens);
  // The failed 100-token pass overwrote every ring slot, including those of the 40 shared
  // positions: none of them may be reused (greedy tokens alone would hardly notice stale rows).
  EXPECT_EQ(got.timings.prefilled_tokens, static_cast<int64_t>(longer.size()));
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

// Dynamic NTK follows HF's stateful frequency update per sequence (issue 14 point 3): the
// frequencies grow with the longest call seen past max_position_embeddings, stay there for a
// shorter call that is still past it, and reset below it; the cache may run past
// max_position_embeddings for this rope type only. A model forward uses the cache's state: after
// a long call, re-running a suffix gives other logits than a fresh cache (HF's behaviour too).
TEST(KvCacheRope, DynamicNtkFollowsTheTrackerPerSequence) {
  const std::string dir = std::string(TESSERA_TEST_DATA) + "/dense_golden/llama_b";
  ModelConfig config = LoadModelConfig(dir);
  config.rope_scaling = RopeScaling{};
  config.rope_scaling->rope_type = "dynamic";
  config.rope_scaling->factor = 2.0;
  config.max_position_embeddings = 32;
  const Rope rope = Rope::FromConfig(config, "dynamic");
  KvCache cache(config, 64, KvType::kF32);  // past max_position_embeddings: allowed for dynamic
  EXPECT_EQ(cache.RopeFrequenciesFor(rope, 20).inv_freq, rope.frequencies().inv_freq);
  EXPECT_EQ(cache.RopeFrequenciesFor(rope, 48).inv_freq, rope.Frequencies(48).inv_freq);
  // Shorter but still past 32: HF keeps the longest length's frequencies.
  EXPECT_EQ(cache.RopeFrequenciesFor(rope, 40).inv_freq, rope.Frequencies(48).inv_freq);
  EXPECT_NE(rope.Frequencies(40).inv_freq, rope.Frequencies(48).inv_freq);
  // Back under the original length: reset.
  EXPECT_EQ(cache.RopeFrequenciesFor(rope, 20).inv_freq, rope.frequencies().inv_freq);
  // Another sequence starts from the initial state.
  KvCache other(config, 64, KvType::kF32);
  EXPECT_EQ(other.RopeFrequenciesFor(rope, 40).inv_freq, rope.Frequencies(40).inv_freq);
  // Other rope types keep the max_position_embeddings limit.
  config.rope_scaling.reset();
  EXPECT_NE(ErrorOf([&] { KvCache(config, 64, KvType::kF32); }).find("max_position_embeddings 32"), std::string::npos);
}

}  // namespace
}  // namespace tessera
