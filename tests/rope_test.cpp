// Rotary embeddings: every rope type against transformers 4.57.1 goldens
// (tools/make_rope_golden.py -> tests/data/rope/rope_golden.json), the upstream and computed values
// of ../shared/reference/rope.md §4, §6-§8 and §11, bad configs, and the rope_apply kernels of
// every ISA against the scalar reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/config.h"
#include "kernels/kernels.h"
#include "model/rope.h"

namespace tessera {
namespace {

using nlohmann::json;

const json& Golden() {
  static const json golden = [] {
    std::ifstream in(std::string(TESSERA_TEST_DATA) + "/rope/rope_golden.json");
    std::stringstream ss;
    ss << in.rdbuf();
    return json::parse(ss.str());
  }();
  return golden;
}

Rope RopeOf(const json& config, const std::string& name) {
  return Rope::FromConfig(ParseModelConfig(config.dump(), name), name);
}

std::vector<float> Floats(const json& v) { return v.get<std::vector<float>>(); }

// |got - want| <= tol * max(|want|, floor): relative, with `floor` the magnitude below which an
// absolute error is what matters (cos/sin near a zero crossing).
void ExpectClose(const std::vector<float>& got, const std::vector<float>& want, double tol, double floor,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    const double bound = tol * std::max<double>(std::fabs(want[i]), floor);
    ASSERT_LE(std::fabs(static_cast<double>(got[i]) - want[i]), bound)
        << what << " [" << i << "]: got " << got[i] << " want " << want[i];
  }
}

constexpr double kTol = 1e-6;  // fp32 agreement with transformers

TEST(RopeGolden, EveryCaseMatchesTransformers) {
  const json& cases = Golden().at("cases");
  ASSERT_GE(cases.size(), 23u);
  std::map<std::string, int> per_type;
  for (const json& c : cases) {
    const std::string name = c.at("name");
    SCOPED_TRACE(name);
    const Rope rope = RopeOf(c.at("config"), name);
    ++per_type[rope.deepseek() ? "deepseek" : rope.type()];
    EXPECT_EQ(rope.type(), c.at("rope_type").get<std::string>());
    EXPECT_EQ(rope.rotary_dim(), c.at("rotary_dim").get<int64_t>());
    EXPECT_EQ(rope.pairing(), c.at("interleaved").get<bool>() ? RopePairing::kInterleaved : RopePairing::kSplitHalf);
    EXPECT_NEAR(rope.attention_scale(), c.at("attention_scale").get<double>(),
                kTol * c.at("attention_scale").get<double>());
    const int64_t h = rope.half(), stride = 2 * h, D = rope.head_dim();
    for (const json& e : c.at("frequencies")) {
      const int64_t seq_len = e.at("seq_len");
      SCOPED_TRACE("seq_len " + std::to_string(seq_len));
      const RopeFrequencies freqs = seq_len == 0 ? rope.frequencies() : rope.Frequencies(seq_len);
      ExpectClose(freqs.inv_freq, Floats(e.at("inv_freq")), kTol, 0.0, "inv_freq");
      EXPECT_NEAR(freqs.attention_factor, e.at("attention_factor").get<double>(), kTol);

      // cos/sin are ill-conditioned at large positions (an ulp of inv_freq moves the angle at
      // position 131071 by ~1e-2 rad; torch's and libm's float pow may differ by that ulp), so the
      // table is checked from the golden inv_freq at 1e-6, and from ours with the angle error
      // that our inv_freq difference implies added to the bound.
      const RopeFrequencies golden{Floats(e.at("inv_freq")), e.at("attention_factor").get<float>()};
      const std::vector<int64_t> positions = e.at("positions");
      for (const RopeFrequencies* from : {&golden, &freqs}) {
        std::vector<float> cs(positions.size() * stride);
        rope.CosSin(*from, positions, cs.data(), stride);
        for (size_t t = 0; t < positions.size(); ++t) {
          for (int64_t i = 0; i < h; ++i) {
            const double drift = freqs.attention_factor * static_cast<double>(positions[t]) *
                                 std::fabs(static_cast<double>(from->inv_freq[i]) - golden.inv_freq[i]);
            const double bound = kTol * freqs.attention_factor + 1.01 * drift;
            const double want_cos = e.at("cos")[t][i], want_sin = e.at("sin")[t][i];
            ASSERT_LE(std::fabs(cs[t * stride + i] - want_cos), bound)
                << "cos at position " << positions[t] << " [" << i << "]" << (from == &golden ? " (golden inv_freq)" : "");
            ASSERT_LE(std::fabs(cs[t * stride + h + i] - want_sin), bound)
                << "sin at position " << positions[t] << " [" << i << "]" << (from == &golden ? " (golden inv_freq)" : "");
          }
        }
      }

      // One q head and one k head at positions 7 and 131071, rotated by HF's apply function.
      const std::vector<int64_t> rot_positions = {7, 131071};
      std::vector<float> rcs(rot_positions.size() * stride);
      rope.CosSin(golden, rot_positions, rcs.data(), stride);
      for (const char* which : {"q", "k"}) {
        const std::vector<float> in = Floats(e.at(std::string(which) + "_in"));
        const std::vector<float> want = Floats(e.at(std::string(which) + "_out"));
        ASSERT_EQ(in.size(), rot_positions.size() * D);
        float scale = 0.0f;
        for (float w : want) scale = std::max(scale, std::fabs(w));
        for (Isa isa : {Isa::kScalar, ActiveIsa()}) {
          std::vector<float> x = in;
          KernelsFor(isa).rope_apply(x.data(), rot_positions.size(), 1, D, D, rcs.data(), stride, h, rope.pairing());
          ExpectClose(x, want, kTol, scale, std::string(which) + " rotated (" + IsaName(isa) + ")");
        }
        std::vector<float> x = in;
        rope.Apply(x.data(), rot_positions.size(), 1, D, D, rcs.data(), stride);
        ExpectClose(x, want, kTol, scale, std::string(which) + " rotated (Rope::Apply)");
      }
    }
  }
  for (const char* type : {"default", "linear", "dynamic", "yarn", "llama3", "longrope", "deepseek"}) {
    EXPECT_GE(per_type[type], 3) << type;
  }
}

TEST(RopeGolden, DynamicTrackerFollowsHfUpdates) {
  const json& seq = Golden().at("dynamic_sequence");
  const Rope rope = RopeOf(seq.at("config"), "dynamic");
  RopeFrequencyTracker tracker(rope);
  for (const json& step : seq.at("steps")) {
    const int64_t seq_len = step.at("seq_len");
    ExpectClose(tracker.Update(seq_len).inv_freq, Floats(step.at("inv_freq")), kTol, 0.0,
                "inv_freq after seq_len " + std::to_string(seq_len));
  }
}

json GptOss20bConfig() {
  std::ifstream in(std::string(TESSERA_TEST_DATA) + "/gpt_oss_20b_config.json");
  std::stringstream ss;
  ss << in.rdbuf();
  return json::parse(ss.str());
}

// rope.md §6: the gpt-oss inv_freq table and concentration; cos/sin at position 1000.
TEST(RopeReference, GptOssConcentrationTable) {
  const Rope rope = RopeOf(GptOss20bConfig(), "gpt-oss-20b");
  const std::vector<double> want = {
      1.000000000e+00, 6.890443078e-01, 4.747820592e-01, 3.271458832e-01, 2.254179981e-01, 1.553229854e-01,
      1.070244163e-01, 7.374456775e-02, 5.081327328e-02, 3.170569703e-02, 1.933500196e-02, 1.159204949e-02,
      6.794959487e-03, 3.860359398e-03, 2.093792444e-03, 1.052602060e-03, 4.564839131e-04, 1.293187029e-04,
      3.830881258e-05, 2.639646856e-05, 1.818833653e-05, 1.253257000e-05, 8.635495855e-06, 5.950239265e-06,
      4.099978488e-06, 2.825066747e-06, 1.946596227e-06, 1.341290989e-06, 9.242089724e-07, 6.368209389e-07,
      4.387978475e-07, 3.023511353e-07};
  ASSERT_EQ(rope.half(), 32);
  EXPECT_EQ(rope.pairing(), RopePairing::kSplitHalf);
  for (int i = 0; i < 32; ++i) EXPECT_NEAR(rope.frequencies().inv_freq[i], want[i], 1e-6 * want[i]) << i;
  EXPECT_NEAR(rope.frequencies().attention_factor, 1.3465735902799727, 1e-6);
  EXPECT_EQ(rope.attention_scale(), 0.125f);  // 1/sqrt(64), unchanged by the concentration
  std::vector<float> cs(64);
  const std::vector<int64_t> pos = {1000};
  rope.CosSin(rope.frequencies(), pos, cs.data(), 64);
  const struct { int i; double cos, sin; } at1000[] = {
      {0, 0.7572848, 1.1134542}, {10, 1.1909998, 0.6283152}, {20, 1.3463509, 0.0244906}, {31, 1.3465735, 0.0004071}};
  for (const auto& v : at1000) {
    EXPECT_NEAR(cs[v.i], v.cos, 1e-5 * 1.35) << v.i;
    EXPECT_NEAR(cs[32 + v.i], v.sin, 1e-5 * 1.35) << v.i;
  }
}

json DeepSeekV3Config() {
  return json::parse(R"({"model_type": "deepseek_v3", "hidden_size": 7168, "num_attention_heads": 128,
    "num_hidden_layers": 61, "intermediate_size": 18432, "vocab_size": 129280, "max_position_embeddings": 163840,
    "rope_theta": 10000, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128,
    "rope_scaling": {"type": "yarn", "factor": 40, "beta_fast": 32, "beta_slow": 1, "mscale": 1.0,
                     "mscale_all_dim": 1.0, "original_max_position_embeddings": 4096}})");
}

// rope.md §7: cos/sin unscaled (ratio 1.0), softmax scale 192^-0.5 * mscale^2, interleaved pairs,
// correction range floored/ceiled to [10, 23].
TEST(RopeReference, DeepSeekV3Settings) {
  const Rope rope = RopeOf(DeepSeekV3Config(), "deepseek-v3");
  EXPECT_TRUE(rope.deepseek());
  EXPECT_EQ(rope.pairing(), RopePairing::kInterleaved);
  EXPECT_EQ(rope.rotary_dim(), 64);
  EXPECT_EQ(rope.frequencies().attention_factor, 1.0f);
  EXPECT_NEAR(rope.attention_scale(), 0.1352337788608801, 1e-7);
  EXPECT_EQ(rope.table_positions(), 163840);
  EXPECT_EQ(rope.table_stride(), 128);
  const std::vector<float>& f = rope.frequencies().inv_freq;
  // Below low = 10 the original frequency is kept; from high = 23 on it is divided by 40.
  for (int i : {0, 5, 10}) EXPECT_NEAR(f[i], std::pow(10000.0, -2.0 * i / 64), 1e-6 * f[i]) << i;
  for (int i : {23, 31}) EXPECT_NEAR(f[i], std::pow(10000.0, -2.0 * i / 64) / 40, 1e-6 * f[i]) << i;
  EXPECT_LT(f[16], std::pow(10000.0, -2.0 * 16 / 64));
  EXPECT_GT(f[16], std::pow(10000.0, -2.0 * 16 / 64) / 40);
}

// rope.md §11, tpu-inference tests/layers/jax/test_rope.py.
TEST(RopeReference, TpuInferenceBaseCacheAndApply) {
  const json cfg = json::parse(R"({"model_type": "llama", "hidden_size": 2, "num_attention_heads": 1,
    "num_hidden_layers": 1, "intermediate_size": 2, "vocab_size": 4, "max_position_embeddings": 2,
    "head_dim": 2, "rope_theta": 10000})");
  const Rope rope = RopeOf(cfg, "tpu base");
  const std::vector<float> table = rope.Table(2);
  const int64_t s = rope.table_stride();
  ASSERT_EQ(table.size(), static_cast<size_t>(2 * s));
  EXPECT_FLOAT_EQ(table[0], 1.0f);
  EXPECT_FLOAT_EQ(table[1], 0.0f);
  EXPECT_NEAR(table[s], 0.5403023f, 1e-7);
  EXPECT_NEAR(table[s + 1], 0.841471f, 1e-6);
  std::vector<float> x = {1, 1, 1, 1};
  rope.Apply(x.data(), 2, 1, 2, 2, table.data(), s);
  ExpectClose(x, {1.0f, 1.0f, -0.30116874f, 1.3817732f}, 1e-6, 1.0, "tpu base apply");
}

TEST(RopeReference, TpuInferenceDeepSeekCacheAndApply) {
  json cfg = DeepSeekV3Config();
  cfg["qk_rope_head_dim"] = 2;
  cfg["rope_scaling"] = json::parse(R"({"type": "yarn", "factor": 2, "original_max_position_embeddings": 1})");
  const Rope rope = RopeOf(cfg, "tpu deepseek");
  EXPECT_EQ(rope.table_positions(), 2);  // P * scaling_factor
  const std::vector<float> table = rope.Table(rope.table_positions());
  ASSERT_EQ(rope.table_stride(), 128);  // shape (2, 128)
  ASSERT_EQ(table.size(), 256u);
  const std::vector<float> head = {table[0], table[1], table[128], table[129]};
  ExpectClose(head, {1.0693147f, 0.0f, 0.5777532f, 0.8997973f}, 1e-6, 1.0, "deepseek cache");
  for (int64_t c = 2; c < 128; ++c) EXPECT_EQ(table[c] + table[128 + c], 0.0f) << "padding column " << c;
  std::vector<float> x = {1, 1, 1, 1};
  rope.Apply(x.data(), 2, 1, 2, 2, table.data(), 128);
  ExpectClose(x, {1.0693147f, 1.0693147f, -0.32204413f, 1.4775505f}, 1e-6, 1.0, "deepseek apply");
}

// tpu-inference test_rope_interface.py: head_dim 8, ones; interleaved with half the width rotated
// leaves channels 4-7 at exactly 1; split order at full width changes all 8 values at position 1.
TEST(RopeReference, TpuInferenceInterfacePairing) {
  json cfg = json::parse(R"({"model_type": "llama", "hidden_size": 8, "num_attention_heads": 1,
    "num_hidden_layers": 1, "intermediate_size": 8, "vocab_size": 4, "max_position_embeddings": 16,
    "head_dim": 8, "rope_theta": 10000, "partial_rotary_factor": 0.5, "rope_interleave": true})");
  const Rope partial = RopeOf(cfg, "partial interleaved");
  std::vector<float> cs(2 * 4);
  partial.CosSin(partial.frequencies(), 0, 2, cs.data(), 4);
  std::vector<float> x(16, 1.0f);
  partial.Apply(x.data(), 2, 1, 8, 8, cs.data(), 4);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(x[i], 1.0f) << "position 0, channel " << i;
  for (int i = 0; i < 4; ++i) EXPECT_NE(x[8 + i], 1.0f) << "position 1, channel " << i;
  for (int i = 4; i < 8; ++i) EXPECT_EQ(x[8 + i], 1.0f) << "position 1, channel " << i;

  cfg.erase("partial_rotary_factor");
  cfg["rope_interleave"] = false;
  const Rope full = RopeOf(cfg, "split");
  std::vector<float> fcs(2 * 8);
  full.CosSin(full.frequencies(), 0, 2, fcs.data(), 8);
  std::vector<float> y(16, 1.0f);
  full.Apply(y.data(), 2, 1, 8, 8, fcs.data(), 8);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(y[i], 1.0f);
  for (int i = 0; i < 8; ++i) EXPECT_NE(y[8 + i], 1.0f) << i;
}

// rope.md §8 (Llama 3.1) and §4 (dynamic NTK) computed examples.
TEST(RopeReference, Llama3AndDynamicExamples) {
  json cfg = json::parse(R"({"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
    "num_hidden_layers": 1, "intermediate_size": 8, "vocab_size": 4, "max_position_embeddings": 131072,
    "head_dim": 128, "rope_theta": 500000, "rope_scaling": {"rope_type": "llama3", "factor": 8.0,
    "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}})");
  const Rope llama31 = RopeOf(cfg, "llama3.1");
  const std::vector<float>& f = llama31.frequencies().inv_freq;
  EXPECT_NEAR(f[28], 3.211445995e-03, 1e-6 * f[28]);
  EXPECT_NEAR(f[29], 2.166570764e-03, 1e-6 * f[29]);
  EXPECT_NEAR(f[34], 1.785078128e-04, 1e-6 * f[34]);
  EXPECT_NEAR(f[63], 3.068925989e-07, 1e-6 * f[63]);

  cfg["max_position_embeddings"] = 4096;
  cfg["rope_theta"] = 10000;
  cfg["rope_scaling"] = json::parse(R"({"rope_type": "dynamic", "factor": 2.0})");
  const Rope dynamic = RopeOf(cfg, "dynamic");
  EXPECT_TRUE(dynamic.length_dependent());
  EXPECT_NEAR(dynamic.frequencies().inv_freq[1], 0.865964, 1e-6);
  EXPECT_NEAR(dynamic.Frequencies(8192).inv_freq[1], 0.850994, 1e-6);
  EXPECT_NEAR(dynamic.Frequencies(4096).inv_freq[1], 0.865964, 1e-6);
}

void ExpectRopeError(ModelConfig config, const std::string& needle) {
  try {
    Rope::FromConfig(config, "bad/config.json");
    ADD_FAILURE() << "accepted a config that should fail with '" << needle << "'";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("bad/config.json"), std::string::npos) << msg;
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

TEST(RopeConfig, BadConfigsFailAtLoad) {
  ModelConfig base;
  base.model_type = "llama";
  base.head_dim = 64;
  base.max_position_embeddings = 4096;
  base.raw = json::object();

  ModelConfig c = base;
  c.rope_scaling = RopeScaling{};
  c.rope_scaling->rope_type = "ntk-by-parts";
  ExpectRopeError(c, "unknown rope type 'ntk-by-parts'");

  for (const char* type : {"linear", "dynamic", "yarn", "llama3"}) {
    c = base;
    c.rope_scaling = RopeScaling{};
    c.rope_scaling->rope_type = type;
    c.rope_scaling->original_max_position_embeddings = 1024;
    c.rope_scaling->low_freq_factor = 1.0;
    c.rope_scaling->high_freq_factor = 4.0;
    for (double factor : {0.0, -2.0, std::nan("")}) {
      c.rope_scaling->factor = factor;
      ExpectRopeError(c, "factor: must be positive");
    }
  }

  c = base;
  c.rope_scaling = RopeScaling{};
  c.rope_scaling->rope_type = "yarn";
  c.rope_scaling->factor = 4.0;
  ExpectRopeError(c, "original_max_position_embeddings: missing");

  c.rope_scaling->rope_type = "llama3";
  c.rope_scaling->original_max_position_embeddings = 8192;
  ExpectRopeError(c, "low_freq_factor and high_freq_factor are required");

  c = base;
  c.rope_scaling = RopeScaling{};
  c.rope_scaling->rope_type = "longrope";
  c.rope_scaling->short_factor.assign(32, 1.0);
  c.rope_scaling->long_factor.assign(31, 2.0);
  ExpectRopeError(c, "long_factor: has 31 entries, expected rotary_dim / 2 = 32");

  c = base;
  c.head_dim = 0;
  ExpectRopeError(c, "head_dim: must be positive");
  c.head_dim = 63;
  ExpectRopeError(c, "must be positive and even");
  c.head_dim = 64;
  c.raw["partial_rotary_factor"] = 1.5;
  ExpectRopeError(c, "partial_rotary_factor: must be in (0, 1]");
  c.raw["partial_rotary_factor"] = 0.3;  // 19.2 -> 19 channels: odd
  ExpectRopeError(c, "must be positive and even");

  c = base;
  c.model_type = "deepseek_v3";
  c.raw = json{{"qk_rope_head_dim", 32}, {"qk_nope_head_dim", 128}};
  ExpectRopeError(c, "qk_rope_head_dim 32 disagrees with head_dim 64");
  c.raw = json{{"qk_rope_head_dim", 64}};
  ExpectRopeError(c, "qk_nope_head_dim: missing");

  c = base;
  c.rope_theta = 0.0;
  ExpectRopeError(c, "rope_theta: must be positive");
}

// ---- rope_apply kernels --------------------------------------------------------------------

class RopeKernelTest : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (!IsaSupported(GetParam())) GTEST_SKIP() << IsaName(GetParam()) << " not supported here";
  }
  std::mt19937 rng_{std::random_device{}()};
};

// Every (tokens, heads, half, pairing, strides) shape: the ISA's result within an ulp of
// |a cos| + |b sin| of the reference, channels past the rotated width and padding untouched.
TEST_P(RopeKernelTest, MatchesReference) {
  const KernelTable& ref = KernelsFor(Isa::kScalar);
  const KernelTable& fast = KernelsFor(GetParam());
  std::normal_distribution<float> dist(0.0f, 2.0f);
  std::uniform_real_distribution<float> angle(-3.2f, 3.2f);
  for (RopePairing pairing : {RopePairing::kSplitHalf, RopePairing::kInterleaved}) {
    for (size_t half : {0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 24, 31, 32, 33, 64, 65}) {
      for (size_t tokens : {0, 1, 3}) {
        for (size_t heads : {1, 2, 5}) {
          const size_t extra = half % 3;  // pass-through channels (partial rotary)
          const size_t head_stride = 2 * half + extra + 1, token_stride = heads * head_stride + 3;
          const size_t cs_stride = 2 * half + 2;
          std::vector<float> x(tokens * token_stride + 8), cs(tokens * cs_stride + 8, 99.0f);
          for (float& v : x) v = dist(rng_);
          for (size_t t = 0; t < tokens; ++t) {
            const float af = 1.0f + 0.3f * static_cast<float>(t);
            for (size_t i = 0; i < half; ++i) {
              const float a = angle(rng_);
              cs[t * cs_stride + i] = std::cos(a) * af;
              cs[t * cs_stride + half + i] = std::sin(a) * af;
            }
          }
          std::vector<float> want = x, got = x;
          ref.rope_apply(want.data(), tokens, heads, token_stride, head_stride, cs.data(), cs_stride, half, pairing);
          fast.rope_apply(got.data(), tokens, heads, token_stride, head_stride, cs.data(), cs_stride, half, pairing);
          std::vector<float> bound(x.size(), 0.0f);
          for (size_t t = 0; t < tokens; ++t) {
            for (size_t h = 0; h < heads; ++h) {
              const size_t o = t * token_stride + h * head_stride;
              for (size_t i = 0; i < half; ++i) {
                const size_t ia = pairing == RopePairing::kInterleaved ? o + 2 * i : o + i;
                const size_t ib = pairing == RopePairing::kInterleaved ? ia + 1 : ia + half;
                const float c = cs[t * cs_stride + i], s = cs[t * cs_stride + half + i];
                const float b = 2.4e-7f * (std::fabs(x[ia]) + std::fabs(x[ib])) * (std::fabs(c) + std::fabs(s));
                bound[ia] = bound[ib] = b;
              }
            }
          }
          for (size_t i = 0; i < x.size(); ++i) {
            ASSERT_LE(std::fabs(got[i] - want[i]), bound[i])
                << "pairing " << static_cast<int>(pairing) << " half " << half << " tokens " << tokens << " heads "
                << heads << " index " << i;
            if (bound[i] == 0.0f) {
              ASSERT_EQ(got[i], x[i]) << "untouched channel " << i;
            }
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllIsas, RopeKernelTest, ::testing::Values(Isa::kScalar, Isa::kAvx2, Isa::kAvx512),
                         [](const auto& info) { return std::string(IsaName(info.param)); });

TEST(RopeKernel, ActiveTableNamesItsImplementation) {
  const KernelTable& t = ActiveKernels();
  ASSERT_NE(t.rope_apply, nullptr);
  EXPECT_STREQ(KernelsFor(Isa::kScalar).rope_apply_isa, "scalar");
  if (IsaSupported(Isa::kAvx512)) {
    EXPECT_STREQ(KernelsFor(Isa::kAvx512).rope_apply_isa, "avx512");
  }
}

}  // namespace
}  // namespace tessera
