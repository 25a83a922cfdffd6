// Matmul kernels (kernels.h matmul_bf16 / matmul_mxfp4) of every instruction set this machine
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

// A random problem: x [m, k], W [n, k] (BF16 bits or MXFP4 codes/scales) and its exact decoding.
struct Problem {
  bool mxfp4 = false;
  size_t m = 0, k = 0, n = 0;
  std::vector<float> x;
  std::vector<uint16_t> w_bf16;
  std::vector<uint8_t> codes, scales;
  std::vector<float> w;  // decoded W [n, k]
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
  p.mxfp4 = true;
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

// Runs the table's kernel for the problem's format on columns [n_begin, n_end).
void RunKernel(const KernelTable& t, const Problem& p, size_t n_begin, size_t n_end,
               const float* bias, float* y, size_t ldy) {
  if (!p.mxfp4) {
    t.matmul_bf16(p.x.data(), p.m, p.k, p.w_bf16.data(), n_begin, n_end, bias, y, ldy);
  } else {
    t.matmul_mxfp4(p.x.data(), p.m, p.k, p.codes.data(), p.scales.data(), n_begin, n_end, bias, y,
                   ldy);
  }
}

// Checks y[:, n_begin:n_end] against the exact result and that nothing else was written. The
// bound is the rounding of a length-(k+1) f32 sum in any order (gamma_{k+1} style, doubled for
// the f32 products of the reference) over sum |terms|, plus the absolute error of results that
// fall in the subnormal range (scale-0 MXFP4 blocks), not a hand-picked constant.
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

TEST_P(MatmulIsaTest, Mxfp4MatchesExact) {
  SCOPED_TRACE(testing::Message() << "seed=" << seed_);
  for (size_t k : {0, 32, 64, 96, 288, 2880}) {
    CheckAllShapes(k, [&](size_t m, size_t n) { return RandomMxfp4Problem(rng_, m, k, n); });
  }
}

// x = one-hot rows, so y[i, j] is the decoded weight W[j, c_i] exactly (no rounding): catches
// any nibble-order, permutation or scale mistake bit for bit, over every scale byte (0 =
// subnormal; 253..255 give inf weights, and then 0 * inf makes the whole output NaN, as in the
// reference).
TEST_P(MatmulIsaTest, OneHotActivationsRecoverWeightsExactly) {
  SCOPED_TRACE(testing::Message() << "seed=" << seed_);
  for (size_t m : {1, 3, 7}) {
    for (bool mxfp4 : {false, true}) {
      const size_t k = 96, n = 86;  // 258 blocks: every scale byte at least once
      Problem p = mxfp4 ? RandomMxfp4Problem(rng_, m, k, n) : RandomBf16Problem(rng_, m, k, n);
      if (mxfp4) {
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
              ASSERT_EQ(got, p.w[j * k + c]) << (mxfp4 ? "mxfp4" : "bf16") << " m=" << m
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
  for (size_t m : {1, 3, 4, 9}) {
    for (bool mxfp4 : {false, true}) {
      const size_t k = 320, n = 301;
      const Problem p = mxfp4 ? RandomMxfp4Problem(rng_, m, k, n) : RandomBf16Problem(rng_, m, k, n);
      std::vector<float> whole(m * n, kSentinel), parts(m * n, kSentinel);
      RunKernel(table(), p, 0, n, p.bias.data(), whole.data(), n);
      std::uniform_int_distribution<size_t> cut(1, n - 1);
      size_t a = cut(rng_), b = cut(rng_);
      if (a > b) std::swap(a, b);
      RunKernel(table(), p, 0, a, p.bias.data(), parts.data(), n);
      RunKernel(table(), p, a, b, p.bias.data(), parts.data(), n);
      RunKernel(table(), p, b, n, p.bias.data(), parts.data(), n);
      ASSERT_EQ(std::memcmp(whole.data(), parts.data(), whole.size() * sizeof(float)), 0)
          << (mxfp4 ? "mxfp4" : "bf16") << " m=" << m << " cuts " << a << ", " << b;
    }
  }
}

// A row's bits do not depend on how many rows are computed with it (m = 1 decode, small batches
// or a long prefill go through different code paths): the model relies on it for chunked prefill
// and speculative verification giving the same logits as one-token steps.
TEST_P(MatmulIsaTest, RowsDoNotDependOnBatchSize) {
  SCOPED_TRACE(testing::Message() << "seed=" << seed_);
  const size_t m = 19, n = 70;
  for (bool mxfp4 : {false, true}) {
    for (size_t k : mxfp4 ? std::vector<size_t>{32, 288, 2880, 4160}
                          : std::vector<size_t>{7, 33, 300, 2880, 4100}) {
      const Problem p = mxfp4 ? RandomMxfp4Problem(rng_, m, k, n) : RandomBf16Problem(rng_, m, k, n);
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
            << (mxfp4 ? "mxfp4" : "bf16") << " k=" << k << " batches of " << batch;
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
  if (IsaSupported(Isa::kAvx2)) {
    EXPECT_STREQ(KernelsFor(Isa::kAvx2).matmul_bf16_isa, "avx2");
    EXPECT_STREQ(KernelsFor(Isa::kAvx2).matmul_mxfp4_isa, "avx2");
  }
  if (IsaSupported(Isa::kAvx512)) {
    EXPECT_STREQ(KernelsFor(Isa::kAvx512).matmul_bf16_isa, "avx512");
    EXPECT_STREQ(KernelsFor(Isa::kAvx512).matmul_mxfp4_isa, "avx512");
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
  for (size_t m : {1, 4, 7}) {
    for (bool mxfp4 : {false, true}) {
      const size_t k = 288, n = 517;
      const Problem p = mxfp4 ? RandomMxfp4Problem(rng, m, k, n) : RandomBf16Problem(rng, m, k, n);
      const size_t ldy = n + 3;
      std::vector<float> first;
      for (int threads : {1, 2, 3}) {
        SetGlobalThreadCount(threads);
        std::vector<float> y(m * ldy, kSentinel);
        if (mxfp4) {
          MatmulMxfp4(p.x.data(), m, k, p.codes.data(), p.scales.data(), n, p.bias.data(), y.data(),
                      ldy);
        } else {
          MatmulBf16(p.x.data(), m, k, p.w_bf16.data(), n, p.bias.data(), y.data(), ldy);
        }
        SCOPED_TRACE(testing::Message() << (mxfp4 ? "mxfp4" : "bf16") << " m=" << m
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
  const Problem p = RandomBf16Problem(rng, 2, 40, 9);
  std::vector<float> a(2 * 9, kSentinel), b(2 * 9, kSentinel);
  MatmulBf16(p.x.data(), 2, 40, p.w_bf16.data(), 9, nullptr, a.data());
  MatmulBf16(p.x.data(), 2, 40, p.w_bf16.data(), 9, nullptr, b.data(), 9);
  EXPECT_EQ(a, b);
  EXPECT_TRUE(CheckOutput(p, 0, 9, nullptr, a, 9));
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
