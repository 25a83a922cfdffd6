// Group-quantized 4-bit kernels (kernels/int4.h): the packer, both results' definitions checked on
// the scalar reference independently, and every instruction set's matmul_int4 / matmul_q8_int4
// against the reference bit for bit on fresh random inputs with awkward shapes (m around the tile
// heights and the direct/GEMM switch, n not a multiple of 16, column splits at group boundaries,
// ldy > n, bias on and off, every group size the kernels take), extreme codes and zeros, batch
// invariance, and the q8 result's accuracy against the exact one.
//
// AWQ semantics: ../shared/reference/quantization.md B.2-B.3 (W = (q - z) s, zeros as stored),
// dense-decoders.md §10 (compressed-tensors' q + 8, z + 8).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "core/dtype.h"
#include "kernels/int4.h"
#include "kernels/kernels.h"
#include "kernels/q8.h"
#include "test_util.h"

namespace tessera {
namespace {

constexpr float kSentinel = -12345.0f;

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

const KernelTable& Reference() { return KernelsFor(Isa::kScalar); }

// A packed int4 matrix with its codes, zeros and scales kept unpacked for the checks.
struct Int4Matrix {
  size_t n = 0, k = 0, group = 0;
  std::vector<uint8_t> q, z;  // [n, k], [n, k / group]
  std::vector<float> s;       // [n, k / group]
  std::vector<uint8_t> codes, zeros;
  std::vector<float> scales;
  std::vector<float> bias;
  Int4Weights weights() const { return Int4Weights{codes.data(), zeros.data(), scales.data(), group}; }
  float W(size_t j, size_t c) const {
    const size_t t = c / group;
    return static_cast<float>(int{q[j * k + c]} - int{z[j * (k / group) + t]}) * s[j * (k / group) + t];
  }
};

// Uniform codes and zeros (every value occurs), fp16 scales of magnitude 1e-3 .. 1e-1 (some
// negative, a few zero), as AWQ checkpoints hold them.
Int4Matrix RandomInt4(std::mt19937& rng, size_t n, size_t k, size_t group) {
  Int4Matrix w;
  w.n = n, w.k = k, w.group = group;
  std::uniform_int_distribution<int> nibble(0, 15), pick(0, 19);
  std::uniform_real_distribution<float> log_scale(-3.0f, -1.0f);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  w.q.resize(n * k);
  for (auto& v : w.q) v = static_cast<uint8_t>(nibble(rng));
  w.z.resize(n * (k / group));
  w.s.resize(n * (k / group));
  for (size_t e = 0; e < w.z.size(); ++e) {
    w.z[e] = static_cast<uint8_t>(nibble(rng));
    const int p = pick(rng);
    const float mag = p == 0 ? 0.0f : std::pow(10.0f, log_scale(rng));
    w.s[e] = F16ToF32(F32ToF16(p == 1 ? -mag : mag));
  }
  w.codes.assign(Int4CodeBytes(n, k), 0);
  w.zeros.assign(Int4GroupEntries(n, k, group), 0);
  w.scales.assign(Int4GroupEntries(n, k, group), 0.0f);
  for (size_t j = 0; j < n; ++j) {
    PackInt4Row(j, k, group, &w.q[j * k], &w.z[j * (k / group)], &w.s[j * (k / group)], w.codes.data(),
                w.zeros.data(), w.scales.data());
  }
  w.bias.resize(n);
  for (auto& b : w.bias) b = normal(rng);
  return w;
}

std::vector<float> RandomActivations(std::mt19937& rng, size_t m, size_t k) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> log_scale(-2.0f, 2.0f);
  std::vector<float> x(m * k);
  for (size_t i = 0; i < m; ++i) {
    for (size_t b = 0; b < k / 32; ++b) {
      const float scale = std::pow(10.0f, log_scale(rng));
      for (size_t c = 0; c < 32; ++c) x[i * k + 32 * b + c] = normal(rng) * scale;
    }
  }
  return x;
}

// One kernel call, exact (x) or q8 (xq).
void RunInt4(const KernelTable& t, bool q8, const Int4Matrix& w, const std::vector<float>& x, const Q8Activations& xq,
         size_t i0, size_t m, size_t n_begin, size_t n_end, bool bias, float* y, size_t ldy) {
  const float* b = bias ? w.bias.data() : nullptr;
  if (q8) {
    const size_t nb = w.k / kQ8Block;
    const Q8Rows rows{xq.q.data() + i0 * w.k, xq.d.data() + i0 * nb, xq.sum.data() + i0 * nb};
    t.matmul_q8_int4(rows, m, w.k, w.weights(), n_begin, n_end, b, y, ldy);
  } else {
    t.matmul_int4(x.data() + i0 * w.k, m, w.k, w.weights(), n_begin, n_end, b, y, ldy);
  }
}

::testing::AssertionResult SameOutputs(const std::vector<float>& want, const std::vector<float>& got, size_t m,
                                       size_t ldy, size_t n_begin, size_t n_end) {
  size_t failures = 0;
  std::ostringstream first;
  for (size_t i = 0; i < m; ++i) {
    for (size_t j = 0; j < ldy; ++j) {
      const bool inside = j >= n_begin && j < n_end;
      const float g = got[i * ldy + j], w = inside ? want[i * ldy + j] : kSentinel;
      if (Bits(g) != Bits(w) && failures++ == 0) {
        first << "y[" << i << "," << j << "] = " << g << ", want " << w << (inside ? "" : " (outside the range)");
      }
    }
  }
  if (failures == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << failures << " bad outputs; first: " << first.str();
}

// ---- the packer and the definitions -------------------------------------------------------------

TEST(Int4Packing, DequantizesToTheDefinitionAndPadsWithZeros) {
  std::mt19937 rng(1);
  for (size_t group : {8, 32, 128}) {
    const size_t n = 37, k = 256;
    const Int4Matrix w = RandomInt4(rng, n, k, group);
    std::vector<float> row(k);
    for (size_t j = 0; j < n; ++j) {
      DequantizeInt4Row(w.weights(), k, j, row.data());
      for (size_t c = 0; c < k; ++c) ASSERT_EQ(Bits(row[c]), Bits(w.W(j, c))) << "row " << j << " col " << c;
    }
    for (size_t j = n; j < Q8PaddedColumns(n); ++j) {  // padding rows: q = z = 0, s = 0
      DequantizeInt4Row(w.weights(), k, j, row.data());
      for (size_t c = 0; c < k; ++c) ASSERT_EQ(Bits(row[c]), 0u) << "padding row " << j;
    }
  }
}

// Byte layout (int4.h): byte (g, k8, r, kk) = q[16 g + r, 8 k8 + kk] | q[.., 8 k8 + 4 + kk] << 4.
TEST(Int4Packing, ByteLayout) {
  std::vector<uint8_t> q(16), z(2, 3);
  for (size_t c = 0; c < 16; ++c) q[c] = static_cast<uint8_t>(c);
  const std::vector<float> s = {0.5f, 2.0f};
  std::vector<uint8_t> codes(Int4CodeBytes(18, 16), 0), zeros(Int4GroupEntries(18, 16, 8), 0);
  std::vector<float> scales(Int4GroupEntries(18, 16, 8), 0.0f);
  PackInt4Row(17, 16, 8, q.data(), z.data(), s.data(), codes.data(), zeros.data(), scales.data());
  const uint8_t* g1 = codes.data() + 16 * 8;  // group 1 (rows 16..31), k = 16: 8 bytes per row
  EXPECT_EQ(g1[4 + 0], 0x40);                 // row 17 = lane 1, k8 = 0: (q0 | q4 << 4)
  EXPECT_EQ(g1[4 + 3], 0x73);
  EXPECT_EQ(g1[64 + 4 + 0], 0xC8);            // k8 = 1
  EXPECT_EQ(g1[64 + 4 + 3], 0xFB);
  EXPECT_EQ(zeros[(1 * 2 + 1) * 16 + 1], 3);
  EXPECT_EQ(scales[(1 * 2 + 0) * 16 + 1], 0.5f);
  EXPECT_EQ(scales[(1 * 2 + 1) * 16 + 1], 2.0f);
}

// The reference's two results computed here from the unpacked matrix: the exact one as the
// sequential FMA over k, the q8 one from the q8.h formula with integer weights q - z.
TEST(Int4Definitions, ReferenceFollowsThem) {
  std::mt19937 rng(7);
  const size_t m = 3, n = 21, k = 256;
  for (size_t group : {32, 128}) {
    const Int4Matrix w = RandomInt4(rng, n, k, group);
    const std::vector<float> x = RandomActivations(rng, m, k);
    const Q8Activations xq = QuantizeQ8Reference(x, m, k);
    std::vector<float> exact(m * n), fast(m * n);
    RunInt4(Reference(), false, w, x, xq, 0, m, 0, n, true, exact.data(), n);
    RunInt4(Reference(), true, w, x, xq, 0, m, 0, n, true, fast.data(), n);
    for (size_t i = 0; i < m; ++i) {
      for (size_t j = 0; j < n; ++j) {
        float acc = 0.0f;
        for (size_t c = 0; c < k; ++c) acc = std::fma(w.W(j, c), x[i * k + c], acc);
        ASSERT_EQ(Bits(exact[i * n + j]), Bits(acc + w.bias[j])) << i << "," << j;
        float acc8 = 0.0f;
        for (size_t b = 0; b < k / 32; ++b) {
          int32_t dot = 0;
          for (size_t c = 32 * b; c < 32 * b + 32; ++c) {
            dot += int32_t{xq.q[i * k + c]} * (int32_t{w.q[j * k + c]} - int32_t{w.z[j * (k / group) + c / group]});
          }
          acc8 = std::fma(static_cast<float>(dot), xq.d[i * (k / 32) + b] * w.s[j * (k / group) + 32 * b / group], acc8);
        }
        ASSERT_EQ(Bits(fast[i * n + j]), Bits(acc8 + w.bias[j])) << i << "," << j;
      }
    }
  }
}

// ---- per-ISA tests ------------------------------------------------------------------------------

class Int4IsaTest : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (!IsaSupported(GetParam())) GTEST_SKIP() << IsaName(GetParam()) << " not supported here";
  }
  const KernelTable& table() { return KernelsFor(GetParam()); }
  const uint32_t seed_ = std::random_device{}();
  std::mt19937 rng_{seed_};
};

TEST_P(Int4IsaTest, TablesNameTheirPaths) {
  const KernelTable& t = table();
  const Isa isa = GetParam();
  EXPECT_STREQ(t.matmul_int4_isa, isa == Isa::kScalar ? "scalar" : isa == Isa::kAvx2 ? "avx2" : "avx512");
  const char* q8 = isa == Isa::kScalar ? "scalar" : isa == Isa::kAvx2 || !GetCpuFeatures().avx512_vnni ? "avx2"
                                                                                                        : "avx512vnni";
  EXPECT_STREQ(t.matmul_q8_int4_isa, q8);
}

// Every (k, group, m, n, bias), the whole range plus a split and an inner range at multiples of
// 16, against the reference's bits.
void CheckMatchesReference(const KernelTable& t, std::mt19937& rng, bool q8) {
  struct Shape {
    size_t k, group;
  };
  const Shape shapes[] = {{32, 32}, {64, 8}, {96, 32}, {256, 64}, {256, 256}, {1024, 128}, {2880, 32}};
  for (const Shape& shape : shapes) {
    if (q8 && !Int4Q8Ok(shape.k, shape.group)) continue;
    for (size_t n : {1, 15, 17, 33, 70}) {
      const Int4Matrix w = RandomInt4(rng, n, shape.k, shape.group);
      for (size_t m : {0, 1, 2, 3, 4, 5, 7, 9, 10, 17}) {
        if (shape.k >= 1024 && m > 10 && n > 33) continue;  // keep the scalar reference cheap
        const std::vector<float> x = RandomActivations(rng, m, shape.k);
        const Q8Activations xq = QuantizeQ8Reference(x, m, shape.k);
        const size_t ldy = n + 3, groups = (n + 15) / 16;
        std::uniform_int_distribution<size_t> cut(0, groups);
        for (bool bias : {false, true}) {
          SCOPED_TRACE(testing::Message() << (q8 ? "q8" : "exact") << " k=" << shape.k << " G=" << shape.group
                                          << " m=" << m << " n=" << n << " bias=" << bias);
          std::vector<float> want(m * ldy, kSentinel), got(m * ldy, kSentinel);
          RunInt4(Reference(), q8, w, x, xq, 0, m, 0, n, bias, want.data(), ldy);
          RunInt4(t, q8, w, x, xq, 0, m, 0, n, bias, got.data(), ldy);
          ASSERT_TRUE(SameOutputs(want, got, m, ldy, 0, n));
          const size_t c = std::min(n, 16 * cut(rng));
          std::vector<float> split(m * ldy, kSentinel);
          RunInt4(t, q8, w, x, xq, 0, m, 0, c, bias, split.data(), ldy);
          RunInt4(t, q8, w, x, xq, 0, m, c, n, bias, split.data(), ldy);
          ASSERT_TRUE(SameOutputs(want, split, m, ldy, 0, n)) << "split at " << c;
          size_t a = cut(rng), b = cut(rng);
          if (a > b) std::swap(a, b);
          const size_t lo = std::min(n, 16 * a), hi = std::min(n, 16 * b);
          std::vector<float> inner(m * ldy, kSentinel);
          RunInt4(t, q8, w, x, xq, 0, m, lo, hi, bias, inner.data(), ldy);
          ASSERT_TRUE(SameOutputs(want, inner, m, ldy, lo, hi)) << "range [" << lo << "," << hi << ")";
        }
      }
    }
  }
}

TEST_P(Int4IsaTest, ExactMatmulMatchesReferenceBits) {
  SCOPED_TRACE(testing::Message() << "seed=" << seed_ << " isa=" << table().matmul_int4_isa);
  CheckMatchesReference(table(), rng_, false);
}

TEST_P(Int4IsaTest, Q8MatmulMatchesReferenceBits) {
  SCOPED_TRACE(testing::Message() << "seed=" << seed_ << " isa=" << table().matmul_q8_int4_isa);
  CheckMatchesReference(table(), rng_, true);
}

// The largest integer terms: codes 15 with zero 0 and codes 0 with zero 15 (w = +-15) against
// activations at +-127: no int16 saturation in the AVX2 pairs, no u8 wrap in the offset add.
TEST_P(Int4IsaTest, ExtremeCodesAndZerosDoNotSaturate) {
  SCOPED_TRACE(testing::Message() << "seed=" << seed_);
  const size_t n = 48, k = 256, m = 11, group = 64;
  Int4Matrix w = RandomInt4(rng_, n, k, group);
  std::uniform_int_distribution<int> coin(0, 1);
  for (size_t j = 0; j < n; ++j) {
    for (size_t t = 0; t < k / group; ++t) {
      const bool high = coin(rng_);
      w.z[j * (k / group) + t] = high ? 0 : 15;
      for (size_t c = t * group; c < (t + 1) * group; ++c) w.q[j * k + c] = high ? 15 : 0;
    }
    PackInt4Row(j, k, group, &w.q[j * k], &w.z[j * (k / group)], &w.s[j * (k / group)], w.codes.data(),
                w.zeros.data(), w.scales.data());
  }
  Q8Activations xq;
  xq.m = m, xq.k = k;
  xq.q.resize(m * k);
  xq.d.resize(m * k / 32);
  xq.sum.assign(m * k / 32, 0);
  for (size_t i = 0; i < m * k; ++i) xq.q[i] = static_cast<int8_t>(coin(rng_) ? 127 : -127);
  for (size_t b = 0; b < m * k / 32; ++b) {
    xq.d[b] = std::ldexp(1.0f, static_cast<int>(b % 7) - 10);
    for (size_t c = 0; c < 32; ++c) xq.sum[b] += xq.q[b * 32 + c];
  }
  const std::vector<float> x = RandomActivations(rng_, m, k);
  for (size_t rows : {size_t{1}, size_t{4}, m}) {
    std::vector<float> want(rows * n, kSentinel), got(rows * n, kSentinel);
    RunInt4(Reference(), true, w, x, xq, 0, rows, 0, n, true, want.data(), n);
    RunInt4(table(), true, w, x, xq, 0, rows, 0, n, true, got.data(), n);
    ASSERT_TRUE(SameOutputs(want, got, rows, n, 0, n)) << "m=" << rows;
  }
}

// Row i alone or in any sub-batch has the bits it has in the whole batch, on both paths.
TEST_P(Int4IsaTest, RowsDoNotDependOnBatchSize) {
  SCOPED_TRACE(testing::Message() << "seed=" << seed_);
  const size_t m = 23, n = 70;
  for (bool q8 : {false, true}) {
    for (size_t k : {64, 1024}) {
      const Int4Matrix w = RandomInt4(rng_, n, k, 32);
      const std::vector<float> x = RandomActivations(rng_, m, k);
      const Q8Activations xq = QuantizeQ8Reference(x, m, k);
      std::vector<float> whole(m * n, kSentinel);
      RunInt4(table(), q8, w, x, xq, 0, m, 0, n, true, whole.data(), n);
      for (size_t batch : {1, 2, 3, 4, 5, 9, 10, 13}) {
        std::vector<float> parts(m * n, kSentinel);
        for (size_t i0 = 0; i0 < m; i0 += batch) {
          RunInt4(table(), q8, w, x, xq, i0, std::min(batch, m - i0), 0, n, true, parts.data() + i0 * n, n);
        }
        ASSERT_EQ(std::memcmp(whole.data(), parts.data(), whole.size() * sizeof(float)), 0)
            << (q8 ? "q8" : "exact") << " k=" << k << " batches of " << batch;
      }
    }
  }
}

// The q8 result against the exact one on N(0, 1) activations: the activation rounding alone
// (relative RMS error about 1 %, q8_test.cpp's ApproximatesExactMatmulOfDequantizedWeights),
// required <= 2 %.
TEST_P(Int4IsaTest, Q8ApproximatesTheExactResult) {
  SCOPED_TRACE(testing::Message() << "seed=" << seed_);
  const size_t m = 9, n = 77, k = 2048;
  const Int4Matrix w = RandomInt4(rng_, n, k, 128);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(m * k);
  for (auto& v : x) v = normal(rng_);
  const Q8Activations xq = QuantizeQ8Reference(x, m, k);
  std::vector<float> exact(m * n), fast(m * n);
  RunInt4(table(), false, w, x, xq, 0, m, 0, n, false, exact.data(), n);
  RunInt4(table(), true, w, x, xq, 0, m, 0, n, false, fast.data(), n);
  double err2 = 0.0, ref2 = 0.0;
  for (size_t i = 0; i < m * n; ++i) {
    err2 += (double{fast[i]} - exact[i]) * (double{fast[i]} - exact[i]);
    ref2 += double{exact[i]} * exact[i];
  }
  EXPECT_LE(std::sqrt(err2 / ref2), 0.02);
}

INSTANTIATE_TEST_SUITE_P(AllIsas, Int4IsaTest, ::testing::Values(Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kAmx),
                         [](const auto& info) { return std::string(IsaName(info.param)); });

}  // namespace
}  // namespace tessera
