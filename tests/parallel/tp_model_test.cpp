// Tensor-parallel gpt-oss (model/tensor_parallel.h, parallel/tp_group.h) against the same model in one
// process, on the golden checkpoints, with the job's world as the TP group (1, 2 or 4 ranks).
// Issue acceptance: logits within 1e-4 relative of the single-process ones and the same greedy
// tokens, for sequence-parallel prefill (T divisible by P: fused AllGather+MatMul and
// MatMul+ReduceScatter), replicated batches (all-reduce) and token-by-token decode, with the
// experts as tensor-parallel slices (the default; at P = 4 the tiny models' 2 or 3 intermediate
// blocks leave some ranks an empty slice) and as whole experts per rank; a degree that does not
// divide the heads, the key/value heads or (expert-parallel) the experts is a one-line error on
// every rank.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <unistd.h>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "parallel/tp_group.h"
#include "parallel_test_util.h"
#include "test_util.h"
#include "model/model.h"
#include "model/sparsify.h"
#include "copying_model.h"
#include "engine/generator.h"

namespace tessera {
namespace {

using parallel_test::ParallelTest;

const std::string kGoldenDir = std::string(TESSERA_TEST_DATA) + "/gpt_oss_golden/";


// Whether the model's heads, key/value heads and (expert-parallel) experts split over P ranks;
// tensor-parallel experts split any expert count.
bool Splits(const ModelConfig& c, int P, TpExperts experts) {
  const int64_t nkv = c.num_key_value_heads;
  return c.num_attention_heads % P == 0 && (nkv % P == 0 || P % nkv == 0) &&
         (experts == TpExperts::kTensor || c.num_local_experts % P == 0);
}

double MaxRelative(const std::vector<float>& got, const std::vector<float>& want) {
  double err = 0.0, ref = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    err = std::max(err, static_cast<double>(std::fabs(got[i] - want[i])));
    ref = std::max(ref, static_cast<double>(std::fabs(want[i])));
  }
  return err / ref;
}

int32_t Argmax(const std::vector<float>& v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

class TpModelTest : public ParallelTest {};

TEST_F(TpModelTest, LogitsAndGreedyTokensMatchOneProcess) {
  const int P = World().size();
  for (const char* name : {"tiny_a", "tiny_b", "tiny_c"}) {
    for (Precision precision : {Precision::kExact, Precision::kFast}) {
      for (TpExperts experts : {TpExperts::kTensor, TpExperts::kExpert}) {
        SCOPED_TRACE(std::string(name) + (precision == Precision::kFast ? " fast" : " exact") +
                     (experts == TpExperts::kTensor ? " tensor-parallel experts" : " expert-parallel experts"));
        const auto one = Model::Load(kGoldenDir + name, ModelOptions{precision, DenseWeights::kBf16, nullptr});
        if (!Splits(one->config(), P, experts)) continue;
        const auto tp = Model::Load(
            kGoldenDir + name, ModelOptions{precision, DenseWeights::kBf16, MakeTensorParallelGroup(P), experts});
        const std::vector<int32_t> seq = GoldenSequence(name);
        // An even and an odd prefill: sequence-parallel (T % P == 0) and replicated (else, P > 1).
        for (size_t T : {seq.size() / (2 * P) * (2 * P), seq.size() / (2 * P) * (2 * P) - 1}) {
          const std::span<const int32_t> prompt(seq.data(), T);
          KvCache c1(one->cache_config(), T + 16, KvType::kF32), cp(tp->cache_config(), T + 16, KvType::kF32);
          std::vector<float> want, got;
          one->Forward(prompt, 0, c1, LogitsMode::kAll, want);
          tp->Forward(prompt, 0, cp, LogitsMode::kAll, got);
          ASSERT_EQ(want.size(), got.size());
          // The fast path quantizes o_proj's activations per rank slice; the same 1e-4 bound holds
          // for the exact path, the fast one stays within its own documented error (docs/ACCURACY.md).
          EXPECT_LE(MaxRelative(got, want), precision == Precision::kExact ? 1e-4 : 3e-2) << "T=" << T;
          // Greedy decode, token by token on both (the all-reduce path).
          int32_t a = Argmax(std::vector<float>(want.end() - one->vocab_size(), want.end()));
          int32_t b = Argmax(std::vector<float>(got.end() - tp->vocab_size(), got.end()));
          for (int step = 0; step < 16; ++step) {
            ASSERT_EQ(a, b) << "greedy step " << step << ", T=" << T;
            const int32_t tok[1] = {a};
            one->Forward(tok, static_cast<int64_t>(T) + step, c1, LogitsMode::kLast, want);
            tp->Forward(tok, static_cast<int64_t>(T) + step, cp, LogitsMode::kLast, got);
            if (precision == Precision::kExact) {
              EXPECT_LE(MaxRelative(got, want), 1e-4) << "decode step " << step;
            }
            a = Argmax(want);
            b = Argmax(got);
          }
        }
      }
    }
  }
}

// The first T prompt tokens through one process and through the job: the logits within 1e-4
// (exact; the partial sums are added in another order) or 3e-2 (fast), and on the exact path the
// same greedy tokens for 8 more steps.
void ExpectSameAsOneProcess(const Model& one, const Model& tp, const std::vector<int32_t>& prompt, size_t T,
                            Precision precision) {
  const std::span<const int32_t> part(prompt.data(), T);
  KvCache c1(one.cache_config(), T + 8, KvType::kF32), cp(tp.cache_config(), T + 8, KvType::kF32);
  std::vector<float> want, got;
  one.Forward(part, 0, c1, LogitsMode::kAll, want);
  tp.Forward(part, 0, cp, LogitsMode::kAll, got);
  ASSERT_EQ(want.size(), got.size());
  EXPECT_LE(MaxRelative(got, want), precision == Precision::kExact ? 1e-4 : 3e-2);
  int32_t a = Argmax(std::vector<float>(want.end() - one.vocab_size(), want.end()));
  for (int step = 0; step < 8 && precision == Precision::kExact; ++step) {
    ASSERT_EQ(a, Argmax(std::vector<float>(got.end() - tp.vocab_size(), got.end()))) << "step " << step;
    const int32_t tok[1] = {a};
    one.Forward(tok, static_cast<int64_t>(T) + step, c1, LogitsMode::kLast, want);
    tp.Forward(tok, static_cast<int64_t>(T) + step, cp, LogitsMode::kLast, got);
    a = Argmax(want);
  }
}

// The dense families and Qwen3-MoE (tests/data/dense_golden): heads, key/value heads, the MLP's
// intermediate units (and the experts' tensor slices) split over the ranks give one process's
// logits within 1e-4 on the exact path (the partial sums are added in another order), and the
// same greedy tokens; with int8 dense weights the fast path's bound.
TEST_F(TpModelTest, DenseFamiliesMatchOneProcess) {
  const int P = World().size();
  const std::string dir = std::string(TESSERA_TEST_DATA) + "/dense_golden/";
  for (const char* name : {"llama_b", "mistral_a", "qwen2_b", "qwen3_a", "qwen3_moe_a", "qwen3_moe_b"}) {
    for (Precision precision : {Precision::kExact, Precision::kFast}) {
      // qwen3_moe_a has a top-k router gap of 1.3e-4 (golden.json): int8 noise that differs
      // between the split and the whole o_proj may route one token differently there.
      if (precision == Precision::kFast && std::string(name) == "qwen3_moe_a") continue;
      SCOPED_TRACE(std::string(name) + (precision == Precision::kFast ? " fast int8" : " exact"));
      const DenseWeights dense = precision == Precision::kFast ? DenseWeights::kInt8 : DenseWeights::kBf16;
      const auto one = Model::Load(dir + name, ModelOptions{precision, dense, nullptr});
      if (!Splits(one->config(), P, TpExperts::kTensor)) continue;
      const auto tp = Model::Load(dir + name, ModelOptions{precision, dense, MakeTensorParallelGroup(P)});
      std::ifstream in(dir + name + "/golden.json");
      const auto golden = nlohmann::json::parse(in);
      const std::vector<int32_t> prompt = golden.at("prompt_ids").get<std::vector<int32_t>>();
      for (size_t T : {prompt.size() / (2 * P) * (2 * P), prompt.size() / (2 * P) * (2 * P) - 1}) {
        SCOPED_TRACE("T=" + std::to_string(T));
        ExpectSameAsOneProcess(*one, *tp, prompt, T, precision);
      }
    }
  }
}

// DeepSeek-V2/V3 (tests/data/deepseek_golden, issue 29 point 6): MLA heads split (their query
// rows, kv_b rows and o_proj columns), the latent projection and cache on every rank, experts
// and shared experts as tensor slices, the dense first layer as a dense MLP; exact within 1e-4 and
// the same greedy tokens; FP8 rows sliced in whole blocks.
TEST_F(TpModelTest, DeepseekMatchesOneProcess) {
  const int P = World().size();
  const std::string dir = std::string(TESSERA_TEST_DATA) + "/deepseek_golden/";
  for (const char* name : {"v2_a", "v2_b", "v3_a", "v3_fp8"}) {
    for (MlaForm form : {MlaForm::kAbsorbed, MlaForm::kNaive}) {
      SCOPED_TRACE(std::string(name) + (form == MlaForm::kNaive ? " naive" : " absorbed"));
      ModelOptions options{Precision::kExact, DenseWeights::kBf16, nullptr};
      options.mla = form;
      const auto one = Model::Load(dir + name, options);
      if (!Splits(one->config(), P, TpExperts::kTensor)) continue;
      options.tp = MakeTensorParallelGroup(P);
      const auto tp = Model::Load(dir + name, options);
      std::ifstream in(dir + name + "/golden.json");
      const auto golden = nlohmann::json::parse(in);
      const std::vector<int32_t> prompt = golden.at("prompt_ids").get<std::vector<int32_t>>();
      ExpectSameAsOneProcess(*one, *tp, prompt, prompt.size() / (2 * P) * (2 * P), Precision::kExact);
    }
  }
}

// int4 checkpoints (tests/data/int4: AutoAWQ GEMM and compressed-tensors, issue 16 point 6):
// the column-parallel projections split their output rows, the row-parallel ones (o_proj,
// down_proj) their input in whole quantization groups; the job equals one process (exact within
// 1e-4 and the same greedy tokens, fast within the int8 bound). A degree that would split a group
// is a one-line error naming the tensor and the group size.
TEST_F(TpModelTest, Int4CheckpointsMatchOneProcess) {
  const int P = World().size();
  const std::string dir = std::string(TESSERA_TEST_DATA) + "/int4/";
  int compared = 0;
  for (const char* name : {"llama_awq", "qwen2_awq", "llama_ct", "qwen3_ct", "qwen3_moe_ct"}) {
    for (Precision precision : {Precision::kExact, Precision::kFast}) {
      SCOPED_TRACE(std::string(name) + (precision == Precision::kFast ? " fast" : " exact"));
      const auto one = Model::Load(dir + name, ModelOptions{precision, DenseWeights::kBf16, nullptr});
      if (!Splits(one->config(), P, TpExperts::kTensor)) continue;
      std::unique_ptr<Model> tp;
      try {
        tp = Model::Load(dir + name, ModelOptions{precision, DenseWeights::kBf16, MakeTensorParallelGroup(P)});
      } catch (const Error& e) {
        const std::string what = e.what();
        EXPECT_TRUE(parallel_test::OneLine(what)) << what;
        EXPECT_NE(what.find("split its quantization groups of"), std::string::npos) << what;
        continue;
      }
      ++compared;
      std::ifstream in(dir + name + "/golden.json");
      const std::vector<int32_t> prompt = nlohmann::json::parse(in).at("prompt_ids").get<std::vector<int32_t>>();
      ExpectSameAsOneProcess(*one, *tp, prompt, prompt.size() - 3, precision);
    }
  }
  if (P <= 2) {  // every model splits in whole groups over 1 or 2 ranks
    EXPECT_GT(compared, 0);
  }
}

// N:M sparse checkpoints (the shipped Llama pruned 2:4, dense with zeros and compressed-tensors
// sparse-24-bitmask): each rank's row and column slices of the sparse formats give one process's
// logits (model/formats/nm.cpp; a bitmask slice starts at the kept values before its columns).
TEST_F(TpModelTest, NmSparseCheckpointsMatchOneProcess) {
  const int P = World().size();
  const std::filesystem::path root = std::filesystem::path(::testing::TempDir()) /
                                     StrCat("tessera_tp_nm_", ::getpid(), "_", World().rank());
  std::filesystem::remove_all(root);
  const std::string llama = std::string(TESSERA_SOURCE_DIR) + "/models/tiny-llama";
  SparsifyOptions o;
  SparsifyCheckpoint(llama, (root / "dense").string(), o);
  o.bitmask24 = true;
  SparsifyCheckpoint(llama, (root / "bitmask").string(), o);
  const std::vector<int32_t> prompt = RandomTokens(24, 4096, 5);
  for (const char* form : {"dense", "bitmask"}) {
    for (Precision precision : {Precision::kExact, Precision::kFast}) {
      SCOPED_TRACE(std::string(form) + (precision == Precision::kFast ? " fast int8" : " exact"));
      const DenseWeights dense = precision == Precision::kFast ? DenseWeights::kInt8 : DenseWeights::kBf16;
      const std::string dir = (root / form).string();
      const auto one = Model::Load(dir, ModelOptions{precision, dense, nullptr});
      if (!Splits(one->config(), P, TpExperts::kTensor)) continue;
      const auto tp = Model::Load(dir, ModelOptions{precision, dense, MakeTensorParallelGroup(P)});
      EXPECT_NE(tp->LinearFormatsInUse().find("nm-"), std::string::npos) << tp->LinearFormatsInUse();
      ExpectSameAsOneProcess(*one, *tp, prompt, prompt.size() - 3, precision);
    }
  }
  std::filesystem::remove_all(root);
}

TEST_F(TpModelTest, DegreesThatDoNotDivideAreOneLineErrors) {
  const int P = World().size();
  if (P == 1) GTEST_SKIP() << "needs several ranks";
  for (const char* name : {"tiny_a", "tiny_b", "tiny_c"}) {
    const auto config = Model::Load(kGoldenDir + name)->config();
    if (Splits(config, P, TpExperts::kExpert)) continue;
    try {
      Model::Load(kGoldenDir + name, ModelOptions{Precision::kExact, DenseWeights::kBf16,
                                                         MakeTensorParallelGroup(P), TpExperts::kExpert});
      ADD_FAILURE() << name << ": expected an error for --tp " << P;
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_TRUE(parallel_test::OneLine(what)) << what;
      EXPECT_NE(what.find("tensor parallel degree " + std::to_string(P)), std::string::npos) << what;
    }
  }
}

// Adaptive speculation under tensor parallelism (issue 13 point 1): each rank's controller times
// its own steps, so left alone the ranks would choose different numbers of drafts and call the
// forward with different token counts (mismatched collectives). Here the ranks are handed cost
// tables that disagree outright (rank 0: verification is free, so it tries every draft; the
// others: prohibitive, so they would try none); the job must follow rank 0 and emit exactly what
// one process emits, with drafts accepted (a model that copies, tests/copying_model.h).
TEST_F(TpModelTest, SpeculationFollowsRankZero) {
  const int P = World().size();
  const Communicator& world = World();
  uint64_t job = static_cast<uint64_t>(::getpid());
  world.Broadcast(&job, sizeof(job), 0);
  const std::string dir = ::testing::TempDir() + "tessera_copying_" + std::to_string(job);
  if (world.rank() == 0) test::WriteCopyingModel(kGoldenDir + "tiny_b", dir);
  world.Barrier();
  std::vector<int32_t> prompt = GoldenSequence("tiny_b");
  prompt.resize(24);
  auto generate = [&](const Model& model, const SpecOptions& spec) {
    Generator generator(model, 256, KvType::kF32);
    Sampler sampler(SamplingParams{.temperature = 0.0f});
    StopCondition stop({}, 40);
    return generator.Generate(prompt, sampler, stop, {}, spec);
  };
  const auto one = Model::Load(dir);
  const GenerationResult plain = generate(*one, {});
  const int64_t K = 8;
  SpecOptions spec{.method = SpecMethod::kNgram, .k = K, .min_n = 1, .max_n = 3, .adaptive = true, .cost = {}};
  spec.cost.assign(K + 1, world.rank() == 0 ? 1.0 : 100.0);
  spec.cost[0] = 1.0;
  if (Splits(one->config(), P, TpExperts::kTensor)) {
    const auto tp = Model::Load(dir, ModelOptions{Precision::kExact, DenseWeights::kBf16, MakeTensorParallelGroup(P)});
    const GenerationResult got = generate(*tp, spec);
    EXPECT_EQ(got.tokens, plain.tokens);
    EXPECT_GT(got.spec.accepted, 0) << "the copying model's drafts were never accepted";
    EXPECT_LT(got.spec.decode_steps, static_cast<int64_t>(got.tokens.size()) - 1);  // rank 0 drafted, all followed
  }
  world.Barrier();
  if (world.rank() == 0) std::filesystem::remove_all(dir);
}

// A batched pass (several sequences, replicated rows and all-reduces) under tensor parallelism
// gives each sequence what one process gives it alone.
TEST_F(TpModelTest, ForwardBatchMatchesOneProcess) {
  const int P = World().size();
  for (const char* name : {"tiny_a", "tiny_c"}) {
    SCOPED_TRACE(name);
    const auto one = Model::Load(kGoldenDir + name);
    if (!Splits(one->config(), P, TpExperts::kTensor)) continue;
    const auto tp = Model::Load(kGoldenDir + name, ModelOptions{Precision::kExact, DenseWeights::kBf16, MakeTensorParallelGroup(P)});
    const std::vector<int32_t> seq = GoldenSequence(name);
    const std::span<const int32_t> all(seq);
    KvCache a1(one->cache_config(), 64, KvType::kF32), b1(one->cache_config(), 64, KvType::kF32);
    KvCache a2(tp->cache_config(), 64, KvType::kF32), b2(tp->cache_config(), 64, KvType::kF32);
    std::vector<float> ignored, want_a, want_b, got_a, got_b;
    one->Forward(all.first(10), 0, b1, LogitsMode::kNone, ignored);
    tp->Forward(all.first(10), 0, b2, LogitsMode::kNone, ignored);
    one->Forward(all.first(7), 0, a1, LogitsMode::kAll, want_a);
    one->Forward(all.subspan(10, 1), 10, b1, LogitsMode::kLast, want_b);
    const std::vector<ForwardSequence> batch = {{all.first(7), 0, &a2, LogitsMode::kAll, &got_a},
                                                {all.subspan(10, 1), 10, &b2, LogitsMode::kLast, &got_b}};
    tp->ForwardBatch(batch);
    EXPECT_LE(MaxRelative(got_a, want_a), 1e-4);
    EXPECT_LE(MaxRelative(got_b, want_b), 1e-4);
  }
}

TEST_F(TpModelTest, TpDegreeMustMatchTheJob) {
  try {
    MakeTensorParallelGroup(World().size() + 1);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("MPI ranks but this job has"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tessera
