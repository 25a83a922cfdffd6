// `tessera sparsify` (model/sparsify.h, issue 18 point 4) on the trained tiny Llama: every linear
// weight of the decoder layers keeps N of every M inputs per output row (the highest |W|, or
// |W| x ||X|| for Wanda), kept weights are the original bits, every other tensor is unchanged,
// config.json records the pattern, the result loads as a dense checkpoint, and Wanda (calibrated
// on other text than it is scored on) has lower 2:4 perplexity than magnitude. sparsity.md §1, §12.
#include "model/sparsify.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "core/dtype.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "engine/perplexity.h"
#include "io/json_util.h"
#include "io/safetensors.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"
#include "test_util.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
const std::string kLlama = std::string(TESSERA_SOURCE_DIR) + "/models/tiny-llama";

bool IsPrunable(const std::string& name) {
  for (const char* m : {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}) {
    if (name.find(std::string(m) + ".weight") != std::string::npos && name.rfind("model.layers.", 0) == 0) return true;
  }
  return false;
}

TEST(Sparsify, SelectNmKeepsTheHighestScoresLowerColumnOnTies) {
  const float scores[10] = {1, 5, 5, 2, 0, 0, 0, 0, 9, 3};
  uint8_t keep[10];
  SelectNm(scores, 10, 2, 4, keep);
  EXPECT_EQ(std::vector<uint8_t>(keep, keep + 10), (std::vector<uint8_t>{0, 1, 1, 0, 1, 1, 0, 0, 1, 1}));
  SelectNm(scores, 10, 1, 3, keep);
  // Groups {1, 5, 5}, {2, 0, 0}, {0, 0, 9}, and the tail {3} kept whole.
  EXPECT_EQ(std::vector<uint8_t>(keep, keep + 10), (std::vector<uint8_t>{0, 1, 0, 1, 0, 0, 0, 0, 1, 1}));
}

TEST(Sparsify, PrunesEveryLinearWeightToTheGivenPatternAndWandaBeatsMagnitude) {
  const fs::path root = fs::path(::testing::TempDir()) / ("tessera_sparsify_" + std::to_string(::getpid()));
  fs::remove_all(root);
  SparsifyOptions magnitude;
  const SparsifyResult r = SparsifyCheckpoint(kLlama, (root / "magnitude").string(), magnitude);
  EXPECT_EQ(r.pruned_modules, 28u);  // 4 layers x 7
  EXPECT_EQ(r.zeros_after * 2, r.weights_in_pruned);
  const WeightStore in = WeightStore::Open(kLlama), out = WeightStore::Open((root / "magnitude").string());
  ASSERT_EQ(in.names(), out.names());
  for (const std::string& name : in.names()) {
    SCOPED_TRACE(name);
    const TensorView a = in.Get(name), b = out.Get(name);
    ASSERT_EQ(a.dtype(), b.dtype());
    ASSERT_EQ(a.shape(), b.shape());
    const size_t elem = DTypeSize(a.dtype());
    if (!IsPrunable(name)) {
      EXPECT_EQ(std::memcmp(a.data, b.data, a.numel() * elem), 0);
      continue;
    }
    for (size_t i = 0; i < a.numel(); i += 4) {
      int nonzero = 0;
      float smallest_kept = INFINITY, largest_pruned = 0;
      for (size_t j = i; j < i + 4; ++j) {
        const float wa = ElementToF32(a.dtype(), a.data + j * elem), wb = ElementToF32(b.dtype(), b.data + j * elem);
        if (std::memcmp(b.data + j * elem, a.data + j * elem, elem) == 0 && wa != 0.0f) {
          ++nonzero;
          smallest_kept = std::min(smallest_kept, std::fabs(wa));
        } else {
          ASSERT_EQ(wb, 0.0f) << j;
          largest_pruned = std::max(largest_pruned, std::fabs(wa));
        }
      }
      ASSERT_LE(nonzero, 2) << i;
      if (nonzero == 2) {
        ASSERT_LE(largest_pruned, smallest_kept) << i;
      }
    }
  }
  const nlohmann::json config = ParseJsonText(ReadFile((root / "magnitude" / "config.json").string()), "config");
  EXPECT_EQ(config["tessera_sparsity"]["kept"], 2);
  EXPECT_EQ(config["tessera_sparsity"]["group"], 4);
  EXPECT_EQ(config["tessera_sparsity"]["method"], "magnitude");

  SparsifyOptions wanda;
  wanda.wanda = true;
  wanda.calib_file = std::string(TESSERA_SOURCE_DIR) + "/tools/train_tiny_models.py";  // not the scored text
  wanda.samples = 8;
  SparsifyCheckpoint(kLlama, (root / "wanda").string(), wanda);
  const Tokenizer tokenizer = Tokenizer::FromModelDir(kLlama);
  const std::vector<int32_t> text =
      tokenizer.Encode(ReadFile(std::string(TESSERA_SOURCE_DIR) + "/tests/data/trained/heldout_sample.txt"));
  auto perplexity = [&](const std::string& dir) {
    return EvaluatePerplexity(*Model::Load(dir), text, {.context = 512}).perplexity();
  };
  const double dense = perplexity(kLlama), pm = perplexity((root / "magnitude").string()),
               pw = perplexity((root / "wanda").string());
  EXPECT_GT(pm, dense);
  EXPECT_LT(pw, pm) << "dense " << dense << ", magnitude " << pm << ", wanda " << pw;
  fs::remove_all(root);
}

TEST(Sparsify, BadRequestsAreOneLineErrors) {
  const std::string out = ::testing::TempDir() + "tessera_sparsify_bad_" + std::to_string(::getpid());
  SparsifyOptions o;
  o.kept = 4;
  EXPECT_EQ(ErrorOf([&] { SparsifyCheckpoint(kLlama, out, o); }), "--pattern 4:4: needs 1 <= N < M <= 16 (N kept of every M)");
  o = {};
  o.wanda = true;
  EXPECT_EQ(ErrorOf([&] { SparsifyCheckpoint(kLlama, out, o); }), "--method wanda needs calibration text (--calib FILE)");
  EXPECT_NE(ErrorOf([&] { SparsifyCheckpoint(std::string(TESSERA_TEST_DATA) + "/int4/llama_awq", out, {}); })
                .find("the checkpoint is already quantized"),
            std::string::npos);
  o = {};
  o.bitmask24 = true, o.kept = 4, o.group = 8;
  EXPECT_EQ(ErrorOf([&] { SparsifyCheckpoint(kLlama, out, o); }), "--format sparse-24-bitmask stores 2:4 only, not 4:8");
  EXPECT_FALSE(fs::exists(out));
}

// gpt-oss: the MXFP4 experts pruned in place (--modules mlp): every group of 4 codes of every
// expert row keeps at most 2 non-zero magnitudes, the kept codes are the original bytes' nibbles,
// attention is untouched, config.json lists the pruned stacks, and the model loads and runs.
TEST(Sparsify, PrunesGptOssMxfp4ExpertsInPlace) {
  const std::string gpt_oss = std::string(TESSERA_SOURCE_DIR) + "/models/tiny-gpt-oss";
  const fs::path out = fs::path(::testing::TempDir()) / ("tessera_sparsify_oss_" + std::to_string(::getpid()));
  fs::remove_all(out);
  SparsifyOptions o;
  o.attention = false;
  const SparsifyResult r = SparsifyCheckpoint(gpt_oss, out.string(), o);
  EXPECT_EQ(r.zeros_after * 2, r.weights_in_pruned);
  const WeightStore in = WeightStore::Open(gpt_oss), pruned = WeightStore::Open(out.string());
  size_t stacks = 0;
  for (const std::string& name : in.names()) {
    SCOPED_TRACE(name);
    const TensorView a = in.Get(name), b = pruned.Get(name);
    ASSERT_EQ(a.nbytes(), b.nbytes());
    if (name.find("_blocks") == std::string::npos) {
      EXPECT_EQ(std::memcmp(a.data, b.data, a.nbytes()), 0);
      continue;
    }
    ++stacks;
    for (size_t i = 0; i < b.nbytes(); i += 2) {  // two bytes = one group of 4 codes
      int nonzero = 0;
      for (size_t c = 0; c < 4; ++c) {
        const int before = (a.data[i + c / 2] >> (4 * (c % 2))) & 0xF, after = (b.data[i + c / 2] >> (4 * (c % 2))) & 0xF;
        nonzero += (after & 7) != 0;
        ASSERT_TRUE(after == before || after == 0) << "byte " << i;
      }
      ASSERT_LE(nonzero, 2) << "byte " << i;
    }
  }
  EXPECT_EQ(stacks, r.pruned_modules);
  const nlohmann::json config = ParseJsonText(ReadFile((out / "config.json").string()), "config.json");
  EXPECT_EQ(config["tessera_sparsity"]["module_names"].size(), stacks);
  const auto model = Model::Load(out.string());
  std::vector<float> logits;
  KvCache cache(model->cache_config(), 8, KvType::kF32);
  model->Forward(std::vector<int32_t>{1, 2, 3, 4}, 0, cache, LogitsMode::kLast, logits);
  for (float v : logits) ASSERT_TRUE(std::isfinite(v));
  fs::remove_all(out);
}

}  // namespace
}  // namespace tessera
