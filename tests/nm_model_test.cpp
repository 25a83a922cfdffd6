// N:M sparse weights in the model (issue 18 point 2; model/sparse_scheme.h, model/formats/nm.cpp,
// ../shared/reference/sparsity.md §11): the shipped Llama pruned by `tessera sparsify` loads from
// each of its sources (dense with zeros and the config's pattern; compressed-tensors
// sparse-24-bitmask; 4:8) into the sparse formats, and
//   - nm-bf16 (exact path) gives the logits of the same weights run dense, within float32
//     summation-order noise, and the same greedy tokens;
//   - nm-int8 (fast path, --dense int8) gives the dense int8 format's logits bit for bit;
//   - the bitmask checkpoint gives the dense-with-zeros checkpoint's logits bit for bit;
//   - chunked prefill equals one pass bit for bit (batch invariance);
// and weights that break the recorded pattern, or sparsity configs tessera cannot run, are
// one-line errors naming the tensor, row and group.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "io/json_util.h"
#include "model/model.h"
#include "model/sparsify.h"
#include "golden_checks.h"
#include "test_util.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
const std::string kLlama = std::string(TESSERA_SOURCE_DIR) + "/models/tiny-llama";

// The shipped Llama pruned once per process, in the three forms (removed at exit, also when the
// binary runs outside ctest's temporary directory).
struct Pruned {
  fs::path root, dense24, bitmask24, dense48;
};
fs::path& PrunedRoot() {
  static fs::path root;
  return root;
}
const Pruned& PrunedModels() {
  static const Pruned p = [] {
    Pruned out;
    out.root = fs::path(::testing::TempDir()) / ("tessera_nm_model_" + std::to_string(::getpid()));
    fs::remove_all(out.root);
    PrunedRoot() = out.root;
    std::atexit([] {
      std::error_code ignored;
      fs::remove_all(PrunedRoot(), ignored);
    });
    out.dense24 = out.root / "dense24", out.bitmask24 = out.root / "bitmask24", out.dense48 = out.root / "dense48";
    SparsifyOptions o;
    SparsifyCheckpoint(kLlama, out.dense24.string(), o);
    o.bitmask24 = true;
    SparsifyCheckpoint(kLlama, out.bitmask24.string(), o);
    o.bitmask24 = false;
    o.kept = 4, o.group = 8;
    SparsifyCheckpoint(kLlama, out.dense48.string(), o);
    return out;
  }();
  return p;
}

std::vector<int32_t> Sequence() { return RandomTokens(40, 4096, 3); }

std::vector<float> AllLogits(const Model& model, const std::vector<int32_t>& seq) {
  KvCache cache(model.cache_config(), static_cast<int64_t>(seq.size()), KvType::kF32);
  std::vector<float> logits;
  model.Forward(seq, 0, cache, LogitsMode::kAll, logits);
  return logits;
}

ModelOptions Options(bool sparse, bool int8) {
  ModelOptions o;
  o.sparse_kernels = sparse;
  if (int8) o.precision = Precision::kFast, o.dense = DenseWeights::kInt8;
  return o;
}

double MaxRelativeDifference(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0.0, scale = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, static_cast<double>(std::fabs(a[i] - b[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(b[i])));
  }
  return diff / scale;
}

TEST(NmModel, SparseBf16MatchesTheSameWeightsRunDense) {
  const auto sparse = Model::Load(PrunedModels().dense24.string(), Options(true, false));
  const auto dense = Model::Load(PrunedModels().dense24.string(), Options(false, false));
  ASSERT_TRUE(sparse->sparse_scheme().has_value());
  EXPECT_EQ(sparse->sparse_scheme()->kept, 2);
  EXPECT_NE(sparse->LinearFormatsInUse().find("nm-bf16"), std::string::npos) << sparse->LinearFormatsInUse();
  EXPECT_EQ(dense->LinearFormatsInUse().find("nm-"), std::string::npos) << dense->LinearFormatsInUse();
  // The sparse formats hold fewer bytes per decode step.
  EXPECT_LT(sparse->DecodeBytes(0), 0.8 * dense->DecodeBytes(0));
  const std::vector<int32_t> seq = Sequence();
  const std::vector<float> a = AllLogits(*sparse, seq), b = AllLogits(*dense, seq);
  EXPECT_LE(MaxRelativeDifference(a, b), 1e-5);
  for (size_t t = 0; t < seq.size(); ++t) {
    EXPECT_EQ(ArgmaxOf(&a[t * 4096], 4096), ArgmaxOf(&b[t * 4096], 4096)) << "position " << t;
  }
  ExpectChunkedPrefillMatchesOnePass(*sparse, seq, KvType::kF32);
}

TEST(NmModel, SparseInt8EqualsTheDenseInt8FormatBitForBit) {
  const auto sparse = Model::Load(PrunedModels().dense24.string(), Options(true, true));
  const auto dense = Model::Load(PrunedModels().dense24.string(), Options(false, true));
  EXPECT_NE(sparse->LinearFormatsInUse().find("nm-int8"), std::string::npos) << sparse->LinearFormatsInUse();
  const std::vector<int32_t> seq = Sequence();
  const std::vector<float> a = AllLogits(*sparse, seq), b = AllLogits(*dense, seq);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
  ExpectChunkedPrefillMatchesOnePass(*sparse, seq, KvType::kF32);
}

TEST(NmModel, CompressedTensorsBitmaskGivesTheDenseWithZerosLogitsBitForBit) {
  const std::vector<int32_t> seq = Sequence();
  for (bool int8 : {false, true}) {
    const auto bitmask = Model::Load(PrunedModels().bitmask24.string(), Options(true, int8));
    const auto dense = Model::Load(PrunedModels().dense24.string(), Options(true, int8));
    ASSERT_TRUE(bitmask->sparse_scheme() && bitmask->sparse_scheme()->bitmask24);
    EXPECT_FALSE(bitmask->int4_scheme().has_value());
    const std::vector<float> a = AllLogits(*bitmask, seq), b = AllLogits(*dense, seq);
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << "int8 " << int8;
  }
  // --sparse off cannot make a compressed module dense: it stays sparse.
  const auto off = Model::Load(PrunedModels().bitmask24.string(), Options(false, false));
  EXPECT_NE(off->LinearFormatsInUse().find("nm-bf16"), std::string::npos);
}

TEST(NmModel, FourOfEightLoadsSparseAndMatchesDense) {
  const auto sparse = Model::Load(PrunedModels().dense48.string(), Options(true, false));
  const auto dense = Model::Load(PrunedModels().dense48.string(), Options(false, false));
  EXPECT_EQ(sparse->sparse_scheme()->group, 8);
  const std::vector<int32_t> seq = Sequence();
  EXPECT_LE(MaxRelativeDifference(AllLogits(*sparse, seq), AllLogits(*dense, seq)), 1e-5);
}

// Rewrites config.json of a copy of `from` with `edit` applied.
fs::path EditedCopy(const fs::path& from, const std::string& name, const std::function<void(nlohmann::json&)>& edit) {
  const fs::path to = PrunedModels().root / name;
  fs::remove_all(to);
  fs::copy(from, to, fs::copy_options::recursive);
  nlohmann::json j = ParseJsonText(ReadFile((to / "config.json").string()), "config.json");
  edit(j);
  std::ofstream((to / "config.json").string()) << j.dump(2);
  return to;
}

TEST(NmModel, WeightsThatBreakTheRecordedPatternAreAOneLineError) {
  // 2:4-pruned weights claimed to be 1:4.
  const fs::path wrong = EditedCopy(PrunedModels().dense24, "claims_1of4", [](nlohmann::json& j) {
    j["tessera_sparsity"]["kept"] = 1;
  });
  const std::string msg = ErrorOf([&] { Model::Load(wrong.string()); });
  EXPECT_NE(msg.find("model.layers.0.self_attn.q_proj.weight"), std::string::npos) << msg;
  EXPECT_NE(msg.find("row 0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("1:4 pattern"), std::string::npos) << msg;
  // The unpruned model claimed to be 2:4.
  const fs::path dense = PrunedModels().root / "unpruned";
  fs::remove_all(dense);
  fs::copy(kLlama, dense, fs::copy_options::recursive);
  const fs::path claimed = EditedCopy(dense, "unpruned_claims", [](nlohmann::json& j) {
    j["tessera_sparsity"] = {{"kept", 2}, {"group", 4}};
  });
  EXPECT_NE(ErrorOf([&] { Model::Load(claimed.string()); }).find("has more than 2 non-zeros"), std::string::npos);
  // ... but runs dense with --sparse off, which checks nothing.
  EXPECT_NO_THROW(Model::Load(claimed.string(), Options(false, false)));
}

TEST(NmModel, SparsityConfigsTesseraCannotRunAreRefused) {
  const auto refuse = [](const std::string& name, const std::function<void(nlohmann::json&)>& edit, const char* want) {
    const fs::path dir = EditedCopy(PrunedModels().bitmask24, name, edit);
    const std::string msg = ErrorOf([&] { Model::Load(dir.string()); });
    EXPECT_NE(msg.find(want), std::string::npos) << msg;
  };
  refuse("unstructured", [](nlohmann::json& j) { j["quantization_config"]["sparsity_config"]["sparsity_structure"] = "unstructured"; },
         "unstructured sparsity has no N:M kernels");
  refuse("bitmask_format", [](nlohmann::json& j) { j["quantization_config"]["sparsity_config"]["format"] = "sparse-bitmask"; },
         "'sparse-bitmask' is not supported");
  refuse("bitmask_4of8", [](nlohmann::json& j) { j["quantization_config"]["sparsity_config"]["sparsity_structure"] = "4:8"; },
         "stores 2:4 only");
  refuse("pattern_17", [](nlohmann::json& j) { j["quantization_config"]["sparsity_config"]["sparsity_structure"] = "2:17"; },
         "not an N:M pattern tessera runs");
}

}  // namespace
}  // namespace tessera
