// parallel/collective_matmul.h on 1, 2 and 4 ranks against single-process references, following the
// verification recipe of ../shared/reference/collective-matmul.md §7:
//  - fresh random inputs every run (one seed drawn on rank 0 and broadcast, printed on failure);
//    every rank builds the global X and W from it, so each rank can compute the single-process
//    reference itself (§7.1);
//  - rows are distinguishable: column 0 of X holds the row index and every rank's shard starts
//    with a selector column e_0, so a piece written at the wrong rows shows as a permutation of
//    the row indices, not as noise (§7.2);
//  - AllGatherMatmul must equal the unfused GEMM over the gathered X bit for bit (the kernels are
//    batch-invariant, §4, §7.3), for every weight format, schedule, piece size and with and
//    without the GEMM thread;
//  - MatmulReduceScatter changes the summation order, so it is compared with a bound that scales
//    with P (§4, §7.3) against the sum of the ranks' partial products (same kernels), and with a
//    bound that scales with K against a float64 product of the decoded weights;
//  - edge cases (§7.5): P = 1, P = 2 (unidirectional fallback, and forced bidirectional), P = 4,
//    m/P odd, one-row shards (an empty lower half), empty m and n;
//  - every validation error (§2.2 as adapted in collective_matmul.h, §7.4), thrown on every rank
//    with one line;
//  - the upstream sweep in emulated form (§2.5, §7.6): both weight layouts (rhs_transpose), 10
//    fresh seeds, GEMM thread on, to shake out races.
#include "parallel/collective_matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "parallel/parallel_test_util.h"
#include "kernels/mxfp4.h"
#include "kernels/q8.h"
#include "test_util.h"

namespace tessera {
namespace {

using parallel_test::ParallelTest;
using parallel_test::SameBits;
using parallel_test::SharedSeed;

constexpr float kUnitRoundoff = std::numeric_limits<float>::epsilon() / 2;

bool IsQ8(LinearFormat format) { return format == LinearFormat::kMxfp4Q8 || format == LinearFormat::kInt8; }
bool IsMxfp4Based(LinearFormat format) { return format == LinearFormat::kMxfp4 || format == LinearFormat::kMxfp4Q8; }

// A global weight matrix W [n, k] in one format (q8 formats keep their source: BF16 for int8,
// MXFP4 for q8-mxfp4) and its exact float decoding.
struct GlobalWeights {
  LinearFormat format = LinearFormat::kF32;
  size_t n = 0, k = 0;
  std::vector<float> decoded;             // [n, k]
  std::vector<uint16_t> bf16;             // [n, k]
  std::vector<uint8_t> blocks, scales;    // MXFP4 checkpoint layout [n, k/32, 16], [n, k/32]
};

// Rows in `selector_rows` become e_0 (weight 1 on column 0, 0 elsewhere).
GlobalWeights RandomWeights(std::mt19937_64& rng, LinearFormat format, size_t n, size_t k,
                            const std::vector<size_t>& selector_rows) {
  GlobalWeights w;
  w.format = format;
  w.n = n;
  w.k = k;
  w.decoded.assign(n * k, 0.0f);
  std::normal_distribution<float> normal(0.0f, 0.5f);
  std::vector<char> selector(n, 0);
  for (size_t row : selector_rows) {
    if (row < n) selector[row] = 1;
  }
  if (IsMxfp4Based(format)) {
    const size_t nb = k / kMxfp4BlockSize;
    w.blocks.resize(n * nb * kMxfp4BlockBytes);
    w.scales.resize(n * nb);
    std::uniform_int_distribution<int> byte(0, 255), scale(121, 128);
    for (size_t j = 0; j < n; ++j) {
      uint8_t* codes = w.blocks.data() + j * nb * kMxfp4BlockBytes;
      for (size_t b = 0; b < nb * kMxfp4BlockBytes; ++b) codes[b] = selector[j] ? 0 : static_cast<uint8_t>(byte(rng));
      for (size_t g = 0; g < nb; ++g) w.scales[j * nb + g] = static_cast<uint8_t>(scale(rng));
      if (selector[j] && k > 0) {
        codes[0] = 2;  // low nibble of byte 0 = element 0: E2M1 code 2 = 1.0
        w.scales[j * nb] = kE8M0Bias;
      }
      DecodeMxfp4Row(codes, w.scales.data() + j * nb, k, w.decoded.data() + j * k);
    }
    return w;
  }
  for (size_t j = 0; j < n; ++j) {
    for (size_t c = 0; c < k; ++c) {
      const float v = selector[j] ? (c == 0 ? 1.0f : 0.0f) : normal(rng);
      w.decoded[j * k + c] = v;
    }
  }
  if (format != LinearFormat::kF32) {
    w.bf16.resize(n * k);
    for (size_t i = 0; i < n * k; ++i) {
      w.bf16[i] = F32ToBf16(w.decoded[i]);
      w.decoded[i] = Bf16ToF32(w.bf16[i]);
    }
  }
  return w;
}

// The block W[row0 : row0 + rows, col0 : col0 + cols] as one rank's shard, built through the
// model's one linear-weight path (LinearSource slice -> LoadLinear in w.format); owns its storage
// (the LocalMatmul points into it, so a Shard never moves). kn (F32 only): W^T stored [k, n], the
// TPU kernel's rhs_transpose = false, multiplied by a plain scalar loop (k ascending, f32).
struct Shard {
  std::unique_ptr<LinearWeights> weights;
  std::vector<float> f32_kn;
  LocalMatmul matmul;
};

std::unique_ptr<Shard> MakeShard(const GlobalWeights& w, size_t row0, size_t rows, size_t col0, size_t cols, bool kn,
                                 const float* bias) {
  auto shard = std::make_unique<Shard>();
  Shard& s = *shard;
  if (kn) {
    EXPECT_EQ(w.format, LinearFormat::kF32);
    s.f32_kn.resize(rows * cols);
    for (size_t j = 0; j < rows; ++j) {
      for (size_t c = 0; c < cols; ++c) s.f32_kn[c * rows + j] = w.decoded[(row0 + j) * w.k + col0 + c];
    }
    const float* wt = s.f32_kn.data();
    s.matmul = {LinearFormat::kF32, rows, cols, [=](const float* x, size_t m, float* y, size_t ldy) {
                  for (size_t i = 0; i < m; ++i) {
                    for (size_t j = 0; j < rows; ++j) {
                      float acc = 0.0f;
                      for (size_t l = 0; l < cols; ++l) acc += x[i * cols + l] * wt[l * rows + j];
                      y[i * ldy + j] = bias != nullptr ? acc + bias[j] : acc;
                    }
                  }
                }};
    return shard;
  }
  const auto n = static_cast<int64_t>(w.n), k = static_cast<int64_t>(w.k);
  const auto r0 = static_cast<int64_t>(row0), nr = static_cast<int64_t>(rows);
  const auto c0 = static_cast<int64_t>(col0), nc = static_cast<int64_t>(cols);
  LinearSource source;
  if (IsMxfp4Based(w.format)) {
    source = LinearSource::Mxfp4Tensor("w", w.blocks.data(), w.scales.data(), 1, n, k, r0, nr, c0, nc);
  } else if (w.format == LinearFormat::kF32) {
    source = LinearSource::Tensor("w", DType::kF32, reinterpret_cast<const uint8_t*>(w.decoded.data()), 1, n, k, r0,
                                  nr, c0, nc);
  } else {
    source = LinearSource::Tensor("w", DType::kBF16, reinterpret_cast<const uint8_t*>(w.bf16.data()), 1, n, k, r0, nr,
                                  c0, nc);
  }
  source.mapped.clear();  // test vectors, not a mapping: nothing to release
  s.weights = LoadLinear(source, w.format, "test");
  s.matmul = LinearShard(*s.weights, bias);
  return shard;
}

// X [m, k]: column 0 = the row index, the rest N(0, 1).
std::vector<float> RandomRows(std::mt19937_64& rng, size_t m, size_t k) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(m * k);
  for (size_t i = 0; i < m; ++i) {
    for (size_t c = 0; c < k; ++c) x[i * k + c] = c == 0 ? static_cast<float>(i) : normal(rng);
  }
  return x;
}

std::string Describe(LinearFormat format, size_t m, size_t k, size_t n, const CollectiveMatmulOptions& o, bool kn,
                     uint64_t seed) {
  static const char* kSchedules[] = {"auto", "unidirectional", "bidirectional"};
  return StrCat(LinearFormatName(format), kn ? " (W stored [k, n])" : "", " m=", m, " k=", k, " n=", n,
                " piece_rows=", o.piece_rows, " schedule=", kSchedules[static_cast<int>(o.schedule)],
                " overlap=", o.overlap, " P=", World().size(), " seed=", seed);
}

// ---- AllGather + MatMul --------------------------------------------------------------------------

struct AgCase {
  LinearFormat format;
  size_t m_local, k, n_local;
  CollectiveMatmulOptions options;
  bool kn = false;
};

// Runs one case on every rank (failures are recorded on the rank that sees them).
void CheckAllGatherMatmul(const AgCase& c, uint64_t seed) {
  const Communicator& world = World();
  const size_t p = static_cast<size_t>(world.size()), r = static_cast<size_t>(world.rank());
  const size_t m = c.m_local * p, n = c.n_local * p;
  SCOPED_TRACE(Describe(c.format, c.m_local, c.k, c.n_local, c.options, c.kn, seed));
  std::mt19937_64 rng(seed);
  const std::vector<float> x = RandomRows(rng, m, c.k);
  std::vector<size_t> selectors;
  for (size_t q = 0; q < p; ++q) selectors.push_back(q * c.n_local);
  const GlobalWeights w = RandomWeights(rng, c.format, n, c.k, selectors);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> bias(n);
  for (float& b : bias) b = normal(rng);
  // Column-parallel: the bias is sharded with the columns; the selector columns get none.
  for (size_t q = 0; q < p && c.n_local > 0; ++q) bias[q * c.n_local] = 0.0f;
  const auto shard = MakeShard(w, r * c.n_local, c.n_local, 0, c.k, c.kn, bias.data() + r * c.n_local);

  // The unfused single-process reference with the same kernel: one GEMM over all of X.
  const size_t ldy = c.n_local + 3;  // a row stride wider than the shard
  std::vector<float> expected(m * ldy, -7.0f), fused(m * ldy, -7.0f), unfused(m * ldy, -7.0f);
  if (m > 0 && c.n_local > 0) shard->matmul.gemm(x.data(), m, expected.data(), ldy);
  AllGatherMatmul(world, x.data() + r * c.m_local * c.k, c.m_local, c.k, shard->matmul, fused.data(), ldy, c.options);
  AllGatherThenMatmul(world, x.data() + r * c.m_local * c.k, c.m_local, c.k, shard->matmul, unfused.data(), ldy);

  EXPECT_TRUE(SameBits(fused, expected))
      << "fused result differs from one GEMM over the gathered rows";
  EXPECT_TRUE(SameBits(unfused, expected))
      << "unfused result differs from one GEMM over the gathered rows";
  for (size_t i = 0; i < m; ++i) {
    for (size_t j = c.n_local; j < ldy; ++j) ASSERT_EQ(fused[i * ldy + j], -7.0f) << "wrote past n at row " << i;
  }
  if (c.n_local == 0 || m == 0) return;
  // Placement: the selector column returns each row's index (exact for the float formats).
  if (!IsQ8(c.format)) {
    for (size_t i = 0; i < m; ++i) {
      ASSERT_EQ(fused[i * ldy], static_cast<float>(i)) << "row " << i << " holds row " << fused[i * ldy];
    }
  }
  // Values: against a float64 product of the decoded weights, within the f32 summation bound
  // (q8 adds activation quantization: only the bit equality above applies).
  if (IsQ8(c.format)) return;
  double worst = 0.0;
  for (size_t i = 0; i < m; ++i) {
    for (size_t j = 0; j < c.n_local; ++j) {
      const float* wr = w.decoded.data() + (r * c.n_local + j) * c.k;
      double exact = bias[r * c.n_local + j], magnitude = std::fabs(bias[r * c.n_local + j]);
      for (size_t l = 0; l < c.k; ++l) {
        exact += static_cast<double>(x[i * c.k + l]) * wr[l];
        magnitude += std::fabs(static_cast<double>(x[i * c.k + l]) * wr[l]);
      }
      const double bound = 2.0 * (c.k + 2) * kUnitRoundoff * magnitude + 1e-30;
      worst = std::max(worst, std::fabs(fused[i * ldy + j] - exact) / bound);
    }
  }
  EXPECT_LE(worst, 1.0) << "error above the float32 summation bound";
}

using AllGatherMatmulTest = ParallelTest;

TEST_F(AllGatherMatmulTest, MatchesTheUnfusedGemmBitForBit) {
  using RS = RingSchedule;
  const auto opts = [](size_t piece_rows, RS schedule, bool overlap) {
    CollectiveMatmulOptions o;
    o.piece_rows = piece_rows;
    o.schedule = schedule;
    o.overlap = overlap;
    return o;
  };
  const std::vector<AgCase> cases = {
      // BF16 (the prefill path): one-row shards (empty lower half), odd shards, many pieces,
      // both schedules forced, with and without the GEMM thread, k not a multiple of 32.
      {LinearFormat::kBf16, 1, 64, 17, opts(128, RS::kAuto, true)},
      {LinearFormat::kBf16, 3, 96, 80, opts(1, RS::kAuto, true)},
      {LinearFormat::kBf16, 37, 64, 17, opts(5, RS::kBidirectional, true)},
      {LinearFormat::kBf16, 37, 64, 17, opts(5, RS::kUnidirectional, true)},
      {LinearFormat::kBf16, 8, 96, 1, opts(3, RS::kAuto, false)},
      {LinearFormat::kBf16, 37, 40, 9, opts(4, RS::kBidirectional, false)},
      {LinearFormat::kBf16, 64, 64, 130, opts(16, RS::kAuto, true)},  // past the dot-form rows
      // Halves longer than a piece: the shrinking last pieces (16 = 8 + 4 + 2 + 1 + 1 rows).
      {LinearFormat::kBf16, 50, 64, 20, opts(16, RS::kBidirectional, true)},
      {LinearFormat::kBf16, 50, 64, 20, opts(16, RS::kUnidirectional, false)},
      {LinearFormat::kMxfp4, 5, 64, 33, opts(2, RS::kAuto, true)},
      {LinearFormat::kMxfp4, 4, 96, 16, opts(128, RS::kBidirectional, false)},
      {LinearFormat::kF32, 7, 10, 5, opts(3, RS::kAuto, true), /*kn=*/false},
      {LinearFormat::kF32, 7, 10, 5, opts(3, RS::kUnidirectional, true), /*kn=*/true},
      {LinearFormat::kInt8, 9, 64, 20, opts(4, RS::kAuto, true)},
      {LinearFormat::kMxfp4Q8, 6, 64, 32, opts(2, RS::kBidirectional, true)},
      // Empty: no rows, no columns.
      {LinearFormat::kBf16, 0, 64, 17, opts(4, RS::kAuto, true)},
      {LinearFormat::kBf16, 5, 64, 0, opts(4, RS::kAuto, true)},
  };
  const uint64_t seed = SharedSeed();
  for (size_t i = 0; i < cases.size(); ++i) CheckAllGatherMatmul(cases[i], seed + i);
}

// §2.5 / §7.6 in emulated form: both weight layouts, 10 fresh seeds each, GEMM thread on.
TEST_F(AllGatherMatmulTest, UpstreamSweepWithFreshSeeds) {
  const uint64_t seed = SharedSeed();
  for (int i = 0; i < 10; ++i) {
    for (bool kn : {false, true}) {
      CollectiveMatmulOptions o;
      o.piece_rows = 3;
      CheckAllGatherMatmul({LinearFormat::kF32, 16, 24, 8, o, kn}, seed + 2 * i + kn);
    }
    CollectiveMatmulOptions o;
    o.piece_rows = 8;
    CheckAllGatherMatmul({LinearFormat::kBf16, 48, 128, 64, o}, seed + 100 + i);
  }
}

// ---- MatMul + ReduceScatter ----------------------------------------------------------------------

struct RsCase {
  LinearFormat format;
  size_t block, k_total, n;  // m = block * P rows; K split over the ranks as evenly as the format allows
  CollectiveMatmulOptions options;
  bool kn = false;
};

void CheckMatmulReduceScatter(const RsCase& c, uint64_t seed) {
  const Communicator& world = World();
  const size_t p = static_cast<size_t>(world.size()), r = static_cast<size_t>(world.rank());
  const size_t m = c.block * p;
  SCOPED_TRACE(Describe(c.format, m, c.k_total, c.n, c.options, c.kn, seed));
  // K split: contiguous slices, sizes differing by at most one quantum (32 for the block formats).
  const auto quantum = static_cast<size_t>(LinearFormatColumnBlock(c.format));
  const size_t units = c.k_total / quantum;
  std::vector<size_t> k_begin(p + 1, 0);
  for (size_t q = 0; q < p; ++q) k_begin[q + 1] = k_begin[q] + (units / p + (q < units % p ? 1 : 0)) * quantum;

  std::mt19937_64 rng(seed);
  const std::vector<float> x = RandomRows(rng, m, c.k_total);
  const GlobalWeights w = RandomWeights(rng, c.format, c.n, c.k_total, {0});
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> bias(c.n);
  for (float& b : bias) b = normal(rng);
  // Every rank's shard and its x slice (all ranks' are built here so that each rank can form the
  // single-process reference); the bias belongs to rank 0 only.
  std::vector<std::unique_ptr<Shard>> shards;
  std::vector<std::vector<float>> slices;
  for (size_t q = 0; q < p; ++q) {
    const size_t kq = k_begin[q + 1] - k_begin[q];
    shards.push_back(MakeShard(w, 0, c.n, k_begin[q], kq, c.kn, q == 0 ? bias.data() : nullptr));
    std::vector<float> slice(m * kq);
    for (size_t i = 0; i < m && kq > 0; ++i) {
      std::memcpy(slice.data() + i * kq, x.data() + i * c.k_total + k_begin[q], kq * sizeof(float));
    }
    slices.push_back(std::move(slice));
  }
  const size_t k_mine = k_begin[r + 1] - k_begin[r];

  const size_t ldy = c.n + 2;
  std::vector<float> fused(c.block * ldy, -7.0f), naive(c.block * ldy, -7.0f), unfused(c.block * ldy, -7.0f);
  CollectiveMatmulOptions naive_options = c.options;
  naive_options.overlap = !c.options.overlap;
  MatmulReduceScatter(world, slices[r].data(), m, k_mine, shards[r]->matmul, fused.data(), ldy, c.options);
  MatmulReduceScatter(world, slices[r].data(), m, k_mine, shards[r]->matmul, naive.data(), ldy, naive_options);
  MatmulThenReduceScatter(world, slices[r].data(), m, k_mine, shards[r]->matmul, unfused.data(), ldy);
  // The same ring with and without the GEMM thread adds in the same order: the same bits.
  EXPECT_TRUE(SameBits(fused, naive))
      << "the GEMM thread changed the result";
  for (size_t i = 0; i < c.block; ++i) {
    for (size_t j = c.n; j < ldy; ++j) ASSERT_EQ(fused[i * ldy + j], -7.0f) << "wrote past n at row " << i;
  }
  if (c.block == 0 || c.n == 0) return;

  // Reference 1: the ranks' partial products (same kernels) summed in float64; only the order of
  // the P additions differs, so the bound scales with P.
  std::vector<double> sum(c.block * c.n, 0.0), magnitude(c.block * c.n, 0.0);
  std::vector<float> partial(m * c.n);
  for (size_t q = 0; q < p; ++q) {
    shards[q]->matmul.gemm(slices[q].data(), m, partial.data(), c.n);
    for (size_t i = 0; i < c.block; ++i) {
      for (size_t j = 0; j < c.n; ++j) {
        const double v = partial[(r * c.block + i) * c.n + j];
        sum[i * c.n + j] += v;
        magnitude[i * c.n + j] += std::fabs(v);
      }
    }
  }
  double worst_fused = 0.0, worst_unfused = 0.0;
  for (size_t i = 0; i < c.block; ++i) {
    for (size_t j = 0; j < c.n; ++j) {
      const double bound = 2.0 * (p + 1) * kUnitRoundoff * magnitude[i * c.n + j] + 1e-30;
      worst_fused = std::max(worst_fused, std::fabs(fused[i * ldy + j] - sum[i * c.n + j]) / bound);
      worst_unfused = std::max(worst_unfused, std::fabs(unfused[i * ldy + j] - sum[i * c.n + j]) / bound);
    }
  }
  EXPECT_LE(worst_fused, 1.0) << "fused reduce-scatter differs from the sum of the partial products";
  EXPECT_LE(worst_unfused, 1.0) << "unfused reduce-scatter differs from the sum of the partial products";
  // Placement: output column 0 is the selector, so row i of this rank's block returns its global
  // row index (each partial holds it once: on the rank whose slice has column 0).
  if (!IsQ8(c.format)) {
    for (size_t i = 0; i < c.block; ++i) {
      ASSERT_EQ(fused[i * ldy], static_cast<float>(r * c.block + i) + bias[0]) << "row " << i;
    }
  }
  // Reference 2 (float formats): float64 over the decoded weights, bound scaling with K.
  if (IsQ8(c.format)) return;
  double worst = 0.0;
  for (size_t i = 0; i < c.block; ++i) {
    const size_t row = r * c.block + i;
    for (size_t j = 0; j < c.n; ++j) {
      double exact = bias[j], mag = std::fabs(bias[j]);
      for (size_t l = 0; l < c.k_total; ++l) {
        const double t = static_cast<double>(x[row * c.k_total + l]) * w.decoded[j * c.k_total + l];
        exact += t;
        mag += std::fabs(t);
      }
      const double bound = 2.0 * (c.k_total + p + 2) * kUnitRoundoff * mag + 1e-30;
      worst = std::max(worst, std::fabs(fused[i * ldy + j] - exact) / bound);
    }
  }
  EXPECT_LE(worst, 1.0) << "error above the float32 summation bound";
}

using MatmulReduceScatterTest = ParallelTest;

TEST_F(MatmulReduceScatterTest, MatchesTheSumOfPartialProducts) {
  using RS = RingSchedule;
  const auto opts = [](size_t piece_rows, RS schedule, bool overlap) {
    CollectiveMatmulOptions o;
    o.piece_rows = piece_rows;
    o.schedule = schedule;
    o.overlap = overlap;
    return o;
  };
  const std::vector<RsCase> cases = {
      {LinearFormat::kBf16, 1, 64, 17, opts(128, RS::kAuto, true)},
      {LinearFormat::kBf16, 3, 100, 40, opts(1, RS::kAuto, true)},  // K = 100: uneven slices
      {LinearFormat::kBf16, 21, 64, 33, opts(4, RS::kBidirectional, true)},
      {LinearFormat::kBf16, 21, 64, 33, opts(4, RS::kUnidirectional, false)},
      {LinearFormat::kBf16, 8, 96, 1, opts(3, RS::kAuto, true)},
      {LinearFormat::kBf16, 16, 128, 130, opts(8, RS::kAuto, true)},
      {LinearFormat::kBf16, 50, 64, 20, opts(16, RS::kBidirectional, true)},  // shrinking last pieces
      {LinearFormat::kBf16, 50, 64, 20, opts(16, RS::kUnidirectional, true)},
      {LinearFormat::kMxfp4, 5, 128, 24, opts(2, RS::kAuto, true)},
      {LinearFormat::kF32, 7, 13, 6, opts(3, RS::kAuto, false), /*kn=*/false},
      {LinearFormat::kF32, 7, 13, 6, opts(2, RS::kBidirectional, true), /*kn=*/true},
      {LinearFormat::kInt8, 6, 128, 20, opts(4, RS::kAuto, true)},
      {LinearFormat::kMxfp4Q8, 3, 128, 32, opts(1, RS::kAuto, true)},
      {LinearFormat::kBf16, 0, 64, 17, opts(4, RS::kAuto, true)},
      {LinearFormat::kBf16, 5, 64, 0, opts(4, RS::kAuto, true)},
  };
  const uint64_t seed = SharedSeed();
  for (size_t i = 0; i < cases.size(); ++i) CheckMatmulReduceScatter(cases[i], seed + i);
}

TEST_F(MatmulReduceScatterTest, UpstreamSweepWithFreshSeeds) {
  const uint64_t seed = SharedSeed();
  for (int i = 0; i < 10; ++i) {
    for (bool kn : {false, true}) {
      CollectiveMatmulOptions o;
      o.piece_rows = 2;
      CheckMatmulReduceScatter({LinearFormat::kF32, 6, 20, 8, o, kn}, seed + 2 * i + kn);
    }
    CollectiveMatmulOptions o;
    o.piece_rows = 5;
    CheckMatmulReduceScatter({LinearFormat::kBf16, 24, 256, 48, o}, seed + 100 + i);
  }
}

// ---- validation ----------------------------------------------------------------------------------

// Each call must throw on every rank (the TearDown exchange fails the test on all ranks if one
// rank did not), with one line that names the operation and contains `needle`.
template <typename F>
void ExpectError(F&& call, const char* op, const std::string& needle) {
  const std::string message = ErrorOf(call);
  EXPECT_EQ(message.rfind(op, 0), 0u) << message;
  EXPECT_NE(message.find(needle), std::string::npos) << "expected '" << needle << "' in: " << message;
}

using CollectiveMatmulValidationTest = ParallelTest;

TEST_F(CollectiveMatmulValidationTest, EveryErrorIsThrownOnEveryRankBeforeAnyWork) {
  const Communicator& world = World();
  const int p = world.size(), r = world.rank();
  constexpr size_t kM = 4, kK = 64, kN = 8;
  std::mt19937_64 rng(5);
  const GlobalWeights w64 = RandomWeights(rng, LinearFormat::kBf16, kN, kK, {});
  const GlobalWeights w32 = RandomWeights(rng, LinearFormat::kBf16, kN, 32, {});
  const GlobalWeights w48 = RandomWeights(rng, LinearFormat::kMxfp4, kN, 64, {});
  const auto bf16 = MakeShard(w64, 0, kN, 0, kK, false, nullptr);
  const auto narrow = MakeShard(w32, 0, kN, 0, 32, false, nullptr);
  const auto mxfp4 = MakeShard(w48, 0, kN, 0, kK, false, nullptr);
  const std::vector<float> x(kM * p * kK, 0.5f);
  std::vector<float> y(kM * p * (kN + 4), 0.0f);
  const std::vector<float> y_before = y;
  const float* xp = x.data();
  float* yp = y.data();
  const bool odd_rank = p > 1 && r == p - 1;  // the rank that differs in the mismatch cases

  // Operations differ.
  if (p > 1) {
    ExpectError([&] {
      if (odd_rank) {
        AllGatherThenMatmul(world, xp, kM, kK, bf16->matmul, yp, kN);
      } else {
        AllGatherMatmul(world, xp, kM, kK, bf16->matmul, yp, kN);
      }
    }, odd_rank ? "AllGatherThenMatmul" : "AllGatherMatmul", "ranks called different operations");
  }
  // Local arguments.
  LocalMatmul no_gemm = bf16->matmul;
  no_gemm.gemm = nullptr;
  ExpectError([&] { AllGatherMatmul(world, xp, kM, kK, no_gemm, yp, kN); }, "AllGatherMatmul", "has no gemm function");
  ExpectError([&] { AllGatherMatmul(world, nullptr, kM, kK, bf16->matmul, yp, kN); }, "AllGatherMatmul", "x is null");
  ExpectError([&] { MatmulReduceScatter(world, xp, kM * p, kK, bf16->matmul, nullptr, kN); }, "MatmulReduceScatter",
              "y is null");
  // Weight formats (dtypes) differ across ranks.
  if (p > 1) {
    ExpectError([&] { AllGatherMatmul(world, xp, kM, kK, odd_rank ? mxfp4->matmul : bf16->matmul, yp, kN); },
                "AllGatherMatmul", "weight shard formats differ across ranks (rank 0: bf16, rank");
    ExpectError([&] { MatmulReduceScatter(world, xp, kM * p, kK, odd_rank ? mxfp4->matmul : bf16->matmul, yp, kN); },
                "MatmulReduceScatter", "formats differ");
  }
  // x's columns against the shard's reduction length.
  ExpectError([&] { AllGatherMatmul(world, xp, kM, kK, narrow->matmul, yp, kN); }, "AllGatherMatmul",
              "x has 64 columns but its weight shard contracts over 32");
  ExpectError([&] { MatmulThenReduceScatter(world, xp, kM * p, 32, bf16->matmul, yp, kN); }, "MatmulThenReduceScatter",
              "contracts over 64");
  if (p > 1) {
    // AG: every rank's rows must have the same width; the row shards the same height.
    ExpectError([&] {
      AllGatherMatmul(world, xp, kM, odd_rank ? 32 : kK, odd_rank ? narrow->matmul : bf16->matmul, yp, kN);
    }, "AllGatherMatmul", "x has 64 columns on rank 0 but 32 on rank");
    ExpectError([&] { AllGatherMatmul(world, xp, odd_rank ? kM - 1 : kM, kK, bf16->matmul, yp, kN); },
                "AllGatherMatmul", "row shards differ across ranks (rank 0: 4 rows");
    // RS: the same m and n everywhere, m divisible by P.
    ExpectError([&] { MatmulReduceScatter(world, xp, odd_rank ? kM : kM * p, kK, bf16->matmul, yp, kN); },
                "MatmulReduceScatter", "rows on rank 0 but");
    LocalMatmul fewer = bf16->matmul;
    fewer.n = kN - 1;
    ExpectError([&] { MatmulReduceScatter(world, xp, kM * p, kK, odd_rank ? fewer : bf16->matmul, yp, kN); },
                "MatmulReduceScatter", "output widths differ across ranks");
    ExpectError([&] { MatmulReduceScatter(world, xp, kM * p + 1, kK, bf16->matmul, yp, kN); },
                "MatmulReduceScatter", "do not split evenly over");
  }
  // Output stride.
  ExpectError([&] { AllGatherMatmul(world, xp, kM, kK, bf16->matmul, yp, kN - 1); }, "AllGatherMatmul",
              "ldy = 7 is smaller than the shard's 8 output columns");
  // The format's own constraint: MXFP4 and q8 need k % 32 == 0.
  LocalMatmul odd_k = mxfp4->matmul;
  odd_k.k = 48;
  ExpectError([&] { AllGatherMatmul(world, xp, kM, 48, odd_k, yp, kN); }, "AllGatherMatmul",
              "mxfp4 weight shards need k divisible by 32 (k = 48)");
  // Options.
  CollectiveMatmulOptions zero;
  zero.piece_rows = 0;
  ExpectError([&] { AllGatherMatmul(world, xp, kM, kK, bf16->matmul, yp, kN, zero); }, "AllGatherMatmul",
              "piece_rows must be at least 1");
  if (p > 1) {
    CollectiveMatmulOptions other;
    other.schedule = odd_rank ? RingSchedule::kBidirectional : RingSchedule::kUnidirectional;
    ExpectError([&] { MatmulReduceScatter(world, xp, kM * p, kK, bf16->matmul, yp, kN, other); },
                "MatmulReduceScatter", "options differ across ranks");
  }
  // Nothing was written, and the ranks are still in step: a valid call works.
  EXPECT_EQ(y, y_before);
  std::vector<float> expected(kM * p * kN), got(kM * p * kN);
  bf16->matmul.gemm(xp, kM * p, expected.data(), kN);
  AllGatherMatmul(world, xp + r * kM * kK, kM, kK, bf16->matmul, got.data(), kN);
  EXPECT_EQ(got, expected);
}

TEST(EvenShardTest, DividesOrNamesWhatDoesNotSplit) {
  EXPECT_EQ(EvenShard("attention heads", 64, 4), 16u);
  EXPECT_EQ(EvenShard("experts", 128, 1), 128u);
  EXPECT_EQ(ErrorOf([] { EvenShard("kv heads", 8, 3); }),
            "kv heads: 8 do not split evenly over 3 tensor-parallel ranks");
  EXPECT_EQ(ErrorOf([] { EvenShard("experts", 32, 0); }), "experts: tensor-parallel degree 0 is not positive");
}

}  // namespace
}  // namespace tessera
