// Attention past one block of positions (kernels/attend_blocked.h) inside the model: the blocked
// softmax gives the same logits bit for bit whether a prompt is prefilled at once or in chunks,
// decoded token by token, and on one thread (a unit's blocks in one task) or several (decode
// spreads a unit's blocks over the pool) — the batch invariance speculative decoding and the
// server rely on, now deep in the context. The tiny gpt-oss adds sinks and sliding layers.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/attend_blocked.h"
#include "model/model.h"
#include "model/synth.h"

namespace tessera {
namespace {

struct ThreadsGuard {
  ~ThreadsGuard() { SetGlobalThreadCount(DefaultThreadCount()); }
};

// Logits of the last prompt position and of `decoded` greedy steps after it.
std::vector<std::vector<float>> Decode(const Model& model, const std::vector<int32_t>& prompt, int64_t chunk,
                                    int decoded, KvType kv) {
  const int64_t T = static_cast<int64_t>(prompt.size());
  KvCache cache(model.cache_config(), T + decoded, kv);
  std::vector<std::vector<float>> out;
  std::vector<float> logits;
  for (int64_t pos = 0; pos < T; pos += chunk) {
    const int64_t n = std::min(chunk, T - pos);
    model.Forward(std::span<const int32_t>(prompt).subspan(pos, n), pos, cache, LogitsMode::kLast, logits);
  }
  out.push_back(logits);
  for (int i = 0; i < decoded; ++i) {
    const int32_t next[1] = {static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin())};
    model.Forward(next, T + i, cache, LogitsMode::kLast, logits);
    out.push_back(logits);
  }
  return out;
}

TEST(LongAttention, BlockedSoftmaxIsBatchAndThreadInvariant) {
  const ThreadsGuard guard;
  for (const char* preset : {"tiny-llama", "tiny"}) {
    const std::string dir = ::testing::TempDir() + "tessera_long_attention_" + preset;
    std::filesystem::remove_all(dir);
    SynthOptions options;
    options.config_json = SynthPresetConfigJson(preset);
    options.seed = 3;
    WriteSyntheticModel(dir, options);
    const auto model = Model::Load(dir, ModelOptions{.precision = Precision::kFast});
    std::mt19937 rng(11);
    std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(model->vocab_size()) - 1);
    std::vector<int32_t> prompt(2 * kAttendBlock + 90);  // three blocks for the last positions
    for (auto& t : prompt) t = token(rng);
    for (KvType kv : {KvType::kBF16, KvType::kInt8}) {
      SCOPED_TRACE(KvTypeName(kv));
      SetGlobalThreadCount(2);
      const auto whole = Decode(*model, prompt, static_cast<int64_t>(prompt.size()), 3, kv);
      const auto chunked = Decode(*model, prompt, 250, 3, kv);
      SetGlobalThreadCount(1);
      const auto serial = Decode(*model, prompt, 333, 3, kv);
      SetGlobalThreadCount(3);
      const auto three = Decode(*model, prompt, static_cast<int64_t>(prompt.size()), 3, kv);
      for (size_t step = 0; step < whole.size(); ++step) {
        const size_t bytes = whole[step].size() * sizeof(float);
        ASSERT_EQ(whole[step].size(), static_cast<size_t>(model->vocab_size()));
        EXPECT_EQ(0, std::memcmp(whole[step].data(), chunked[step].data(), bytes)) << preset << " step " << step;
        EXPECT_EQ(0, std::memcmp(whole[step].data(), serial[step].data(), bytes)) << preset << " step " << step;
        EXPECT_EQ(0, std::memcmp(whole[step].data(), three[step].data(), bytes)) << preset << " step " << step;
      }
    }
    std::filesystem::remove_all(dir);
  }
}

}  // namespace
}  // namespace tessera
