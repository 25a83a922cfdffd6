// The q8 path (kernels/q8.h): activation quantizer and integer matmuls of every instruction set
// this machine supports against the scalar reference (reference.cpp), bit for bit, on fresh
// random inputs with awkward shapes (m around the direct/GEMM switch and tile heights, n not a
// multiple of the 16-column group, column ranges starting at group boundaries, ldy > n, bias on
// and off, every E8M0 edge byte, NaN/inf/zero/tiny activation blocks); batch invariance; the
// accuracy of the q8 result against the exact f32 matmul of the dequantized weights; the packers
// and the thread-parallel wrappers.
//
// MXFP4 layout and decoding: ../shared/reference/gpt-oss.md §2.3, quantization.md A.1/A.2/A.5.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/kernels.h"
#include "kernels/mxfp4.h"
#include "kernels/q8.h"
#include "test_util.h"

namespace tessera {
namespace {

constexpr float kSentinel = -12345.0f;  // marks outputs a kernel must not write

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

// Same bits, or both NaN (payloads aside: NaNs only arise from NaN/inf inputs or 0 * inf).
bool SameFloat(float a, float b) { return Bits(a) == Bits(b) || (std::isnan(a) && std::isnan(b)); }

const KernelTable& Reference() { return KernelsFor(Isa::kScalar); }

// ---- inputs -------------------------------------------------------------------------------------

// Activations x[m, k] whose blocks have magnitudes spread over 1e-3 .. 1e3 (so the per-block
// scales differ), with every kind of special block mixed in when `specials`: all zeros, tiny
// (amax < 1e-30: quantized to zeros), subnormals next to a normal value, NaN, +inf, -inf, and
// values at exact .5 ties (amax 127 makes 127 / amax = 1).
std::vector<float> RandomActivations(std::mt19937& rng, size_t m, size_t k, bool specials) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> log_scale(-3.0f, 3.0f);
  std::uniform_int_distribution<int> kind(0, specials ? 15 : 0), tie(-254, 254);
  std::vector<float> x(m * k);
  for (size_t b = 0; b < m * k / kQ8Block; ++b) {
    float* xb = x.data() + b * kQ8Block;
    const float scale = std::pow(10.0f, log_scale(rng));
    for (size_t c = 0; c < kQ8Block; ++c) xb[c] = normal(rng) * scale;
    switch (kind(rng)) {
      case 1: std::fill(xb, xb + kQ8Block, 0.0f); break;
      case 2: for (size_t c = 0; c < kQ8Block; ++c) xb[c] = normal(rng) * 1e-31f; break;
      case 3:
        for (size_t c = 0; c < kQ8Block; ++c) xb[c] = normal(rng) * 1e-40f;
        xb[5] = 1e-30f;  // exactly the threshold: not tiny
        break;
      case 4: xb[normal(rng) > 0 ? 0 : 31] = std::numeric_limits<float>::quiet_NaN(); break;
      case 5: xb[7] = std::numeric_limits<float>::infinity(); break;
      case 6: xb[19] = -std::numeric_limits<float>::infinity(); break;
      case 7:  // ties: q = rne(v) for v = t / 2
        for (size_t c = 0; c < kQ8Block; ++c) xb[c] = static_cast<float>(tie(rng)) * 0.5f;
        xb[3] = normal(rng) > 0 ? 127.0f : -127.0f;
        break;
      case 8: xb[11] = std::numeric_limits<float>::max(); break;
      default: break;
    }
  }
  return x;
}

// The same rows as views (row i0 .. i0 + rows - 1 of a).
Q8Rows RowsFrom(const Q8Activations& a, size_t i0) {
  const size_t nb = a.k / kQ8Block;
  return Q8Rows{a.q.data() + i0 * a.k, a.d.data() + i0 * nb, a.sum.data() + i0 * nb};
}

// A weight matrix W[n, k] in one of the two packed q8 forms, with its exact dequantization.
struct Weights {
  bool mxfp4 = false;
  size_t n = 0, k = 0;
  std::vector<uint8_t> codes, scales;  // MXFP4 packed
  std::vector<uint8_t> values;         // int8 packed
  std::vector<float> row_scales;       // int8 packed
  std::vector<float> w;                // dequantized W [n, k] (exact)
  std::vector<float> bias;
};

const uint8_t kEdgeScales[] = {0, 1, 2, 127, 200, 254};

// Checkpoint-layout MXFP4 (uniform random code bytes, so -0 and every code occur) packed for
// q8. Scales: `edges` mixes the E8M0 edge bytes into 1/4 of the blocks, otherwise 118 .. 130
// (weights of magnitude ~2^-9 .. 6 * 2^3, all results finite).
Weights RandomMxfp4(std::mt19937& rng, size_t n, size_t k, bool edges) {
  Weights w;
  w.mxfp4 = true;
  w.n = n, w.k = k;
  const size_t nb = k / kQ8Block;
  std::uniform_int_distribution<int> byte(0, 255), scale(118, 130), pick(0, 23);
  std::vector<uint8_t> blocks(n * k / 2), scales(n * nb);
  for (auto& b : blocks) b = static_cast<uint8_t>(byte(rng));
  for (auto& s : scales) {
    const int p = edges ? pick(rng) : 23;
    s = p < 6 ? kEdgeScales[p] : static_cast<uint8_t>(scale(rng));
  }
  w.codes.resize(Q8Mxfp4CodeBytes(n, k));
  w.scales.resize(Q8Mxfp4ScaleBytes(n, k));
  size_t bad_row = 0;
  EXPECT_TRUE(PackMxfp4ForQ8(blocks.data(), scales.data(), n, k, w.codes.data(), w.scales.data(), &bad_row));
  w.w.resize(n * k);
  for (size_t j = 0; j < n; ++j) DecodeMxfp4Row(blocks.data() + j * k / 2, scales.data() + j * nb, k, w.w.data() + j * k);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  w.bias.resize(n);
  for (auto& b : w.bias) b = normal(rng);
  return w;
}

// BF16 weights N(0, sigma) quantized per row to int8; a few rows all zero (scale 0).
Weights RandomInt8(std::mt19937& rng, size_t n, size_t k) {
  Weights w;
  w.n = n, w.k = k;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> log_scale(-2.0f, 1.0f);
  std::vector<uint16_t> bf16(n * k);
  for (size_t j = 0; j < n; ++j) {
    const float sigma = j % 7 == 3 ? 0.0f : std::pow(10.0f, log_scale(rng));
    for (size_t c = 0; c < k; ++c) bf16[j * k + c] = F32ToBf16(normal(rng) * sigma);
  }
  w.values.resize(Q8Int8Bytes(n, k));
  w.row_scales.resize(Q8PaddedColumns(n));
  size_t bad_row = 0;
  EXPECT_TRUE(QuantizeBf16ToQ8Int8(bf16.data(), n, k, w.values.data(), w.row_scales.data(), &bad_row));
  w.w.resize(n * k);
  for (size_t j = 0; j < n; ++j) DequantizeQ8Int8Row(w.values.data(), w.row_scales.data(), k, j, w.w.data() + j * k);
  w.bias.resize(n);
  for (auto& b : w.bias) b = normal(rng);
  return w;
}

void RunQ8(const KernelTable& t, const Weights& w, Q8Rows x, size_t m, size_t n_begin, size_t n_end, bool bias,
         float* y, size_t ldy) {
  const float* b = bias ? w.bias.data() : nullptr;
  if (w.mxfp4) {
    t.matmul_q8_mxfp4(x, m, w.k, w.codes.data(), w.scales.data(), n_begin, n_end, b, y, ldy);
  } else {
    t.matmul_q8_int8(x, m, w.k, w.values.data(), w.row_scales.data(), n_begin, n_end, b, y, ldy);
  }
}

// got[:, n_begin:n_end] has want's bits and every other entry is still the sentinel.
::testing::AssertionResult SameOutputs(const std::vector<float>& want, const std::vector<float>& got, size_t m,
                                       size_t ldy, size_t n_begin, size_t n_end) {
  size_t failures = 0;
  std::ostringstream first;
  for (size_t i = 0; i < m; ++i) {
    for (size_t j = 0; j < ldy; ++j) {
      const float g = got[i * ldy + j];
      const bool inside = j >= n_begin && j < n_end;
      const float w = inside ? want[i * ldy + j] : kSentinel;
      if (!(inside ? SameFloat(w, g) : Bits(g) == Bits(kSentinel)) && failures++ == 0) {
        first << "y[" << i << "," << j << "] = " << g << " (0x" << std::hex << Bits(g) << "), want " << w
              << " (0x" << Bits(w) << std::dec << ")" << (inside ? "" : " (outside the range)");
      }
    }
  }
  if (failures == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << failures << " bad outputs; first: " << first.str();
}

// ---- per-ISA tests ------------------------------------------------------------------------------

class Q8IsaTest : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (!IsaSupported(GetParam())) GTEST_SKIP() << IsaName(GetParam()) << " not supported here";
  }
  const KernelTable& table() { return KernelsFor(GetParam()); }

  const uint32_t seed_ = std::random_device{}();
  std::mt19937 rng_{seed_};
};

TEST_P(Q8IsaTest, TablesNameTheirQ8Paths) {
  const KernelTable& t = table();
  const char* want = "scalar";
  if (GetParam() == Isa::kAvx2) want = "avx2";
  if (GetParam() >= Isa::kAvx512) want = GetCpuFeatures().avx512_vnni ? "avx512vnni" : "avx2";
  EXPECT_STREQ(t.quantize_q8_isa, want);
  EXPECT_STREQ(t.matmul_q8_mxfp4_isa, want);
  EXPECT_STREQ(t.matmul_q8_int8_isa, want);
}

TEST_P(Q8IsaTest, QuantizerMatchesReferenceBits) {
  SCOPED_TRACE(testing::Message() << "seed=" << seed_ << " isa=" << table().quantize_q8_isa);
  for (size_t k : {0, 32, 64, 96, 2880}) {
    for (int trial = 0; trial < 20; ++trial) {
      const std::vector<float> x = RandomActivations(rng_, 1, k, true);
      const size_t nb = k / kQ8Block;
      // One guard entry past each output: nothing may be written there.
      std::vector<int8_t> q_ref(k + 1, 99), q(k + 1, 99);
      std::vector<float> d_ref(nb + 1, kSentinel), d(nb + 1, kSentinel);
      std::vector<int32_t> s_ref(nb + 1, 99), s(nb + 1, 99);
      Reference().quantize_q8(x.data(), k, q_ref.data(), d_ref.data(), s_ref.data());
      table().quantize_q8(x.data(), k, q.data(), d.data(), s.data());
      ASSERT_EQ(q, q_ref) << "k=" << k;
      ASSERT_EQ(s, s_ref) << "k=" << k;
      for (size_t b = 0; b <= nb; ++b) ASSERT_TRUE(SameFloat(d[b], d_ref[b])) << "k=" << k << " block " << b;
    }
  }
}

// The definition itself (kernels/q8.h), checked on the table's quantizer independently of the
// reference: d = amax / 127, q = rne(x * (127 / amax)) within +-127, sum = sum of q, and the
// special blocks.
TEST_P(Q8IsaTest, QuantizerFollowsTheDefinition) {
  SCOPED_TRACE(testing::Message() << "seed=" << seed_);
  const size_t k = 2880, nb = k / kQ8Block;
  for (int trial = 0; trial < 5; ++trial) {
    const std::vector<float> x = RandomActivations(rng_, 1, k, true);
    std::vector<int8_t> q(k);
    std::vector<float> d(nb);
    std::vector<int32_t> s(nb);
    table().quantize_q8(x.data(), k, q.data(), d.data(), s.data());
    for (size_t b = 0; b < nb; ++b) {
      const float* xb = x.data() + b * kQ8Block;
      float amax = 0.0f;
      bool finite = true;
      for (size_t c = 0; c < kQ8Block; ++c) {
        finite = finite && std::isfinite(xb[c]);
        amax = std::max(amax, std::fabs(xb[c]));
      }
      int32_t sum = 0;
      for (size_t c = 0; c < kQ8Block; ++c) sum += q[b * kQ8Block + c];
      ASSERT_EQ(s[b], sum) << "block " << b;
      if (!finite) {
        ASSERT_TRUE(std::isnan(d[b])) << "block " << b;
      } else if (amax < 1e-30f) {
        ASSERT_EQ(Bits(d[b]), 0u) << "block " << b;
      } else {
        ASSERT_EQ(d[b], amax / 127.0f) << "block " << b;
      }
      const float inv = finite && amax >= 1e-30f ? 127.0f / amax : 0.0f;
      for (size_t c = 0; c < kQ8Block; ++c) {
        const float want = std::clamp(std::nearbyint(xb[c] * inv), -127.0f, 127.0f);
        ASSERT_EQ(q[b * kQ8Block + c], static_cast<int8_t>(want)) << "block " << b << " element " << c;
      }
    }
  }
  // Ties round to even: with amax = 127 the scaled values are the inputs themselves.
  std::vector<float> ties(kQ8Block);
  for (size_t c = 0; c < kQ8Block; ++c) ties[c] = static_cast<float>(c) - 15.5f;  // -15.5 .. 15.5
  ties[31] = 127.0f;
  std::vector<int8_t> q(kQ8Block);
  float d;
  int32_t s;
  table().quantize_q8(ties.data(), kQ8Block, q.data(), &d, &s);
  for (size_t c = 0; c < 31; ++c) {
    const float lower = std::floor(ties[c]);  // ties[c] = lower + 0.5
    const float even = std::fmod(lower, 2.0f) == 0.0f ? lower : lower + 1.0f;
    EXPECT_EQ(q[c], static_cast<int>(even)) << ties[c];
  }
  EXPECT_EQ(q[31], 127);
  EXPECT_EQ(d, 1.0f);
}

const size_t kColumnCounts[] = {1, 15, 17, 33, 100};
// Around the decode/GEMM switch (9/10) and the GEMM tile heights, and GEMM row counts with
// several row blocks of unequal height (33, 50).
const size_t kRowCounts[] = {0, 1, 2, 3, 4, 5, 7, 8, 9, 10, 17, 33, 50, 64};

// Every (k, m, n, bias) combination, the whole range and one split at a random multiple of 16,
// against the reference's bits.
void CheckMatmulsMatchReference(const KernelTable& t, std::mt19937& rng, bool mxfp4) {
  for (size_t k : {32, 64, 96, 2880}) {
    for (size_t n : kColumnCounts) {
      const Weights w = mxfp4 ? RandomMxfp4(rng, n, k, true) : RandomInt8(rng, n, k);
      for (size_t m : kRowCounts) {
        // Keep the scalar reference cheap on the long rows.
        if (k == 2880 && m > 17 && n > 33) continue;
        const Q8Activations x = QuantizeQ8Reference(RandomActivations(rng, m, k, true), m, k);
        const size_t ldy = n + 3;
        const size_t groups = (n + kQ8Group - 1) / kQ8Group;
        std::uniform_int_distribution<size_t> cut(0, groups);
        for (bool bias : {false, true}) {
          SCOPED_TRACE(testing::Message() << (mxfp4 ? "mxfp4" : "int8") << " m=" << m << " k=" << k << " n=" << n
                                          << " bias=" << bias);
          std::vector<float> want(m * ldy, kSentinel), got(m * ldy, kSentinel);
          RunQ8(Reference(), w, x.rows(), m, 0, n, bias, want.data(), ldy);
          RunQ8(t, w, x.rows(), m, 0, n, bias, got.data(), ldy);
          ASSERT_TRUE(SameOutputs(want, got, m, ldy, 0, n));
          // [0, c) + [c, n) with c a multiple of 16, and the inner range [16 a, 16 b).
          const size_t c = std::min(n, kQ8Group * cut(rng));
          std::vector<float> split(m * ldy, kSentinel);
          RunQ8(t, w, x.rows(), m, 0, c, bias, split.data(), ldy);
          RunQ8(t, w, x.rows(), m, c, n, bias, split.data(), ldy);
          ASSERT_TRUE(SameOutputs(want, split, m, ldy, 0, n)) << "split at " << c;
          size_t a = cut(rng), b = cut(rng);
          if (a > b) std::swap(a, b);
          const size_t lo = std::min(n, kQ8Group * a), hi = std::min(n, kQ8Group * b);
          std::vector<float> inner(m * ldy, kSentinel);
          RunQ8(t, w, x.rows(), m, lo, hi, bias, inner.data(), ldy);
          ASSERT_TRUE(SameOutputs(want, inner, m, ldy, lo, hi)) << "range [" << lo << "," << hi << ")";
        }
      }
    }
  }
}

TEST_P(Q8IsaTest, Mxfp4MatmulMatchesReferenceBits) {
  SCOPED_TRACE(testing::Message() << "seed=" << seed_ << " isa=" << table().matmul_q8_mxfp4_isa);
  CheckMatmulsMatchReference(table(), rng_, true);
}

TEST_P(Q8IsaTest, Int8MatmulMatchesReferenceBits) {
  SCOPED_TRACE(testing::Message() << "seed=" << seed_ << " isa=" << table().matmul_q8_int8_isa);
  CheckMatmulsMatchReference(table(), rng_, false);
}

// Extreme int8 weights: every byte 0 .. 255 (W8 = -128 .. 127, beyond the quantizer's +-127,
// where the AVX2 sign trick's |W8| = 128 and the pair sums are largest) against activations at
// +-127, and the largest possible MXFP4 codes (+-6) likewise: no int16 saturation anywhere.
TEST_P(Q8IsaTest, ExtremeOperandsDoNotSaturate) {
  SCOPED_TRACE(testing::Message() << "seed=" << seed_);
  const size_t n = 48, k = 256, m = 19;
  std::uniform_int_distribution<int> byte(0, 255), sign(0, 1);
  Q8Activations x;
  x.m = m, x.k = k;
  x.q.resize(m * k);
  x.d.assign(m * k / kQ8Block, 0.0f);
  x.sum.resize(m * k / kQ8Block);
  for (size_t i = 0; i < m * k; ++i) x.q[i] = static_cast<int8_t>(i % 5 == 0 ? 127 : sign(rng_) ? 127 : -127);
  for (size_t b = 0; b < m * k / kQ8Block; ++b) {
    x.d[b] = std::ldexp(1.0f, static_cast<int>(b % 9) - 12);
    x.sum[b] = 0;
    for (size_t c = 0; c < kQ8Block; ++c) x.sum[b] += x.q[b * kQ8Block + c];
  }
  Weights w;
  w.n = n, w.k = k;
  w.values.resize(Q8Int8Bytes(n, k));
  for (size_t i = 0; i < w.values.size(); ++i) w.values[i] = static_cast<uint8_t>(i % 3 == 0 ? byte(rng_) : sign(rng_) ? 0 : 255);
  w.row_scales.resize(n);
  for (auto& s : w.row_scales) s = 0.01f * static_cast<float>(byte(rng_) + 1);
  w.bias.assign(n, 0.5f);
  for (bool mxfp4 : {false, true}) {
    if (mxfp4) {
      w.mxfp4 = true;
      w.codes.resize(Q8Mxfp4CodeBytes(n, k));
      // Nibbles 7 (+6) and 15 (-6) only, plus random ones.
      for (size_t i = 0; i < w.codes.size(); ++i) {
        w.codes[i] = static_cast<uint8_t>(i % 4 == 0 ? byte(rng_) : (sign(rng_) ? 0x77 : 0xF7) ^ (sign(rng_) ? 0x80 : 0));
      }
      w.scales.assign(Q8Mxfp4ScaleBytes(n, k), 127);
    }
    for (size_t rows : {size_t{1}, size_t{4}, size_t{7}, m}) {
      std::vector<float> want(rows * n, kSentinel), got(rows * n, kSentinel);
      RunQ8(Reference(), w, x.rows(), rows, 0, n, true, want.data(), n);
      RunQ8(table(), w, x.rows(), rows, 0, n, true, got.data(), n);
      ASSERT_TRUE(SameOutputs(want, got, rows, n, 0, n)) << (mxfp4 ? "mxfp4" : "int8") << " m=" << rows;
    }
  }
}

// Row i computed alone (m = 1, the decode path) or in any sub-batch has the bits it has inside
// the whole batch (the GEMM path).
TEST_P(Q8IsaTest, RowsDoNotDependOnBatchSize) {
  SCOPED_TRACE(testing::Message() << "seed=" << seed_);
  const size_t m = 23, n = 70;
  for (bool mxfp4 : {false, true}) {
    for (size_t k : {32, 288, 2880}) {
      const Weights w = mxfp4 ? RandomMxfp4(rng_, n, k, false) : RandomInt8(rng_, n, k);
      const Q8Activations x = QuantizeQ8Reference(RandomActivations(rng_, m, k, false), m, k);
      std::vector<float> whole(m * n, kSentinel);
      RunQ8(table(), w, x.rows(), m, 0, n, true, whole.data(), n);
      for (size_t batch : {1, 2, 3, 4, 5, 6, 7, 8, 9, 13}) {
        std::vector<float> parts(m * n, kSentinel);
        for (size_t i0 = 0; i0 < m; i0 += batch) {
          RunQ8(table(), w, RowsFrom(x, i0), std::min(batch, m - i0), 0, n, true, parts.data() + i0 * n, n);
        }
        ASSERT_EQ(std::memcmp(whole.data(), parts.data(), whole.size() * sizeof(float)), 0)
            << (mxfp4 ? "mxfp4" : "int8") << " k=" << k << " batches of " << batch;
      }
    }
  }
}

// The q8 result against the exact matmul of the dequantized weights (exact in f32) on the
// original, unquantized activations, evaluated in double.
//
// Per element, with block b's scale d_b and weights w_c = w'_c s_b (exact):
//   x_c = d_b q_c + e_c,  |e_c| <= d_b / 2 (1 + 2^-20): q_c = rne(fl(x_c * fl(127 / amax))) is
//   within 1/2 of x_c 127 / amax up to relative errors of a few u = 2^-24, and d_b 127 / amax = 1
//   within a few u;
//   the f32 evaluation: float(dot_b) exact, fl(d_b s_b) and each FMA one rounding, so it is
//   within (nb + 2) u sum_b |dot_b| d_b s_b <= (nb + 2) u sum_c (|x_c| + d_b) |w_c| of the exact
//   sum_b dot_b d_b s_b (the standard bound for a recursive sum of nb products);
//   the bias add: u |y|.
// So |y - exact| <= sum_c (d_b / 2) (1 + 2^-20) |w_c| + (nb + 2) u sum_c (|x_c| + d_b) |w_c|
// + u |y| (+ a subnormal's absolute error, 2^-149 per operation). This bound is checked for
// every element.
//
// The typical error is far smaller: e_c is spread evenly over [-d_b/2, d_b/2] (standard
// deviation d_b / sqrt(12)), independent between elements, so for N(0, sigma) activations and
// independent weights the relative RMS error of y is about (d / sqrt 12) / sigma; the amax of
// 32 Gaussians stays below 4.5 sigma except with probability ~2e-4 per block, so d <= 4.5 sigma /
// 127 and the relative error <= 4.5 / (127 sqrt 12) = 1.0%. The test requires <= 2% over the
// whole output (RMS of the errors / RMS of the exact values).
TEST_P(Q8IsaTest, ApproximatesExactMatmulOfDequantizedWeights) {
  SCOPED_TRACE(testing::Message() << "seed=" << seed_);
  const double u = std::ldexp(1.0, -24), tiny = std::ldexp(1.0, -149);
  const size_t m = 9, n = 77, k = 2880, nb = k / kQ8Block;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (bool mxfp4 : {false, true}) {
    const Weights w = mxfp4 ? RandomMxfp4(rng_, n, k, false) : RandomInt8(rng_, n, k);
    std::vector<float> x(m * k);
    for (auto& v : x) v = normal(rng_);
    Q8Activations xq;
    QuantizeQ8(x.data(), m, k, k, xq);  // the active quantizer: the same bits on every ISA
    std::vector<float> y(m * n, kSentinel);
    RunQ8(table(), w, xq.rows(), m, 0, n, true, y.data(), n);
    double err2 = 0.0, exact2 = 0.0;
    for (size_t i = 0; i < m; ++i) {
      for (size_t j = 0; j < n; ++j) {
        double exact = w.bias[j], bound = 0.0;
        for (size_t c = 0; c < k; ++c) {
          const double wc = w.w[j * k + c], db = xq.d[i * nb + c / kQ8Block];
          exact += static_cast<double>(x[i * k + c]) * wc;
          bound += db / 2 * (1 + std::ldexp(1.0, -20)) * std::fabs(wc) +
                   (nb + 2) * u * (std::fabs(x[i * k + c]) + db) * std::fabs(wc);
        }
        const double got = y[i * n + j];
        bound += u * std::fabs(got) + 4 * (nb + 2) * tiny;
        ASSERT_LE(std::fabs(got - exact), bound)
            << (mxfp4 ? "mxfp4" : "int8") << " y[" << i << "," << j << "] = " << got << ", exact " << exact;
        err2 += (got - exact) * (got - exact);
        exact2 += (exact - w.bias[j]) * (exact - w.bias[j]);
      }
    }
    EXPECT_LE(std::sqrt(err2 / exact2), 0.02) << (mxfp4 ? "mxfp4" : "int8");
  }
}

INSTANTIATE_TEST_SUITE_P(AllIsas, Q8IsaTest, ::testing::Values(Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kAmx),
                         [](const auto& info) { return std::string(IsaName(info.param)); });

// ---- packers ------------------------------------------------------------------------------------

// The packed MXFP4 layout (kernels/q8.h), decoded here independently: w = 2 E2M1 of the nibble,
// s = 2^(e - 128), so w s must be the checkpoint decoding exactly (ldexp is exact for powers of
// two, subnormals included), with -0 codes as 0. Padding columns hold code 0 and a finite scale.
TEST(Q8Packing, Mxfp4RoundTripsToTheCheckpointDecoding) {
  const uint32_t seed = std::random_device{}();
  SCOPED_TRACE(testing::Message() << "seed=" << seed);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255), scale(0, 254);
  for (size_t n : {1, 16, 17, 40}) {
    for (size_t k : {32, 96, 256}) {
      const size_t nb = k / kQ8Block, np = Q8PaddedColumns(n);
      std::vector<uint8_t> blocks(n * k / 2), scales(n * nb);
      for (auto& b : blocks) b = static_cast<uint8_t>(byte(rng));
      for (size_t i = 0; i < scales.size(); ++i) {
        scales[i] = i < sizeof(kEdgeScales) ? kEdgeScales[i] : static_cast<uint8_t>(scale(rng));
      }
      std::vector<uint8_t> codes(Q8Mxfp4CodeBytes(n, k), 0xAA), packed_scales(Q8Mxfp4ScaleBytes(n, k), 0xAA);
      ASSERT_EQ(codes.size(), np * k / 2);
      ASSERT_EQ(packed_scales.size(), np * nb);
      ASSERT_TRUE(PackMxfp4ForQ8(blocks.data(), scales.data(), n, k, codes.data(), packed_scales.data(), nullptr));
      std::vector<float> want(k);
      for (size_t j = 0; j < np; ++j) {
        if (j < n) DecodeMxfp4Row(blocks.data() + j * k / 2, scales.data() + j * nb, k, want.data());
        const size_t g = j / 16, c = j % 16;
        for (size_t kk = 0; kk < k; ++kk) {
          const uint8_t b = codes[g * (k * 8) + (kk / 8) * 64 + c * 4 + kk % 4];
          const uint8_t code = kk % 8 < 4 ? b & 0x0F : b >> 4;
          const uint8_t e = packed_scales[(g * nb + kk / 32) * 16 + c];
          ASSERT_NE(e, 255) << "j=" << j;
          const float got = 2.0f * kE2M1Values[code] * std::ldexp(1.0f, int{e} - 128);
          if (j < n) {
            ASSERT_EQ(got, want[kk]) << "n=" << n << " k=" << k << " row " << j << " element " << kk;
          } else {
            ASSERT_EQ(code, 0) << "padding column " << j;
          }
        }
      }
    }
  }
}

TEST(Q8Packing, Mxfp4RejectsScale255WithItsRow) {
  const size_t n = 37, k = 64;
  std::vector<uint8_t> blocks(n * k / 2, 0x21), scales(n * k / 32, 127);
  std::vector<uint8_t> codes(Q8Mxfp4CodeBytes(n, k)), packed(Q8Mxfp4ScaleBytes(n, k));
  for (size_t row : {size_t{0}, size_t{21}, n - 1}) {
    std::fill(scales.begin(), scales.end(), 127);
    scales[row * 2 + 1] = 255;
    size_t bad_row = 12345;
    EXPECT_FALSE(PackMxfp4ForQ8(blocks.data(), scales.data(), n, k, codes.data(), packed.data(), &bad_row));
    EXPECT_EQ(bad_row, row);
  }
}

TEST(Q8Packing, Int8QuantizationIsWithinHalfAScaleStep) {
  const uint32_t seed = std::random_device{}();
  SCOPED_TRACE(testing::Message() << "seed=" << seed);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (size_t n : {1, 17, 50}) {
    for (size_t k : {32, 100, 2880}) {  // the int8 layout needs only k % 4 == 0
      std::vector<uint16_t> bf16(n * k);
      for (size_t j = 0; j < n; ++j) {
        const float sigma = j == 1 ? 0.0f : std::ldexp(1.0f, static_cast<int>(j % 11) - 6);
        for (size_t c = 0; c < k; ++c) bf16[j * k + c] = F32ToBf16(normal(rng) * sigma);
      }
      std::vector<uint8_t> values(Q8Int8Bytes(n, k), 7);
      std::vector<float> scales(Q8PaddedColumns(n), kSentinel);
      ASSERT_TRUE(QuantizeBf16ToQ8Int8(bf16.data(), n, k, values.data(), scales.data(), nullptr));
      std::vector<float> row(k);
      for (size_t j = 0; j < Q8PaddedColumns(n); ++j) {
        DequantizeQ8Int8Row(values.data(), scales.data(), k, j, row.data());
        float amax = 0.0f;
        for (size_t c = 0; j < n && c < k; ++c) amax = std::max(amax, std::fabs(Bf16ToF32(bf16[j * k + c])));
        ASSERT_EQ(scales[j], amax / 127.0f) << "row " << j;  // padding rows: 0
        bool hits_127 = amax == 0.0f;
        for (size_t c = 0; c < k; ++c) {
          const float w = j < n ? Bf16ToF32(bf16[j * k + c]) : 0.0f;
          const uint8_t stored = values[(j / 16) * (k * 16) + (c / 4) * 64 + (j % 16) * 4 + c % 4];
          ASSERT_GE(stored, 1) << "W8 = -128 is outside the format";
          hits_127 = hits_127 || stored == 1 || stored == 255;
          // scale / 2 plus the f32 roundings of 127 / amax, w * inv and scale * W8.
          ASSERT_LE(std::fabs(row[c] - w), scales[j] * (0.5f + 1e-5f) + 1e-6f * std::fabs(w))
              << "row " << j << " element " << c;
        }
        EXPECT_TRUE(hits_127) << "row " << j << ": the largest weight maps to +-127";
      }
    }
  }
}

TEST(Q8Packing, Int8RejectsNonFiniteRows) {
  const size_t n = 20, k = 32;
  std::vector<uint16_t> w(n * k, F32ToBf16(0.5f));
  std::vector<uint8_t> values(Q8Int8Bytes(n, k));
  std::vector<float> scales(Q8PaddedColumns(n));
  const float bad[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                       -std::numeric_limits<float>::infinity()};
  for (size_t t = 0; t < 3; ++t) {
    std::vector<uint16_t> v = w;
    const size_t row = 5 + 6 * t;
    v[row * k + 31] = F32ToBf16(bad[t]);
    size_t bad_row = 12345;
    EXPECT_FALSE(QuantizeBf16ToQ8Int8(v.data(), n, k, values.data(), scales.data(), &bad_row));
    EXPECT_EQ(bad_row, row);
  }
}

// ---- thread-parallel wrappers (q8.cpp) ----------------------------------------------------------

class ThreadCountGuard {
 public:
  ~ThreadCountGuard() { SetGlobalThreadCount(saved_); }

 private:
  const int saved_ = GlobalPool().num_threads();
};

TEST(Q8Parallel, WrappersMatchTheReferenceForAnyThreadCount) {
  ThreadCountGuard guard;
  const uint32_t seed = std::random_device{}();
  SCOPED_TRACE(testing::Message() << "seed=" << seed);
  std::mt19937 rng(seed);
  const size_t k = 320, ldx = k + 32;
  for (size_t m : {1, 5, 40}) {
    const std::vector<float> x = RandomActivations(rng, m, ldx, true);
    std::vector<float> dense(m * k);
    for (size_t i = 0; i < m; ++i) std::copy_n(x.begin() + i * ldx, k, dense.begin() + i * k);
    const Q8Activations want_x = QuantizeQ8Reference(dense, m, k);
    for (bool mxfp4 : {false, true}) {
      const size_t n = 333, ldy = n + 1;
      const Weights w = mxfp4 ? RandomMxfp4(rng, n, k, true) : RandomInt8(rng, n, k);
      std::vector<float> want(m * ldy, kSentinel);
      RunQ8(Reference(), w, want_x.rows(), m, 0, n, true, want.data(), ldy);
      for (int threads : {1, 2, 3}) {
        SetGlobalThreadCount(threads);
        Q8Activations xq;
        QuantizeQ8(x.data(), m, k, ldx, xq);
        ASSERT_EQ(xq.q, want_x.q);
        ASSERT_EQ(xq.sum, want_x.sum);
        for (size_t b = 0; b < xq.d.size(); ++b) ASSERT_TRUE(SameFloat(xq.d[b], want_x.d[b]));
        std::vector<float> y(m * ldy, kSentinel);
        if (mxfp4) {
          MatmulQ8Mxfp4(xq, w.codes.data(), w.scales.data(), n, w.bias.data(), y.data(), ldy);
        } else {
          MatmulQ8Int8(xq, w.values.data(), w.row_scales.data(), n, w.bias.data(), y.data(), ldy);
        }
        ASSERT_TRUE(SameOutputs(want, y, m, ldy, 0, n)) << (mxfp4 ? "mxfp4" : "int8") << " m=" << m
                                                        << " threads=" << threads;
      }
    }
  }
}

TEST(Q8Parallel, QuantizeRejectsPartialBlocks) {
  std::vector<float> x(40);
  Q8Activations xq;
  try {
    QuantizeQ8(x.data(), 1, 40, 40, xq);
    FAIL() << "k = 40 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("40"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tessera
