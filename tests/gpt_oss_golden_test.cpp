// The gpt-oss forward pass against Hugging Face transformers float32 eager goldens.
//
// tests/data/gpt_oss_golden/<model>/ holds a tiny random checkpoint (MXFP4 experts in the real
// layout) with logits.npy and golden.json made by tools/make_gpt_oss_golden.py (transformers
// 4.57.1, torch 2.9.1, CPU, float32, eager; cross-checked there against an independent float64
// reference). Issue acceptance: max |logit - ref| <= 1e-4 * max |ref| on the exact path (float32
// activations, float32 KV cache) and identical 32-token greedy continuations.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/mapped_file.h"
#include "io/safetensors.h"
#include "io/npy.h"
#include "model/model.h"
#include "golden_checks.h"
#include "test_util.h"

namespace tessera {
namespace {

const std::string kGoldenDir = std::string(TESSERA_TEST_DATA) + "/gpt_oss_golden/";

using Golden = ModelGolden;
Golden LoadGolden(const std::string& name) { return LoadModelGolden(kGoldenDir + name); }
double RelativeError(const float* got, const NpyArray& ref, int64_t row0, int64_t rows) {
  return RelativeToGolden(got, ref, row0, rows);
}

class GptOssGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(GptOssGolden, PrefillLogitsMatchTransformers) {
  const auto model = Model::Load(kGoldenDir + GetParam());
  const Golden g = LoadGolden(GetParam());
  std::vector<int32_t> seq = g.prompt;
  seq.insert(seq.end(), g.greedy.begin(), g.greedy.end());
  ASSERT_EQ(g.logits.shape[0], static_cast<int64_t>(seq.size()));
  ASSERT_EQ(g.logits.shape[1], model->vocab_size());
  // The golden sequences are longer than the sliding window of every model.
  ASSERT_GT(static_cast<int64_t>(g.prompt.size()), model->config().sliding_window.value());

  KvCache cache(model->config(), static_cast<int64_t>(seq.size()), KvType::kF32);
  std::vector<float> logits;
  model->Forward(seq, 0, cache, LogitsMode::kAll, logits);
  const double err = RelativeError(logits.data(), g.logits, 0, static_cast<int64_t>(seq.size()));
  RecordProperty("relative_error", std::to_string(err));
  std::printf("%s: max |logit - ref| / max |ref| = %.3g over %zu positions\n", GetParam().c_str(), err, seq.size());
  EXPECT_LE(err, 1e-4);
}

TEST_P(GptOssGolden, GreedyDecodeMatchesTransformers) {
  const auto model = Model::Load(kGoldenDir + GetParam());
  const Golden g = LoadGolden(GetParam());
  EXPECT_EQ(GreedyAgainstGolden(*model, g, 1e-4), g.greedy);
}

// Splitting the sequence into uneven chunks (each chunk sees its predecessors only through the
// cache) gives the same logits as one pass, bit for bit, with either cache type.
TEST_P(GptOssGolden, ChunkedPrefillIsBatchInvariant) {
  const auto model = Model::Load(kGoldenDir + GetParam());
  const Golden g = LoadGolden(GetParam());
  for (KvType type : {KvType::kF32, KvType::kBF16}) {
    const int64_t T = static_cast<int64_t>(g.prompt.size());
    KvCache one(model->config(), T, type), chunked(model->config(), T, type);
    std::vector<float> all, part, stitched;
    model->Forward(g.prompt, 0, one, LogitsMode::kAll, all);
    int64_t pos = 0;
    for (int64_t len : {1, 7, 2, 19, 1000}) {
      const int64_t n = std::min(len, T - pos);
      if (n <= 0) break;
      model->Forward(std::span<const int32_t>(g.prompt).subspan(pos, n), pos, chunked, LogitsMode::kAll, part);
      stitched.insert(stitched.end(), part.begin(), part.end());
      pos += n;
    }
    ASSERT_EQ(stitched.size(), all.size());
    EXPECT_TRUE(std::equal(all.begin(), all.end(), stitched.begin())) << KvTypeName(type);
  }
}

// Rolling back and re-running a suffix reproduces the original logits (verification of several
// tokens followed by a partial rejection).
TEST_P(GptOssGolden, RollbackAndReplay) {
  const auto model = Model::Load(kGoldenDir + GetParam());
  const Golden g = LoadGolden(GetParam());
  const int64_t T = static_cast<int64_t>(g.prompt.size());
  KvCache cache(model->config(), T, KvType::kBF16, /*rollback=*/8);
  std::vector<float> first, again;
  model->Forward(std::span<const int32_t>(g.prompt).first(T - 8), 0, cache, LogitsMode::kNone, first);
  model->Forward(std::span<const int32_t>(g.prompt).subspan(T - 8), T - 8, cache, LogitsMode::kAll, first);
  // Roll back 5 positions, feed different tokens, roll back again and replay the originals.
  const std::vector<int32_t> other(5, 3);
  model->Forward(other, T - 5, cache, LogitsMode::kNone, again);
  model->Forward(std::span<const int32_t>(g.prompt).subspan(T - 5), T - 5, cache, LogitsMode::kAll, again);
  const int64_t V = model->vocab_size();
  ASSERT_EQ(again.size(), static_cast<size_t>(5 * V));
  EXPECT_TRUE(std::equal(again.begin(), again.end(), first.begin() + 3 * V));
  // Rolling back further than the ring allows is refused, not silently wrong.
  EXPECT_THROW(cache.Truncate(T - 30), Error);
}

INSTANTIATE_TEST_SUITE_P(TinyModels, GptOssGolden, ::testing::Values("tiny_a", "tiny_b", "tiny_c"));

TEST(Model, RejectsBadInput) {
  const auto model = Model::Load(kGoldenDir + "tiny_a");
  KvCache cache(model->config(), 16, KvType::kF32);
  std::vector<float> logits;
  const std::vector<int32_t> bad = {1, static_cast<int32_t>(model->vocab_size())};
  EXPECT_THROW(model->Forward(bad, 0, cache, LogitsMode::kLast, logits), Error);
  const std::vector<int32_t> too_long(17, 1);
  EXPECT_THROW(model->Forward(too_long, 0, cache, LogitsMode::kLast, logits), Error);
  EXPECT_THROW(model->Forward(std::vector<int32_t>{1}, 3, cache, LogitsMode::kLast, logits), Error);
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

// Copies the golden tiny_a checkpoint into a temporary directory, dropping or reshaping one
// tensor, and expects Load to name it.
class BrokenCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "tessera_broken_" + std::to_string(::getpid());
    std::filesystem::create_directories(dir_);
    for (const char* f : {"config.json", "generation_config.json"}) {
      std::filesystem::copy_file(kGoldenDir + "tiny_a/" + f, dir_ + "/" + f,
                                 std::filesystem::copy_options::overwrite_existing);
    }
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Rewrites model.safetensors from tiny_a with `edit` applied to the tensor list.
  void Write(const std::function<void(std::vector<TensorToWrite>&)>& edit) {
    source_ = std::make_unique<SafetensorsFile>(SafetensorsFile::Open(kGoldenDir + "tiny_a/model.safetensors"));
    std::vector<TensorToWrite> tensors;
    for (const TensorInfo& info : source_->tensors()) {
      const TensorView view = source_->View(info);
      tensors.push_back({info.name, info.dtype, info.shape, [view](uint8_t* dst, size_t n) {
                           std::memcpy(dst, view.data, n);
                         }});
    }
    edit(tensors);
    WriteSafetensors(dir_ + "/model.safetensors", tensors);
  }

  std::string LoadError() {
    return ErrorOf([&] { Model::Load(dir_); });
  }

  std::string dir_;
  std::unique_ptr<SafetensorsFile> source_;
};

TEST_F(BrokenCheckpoint, MissingTensorIsNamed) {
  Write([](std::vector<TensorToWrite>& t) {
    t.erase(std::find_if(t.begin(), t.end(), [](const auto& x) { return x.name == "model.layers.1.self_attn.sinks"; }));
  });
  EXPECT_NE(LoadError().find("model.layers.1.self_attn.sinks"), std::string::npos) << LoadError();
}

TEST_F(BrokenCheckpoint, MisshapenTensorIsNamed) {
  Write([](std::vector<TensorToWrite>& t) {
    for (auto& x : t) {
      if (x.name == "model.layers.2.self_attn.k_proj.bias") x.shape = {x.shape[0] / 2, 2};
    }
  });
  const std::string err = LoadError();
  EXPECT_NE(err.find("model.layers.2.self_attn.k_proj.bias"), std::string::npos) << err;
  EXPECT_EQ(err.find('\n'), std::string::npos) << err;
}

TEST_F(BrokenCheckpoint, UnknownArchitectureIsRejected) {
  Write([](std::vector<TensorToWrite>&) {});
  std::string config = ReadFile(dir_ + "/config.json");
  config.replace(config.find("\"gpt_oss\""), 9, "\"mamba2\"");
  WriteFile(dir_ + "/config.json", config);
  EXPECT_NE(LoadError().find("mamba2"), std::string::npos) << LoadError();
}

}  // namespace
}  // namespace tessera
