// Matmul kernels (kernels.h matmul_bf16 / matmul_f16 / matmul_f32 / matmul_mxfp4) of every
// instruction set this machine
// supports, the scalar reference included, against an exact double-precision evaluation over the
// reference-decoded weights, on fresh random inputs with awkward shapes: m around the
// dot-form/GEMM switch and the micro-tile heights, k with vector and k-block tails, column ranges
// with odd ends and n_begin > 0, ldy > n, bias on and off. Exact decoding is checked bit for bit,
// and results must not depend on the column split or the batch size. Plus the thread-parallel
// wrappers (parallel_matmul.h).
//
// MXFP4 layout and decoding: ../shared/reference/gpt-oss.md §2.3, quantization.md A.1/A.2.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/kernels.h"
#include "kernels/mxfp4.h"
#include "kernels/parallel_matmul.h"

namespace tessera {
namespace {

constexpr float kSentinel = -12345.0f;  // marks outputs a kernel must not write

// The weight formats of the exact matmuls.
enum class Format { kBf16, kF16, kF32, kMxfp4 };
const Format kFormats[] = {Format::kBf16, Format::kF16, Format::kF32, Format::kMxfp4};
const Format kDenseFormats[] = {Format::kBf16, Format::kF16, Format::kF32};

const char* FormatName(Format f) {
  switch (f) {
    case Format::kBf16: return "bf16";
    case Format::kF16: return "f16";
    case Format::kF32: return "f32";
    case Format::kMxfp4: return "mxfp4";
  }
  return "?";
}

// A random problem: x [m, k], W [n, k] (BF16 or F16 bits, F32 values or MXFP4 codes/scales) and
// its exact decoding.
struct Problem {
  Format format = Format::kBf16;
  size_t m = 0, k = 0, n = 0;
  std::vector<float> x;
  std::vector<uint16_t> w_bf16, w_f16;
  std::vector<uint8_t> codes, scales;
  std::vector<float> w;  // decoded W [n, k]; the kernel's input for F32
  std::vector<float> bias;
};

void FillActivations(std::mt19937& rng, Problem& p) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  p.x.resize(p.m * p.k);
  for (auto& v : p.x) v = dist(rng);
  p.bias.resize(p.n);
  for (auto& v : p.bias) v = dist(rng);
}

Problem RandomBf16Problem(std::mt19937& rng, size_t m, size_t k, size_t n) {
  Problem p;
  p.m = m, p.k = k, p.n = n;
  FillActivations(rng, p);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  p.w_bf16.resize(n * k);
  p.w.resize(n * k);
  for (size_t i = 0; i < n * k; ++i) {
    p.w_bf16[i] = F32ToBf16(dist(rng));
    p.w[i] = Bf16ToF32(p.w_bf16[i]);
  }
  return p;
}

// F16 weights: mostly N(0, 1) rounded to F16, plus 1/16 subnormals (random sign and mantissa),
// 1/32 signed zeros and, with `wide`, 1/4 random finite bit patterns (every exponent, up to
// +-65504; never inf or NaN).
Problem RandomF16Problem(std::mt19937& rng, size_t m, size_t k, size_t n, bool wide = false) {
  Problem p;
  p.format = Format::kF16;
  p.m = m, p.k = k, p.n = n;
  FillActivations(rng, p);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::uniform_int_distribution<int> kind(0, 31);
  std::uniform_int_distribution<uint32_t> bits(0, 0xffff), mantissa(1, 0x3ff), exponent(0, 30);
  p.w_f16.resize(n * k);
  p.w.resize(n * k);
  for (size_t i = 0; i < n * k; ++i) {
    const int r = kind(rng);
    const uint16_t sign = static_cast<uint16_t>(bits(rng) & 0x8000);
    uint16_t h;
    if (r < 2) {
      h = sign | static_cast<uint16_t>(mantissa(rng));  // subnormal
    } else if (r == 2) {
      h = sign;  // +-0
    } else if (wide && r < 11) {
      h = sign | static_cast<uint16_t>(exponent(rng) << 10) | static_cast<uint16_t>(bits(rng) & 0x3ff);
    } else {
      h = F32ToF16(dist(rng));
    }
    p.w_f16[i] = h;
    p.w[i] = F16ToF32(h);
  }
  return p;
}

// F32 weights: mostly N(0, 1), plus 1/16 subnormals, 1/32 signed zeros and, with `wide`, 1/4
// random finite bit patterns (never inf or NaN).
Problem RandomF32Problem(std::mt19937& rng, size_t m, size_t k, size_t n, bool wide = false) {
  Problem p;
  p.format = Format::kF32;
  p.m = m, p.k = k, p.n = n;
  FillActivations(rng, p);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::uniform_int_distribution<int> kind(0, 31);
  std::uniform_int_distribution<uint32_t> bits(0, 0xffffffffu), exponent(0, 254);
  p.w.resize(n * k);
  for (size_t i = 0; i < n * k; ++i) {
    const int r = kind(rng);
    const uint32_t b = bits(rng), sign = b & 0x80000000u;
    uint32_t u;
    if (r < 2) {
      u = sign | ((b & 0x7fffffu) | 1u);  // subnormal
    } else if (r == 2) {
      u = sign;
    } else if (wide && r < 11) {
      u = sign | exponent(rng) << 23 | (b & 0x7fffffu);
    } else {
      u = std::bit_cast<uint32_t>(dist(rng));
    }
    p.w[i] = std::bit_cast<float>(u);
  }
  return p;
}

// p.w = the reference decoding of p.codes / p.scales.
void DecodeWeights(Problem& p) {
  const size_t groups = p.k / kMxfp4BlockSize;
  p.w.resize(p.n * p.k);
  for (size_t j = 0; j < p.n; ++j) {
    DecodeMxfp4Row(p.codes.data() + j * groups * kMxfp4BlockBytes, p.scales.data() + j * groups,
                   p.k, p.w.data() + j * p.k);
  }
}

// Uniformly random code bytes (so code 8, -0, appears in 1/16 of the nibbles) and scales mostly
// around 1 with the subnormal edge, scale 0 (2^-127), in 1/16 of the blocks. `max_scale` keeps
// 6 * 2^(s-127) and the sums finite.
Problem RandomMxfp4Problem(std::mt19937& rng, size_t m, size_t k, size_t n, int min_scale = 119,
                           int max_scale = 131) {
  Problem p;
  p.format = Format::kMxfp4;
  p.m = m, p.k = k, p.n = n;
  FillActivations(rng, p);
  const size_t groups = k / kMxfp4BlockSize;
  std::uniform_int_distribution<int> byte(0, 255), scale(min_scale, max_scale), edge(0, 15);
  p.codes.resize(n * groups * kMxfp4BlockBytes);
  for (auto& c : p.codes) c = static_cast<uint8_t>(byte(rng));
  p.scales.resize(n * groups);
  for (auto& s : p.scales) s = static_cast<uint8_t>(edge(rng) == 0 ? 0 : scale(rng));
  DecodeWeights(p);
  return p;
}

// A random problem of format f (k % 32 == 0 for MXFP4).
Problem RandomProblem(Format f, std::mt19937& rng, size_t m, size_t k, size_t n) {
  switch (f) {
    case Format::kBf16: return RandomBf16Problem(rng, m, k, n);
    case Format::kF16: return RandomF16Problem(rng, m, k, n);
    case Format::kF32: return RandomF32Problem(rng, m, k, n);
    case Format::kMxfp4: return RandomMxfp4Problem(rng, m, k, n);
  }
  return {};
}

// Runs the table's kernel for the problem's format on columns [n_begin, n_end).
void RunKernel(const KernelTable& t, const Problem& p, size_t n_begin, size_t n_end,
               const float* bias, float* y, size_t ldy) {
  switch (p.format) {
    case Format::kBf16:
      return t.matmul_bf16(p.x.data(), p.m, p.k, p.w_bf16.data(), n_begin, n_end, bias, y, ldy);
    case Format::kF16:
      return t.matmul_f16(p.x.data(), p.m, p.k, p.w_f16.data(), n_begin, n_end, bias, y, ldy);
    case Format::kF32:
      return t.matmul_f32(p.x.data(), p.m, p.k, p.w.data(), n_begin, n_end, bias, y, ldy);
    case Format::kMxfp4:
      return t.matmul_mxfp4(p.x.data(), p.m, p.k, p.codes.data(), p.scales.data(), n_begin, n_end,
                            bias, y, ldy);
  }
}

// The same through the thread-parallel wrapper of parallel_matmul.h (all n columns).
void RunParallel(const Problem& p, const float* bias, float* y, size_t ldy) {
  switch (p.format) {
    case Format::kBf16: return MatmulBf16(p.x.data(), p.m, p.k, p.w_bf16.data(), p.n, bias, y, ldy);
    case Format::kF16: return MatmulF16(p.x.data(), p.m, p.k, p.w_f16.data(), p.n, bias, y, ldy);
    case Format::kF32: return MatmulF32(p.x.data(), p.m, p.k, p.w.data(), p.n, bias, y, ldy);
    case Format::kMxfp4:
      return MatmulMxfp4(p.x.data(), p.m, p.k, p.codes.data(), p.scales.data(), p.n, bias, y, ldy);
  }
}

// Checks y[:, n_begin:n_end] against the exact result and that nothing else was written. The
// bound is the rounding of a length-(k+1) f32 sum in any order (gamma_{k+1} style, doubled for
// the f32 products of the reference) over sum |terms|, plus the absolute error of results that
// fall in the subnormal range (scale-0 MXFP4 blocks, subnormal F32 weights), not a hand-picked
// constant.
::testing::AssertionResult CheckOutput(const Problem& p, size_t n_begin, size_t n_end,
                                       const float* bias, const std::vector<float>& y,
                                       size_t ldy) {
  const double u = std::ldexp(1.0, -24);
  const double tiny = std::ldexp(1.0, -149);
  size_t failures = 0;
  std::ostringstream first;
  for (size_t i = 0; i < p.m; ++i) {
    for (size_t j = 0; j < ldy; ++j) {
      const float got = y[i * ldy + j];
      if (j < n_begin || j >= n_end) {
        if (std::memcmp(&got, &kSentinel, sizeof(float)) != 0 && failures++ == 0) {
          first << "y[" << i << "," << j << "] outside [" << n_begin << "," << n_end
                << ") was overwritten with " << got;
        }
        continue;
      }
      double exact = bias ? bias[j] : 0.0, abs_sum = bias ? std::fabs(bias[j]) : 0.0;
      for (size_t c = 0; c < p.k; ++c) {
        const double term = static_cast<double>(p.x[i * p.k + c]) * p.w[j * p.k + c];
        exact += term;
        abs_sum += std::fabs(term);
      }
      const double bound = 2.0 * static_cast<double>(p.k + 2) * (u * abs_sum + tiny);
      if (!(std::fabs(got - exact) <= bound) && failures++ == 0) {
        first << "y[" << i << "," << j << "] = " << got << ", exact " << exact << ", bound "
              << bound;
      }
    }
  }
  if (failures == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << failures << " bad outputs; first: " << first.str();
}

struct ColumnRange {
  size_t n, n_begin, n_end;
};
// One column; odd range with n_begin > 0; several GEMM column blocks (kNc = 256) with odd ends;
// an empty range.
const ColumnRange kRanges[] = {{1, 0, 1}, {75, 3, 70}, {300, 1, 299}, {9, 9, 9}};
// Around the dot-form tile limits (AVX2 4; AVX-512 4 rows per pass, then one pass for 5 to 9
// speculative rows) and GEMM row-block heights (6), plus none.
const size_t kRows[] = {0, 1, 2, 3, 4, 5, 8, 9, 10, 17};

class MatmulIsaTest : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (!IsaSupported(GetParam())) GTEST_SKIP() << IsaName(GetParam()) << " not supported here";
  }
  const KernelTable& table() { return KernelsFor(GetParam()); }

  // Every (m, range, bias) combination for one k; `make(m, n)` builds a fresh problem.
  template <typename Make>
  void CheckAllShapes(size_t k, const Make& make) {
    for (size_t m : kRows) {
      for (const ColumnRange& r : kRanges) {
        const Problem p = make(m, r.n);
        for (bool with_bias : {false, true}) {
          SCOPED_TRACE(testing::Message() << "m=" << m << " k=" << k << " n=" << r.n << " cols=["
                                          << r.n_begin << "," << r.n_end << ") bias=" << with_bias);
          const float* bias = with_bias ? p.bias.data() : nullptr;
          const size_t ldy = r.n + 5;
          std::vector<float> y(m * ldy, kSentinel);
          RunKernel(table(), p, r.n_begin, r.n_end, bias, y.data(), ldy);
          ASSERT_TRUE(CheckOutput(p, r.n_begin, r.n_end, bias, y, ldy));
        }
      }
    }
  }

  const uint32_t seed_ = std::random_device{}();
  std::mt19937 rng_{seed_};
};

TEST_P(MatmulIsaTest, Bf16MatchesExact) {
  SCOPED_TRACE(testing::Message() << "seed=" << seed_);
  for (size_t k : {0, 1, 7, 16, 31, 33, 300, 2880}) {
    CheckAllShapes(k, [&](size_t m, size_t n) { return RandomBf16Problem(rng_, m, k, n); });
  }
}

// F16 weights with subnormals and signed zeros, every k tail (k % 16, k % 8) and k = 0.
TEST_P(MatmulIsaTest, F16MatchesExact) {
  SCOPED_TRACE(testing::Message() << "seed=" << seed_);
  for (size_t k : {0, 1, 7, 15, 16, 31, 33, 300, 2880}) {
    CheckAllShapes(k, [&](size_t m, size_t n) { return RandomF16Problem(rng_, m, k, n); });
  }
}

TEST_P(MatmulIsaTest, F32MatchesExact) {
  SCOPED_TRACE(testing::Message() << "seed=" << seed_);
  for (size_t k : {0, 1, 7, 15, 16, 31, 33, 300, 2880}) {
    CheckAllShapes(k, [&](size_t m, size_t n) { return RandomF32Problem(rng_, m, k, n); });
  }
}

TEST_P(MatmulIsaTest, Mxfp4MatchesExact) {
  SCOPED_TRACE(testing::Message() << "seed=" << seed_);
  for (size_t k : {0, 32, 64, 96, 288, 2880}) {
    CheckAllShapes(k, [&](size_t m, size_t n) { return RandomMxfp4Problem(rng_, m, k, n); });
  }
}

// x = one-hot rows, so y[i, j] is the decoded weight W[j, c_i] exactly (no rounding): catches
// any nibble-order, permutation or scale mistake bit for bit, over every scale byte (0 =
// subnormal; 253..255 give inf weights, and then 0 * inf makes the whole output NaN, as in the
// reference), and any F16 / F32 decoding mistake over random finite values of every exponent.
TEST_P(MatmulIsaTest, OneHotActivationsRecoverWeightsExactly) {
  SCOPED_TRACE(testing::Message() << "seed=" << seed_);
  for (size_t m : {1, 3, 7, 13}) {
    for (Format f : kFormats) {
      const size_t k = 96, n = 86;  // 258 blocks: every scale byte at least once
      Problem p = f == Format::kF16   ? RandomF16Problem(rng_, m, k, n, /*wide=*/true)
                  : f == Format::kF32 ? RandomF32Problem(rng_, m, k, n, /*wide=*/true)
                                      : RandomProblem(f, rng_, m, k, n);
      if (f == Format::kMxfp4) {
        // Block b gets scale b % 256 and its 32 codes are two shuffles of all 16 codes.
        std::vector<uint8_t> nibbles(32);
        for (size_t b = 0; b < p.scales.size(); ++b) {
          p.scales[b] = static_cast<uint8_t>(b % 256);
          for (size_t i = 0; i < 32; ++i) nibbles[i] = static_cast<uint8_t>(i % 16);
          std::shuffle(nibbles.begin(), nibbles.end(), rng_);
          for (size_t i = 0; i < 16; ++i) {
            p.codes[b * kMxfp4BlockBytes + i] = static_cast<uint8_t>(nibbles[2 * i] | nibbles[2 * i + 1] << 4);
          }
        }
        DecodeWeights(p);
      }
      std::vector<bool> finite_row(n, true);
      for (size_t j = 0; j < n; ++j) {
        for (size_t c = 0; c < k; ++c) finite_row[j] = finite_row[j] && std::isfinite(p.w[j * k + c]);
      }
      for (size_t c0 = 0; c0 < k; ++c0) {
        std::fill(p.x.begin(), p.x.end(), 0.0f);
        for (size_t i = 0; i < m; ++i) p.x[i * k + (c0 + 37 * i) % k] = 1.0f;
        std::vector<float> y(m * n, kSentinel);
        RunKernel(table(), p, 0, n, nullptr, y.data(), n);
        for (size_t i = 0; i < m; ++i) {
          for (size_t j = 0; j < n; ++j) {
            const size_t c = (c0 + 37 * i) % k;
            const float got = y[i * n + j];
            if (finite_row[j]) {
              ASSERT_EQ(got, p.w[j * k + c]) << FormatName(f) << " m=" << m
                                             << " row " << i << " col " << j << " element " << c;
            } else {
              ASSERT_TRUE(std::isnan(got)) << "m=" << m << " col " << j << ": " << got;
            }
          }
        }
      }
    }
  }
}

// A column's bits do not depend on how [n_begin, n_end) is split: the parallel wrappers rely on it.
TEST_P(MatmulIsaTest, SplittingColumnsGivesIdenticalBits) {
  SCOPED_TRACE(testing::Message() << "seed=" << seed_);
  for (size_t m : {1, 3, 4, 9, 13}) {
    for (Format f : kFormats) {
      const size_t k = 320, n = 301;
      const Problem p = RandomProblem(f, rng_, m, k, n);
      std::vector<float> whole(m * n, kSentinel), parts(m * n, kSentinel);
      RunKernel(table(), p, 0, n, p.bias.data(), whole.data(), n);
      std::uniform_int_distribution<size_t> cut(1, n - 1);
      size_t a = cut(rng_), b = cut(rng_);
      if (a > b) std::swap(a, b);
      RunKernel(table(), p, 0, a, p.bias.data(), parts.data(), n);
      RunKernel(table(), p, a, b, p.bias.data(), parts.data(), n);
      RunKernel(table(), p, b, n, p.bias.data(), parts.data(), n);
      ASSERT_EQ(std::memcmp(whole.data(), parts.data(), whole.size() * sizeof(float)), 0)
          << FormatName(f) << " m=" << m << " cuts " << a << ", " << b;
    }
  }
}

// A row's bits do not depend on how many rows are computed with it (m = 1 decode, small batches
// or a long prefill go through different code paths): the model relies on it for chunked prefill
// and speculative verification giving the same logits as one-token steps.
TEST_P(MatmulIsaTest, RowsDoNotDependOnBatchSize) {
  SCOPED_TRACE(testing::Message() << "seed=" << seed_);
  const size_t m = 19, n = 70;
  for (Format f : kFormats) {
    for (size_t k : f == Format::kMxfp4 ? std::vector<size_t>{32, 288, 2880, 4160}
                                        : std::vector<size_t>{7, 33, 300, 2880, 4100}) {
      const Problem p = RandomProblem(f, rng_, m, k, n);
      std::vector<float> whole(m * n, kSentinel);
      RunKernel(table(), p, 0, n, p.bias.data(), whole.data(), n);
      for (size_t batch : {1, 2, 3, 4, 5, 6, 7, 8, 9, 13}) {
        std::vector<float> parts(m * n, kSentinel);
        for (size_t i0 = 0; i0 < m; i0 += batch) {
          Problem sub = p;
          sub.m = std::min(batch, m - i0);
          sub.x.assign(p.x.begin() + i0 * k, p.x.begin() + (i0 + sub.m) * k);
          RunKernel(table(), sub, 0, n, p.bias.data(), parts.data() + i0 * n, n);
        }
        ASSERT_EQ(std::memcmp(whole.data(), parts.data(), whole.size() * sizeof(float)), 0)
            << FormatName(f) << " k=" << k << " batches of " << batch;
      }
    }
  }
}

// The decode step (m = 1) and a verification batch (m = 13, the GEMM form on every ISA) give
// row i the same bits, for every row and the three dense formats, over k with every tail.
TEST_P(MatmulIsaTest, OneRowMatchesItsRowOfThirteen) {
  SCOPED_TRACE(testing::Message() << "seed=" << seed_);
  const size_t m = 13, n = 131;
  for (Format f : kDenseFormats) {
    for (size_t k : {1, 15, 17, 100, 2049, 2880}) {
      const Problem p = RandomProblem(f, rng_, m, k, n);
      std::vector<float> batch(m * n, kSentinel);
      RunKernel(table(), p, 0, n, p.bias.data(), batch.data(), n);
      for (size_t i = 0; i < m; ++i) {
        Problem row = p;
        row.m = 1;
        row.x.assign(p.x.begin() + i * k, p.x.begin() + (i + 1) * k);
        std::vector<float> y(n, kSentinel);
        RunKernel(table(), row, 0, n, p.bias.data(), y.data(), n);
        ASSERT_EQ(std::memcmp(y.data(), batch.data() + i * n, n * sizeof(float)), 0)
            << FormatName(f) << " k=" << k << " row " << i;
      }
    }
  }
}

// The dense formats share one summation order per table: weights that BF16, F16 and F32 all
// represent exactly (BF16 values of magnitude in [2^-14, 2^15], the normal F16 range, with at
// most 8 significant bits) give identical bits through matmul_bf16, matmul_f16 and matmul_f32,
// for every m (dot and GEMM forms) and k tail.
TEST_P(MatmulIsaTest, DenseFormatsShareTheBf16SummationOrder) {
  SCOPED_TRACE(testing::Message() << "seed=" << seed_);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (size_t k : {0, 1, 7, 16, 33, 300, 2880}) {
    for (size_t m : kRows) {
      const size_t n = 75;
      Problem p = RandomBf16Problem(rng_, m, k, n);
      for (size_t i = 0; i < n * k; ++i) {
        while (std::fabs(p.w[i]) < 0x1p-14f || std::fabs(p.w[i]) > 0x1p15f) {
          p.w_bf16[i] = F32ToBf16(dist(rng_));
          p.w[i] = Bf16ToF32(p.w_bf16[i]);
        }
      }
      p.w_f16.resize(n * k);
      for (size_t i = 0; i < n * k; ++i) {
        p.w_f16[i] = F32ToF16(p.w[i]);
        ASSERT_EQ(F16ToF32(p.w_f16[i]), p.w[i]);
      }
      std::vector<float> y[3];
      for (Format f : kDenseFormats) {
        p.format = f;
        std::vector<float>& out = y[static_cast<int>(f)];
        out.assign(m * (n + 2), kSentinel);
        RunKernel(table(), p, 2, n, p.bias.data(), out.data(), n + 2);
      }
      if (y[0].empty()) continue;  // m = 0: nothing written (and memcmp may not see null)
      ASSERT_EQ(std::memcmp(y[0].data(), y[1].data(), y[0].size() * sizeof(float)), 0)
          << "f16 vs bf16, m=" << m << " k=" << k;
      ASSERT_EQ(std::memcmp(y[0].data(), y[2].data(), y[0].size() * sizeof(float)), 0)
          << "f32 vs bf16, m=" << m << " k=" << k;
    }
  }
}

// Every finite F16 value (both signs, exponents 0..30 with subnormals, every mantissa) as a
// weight: W[j, c] = sign(j), exponent(j), mantissa c, recovered exactly by identity rows of x,
// computed in batches of 1, 4, 9 and 16 rows (the dot forms and the GEMM).
TEST_P(MatmulIsaTest, F16DecodesEveryFiniteValueExactly) {
  const size_t k = 1024, n = 62;
  std::vector<uint16_t> w(n * k);
  for (size_t j = 0; j < n; ++j) {
    for (size_t c = 0; c < k; ++c) {
      w[j * k + c] = static_cast<uint16_t>((j / 31) << 15 | (j % 31) << 10 | c);
    }
  }
  for (size_t batch : {1, 4, 9, 16}) {
    std::vector<float> x(batch * k), y(batch * n);
    for (size_t c0 = 0; c0 < k; c0 += batch) {
      const size_t rows = std::min(batch, k - c0);
      std::fill(x.begin(), x.end(), 0.0f);
      for (size_t i = 0; i < rows; ++i) x[i * k + c0 + i] = 1.0f;
      std::fill(y.begin(), y.end(), kSentinel);
      table().matmul_f16(x.data(), rows, k, w.data(), 0, n, nullptr, y.data(), n);
      for (size_t i = 0; i < rows; ++i) {
        for (size_t j = 0; j < n; ++j) {
          const uint16_t h = w[j * k + c0 + i];
          ASSERT_EQ(y[i * n + j], F16ToF32(h)) << "f16 bits 0x" << std::hex << h << std::dec << " batch " << batch;
          if ((h & 0x7fff) != 0) {
            ASSERT_EQ(std::signbit(y[i * n + j]), (h >> 15) != 0) << "f16 bits 0x" << std::hex << h;
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllIsas, MatmulIsaTest,
                         ::testing::Values(Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kAmx),
                         [](const auto& info) { return std::string(IsaName(info.param)); });

TEST(MatmulDispatch, TablesNameTheirPaths) {
  EXPECT_STREQ(KernelsFor(Isa::kScalar).matmul_bf16_isa, "scalar");
  EXPECT_STREQ(KernelsFor(Isa::kScalar).matmul_mxfp4_isa, "scalar");
  EXPECT_STREQ(KernelsFor(Isa::kScalar).matmul_f16_isa, "scalar");
  EXPECT_STREQ(KernelsFor(Isa::kScalar).matmul_f32_isa, "scalar");
  if (IsaSupported(Isa::kAvx2)) {
    EXPECT_STREQ(KernelsFor(Isa::kAvx2).matmul_bf16_isa, "avx2");
    EXPECT_STREQ(KernelsFor(Isa::kAvx2).matmul_mxfp4_isa, "avx2");
    EXPECT_STREQ(KernelsFor(Isa::kAvx2).matmul_f16_isa, "avx2");  // Isa::kAvx2 implies F16C
    EXPECT_STREQ(KernelsFor(Isa::kAvx2).matmul_f32_isa, "avx2");
  }
  if (IsaSupported(Isa::kAvx512)) {
    EXPECT_STREQ(KernelsFor(Isa::kAvx512).matmul_bf16_isa, "avx512");
    EXPECT_STREQ(KernelsFor(Isa::kAvx512).matmul_mxfp4_isa, "avx512");
    EXPECT_STREQ(KernelsFor(Isa::kAvx512).matmul_f16_isa, "avx512");
    EXPECT_STREQ(KernelsFor(Isa::kAvx512).matmul_f32_isa, "avx512");
  }
}

// ---- parallel wrappers ----------------------------------------------------------------------

// Restores the process-wide thread count when a test that changes it ends.
class ThreadCountGuard {
 public:
  ~ThreadCountGuard() { SetGlobalThreadCount(saved_); }

 private:
  const int saved_ = GlobalPool().num_threads();
};

TEST(ParallelMatmul, ChunksCoverEveryColumnOnceOnTileBoundaries) {
  ThreadCountGuard guard;
  for (int threads : {1, 2, 3}) {
    SetGlobalThreadCount(threads);
    for (size_t n : {1, 63, 64, 65, 700, 5760, 201088}) {
      std::vector<std::atomic<int>> seen(n);
      std::mutex mutex;
      std::vector<std::pair<size_t, size_t>> chunks;
      ParallelColumns(n, [&](size_t begin, size_t end) {
        for (size_t j = begin; j < end; ++j) seen[j].fetch_add(1, std::memory_order_relaxed);
        std::lock_guard<std::mutex> lock(mutex);
        chunks.emplace_back(begin, end);
      });
      for (size_t j = 0; j < n; ++j) {
        ASSERT_EQ(seen[j].load(), 1) << "column " << j << " n=" << n << " threads=" << threads;
      }
      for (const auto& [begin, end] : chunks) {
        EXPECT_LT(begin, end);
        EXPECT_EQ(begin % kMatmulColumnTile, 0u) << "n=" << n;
        EXPECT_TRUE(end == n || end % kMatmulColumnTile == 0) << "n=" << n << " end=" << end;
      }
      EXPECT_LE(chunks.size(), static_cast<size_t>(4 * threads)) << "n=" << n;
    }
  }
}

TEST(ParallelMatmul, ThreadCountDoesNotChangeTheBits) {
  ThreadCountGuard guard;
  const uint32_t seed = std::random_device{}();
  SCOPED_TRACE(testing::Message() << "seed=" << seed);
  std::mt19937 rng(seed);
  for (size_t m : {1, 4, 7, 13}) {
    for (Format f : kFormats) {
      const size_t k = 288, n = 517;
      const Problem p = RandomProblem(f, rng, m, k, n);
      const size_t ldy = n + 3;
      std::vector<float> first;
      for (int threads : {1, 2, 3}) {
        SetGlobalThreadCount(threads);
        std::vector<float> y(m * ldy, kSentinel);
        RunParallel(p, p.bias.data(), y.data(), ldy);
        SCOPED_TRACE(testing::Message() << FormatName(f) << " m=" << m
                                        << " threads=" << threads);
        ASSERT_TRUE(CheckOutput(p, 0, n, p.bias.data(), y, ldy));
        if (first.empty()) {
          first = y;
        } else {
          ASSERT_EQ(std::memcmp(first.data(), y.data(), y.size() * sizeof(float)), 0);
        }
      }
    }
  }
}

TEST(ParallelMatmul, DefaultLdyIsN) {
  std::mt19937 rng(std::random_device{}());
  for (Format f : kDenseFormats) {
    SCOPED_TRACE(FormatName(f));
    const Problem p = RandomProblem(f, rng, 2, 40, 9);
    std::vector<float> a(2 * 9, kSentinel), b(2 * 9, kSentinel);
    switch (f) {
      case Format::kBf16: MatmulBf16(p.x.data(), 2, 40, p.w_bf16.data(), 9, nullptr, a.data()); break;
      case Format::kF16: MatmulF16(p.x.data(), 2, 40, p.w_f16.data(), 9, nullptr, a.data()); break;
      case Format::kF32: MatmulF32(p.x.data(), 2, 40, p.w.data(), 9, nullptr, a.data()); break;
      case Format::kMxfp4: break;
    }
    RunParallel(p, nullptr, b.data(), 9);
    EXPECT_EQ(a, b);
    EXPECT_TRUE(CheckOutput(p, 0, 9, nullptr, a, 9));
  }
}

TEST(ParallelMatmul, Mxfp4RejectsPartialBlocks) {
  std::vector<float> x(33), y(1);
  std::vector<uint8_t> codes(32), scales(2);
  try {
    MatmulMxfp4(x.data(), 1, 33, codes.data(), scales.data(), 1, nullptr, y.data());
    FAIL() << "k = 33 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("33"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tessera
