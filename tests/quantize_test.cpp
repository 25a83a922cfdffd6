// Checkpoint conversion dense experts -> MXFP4 (model/quantize.h) on the golden tiny_a model.
//
// tiny_a (tests/data/gpt_oss_golden, made by tools/make_gpt_oss_golden.py) is a real-layout MXFP4
// checkpoint with transformers goldens. Its experts are decoded (exactly) into the dense layout an
// unquantized checkpoint stores (gate_up_proj [E, H, 2I], down_proj [E, I, H], x @ W orientation,
// gpt-oss.md §2.3) with quantization_config dropped; quantizing that directory must give back
// tiny_a's block and scale bytes (issue 5 item 1: "quantizing the dequantized values of real
// MXFP4 blocks reproduces the blocks bit for bit") and a model that matches the goldens.
#include <gtest/gtest.h>

#include <csignal>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "io/npy.h"
#include "io/safetensors.h"
#include "kernels/mxfp4.h"
#include "model/model.h"
#include "model/quantize.h"
#include "test_util.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kTinyA = std::string(TESSERA_TEST_DATA) + "/gpt_oss_golden/tiny_a";

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

void StoreAs(DType dtype, float v, uint8_t* dst) {
  if (dtype == DType::kBF16) {
    const uint16_t h = F32ToBf16(v);
    std::memcpy(dst, &h, 2);
  } else if (dtype == DType::kF16) {
    const uint16_t h = F32ToF16(v);
    std::memcpy(dst, &h, 2);
  } else {
    std::memcpy(dst, &v, 4);
  }
}

// Writes tiny_a into `dir` with dense experts of `dtype` ([E, in, out], decoded exactly; the
// golden scales 2^-8..2^-6 keep every value a normal number in BF16, F16 and F32), config.json
// without quantization_config, plus a chat template and a subdirectory that the conversion must
// copy and skip. `poison` (if set) replaces one dense element: {tensor name, flat index, value}.
struct Poison {
  std::string name;
  size_t index = 0;
  float value = 0.0f;
};

void WriteDenseTinyA(const std::string& dir, DType dtype, const Poison& poison = {}) {
  fs::create_directories(dir);
  json config = json::parse(ReadFile(kTinyA + "/config.json"));
  config.erase("quantization_config");
  WriteFile(dir + "/config.json", config.dump(2));
  fs::copy_file(kTinyA + "/generation_config.json", dir + "/generation_config.json",
                fs::copy_options::overwrite_existing);
  WriteFile(dir + "/chat_template.jinja", "{{ messages }}\n");
  fs::create_directories(dir + "/original");
  WriteFile(dir + "/original/README", "not copied\n");

  auto source = std::make_shared<SafetensorsFile>(SafetensorsFile::Open(kTinyA + "/model.safetensors"));
  std::vector<TensorToWrite> tensors;
  for (const TensorInfo& info : source->tensors()) {
    const TensorView view = source->View(info);
    if (EndsWith(info.name, "_scales")) continue;
    if (!EndsWith(info.name, "_blocks")) {
      tensors.push_back({info.name, info.dtype, info.shape, [source, view](uint8_t* dst, size_t n) {
                           std::memcpy(dst, view.data, n);
                         }});
      continue;
    }
    const std::string dense = info.name.substr(0, info.name.size() - 7);
    const TensorView scales = source->View(*source->Find(dense + "_scales"));
    const int64_t E = info.shape[0], out = info.shape[1], in = info.shape[2] * kMxfp4BlockSize;
    tensors.push_back({dense, dtype, {E, in, out}, [=](uint8_t* dst, size_t) {
                         const size_t es = DTypeSize(dtype);
                         std::vector<float> row(static_cast<size_t>(in));
                         for (int64_t e = 0; e < E; ++e) {
                           for (int64_t o = 0; o < out; ++o) {
                             const size_t r = static_cast<size_t>(e * out + o);
                             DecodeMxfp4Row(view.data + r * in / 2, scales.data + r * in / 32, in, row.data());
                             for (int64_t i = 0; i < in; ++i) {
                               const size_t flat = static_cast<size_t>((e * in + i) * out + o);
                               float v = row[i];
                               if (poison.name == dense && poison.index == flat) v = poison.value;
                               StoreAs(dtype, v, dst + flat * es);
                             }
                           }
                         }
                       }});
  }
  WriteSafetensors(dir + "/model.safetensors", tensors);
}

class QuantizeCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // A parameterized test's name ends in "/N": flattened, so that TearDown removes the whole folder.
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::replace(name.begin(), name.end(), '/', '_');
    root_ = ::testing::TempDir() + "tessera_quantize_" + std::to_string(::getpid()) + "_" + name;
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  std::string root_;
};

// Compares the weights of `dir` with tiny_a: every tensor present with the same dtype, shape and
// bytes, except that a block may differ when it is non-canonical in tiny_a (largest code
// magnitude below 4: random golden codes produce a few) and then only on the canonical scale with
// identical decoded values. Returns the number of such blocks.
size_t ExpectSameWeightsAsTinyA(const std::string& dir) {
  const SafetensorsFile golden = SafetensorsFile::Open(kTinyA + "/model.safetensors");
  const WeightStore got = WeightStore::Open(dir);
  EXPECT_EQ(got.num_tensors(), golden.tensors().size());
  size_t non_canonical = 0;
  for (const TensorInfo& info : golden.tensors()) {
    const auto view = got.Find(info.name);
    if (!view) {
      ADD_FAILURE() << "missing " << info.name;
      continue;
    }
    EXPECT_EQ(view->shape(), info.shape) << info.name;
    EXPECT_EQ(DTypeSize(view->dtype()), DTypeSize(info.dtype)) << info.name;
    if (EndsWith(info.name, "_scales")) continue;  // compared with their blocks
    const TensorView want = golden.View(info);
    if (!EndsWith(info.name, "_blocks")) {
      EXPECT_EQ(view->dtype(), info.dtype) << info.name;
      EXPECT_EQ(0, std::memcmp(view->data, want.data, want.nbytes())) << info.name;
      continue;
    }
    const std::string base = info.name.substr(0, info.name.size() - 7);
    const TensorView want_scales = golden.View(*golden.Find(base + "_scales"));
    const TensorView got_scales = got.Get(base + "_scales");
    for (size_t b = 0; b < want_scales.nbytes(); ++b) {
      const uint8_t* wc = want.data + 16 * b;
      const uint8_t* gc = view->data + 16 * b;
      if (want_scales.data[b] == got_scales.data[b] && std::memcmp(wc, gc, 16) == 0) continue;
      uint8_t top = 0;
      for (int k = 0; k < 16; ++k) top = std::max<uint8_t>(top, std::max(wc[k] & 7, wc[k] >> 4 & 7));
      EXPECT_LT(top, 6) << info.name << " block " << b << ": a canonical block changed";
      float a[32], g[32];
      DecodeMxfp4Block(wc, want_scales.data[b], a);
      DecodeMxfp4Block(gc, got_scales.data[b], g);
      EXPECT_EQ(0, std::memcmp(a, g, sizeof(a))) << info.name << " block " << b << ": values changed";
      ++non_canonical;
    }
  }
  return non_canonical;
}

class QuantizeDtypes : public QuantizeCheckpointTest, public ::testing::WithParamInterface<DType> {};

TEST_P(QuantizeDtypes, ReproducesTheGoldenBlocksBitForBit) {
  const std::string dense = root_ + "/dense", out = root_ + "/mxfp4";
  WriteDenseTinyA(dense, GetParam());
  const QuantizeResult r = QuantizeCheckpoint(dense, out);
  EXPECT_EQ(r.quantized_matrices, 8u);  // 4 layers x (gate_up, down)
  EXPECT_EQ(r.weight_files, std::vector<std::string>{"model.safetensors"});
  EXPECT_EQ(r.copied_files, (std::vector<std::string>{"chat_template.jinja", "generation_config.json"}));
  EXPECT_EQ(r.skipped, std::vector<std::string>{"original/"});
  const size_t non_canonical = ExpectSameWeightsAsTinyA(out);
  std::printf("%s: %zu non-canonical golden blocks (same values, canonical scale)\n",
              std::string(DTypeName(GetParam())).c_str(), non_canonical);
  EXPECT_LE(non_canonical, 8u);  // ~1.2 expected among 12288 random blocks: (12/16)^32 each

  // config.json: tiny_a's, quantization_config included, key for key.
  EXPECT_EQ(json::parse(ReadFile(out + "/config.json")), json::parse(ReadFile(kTinyA + "/config.json")));
  EXPECT_EQ(json::parse(ReadFile(out + "/config.json")).at("quantization_config"),
            json::parse(R"({"quant_method": "mxfp4", "modules_to_not_convert":
              ["model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]})"));
  EXPECT_EQ(ReadFile(out + "/chat_template.jinja"), "{{ messages }}\n");
  EXPECT_EQ(ReadFile(out + "/generation_config.json"), ReadFile(kTinyA + "/generation_config.json"));
  EXPECT_FALSE(fs::exists(out + "/original"));
}

INSTANTIATE_TEST_SUITE_P(InputDtypes, QuantizeDtypes, ::testing::Values(DType::kBF16, DType::kF16, DType::kF32),
                         [](const auto& info) { return std::string(DTypeName(info.param)); });

TEST_F(QuantizeCheckpointTest, QuantizedModelMatchesTheGoldens) {
  const std::string dense = root_ + "/dense", out = root_ + "/mxfp4";
  WriteDenseTinyA(dense, DType::kBF16);
  QuantizeCheckpoint(dense, out);
  const auto model = Model::Load(out);
  const auto reference = Model::Load(kTinyA);
  const json golden = json::parse(ReadFile(kTinyA + "/golden.json"));
  std::vector<int32_t> seq = golden.at("prompt_ids").get<std::vector<int32_t>>();
  const auto greedy = golden.at("greedy_ids").get<std::vector<int32_t>>();
  seq.insert(seq.end(), greedy.begin(), greedy.end());
  const NpyArray ref = ReadNpyF32(kTinyA + "/logits.npy");
  KvCache cache(model->config(), static_cast<int64_t>(seq.size()), KvType::kF32);
  KvCache ref_cache(reference->config(), static_cast<int64_t>(seq.size()), KvType::kF32);
  std::vector<float> logits, ref_logits;
  model->Forward(seq, 0, cache, LogitsMode::kAll, logits);
  reference->Forward(seq, 0, ref_cache, LogitsMode::kAll, ref_logits);
  ASSERT_EQ(logits.size(), ref.data.size());
  double max_ref = 0, max_err = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    max_ref = std::max(max_ref, std::fabs(static_cast<double>(ref.data[i])));
    max_err = std::max(max_err, std::fabs(static_cast<double>(logits[i]) - ref.data[i]));
  }
  EXPECT_LE(max_err / max_ref, 1e-4);  // the golden test's acceptance bound
  // Same decoded weights as tiny_a: the same logits, bit for bit.
  EXPECT_EQ(0, std::memcmp(logits.data(), ref_logits.data(), logits.size() * sizeof(float)));
}

TEST_F(QuantizeCheckpointTest, ShardedOutputAndForce) {
  const std::string dense = root_ + "/dense", out = root_ + "/mxfp4";
  WriteDenseTinyA(dense, DType::kBF16);
  QuantizeOptions options;
  options.max_shard_bytes = 100000;
  const QuantizeResult sharded = QuantizeCheckpoint(dense, out, options);
  ASSERT_GT(sharded.weight_files.size(), 1u);
  EXPECT_TRUE(fs::exists(out + "/model.safetensors.index.json"));
  ExpectSameWeightsAsTinyA(out);
  // A non-empty output directory needs --force, which removes the stale shards.
  EXPECT_NE(ErrorOf([&] { QuantizeCheckpoint(dense, out); }).find("directory is not empty (use --force"),
            std::string::npos);
  QuantizeOptions force;
  force.overwrite = true;
  QuantizeCheckpoint(dense, out, force);
  EXPECT_FALSE(fs::exists(out + "/" + sharded.weight_files[0]));
  EXPECT_FALSE(fs::exists(out + "/model.safetensors.index.json"));
  ExpectSameWeightsAsTinyA(out);
  // The input is never a valid output, even with --force.
  EXPECT_NE(ErrorOf([&] { QuantizeCheckpoint(dense, dense + "/.", force); }).find("must differ from the input"),
            std::string::npos);
  EXPECT_TRUE(fs::exists(dense + "/model.safetensors"));
}

TEST_F(QuantizeCheckpointTest, BadInputIsAOneLineError) {
  const std::string out = root_ + "/out";
  // Already MXFP4.
  EXPECT_NE(ErrorOf([&] { QuantizeCheckpoint(kTinyA, out); }).find("already MXFP4"), std::string::npos);
  // Unsupported target.
  QuantizeOptions awq;
  awq.to = "awq";
  EXPECT_NE(ErrorOf([&] { QuantizeCheckpoint(kTinyA, out, awq); }).find("unsupported target format 'awq' (supported: mxfp4)"),
            std::string::npos);
  // A dense config over MXFP4 tensors: the dense expert tensors are missing.
  const std::string mixed = root_ + "/mixed";
  fs::create_directories(mixed);
  json config = json::parse(ReadFile(kTinyA + "/config.json"));
  config.erase("quantization_config");
  WriteFile(mixed + "/config.json", config.dump());
  fs::copy_file(kTinyA + "/model.safetensors", mixed + "/model.safetensors");
  EXPECT_NE(ErrorOf([&] { QuantizeCheckpoint(mixed, out); }).find("missing tensor 'model.layers.0.mlp.experts.gate_up_proj'"),
            std::string::npos);
  // Not a model directory.
  EXPECT_NE(ErrorOf([&] { QuantizeCheckpoint(root_ + "/nope", out); }).find(root_ + "/nope"), std::string::npos);
  EXPECT_FALSE(fs::exists(out));  // nothing was written for any of these

  // A NaN and an infinity in the experts: named with their [e, i, o] index; no config.json.
  const std::string nan_dir = root_ + "/nan";
  // gate_up_proj of layer 2 is [8, 64, 128]: element [3, 17, 100].
  WriteDenseTinyA(nan_dir, DType::kF32, {"model.layers.2.mlp.experts.gate_up_proj", (3 * 64 + 17) * 128 + 100, NAN});
  const std::string msg = ErrorOf([&] { QuantizeCheckpoint(nan_dir, out); });
  EXPECT_NE(msg.find("tensor 'model.layers.2.mlp.experts.gate_up_proj': element [3, 17, 100] is nan"),
            std::string::npos) << msg;
  EXPECT_FALSE(fs::exists(out + "/config.json"));
  const std::string inf_dir = root_ + "/inf";
  WriteDenseTinyA(inf_dir, DType::kBF16, {"model.layers.0.mlp.experts.down_proj", 5, -INFINITY});
  EXPECT_NE(ErrorOf([&] { QuantizeCheckpoint(inf_dir, root_ + "/out2"); }).find("element [0, 0, 5] is -inf"),
            std::string::npos);
}

// The tensor-level encoder on awkward shapes against a block-by-block reference: out not a
// multiple of the column chunk, one column, one block row; scales-only mode.
TEST_F(QuantizeCheckpointTest, DenseExpertsMatchBlockwiseEncoding) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  struct Shape {
    int64_t E, in, out;
  };
  for (const Shape s : {Shape{1, 32, 1}, Shape{3, 96, 130}, Shape{2, 64, 128}, Shape{1, 32, 257}, Shape{2, 0, 5}}) {
    std::vector<float> w(static_cast<size_t>(s.E * s.in * s.out));
    for (float& v : w) v = normal(rng);
    const std::string path = root_ + "/w.safetensors";
    WriteSafetensors(path, {{"w", DType::kF32, {s.E, s.in, s.out}, [&](uint8_t* dst, size_t n) {
                               if (n > 0) std::memcpy(dst, w.data(), n);  // w may be empty (null data)
                             }}});
    const SafetensorsFile file = SafetensorsFile::Open(path);
    const TensorView view = file.View(file.tensors()[0]);
    const size_t groups = static_cast<size_t>(s.in / 32), rows = static_cast<size_t>(s.E * s.out);
    std::vector<uint8_t> blocks(rows * groups * 16), scales(rows * groups), scales_only(rows * groups);
    QuantizeDenseExperts(view, blocks.data(), scales.data());
    QuantizeDenseExperts(view, nullptr, scales_only.data());
    EXPECT_EQ(scales, scales_only);
    for (int64_t e = 0; e < s.E; ++e) {
      for (int64_t o = 0; o < s.out; ++o) {
        for (size_t g = 0; g < groups; ++g) {
          float block[32];
          for (int j = 0; j < 32; ++j) block[j] = w[static_cast<size_t>((e * s.in + 32 * g + j) * s.out + o)];
          uint8_t codes[16], scale;
          ASSERT_TRUE(QuantizeMxfp4Block(block, codes, &scale));
          const size_t b = static_cast<size_t>(e * s.out + o) * groups + g;
          ASSERT_EQ(scales[b], scale);
          ASSERT_EQ(0, std::memcmp(blocks.data() + 16 * b, codes, 16)) << e << " " << o << " " << g;
        }
      }
    }
  }
  // Shapes the layout cannot hold.
  const std::string path = root_ + "/bad.safetensors";
  WriteSafetensors(path, {{"w", DType::kF32, {2, 48, 4}, [](uint8_t* dst, size_t n) { std::memset(dst, 0, n); }},
                          {"v", DType::kI32, {1, 32, 1}, [](uint8_t* dst, size_t n) { std::memset(dst, 0, n); }}});
  const SafetensorsFile file = SafetensorsFile::Open(path);
  std::vector<uint8_t> sink(64);
  EXPECT_NE(ErrorOf([&] { QuantizeDenseExperts(file.View(*file.Find("w")), sink.data(), sink.data()); })
                .find("not [experts, in, out]"),
            std::string::npos);
  EXPECT_NE(ErrorOf([&] { QuantizeDenseExperts(file.View(*file.Find("v")), sink.data(), sink.data()); })
                .find("dtype I32 cannot be quantized"),
            std::string::npos);
}

// The CLI runs the same conversion (tests/cli/quantize.sh covers its errors).
TEST_F(QuantizeCheckpointTest, CommandLine) {
  const std::string dense = root_ + "/dense";
  WriteDenseTinyA(dense, DType::kBF16);
  QuantizeCheckpoint(dense, root_ + "/lib");
  const std::string cmd = std::string(TESSERA_CLI_PATH) + " quantize -m " + dense + " --to mxfp4 --out " + root_ +
                          "/cli > " + root_ + "/stdout 2>&1";
  const int status = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0) << ReadFile(root_ + "/stdout");
  EXPECT_NE(ReadFile(root_ + "/stdout").find("8 expert matrices as MXFP4"), std::string::npos);
  EXPECT_EQ(ReadFile(root_ + "/cli/model.safetensors"), ReadFile(root_ + "/lib/model.safetensors"));
  EXPECT_EQ(ReadFile(root_ + "/cli/config.json"), ReadFile(root_ + "/lib/config.json"));
}

// `inspect` of the dense-expert input says what loading says: every tensor matches, and the
// experts must be quantized first (one line, exit 2, after the report); the output inspects ok.
TEST_F(QuantizeCheckpointTest, InspectAgreesWithLoadOnDenseExperts) {
  const std::string dense = root_ + "/dense";
  WriteDenseTinyA(dense, DType::kBF16);
  const std::string load_error = ErrorOf([&] { Model::Load(dense); });
  EXPECT_NE(load_error.find("tessera quantize --to mxfp4"), std::string::npos) << load_error;
  const std::string cmd = std::string(TESSERA_CLI_PATH) + " inspect -m " + dense + " > " + root_ + "/report 2> " +
                          root_ + "/err";
  const int status = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 2);
  EXPECT_EQ(ReadFile(root_ + "/err"), "tessera: error: " + load_error + "\n");
  EXPECT_NE(ReadFile(root_ + "/report").find("cannot be loaded as it is"), std::string::npos);
  QuantizeCheckpoint(dense, root_ + "/mxfp4");
  const std::string ok = std::string(TESSERA_CLI_PATH) + " inspect -m " + root_ + "/mxfp4 > /dev/null";
  EXPECT_EQ(std::system(ok.c_str()), 0);
}

// Interrupted (issue 13 point 7): SIGINT partway through writing the shard (raised by the fail
// point after the 5th tensor) ends the process by that signal and leaves no temporary file and no
// config.json (the mark of a complete directory); a leftover NAME.tmp from a writer killed
// outright is removed by the next run, which needs no --force for it.
TEST_F(QuantizeCheckpointTest, InterruptedRunLeavesNothingThatLooksComplete) {
  const std::string dense = root_ + "/dense", out = root_ + "/out";
  WriteDenseTinyA(dense, DType::kBF16);
  auto quantize = [&](const std::string& env) {
    const std::string cmd = env + " " + std::string(TESSERA_CLI_PATH) + " quantize -m " + dense + " --to mxfp4 --out " +
                            out + " > " + root_ + "/stdout 2>&1";
    return std::system(cmd.c_str());
  };
  auto temp_files = [&] {
    std::vector<std::string> found;
    for (const auto& entry : fs::directory_iterator(out)) {
      if (EndsWith(entry.path().filename().string(), ".tmp")) found.push_back(entry.path().string());
    }
    return found;
  };
  const int status = quantize("TESSERA_FAIL_POINT=write.tensor:5:sigint");
  const bool by_sigint = (WIFSIGNALED(status) && WTERMSIG(status) == SIGINT) ||
                         (WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGINT);
  EXPECT_TRUE(by_sigint) << "status " << status << ": " << ReadFile(root_ + "/stdout");
  ASSERT_TRUE(fs::is_directory(out));
  EXPECT_TRUE(temp_files().empty());
  EXPECT_FALSE(fs::exists(out + "/config.json"));
  EXPECT_FALSE(fs::exists(out + "/model.safetensors"));

  WriteFile(out + "/model.safetensors.tmp", "half a shard");  // as SIGKILL would leave it
  const int again = quantize("");
  ASSERT_TRUE(WIFEXITED(again) && WEXITSTATUS(again) == 0) << ReadFile(root_ + "/stdout");
  EXPECT_TRUE(temp_files().empty());
  EXPECT_TRUE(fs::exists(out + "/config.json"));
}

}  // namespace
}  // namespace tessera
