// The decode profile (core/profile.h, `bench --profile`, issue 28 point 1): exclusive times
// that add up, bytes as the weights and the KV cache give them, nothing recorded on other
// threads, the pool's counters, and a forward pass whose bits do not change with it on; the
// prefill profile's ops (`bench --profile-prefill`) as the matmuls and the attention define them.
#include "core/profile.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <map>
#include <thread>

#include "core/thread_pool.h"
#include "engine/speculative.h"
#include "model/model.h"

namespace tessera {
namespace {

const std::string kLlama = std::string(TESSERA_SOURCE_DIR) + "/models/tiny-llama";

void BusyFor(std::chrono::microseconds d) {
  const auto end = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < end) {
  }
}

std::map<std::string, ProfileEntry> ByName(const std::vector<ProfileEntry>& entries) {
  std::map<std::string, ProfileEntry> out;
  for (const ProfileEntry& e : entries) out[e.category + "/" + e.detail] = e;
  return out;
}

TEST(Profile, NestedScopesAreExclusiveAndOtherThreadsRecordNothing) {
  StartProfiling();
  {
    const ProfileScope outer("outer", "", 100.0, 3.0, ProfileArithmetic::kInt8);
    BusyFor(std::chrono::microseconds(20000));
    {
      const ProfileScope inner("inner", "x", 7.0);
      BusyFor(std::chrono::microseconds(20000));
      std::thread other([] {
        EXPECT_FALSE(ProfilingThisThread());
        const ProfileScope ignored("elsewhere");
      });
      other.join();
    }
    const ProfileScope inner_again("inner", "x", 7.0);
  }
  StopProfiling();
  const ProfileScope after("after");  // profiling is off: not recorded
  const auto e = ByName(ProfileEntries());
  ASSERT_EQ(e.size(), 2u);
  EXPECT_EQ(e.at("outer/").calls, 1);
  EXPECT_EQ(e.at("inner/x").calls, 2);
  EXPECT_EQ(e.at("inner/x").bytes, 14.0);
  EXPECT_EQ(e.at("outer/").bytes, 100.0);
  EXPECT_EQ(e.at("outer/").ops, 3.0);
  EXPECT_EQ(e.at("outer/").arithmetic, ProfileArithmetic::kInt8);
  EXPECT_EQ(e.at("inner/x").ops, 0.0);
  EXPECT_EQ(e.at("inner/x").arithmetic, ProfileArithmetic::kF32);
  // Each spent 20 ms of its own; the outer's clock stopped while the inner ran.
  EXPECT_GT(e.at("outer/").seconds, 0.019);
  EXPECT_LT(e.at("outer/").seconds, 0.035);
  EXPECT_GT(e.at("inner/x").seconds, 0.019);
}

TEST(Profile, DecodeStepBytesFollowTheWeightsAndTheCache) {
  const auto model = Model::Load(kLlama);
  const ModelConfig& c = model->config();
  const int64_t n = 5;
  std::vector<float> plain, profiled;
  std::vector<std::vector<float>> rows_plain, rows_profiled;
  for (bool on : {false, true}) {
    KvCache cache(model->cache_config(), n, KvType::kBF16);
    if (on) StartProfiling();
    std::vector<float> logits;
    for (int64_t i = 0; i < n; ++i) {
      const int32_t id[1] = {static_cast<int32_t>(7 + i)};
      model->Forward(id, i, cache, LogitsMode::kLast, logits);
      (on ? rows_profiled : rows_plain).push_back(logits);
    }
    if (on) StopProfiling();
  }
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(rows_plain[i].size(), rows_profiled[i].size());
    EXPECT_EQ(0, std::memcmp(rows_plain[i].data(), rows_profiled[i].data(), rows_plain[i].size() * sizeof(float)));
  }
  const std::vector<ProfileEntry> entries = ProfileEntries();
  double linear_bytes = 0.0, attention_bytes = 0.0;
  bool lm_head = false, norm = false, other = false;
  for (const ProfileEntry& e : entries) {
    if (e.category == "linear" || e.category == "lm_head") linear_bytes += e.bytes;
    if (e.category == "attention") attention_bytes += e.bytes;
    lm_head |= e.category == "lm_head" && e.calls == n;
    norm |= e.category == "norm" && e.calls == n * (2 * c.num_hidden_layers + 1);
    other |= e.category == "other" && e.calls == n;
    EXPECT_GE(e.seconds, 0.0) << e.category;
  }
  EXPECT_TRUE(lm_head && norm && other);
  // Every linear reads its matrix once per step: the byte model's shared bytes, per token.
  const DecodeByteModel bytes = DecodeBytesOf(c, model->options());
  EXPECT_NEAR(linear_bytes / n, bytes.shared, 1e-6 * bytes.shared);
  // Step i reads the K and V rows of positions 0..i in every layer (BF16).
  const double row = static_cast<double>(c.num_key_value_heads * c.head_dim * 2);
  EXPECT_EQ(attention_bytes, c.num_hidden_layers * 2 * row * (n * (n + 1) / 2));
  const PoolProfile pool = GlobalPool().Profile();
  if (GlobalPool().num_threads() > 1) {
    EXPECT_GT(pool.runs, 0);
    ASSERT_EQ(pool.threads.size(), static_cast<size_t>(GlobalPool().num_threads()));
    for (const PoolThreadProfile& t : pool.threads) EXPECT_GT(t.busy_seconds, 0.0);
    EXPECT_GE(pool.run_seconds, pool.threads[0].busy_seconds);
  }
}

// A prefill of T tokens after `start` cached positions, logits for every row: the linears' ops are
// T times the model's matmul FLOPs per token (2 per weight), the attention's 4 D per query head
// and position seen (a dot product and a weighted sum), with the f32 arithmetic of BF16 weights.
TEST(Profile, PrefillOpsAreTheMatmulsAndTheAttention) {
  const auto model = Model::Load(kLlama);
  const ModelConfig& c = model->config();
  const int64_t start = 3, T = 9;
  KvCache cache(model->cache_config(), start + T, KvType::kBF16);
  std::vector<float> logits;
  const std::vector<int32_t> first = {5, 6, 7}, prompt = {8, 9, 10, 11, 12, 13, 14, 15, 16};
  model->Forward(first, 0, cache, LogitsMode::kNone, logits);
  StartProfiling();
  model->Forward(prompt, start, cache, LogitsMode::kAll, logits);
  StopProfiling();
  double linear_ops = 0.0, attention_ops = 0.0;
  for (const ProfileEntry& e : ProfileEntries()) {
    if (e.category == "linear" || e.category == "lm_head") {
      linear_ops += e.ops;
      EXPECT_EQ(e.arithmetic, ProfileArithmetic::kF32) << e.detail;
    }
    if (e.category == "attention") attention_ops += e.ops;
  }
  EXPECT_NEAR(linear_ops, T * model->MatmulFlopsPerToken(), 1e-9 * linear_ops);
  const double positions = static_cast<double>(T * start + T * (T + 1) / 2);  // query t sees start + t + 1
  EXPECT_EQ(attention_ops, c.num_hidden_layers * positions * 4.0 * c.num_attention_heads * c.head_dim);
}

}  // namespace
}  // namespace tessera
