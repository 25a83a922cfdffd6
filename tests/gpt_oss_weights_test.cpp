// The gpt-oss tensor description (model/tensor_specs.h) and MXFP4 decoding (kernels/mxfp4.h),
// checked against manifests of the real checkpoints (tests/data/gpt_oss_{20b,120b}_manifest.json,
// written by tools/make_gpt_oss_manifests.py from ../shared/reference/gpt-oss.md §2.1/§2.3 and
// the Hub's model.safetensors.index.json, independently of this code).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/mapped_file.h"
#include "io/config.h"
#include "model/model.h"
#include "model/tensor_specs.h"
#include "kernels/mxfp4.h"
#include "model/synth.h"

namespace tessera {
namespace {

// A stored tensor of `nbytes` at the start of the data section.
TensorInfo StoredInfo(std::string name, DType dtype, std::vector<int64_t> shape, uint64_t nbytes) {
  TensorInfo info;
  info.name = std::move(name);
  info.dtype = dtype;
  info.shape = std::move(shape);
  info.end = nbytes;
  return info;
}

ModelConfig ConfigFromJson(const nlohmann::json& json) { return ParseModelConfig(json.dump(), "test config"); }

nlohmann::json LoadManifest(const std::string& name) {
  return nlohmann::json::parse(ReadFile(std::string(TESSERA_TEST_DATA) + "/" + name));
}

// Shard index per tensor when tensors are packed greedily in order: a new shard starts when the
// next tensor would push a non-empty shard past `max_bytes` (WriteShardedSafetensors' rule).
std::vector<int> GreedyShards(const std::vector<TensorSpec>& specs, uint64_t max_bytes) {
  std::vector<int> shard;
  int current = 0;
  uint64_t size = 0;
  for (const TensorSpec& s : specs) {
    if (size > 0 && size + s.nbytes() > max_bytes) {
      ++current;
      size = 0;
    }
    size += s.nbytes();
    shard.push_back(current);
  }
  return shard;
}

void ExpectMatchesManifest(const std::string& preset, const std::string& manifest_name, size_t num_tensors,
                           uint64_t parameters) {
  SCOPED_TRACE(preset);
  const nlohmann::json manifest = LoadManifest(manifest_name);
  const std::vector<TensorSpec> specs = ModelTensorSpecs(ConfigFromJson(SynthPresetConfigJson(preset)));
  const nlohmann::json& rows = manifest.at("tensors");
  ASSERT_EQ(rows.size(), num_tensors);
  ASSERT_EQ(specs.size(), num_tensors);

  // Same set of (name, dtype, shape).
  std::map<std::string, const TensorSpec*> by_name;
  for (const TensorSpec& s : specs) EXPECT_TRUE(by_name.emplace(s.name, &s).second) << "duplicate " << s.name;
  for (const nlohmann::json& row : rows) {
    const std::string name = row.at(0).get<std::string>();
    auto it = by_name.find(name);
    ASSERT_NE(it, by_name.end()) << "description lacks " << name;
    EXPECT_EQ(DTypeName(it->second->dtype), row.at(1).get<std::string>()) << name;
    EXPECT_EQ(it->second->shape, row.at(2).get<std::vector<int64_t>>()) << name;
  }

  // The checkpoint order is the real index's order.
  const std::vector<TensorSpec> ordered = CheckpointOrder(ConfigFromJson(SynthPresetConfigJson(preset)), specs);
  for (size_t i = 0; i < rows.size(); ++i) {
    ASSERT_EQ(ordered[i].name, rows[i].at(0).get<std::string>()) << "position " << i;
  }

  uint64_t bytes = 0, params = 0;
  for (const TensorSpec& s : specs) {
    bytes += s.nbytes();
    params += s.parameters();
  }
  EXPECT_EQ(bytes, manifest.at("total_size").get<uint64_t>());
  EXPECT_EQ(params, parameters);

  // Greedy sharding at kGptOssMaxShardBytes gives the real shard count (and, where the manifest
  // records it, the real shard of every tensor).
  const std::vector<int> shards = GreedyShards(ordered, kGptOssMaxShardBytes);
  EXPECT_EQ(static_cast<size_t>(shards.back() + 1), manifest.at("shards").size());
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].size() > 3) {
      EXPECT_EQ(shards[i], rows[i].at(3).get<int>()) << rows[i].at(0);
    }
  }
}

TEST(GptOssWeights, Gpt20bMatchesRealCheckpointManifest) {
  // 3 global tensors + 19 per layer x 24; 20.91 B parameters as llama-bench reports
  // (performance.md §2: MXFP4 scales are not parameters).
  ExpectMatchesManifest("gpt-oss-20b", "gpt_oss_20b_manifest.json", 3 + 19 * 24, 20914757184ull);
}

TEST(GptOssWeights, Gpt120bMatchesRealCheckpointManifest) {
  ExpectMatchesManifest("gpt-oss-120b", "gpt_oss_120b_manifest.json", 3 + 19 * 36, 116829156672ull);
}

TEST(GptOssWeights, KindsAndLayers) {
  const std::vector<TensorSpec> specs = ModelTensorSpecs(ConfigFromJson(SynthPresetConfigJson("gpt-oss-20b")));
  std::map<TensorKind, int> count;
  for (const TensorSpec& s : specs) {
    ++count[s.kind];
    const bool layered = s.name.rfind("model.layers.", 0) == 0;
    EXPECT_EQ(layered, s.layer >= 0) << s.name;
    if (layered) {
      EXPECT_EQ(s.name.rfind(StrCat("model.layers.", s.layer, "."), 0), 0u) << s.name;
    }
  }
  EXPECT_EQ(count[TensorKind::kEmbedding], 1);
  EXPECT_EQ(count[TensorKind::kLmHead], 1);
  EXPECT_EQ(count[TensorKind::kNorm], 2 * 24 + 1);
  EXPECT_EQ(count[TensorKind::kLinearWeight], 4 * 24);
  EXPECT_EQ(count[TensorKind::kLinearBias], 4 * 24);
  EXPECT_EQ(count[TensorKind::kAttentionSinks], 24);
  EXPECT_EQ(count[TensorKind::kRouterWeight], 24);
  EXPECT_EQ(count[TensorKind::kRouterBias], 24);
  EXPECT_EQ(count[TensorKind::kExpertBlocks], 2 * 24);
  EXPECT_EQ(count[TensorKind::kExpertScales], 2 * 24);
  EXPECT_EQ(count[TensorKind::kExpertBias], 2 * 24);
  EXPECT_EQ(count[TensorKind::kExpertWeight], 0);
}

TEST(GptOssWeights, HeadDimIsReadNotDerived) {
  // tiny: hidden 64, 4 heads of 32 (64 / 4 would be 16), 2 KV heads; experts 8, intermediate 96.
  const std::vector<TensorSpec> specs = ModelTensorSpecs(ConfigFromJson(SynthPresetConfigJson("tiny")));
  std::map<std::string, std::vector<int64_t>> shape;
  for (const TensorSpec& s : specs) shape[s.name] = s.shape;
  EXPECT_EQ(shape["model.layers.0.self_attn.q_proj.weight"], (std::vector<int64_t>{128, 64}));
  EXPECT_EQ(shape["model.layers.0.self_attn.k_proj.weight"], (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(shape["model.layers.0.self_attn.o_proj.weight"], (std::vector<int64_t>{64, 128}));
  EXPECT_EQ(shape["model.layers.3.self_attn.sinks"], (std::vector<int64_t>{4}));
  EXPECT_EQ(shape["model.layers.3.mlp.experts.gate_up_proj_blocks"], (std::vector<int64_t>{8, 192, 2, 16}));
  EXPECT_EQ(shape["model.layers.3.mlp.experts.down_proj_blocks"], (std::vector<int64_t>{8, 64, 3, 16}));
  EXPECT_EQ(shape["model.layers.3.mlp.experts.down_proj_scales"], (std::vector<int64_t>{8, 64, 3}));
  EXPECT_EQ(shape["lm_head.weight"], (std::vector<int64_t>{201088, 64}));
  EXPECT_EQ(specs.size(), 3u + 19 * 4);
}

TEST(GptOssWeights, ConfigVariants) {
  nlohmann::json json = SynthPresetConfigJson("tiny");
  json["tie_word_embeddings"] = true;
  json["attention_bias"] = false;
  std::vector<TensorSpec> specs = ModelTensorSpecs(ConfigFromJson(json));
  for (const TensorSpec& s : specs) {
    EXPECT_NE(s.name, "lm_head.weight");
    EXPECT_NE(s.kind, TensorKind::kLinearBias) << s.name;
  }
  EXPECT_EQ(specs.size(), 2u + 15 * 4);

  // Without quantization_config the experts are dense, in HF's x @ W orientation.
  json = SynthPresetConfigJson("tiny");
  json.erase("quantization_config");
  const ModelConfig dense = ConfigFromJson(json);
  EXPECT_EQ(GptOssExpertFormat(dense), ExpertFormat::kDense);
  specs = ModelTensorSpecs(dense);
  std::map<std::string, const TensorSpec*> by_name;
  for (const TensorSpec& s : specs) by_name[s.name] = &s;
  ASSERT_TRUE(by_name.count("model.layers.1.mlp.experts.gate_up_proj"));
  EXPECT_EQ(by_name["model.layers.1.mlp.experts.gate_up_proj"]->shape, (std::vector<int64_t>{8, 64, 192}));
  EXPECT_EQ(by_name["model.layers.1.mlp.experts.down_proj"]->shape, (std::vector<int64_t>{8, 96, 64}));
  EXPECT_EQ(by_name["model.layers.1.mlp.experts.down_proj"]->kind, TensorKind::kExpertWeight);
  EXPECT_FALSE(by_name.count("model.layers.1.mlp.experts.down_proj_blocks"));
  EXPECT_EQ(specs.size(), 3u + 17 * 4);
}

TEST(GptOssWeights, RejectsConfigsItCannotDescribe) {
  auto expect_error = [](nlohmann::json json, const std::string& needle) {
    try {
      ModelTensorSpecs(ConfigFromJson(json), "dir/config.json");
      ADD_FAILURE() << "no error for " << needle;
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(needle), std::string::npos) << msg;
      EXPECT_EQ(msg.rfind("dir/config.json: ", 0), 0u) << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
  };
  nlohmann::json json = SynthPresetConfigJson("tiny");
  json["intermediate_size"] = 100;
  expect_error(json, "intermediate_size 100 is not a multiple of the MXFP4 block size 32");
  json = SynthPresetConfigJson("tiny");
  json["quantization_config"]["quant_method"] = "awq";
  expect_error(json, "quant_method 'awq' is not supported");

  ModelConfig config = ConfigFromJson(SynthPresetConfigJson("tiny"));
  config.model_type = "mamba";
  EXPECT_THROW(ModelTensorSpecs(config), Error);
  config = ConfigFromJson(SynthPresetConfigJson("tiny"));
  config.num_local_experts = 0;
  try {
    ModelTensorSpecs(config, "c.json");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "c.json: num_local_experts 0 is out of range");
  }
}

TEST(GptOssWeights, CheckTensorsReportsEveryProblemByName) {
  const std::vector<TensorSpec> specs = ModelTensorSpecs(ConfigFromJson(SynthPresetConfigJson("tiny")));
  std::vector<TensorInfo> stored;
  for (const TensorSpec& s : specs) stored.push_back(StoredInfo(s.name, s.dtype, s.shape, s.nbytes()));
  EXPECT_TRUE(CheckTensors(specs, stored).empty());

  // Lenient dtype labels: raw bytes of any 1-byte type, floats that convert exactly.
  for (TensorInfo& t : stored) {
    if (t.name == "model.layers.0.mlp.experts.down_proj_scales") t.dtype = DType::kF8E8M0;
    if (t.name == "model.layers.0.mlp.experts.down_proj_blocks") t.dtype = DType::kI8;
    if (t.name == "model.norm.weight") t.dtype = DType::kF32;
  }
  EXPECT_TRUE(CheckTensors(specs, stored).empty());

  std::vector<TensorInfo> broken;
  for (const TensorInfo& t : stored) {
    if (t.name == "model.layers.2.mlp.router.bias") continue;  // missing
    broken.push_back(t);
    if (t.name == "model.layers.1.self_attn.k_proj.weight") broken.back().shape = {128, 64};
    if (t.name == "model.layers.3.mlp.experts.gate_up_proj_scales") broken.back().dtype = DType::kBF16;
  }
  broken.push_back(StoredInfo("model.layers.0.self_attn.qkv.weight", DType::kBF16, {256, 64}, 0));
  const std::vector<TensorProblem> problems = CheckTensors(specs, broken);
  ASSERT_EQ(problems.size(), 4u);
  EXPECT_EQ(problems[0].ToString(), "tensor 'model.layers.1.self_attn.k_proj.weight': shape [128, 64], expected [64, 64]");
  EXPECT_EQ(problems[1].ToString(), "missing tensor 'model.layers.2.mlp.router.bias'");
  EXPECT_EQ(problems[2].ToString(), "tensor 'model.layers.3.mlp.experts.gate_up_proj_scales': dtype BF16, expected U8");
  EXPECT_EQ(problems[3].ToString(), "unexpected tensor 'model.layers.0.self_attn.qkv.weight'");
  try {
    RequireNoProblems(problems, "/m");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "/m: tensor 'model.layers.1.self_attn.k_proj.weight': shape [128, 64], expected [64, 64] "
                 "(and 3 more problems)");
  }
  EXPECT_NO_THROW(RequireNoProblems({}, "/m"));

  // A hostile name cannot break the one-line message.
  broken.push_back(StoredInfo("evil\nname", DType::kBF16, {1}, 2));
  for (const TensorProblem& p : CheckTensors(specs, broken)) {
    EXPECT_EQ(p.ToString().find('\n'), std::string::npos);
  }
}

TEST(Mxfp4, CodeTableAndScales) {
  // gpt-oss.md §2.3: [+0, +0.5, +1, +1.5, +2, +3, +4, +6, -0, -0.5, ..., -6].
  const float expected[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};
  for (int i = 0; i < 16; ++i) EXPECT_EQ(kE2M1Values[i], expected[i]) << i;
  EXPECT_TRUE(std::signbit(kE2M1Values[8]));
  EXPECT_EQ(E8M0ScaleToF32(127), 1.0f);
  EXPECT_EQ(E8M0ScaleToF32(128), 2.0f);
  EXPECT_EQ(E8M0ScaleToF32(1), std::ldexp(1.0f, -126));
  EXPECT_EQ(E8M0ScaleToF32(0), std::ldexp(1.0f, -127));  // subnormal, as the references decode it
  EXPECT_GT(E8M0ScaleToF32(0), 0.0f);
  EXPECT_EQ(E8M0ScaleToF32(254), std::ldexp(1.0f, 127));
  EXPECT_EQ(E8M0ScaleToF32(255), std::numeric_limits<float>::infinity());  // OAI/HF: 2^128 = inf
}

TEST(Mxfp4, LowNibbleFirst) {
  // Byte b holds W[2b] in its low nibble and W[2b + 1] in its high nibble.
  uint8_t codes[32];
  for (int b = 0; b < 16; ++b) codes[b] = static_cast<uint8_t>((b & 0x0F) | ((15 - b) << 4));
  for (int b = 0; b < 16; ++b) codes[16 + b] = 0x71;  // low 1 (0.5), high 7 (6)
  const uint8_t scales[2] = {127 - 1, 127 + 2};       // 0.5 and 4
  float out[64];
  DecodeMxfp4Row(codes, scales, 64, out);
  for (int b = 0; b < 16; ++b) {
    EXPECT_EQ(out[2 * b], kE2M1Values[b] * 0.5f) << b;
    EXPECT_EQ(out[2 * b + 1], kE2M1Values[15 - b] * 0.5f) << b;
    EXPECT_EQ(out[32 + 2 * b], 0.5f * 4.0f);
    EXPECT_EQ(out[32 + 2 * b + 1], 6.0f * 4.0f);
  }
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

// `inspect` and the loader apply one dtype rule (DTypeFits): for each tensor role stored as F16 or
// F32, CheckTensors reports a problem exactly when Model::Load refuses the checkpoint
// (issue 13 point 6: a checkpoint reported "ok" that fails to load, or the reverse).
TEST(GptOssWeights, InspectAndLoadAgreeOnStoredDTypes) {
  const std::string golden = std::string(TESSERA_TEST_DATA) + "/gpt_oss_golden/tiny_a";
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("tessera_dtype_rule_" + std::to_string(::getpid()));
  const WeightStore source = WeightStore::Open(golden);
  const char* kNames[] = {"model.embed_tokens.weight",
                          "model.layers.0.self_attn.q_proj.weight",
                          "model.layers.1.mlp.router.weight",
                          "lm_head.weight",
                          "model.layers.0.input_layernorm.weight",
                          "model.layers.0.self_attn.q_proj.bias",
                          "model.layers.0.self_attn.sinks",
                          "model.layers.1.mlp.router.bias",
                          "model.layers.0.mlp.experts.down_proj_bias",
                          "model.norm.weight"};
  int refused = 0, accepted = 0;
  // The logits of the checkpoint as stored, to compare the re-typed copies with.
  const std::vector<int32_t> ids = {5, 77, 300, 12, 9};
  std::vector<float> want;
  {
    const auto model = Model::Load(golden);
    KvCache cache(model->config(), 8, KvType::kF32);
    model->Forward(ids, 0, cache, LogitsMode::kAll, want);
  }
  for (const char* changed : kNames) {
    for (const DType dtype : {DType::kF16, DType::kF32}) {
      SCOPED_TRACE(std::string(changed) + " as " + std::string(DTypeName(dtype)));
      std::filesystem::remove_all(dir);
      std::filesystem::create_directories(dir);
      for (const char* file : {"config.json", "generation_config.json"}) {
        std::filesystem::copy_file(golden + "/" + file, dir / file);
      }
      std::vector<TensorToWrite> tensors;
      for (const std::string& name : source.names()) {
        const TensorView t = source.Get(name);
        const bool convert = name == changed;
        tensors.push_back({name, convert ? dtype : t.dtype(), t.shape(), [t, convert, dtype](uint8_t* dst, size_t n) {
                             if (!convert) {
                               std::memcpy(dst, t.data, n);
                               return;
                             }
                             for (uint64_t i = 0; i < t.numel(); ++i) {
                               const float v = ElementToF32(t.dtype(), t.data + i * DTypeSize(t.dtype()));
                               if (dtype == DType::kF32) {
                                 std::memcpy(dst + 4 * i, &v, 4);
                               } else {
                                 const uint16_t h = F32ToF16(v);
                                 std::memcpy(dst + 2 * i, &h, 2);
                               }
                             }
                           }});
      }
      WriteSafetensors((dir / "model.safetensors").string(), tensors);
      const WeightStore store = WeightStore::Open(dir.string());
      const ModelConfig config = LoadModelConfig(dir.string());
      const bool inspect_ok = CheckTensors(ModelTensorSpecs(config), store).empty();
      bool load_ok = true;
      std::string why;
      try {
        Model::Load(dir.string());
      } catch (const Error& e) {
        load_ok = false;
        why = e.what();
      }
      EXPECT_EQ(inspect_ok, load_ok) << why;
      (load_ok ? accepted : refused) += 1;
      if (load_ok && dtype == DType::kF32) {
        // F32 holds every BF16 value exactly and its kernels sum as the BF16 ones do: the same bits.
        const auto model = Model::Load(dir.string());
        KvCache cache(model->config(), 8, KvType::kF32);
        std::vector<float> got;
        model->Forward(ids, 0, cache, LogitsMode::kAll, got);
        EXPECT_EQ(got, want);
      }
    }
  }
  std::filesystem::remove_all(dir);
  // Matrices are held in their stored format (model/linear.h), vectors widened to float32.
  EXPECT_EQ(refused, 0);
  EXPECT_EQ(accepted, 2 * static_cast<int>(std::size(kNames)));
}

}  // namespace
}  // namespace tessera
