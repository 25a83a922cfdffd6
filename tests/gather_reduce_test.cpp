// Gather-reduce (the MoE combine, ../shared/reference/moe-gather-reduce.md): the scalar reference
// against an f64 evaluation of the definition (§2), every ISA against the scalar reference bit for
// bit on random routings and awkward shapes, zero-weight NaN/Inf masking, the upstream sweeps of
// §4 (dense_gather_reduce_test.py, ragged_gather_reduce_v2_test.py, gather_reduce_test.py), the
// combine-index construction of §1/§7.2, and the thread-parallel wrapper (moe_ops.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/kernels.h"
#include "kernels/moe_ops.h"
#include "test_util.h"

namespace tessera {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kSentinel = 12345.0f;  // out padding, which no kernel may write

// One gather-reduce problem: op [rows, ldop], idx / w [groups * r], out [groups, ldo].
struct Problem {
  size_t rows = 0, ldop = 0, groups = 0, r = 0, k = 0, ldo = 0;
  std::vector<float> op;
  std::vector<int32_t> idx;
  std::vector<float> w;  // empty: null weights
  const float* weights() const { return w.empty() ? nullptr : w.data(); }
};

// Random problem: N(0, 1) rows with NaN in the row padding (columns >= k must never be read into
// a result), indices uniform over the rows, N(0, 1) weights with `zero_frac` of them zero (half of
// those -0). With `poison`, every row gathered only through zero weights is NaN or +-Inf, so a
// zero weight that leaks shows up as a non-finite output.
Problem RandomProblem(std::mt19937& rng, size_t rows, size_t groups, size_t r, size_t k, bool weighted,
                      double zero_frac, bool poison) {
  Problem p;
  p.rows = rows;
  p.groups = groups;
  p.r = r;
  p.k = k;
  p.ldop = k + (k % 3);
  p.ldo = k + 1 + (k % 2);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  p.op.assign(rows * p.ldop, kNaN);
  for (size_t i = 0; i < rows; ++i) {
    for (size_t c = 0; c < k; ++c) p.op[i * p.ldop + c] = normal(rng);
  }
  std::uniform_int_distribution<int32_t> row(0, static_cast<int32_t>(rows) - 1);
  p.idx.resize(groups * r);
  for (auto& i : p.idx) i = row(rng);
  if (weighted) {
    std::bernoulli_distribution zero(zero_frac), negative(0.5);
    p.w.resize(groups * r);
    for (auto& v : p.w) v = zero(rng) ? (negative(rng) ? -0.0f : 0.0f) : normal(rng);
  }
  if (poison && weighted) {
    std::vector<bool> live(rows, false);
    for (size_t i = 0; i < p.idx.size(); ++i) live[p.idx[i]] = live[p.idx[i]] || p.w[i] != 0.0f;
    const float bad[] = {kNaN, kInf, -kInf};
    for (size_t i = 0; i < rows; ++i) {
      if (live[i]) continue;
      for (size_t c = 0; c < k; ++c) p.op[i * p.ldop + c] = bad[(i + c) % 3];
    }
  }
  return p;
}

std::vector<float> Compute(const KernelTable& t, const Problem& p) {
  std::vector<float> out(p.groups * p.ldo, kSentinel);
  t.gather_reduce(p.op.data(), p.ldop, p.idx.data(), p.weights(), p.groups, p.r, p.k, out.data(), p.ldo);
  return out;
}

// Bit equality, any NaN matching any NaN (the payload of a propagated NaN is not specified).
bool SameBits(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b);
}

void ExpectSameBits(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_TRUE(SameBits(got[i], want[i])) << what << " [" << i << "]: got " << got[i] << " want " << want[i];
  }
}

// The definition in f64 (§2): terms with a zero weight dropped, the rest summed. Checks every
// output within (r + 1) f32 roundings of the sum of |terms|, the padding untouched, and returns
// whether some output is non-finite.
bool ExpectMatchesDefinition(const Problem& p, const std::vector<float>& out, const std::string& what) {
  bool non_finite = false;
  for (size_t g = 0; g < p.groups; ++g) {
    for (size_t c = 0; c < p.k; ++c) {
      double sum = 0.0, mag = 0.0;
      bool nan = false;
      for (size_t j = 0; j < p.r; ++j) {
        const double w = p.w.empty() ? 1.0 : p.w[g * p.r + j];
        if (w == 0.0) continue;
        const double x = p.op[static_cast<size_t>(p.idx[g * p.r + j]) * p.ldop + c];
        if (!std::isfinite(x)) nan = true;
        sum += w * x;
        mag += std::fabs(w * x);
      }
      const float got = out[g * p.ldo + c];
      if (nan) {
        EXPECT_FALSE(std::isfinite(got)) << what << " group " << g << " column " << c;
        non_finite = true;
        continue;
      }
      const double bound = (p.r + 1) * 0x1p-24 * mag + 1e-30;
      const double error = std::fabs(got - sum);
      if (!(error <= bound)) {  // also a NaN result; one report per problem
        ADD_FAILURE() << what << " group " << g << " column " << c << ": got " << got << " want " << sum;
        return non_finite;
      }
    }
    for (size_t c = p.k; c < p.ldo; ++c) {
      EXPECT_EQ(out[g * p.ldo + c], kSentinel) << what << " padding of group " << g;
    }
  }
  return non_finite;
}

// ---- the scalar reference -----------------------------------------------------------------

TEST(GatherReduceReference, MatchesTheDefinition) {
  std::mt19937 rng(1);
  const KernelTable& ref = KernelsFor(Isa::kScalar);
  for (size_t r : {1, 2, 4, 5, 8, 10}) {
    for (size_t k : {1, 7, 33, 130}) {
      for (bool weighted : {false, true}) {
        const Problem p = RandomProblem(rng, 23, 9, r, k, weighted, 0.2, true);
        const std::string what = "r " + std::to_string(r) + " k " + std::to_string(k);
        EXPECT_FALSE(ExpectMatchesDefinition(p, Compute(ref, p), what)) << what;
      }
    }
  }
}

// gather_reduce_test.py test_column: integer-valued rows in [0, 1024) summed without weights are
// exact in f32, so the result must equal the integer sum (in every ISA).
TEST(GatherReduceReference, IntegerRowsSumExactly) {
  std::mt19937 rng(2);
  std::uniform_int_distribution<int> value(0, 1023);
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    if (!IsaSupported(isa)) continue;
    Problem p = RandomProblem(rng, 512, 64, 8, 2880, false, 0.0, false);
    for (size_t i = 0; i < p.rows; ++i) {
      for (size_t c = 0; c < p.k; ++c) p.op[i * p.ldop + c] = static_cast<float>(value(rng));
    }
    const std::vector<float> out = Compute(KernelsFor(isa), p);
    for (size_t g = 0; g < p.groups; ++g) {
      for (size_t c = 0; c < p.k; ++c) {
        int64_t want = 0;
        for (size_t j = 0; j < p.r; ++j) want += static_cast<int64_t>(p.op[p.idx[g * p.r + j] * p.ldop + c]);
        ASSERT_EQ(out[g * p.ldo + c], static_cast<float>(want)) << IsaName(isa) << " group " << g << " column " << c;
      }
    }
  }
}

// dense_gather_reduce_test.py test_debug_layout: op[520, 8192] with x[i, i % 8] = 1, weights
// arange(520) as [65, 8], R 8, indices a permutation: out[g, c] = sum of the weights whose row has
// i % 8 == c, exactly, and zero in every other column.
TEST(GatherReduceReference, DebugLayout) {
  std::mt19937 rng(3);
  constexpr size_t kRows = 520, kK = 8192, kR = 8, kGroups = kRows / kR;
  std::vector<float> op(kRows * kK, 0.0f), w(kRows);
  for (size_t i = 0; i < kRows; ++i) op[i * kK + i % 8] = 1.0f;
  std::iota(w.begin(), w.end(), 0.0f);
  std::vector<int32_t> idx(kRows);
  std::iota(idx.begin(), idx.end(), 0);
  std::shuffle(idx.begin(), idx.end(), rng);
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    if (!IsaSupported(isa)) continue;
    std::vector<float> out(kGroups * kK, kNaN);
    KernelsFor(isa).gather_reduce(op.data(), kK, idx.data(), w.data(), kGroups, kR, kK, out.data(), kK);
    for (size_t g = 0; g < kGroups; ++g) {
      float want[8] = {};
      for (size_t j = 0; j < kR; ++j) want[idx[g * kR + j] % 8] += w[g * kR + j];
      for (size_t c = 0; c < kK; ++c) {
        ASSERT_EQ(out[g * kK + c], c < 8 ? want[c] : 0.0f) << IsaName(isa) << " group " << g << " column " << c;
      }
    }
  }
}

// ---- every ISA against the reference ----------------------------------------------------

class GatherReduceKernelTest : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (!IsaSupported(GetParam())) GTEST_SKIP() << IsaName(GetParam()) << " not supported here";
  }
  const KernelTable& ref() { return KernelsFor(Isa::kScalar); }
  const KernelTable& fast() { return KernelsFor(GetParam()); }
  std::mt19937 rng_{std::random_device{}()};
};

// Random routings over every awkward shape: empty problems (0 groups), a single row gathered by
// every term (every token on one expert), R 1..8 and 10, R 17 and 33 (more terms than the
// kernels' 16-term pass), hidden sizes around the 8/16/32/64-column blocks and the gpt-oss
// 2880 / 2944; weighted with zeros and poisoned rows, unweighted, and with every weight zero.
TEST_P(GatherReduceKernelTest, MatchesReferenceBitExactly) {
  for (size_t r : {1, 2, 3, 4, 5, 6, 7, 8, 10, 17, 33}) {
    for (size_t k : {1, 2, 7, 8, 9, 15, 16, 17, 31, 33, 63, 64, 65, 100, 127, 129, 2880, 2944}) {
      for (size_t rows : {1, 5, 64}) {
        for (size_t groups : {0, 1, 3, 11}) {
          if (k > 200 && (groups > 3 || r > 8)) continue;  // keep the large sizes quick
          for (int mode = 0; mode < 3; ++mode) {
            // 0: weighted with 20 % zero weights and poisoned rows; 1: unweighted; 2: all weights zero.
            const Problem p = RandomProblem(rng_, rows, groups, r, k, mode != 1, mode == 2 ? 1.0 : 0.2, true);
            const std::string what = "r " + std::to_string(r) + " k " + std::to_string(k) + " rows " +
                                     std::to_string(rows) + " groups " + std::to_string(groups) + " mode " +
                                     std::to_string(mode);
            const std::vector<float> want = Compute(ref(), p), got = Compute(fast(), p);
            ExpectSameBits(got, want, what);
            if (mode != 1) {
              for (size_t g = 0; g < groups; ++g) {
                for (size_t c = 0; c < k; ++c) ASSERT_TRUE(std::isfinite(got[g * p.ldo + c])) << what;
              }
            }
            if (mode == 2) {  // no term left: +0, sign bit clear
              for (size_t g = 0; g < groups; ++g) {
                for (size_t c = 0; c < k; ++c) ASSERT_EQ(std::bit_cast<uint32_t>(got[g * p.ldo + c]), 0u) << what;
              }
            }
            for (size_t g = 0; g < groups; ++g) {
              for (size_t c = k; c < p.ldo; ++c) ASSERT_EQ(got[g * p.ldo + c], kSentinel) << what;
            }
          }
        }
      }
    }
  }
}

// dense_gather_reduce_test.py test_nan_mitigation: 16384 x 128, R 8, rows 5, 12, 100, 500, 1000
// NaN (here also +-Inf), indices a permutation, all weights 1 except the slots gathering those rows
// (0). With the weights: no non-finite output, equal to the reference. Without weights (every term
// counts, as with zero_nan off): exactly the groups gathering a bad row are non-finite.
TEST_P(GatherReduceKernelTest, ZeroWeightsMaskNaNAndInfRows) {
  constexpr size_t kRows = 16384, kK = 128, kR = 8, kGroups = kRows / kR;
  const int32_t bad_rows[] = {5, 12, 100, 500, 1000};
  const float bad_values[] = {kNaN, kInf, -kInf, kNaN, -kNaN};
  Problem p;
  p.rows = kRows;
  p.ldop = p.k = p.ldo = kK;
  p.groups = kGroups;
  p.r = kR;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  p.op.resize(kRows * kK);
  for (float& v : p.op) v = normal(rng_);
  for (size_t b = 0; b < 5; ++b) std::fill_n(&p.op[bad_rows[b] * kK], kK, bad_values[b]);
  p.idx.resize(kRows);
  std::iota(p.idx.begin(), p.idx.end(), 0);
  std::shuffle(p.idx.begin(), p.idx.end(), rng_);
  p.w.assign(kRows, 1.0f);
  std::vector<bool> bad_group(kGroups, false);
  for (size_t i = 0; i < kRows; ++i) {
    if (std::find(std::begin(bad_rows), std::end(bad_rows), p.idx[i]) != std::end(bad_rows)) {
      p.w[i] = i % 2 ? 0.0f : -0.0f;
      bad_group[i / kR] = true;
    }
  }
  const std::vector<float> got = Compute(fast(), p);
  ExpectSameBits(got, Compute(ref(), p), "weighted");
  for (float v : got) ASSERT_TRUE(std::isfinite(v));
  EXPECT_FALSE(ExpectMatchesDefinition(p, got, "weighted"));

  p.w.clear();
  const std::vector<float> unweighted = Compute(fast(), p);
  ExpectSameBits(unweighted, Compute(ref(), p), "unweighted");
  for (size_t g = 0; g < kGroups; ++g) {
    for (size_t c = 0; c < kK; ++c) {
      ASSERT_EQ(std::isfinite(unweighted[g * kK + c]), !bad_group[g]) << "group " << g << " column " << c;
    }
  }
}

// Null weights are weight 1 (multiplying by 1 is exact), and -0 weights are zero weights.
TEST_P(GatherReduceKernelTest, NullWeightsAndNegativeZero) {
  Problem p = RandomProblem(rng_, 40, 13, 6, 2881, false, 0.0, false);
  const std::vector<float> unweighted = Compute(fast(), p);
  p.w.assign(p.groups * p.r, 1.0f);
  ExpectSameBits(Compute(fast(), p), unweighted, "weights of 1");
  // A -0 weight on every even term, which gathers the Inf row 0 (the odd terms gather rows >= 1):
  // the same bits as +0 weights, and finite.
  Problem q = RandomProblem(rng_, 40, 13, 6, 2881, true, 0.0, false);
  std::fill_n(q.op.begin(), q.k, kInf);
  for (size_t i = 0; i < q.idx.size(); ++i) q.idx[i] = i % 2 ? 1 + q.idx[i] % 39 : 0;
  Problem z = q;
  for (size_t i = 0; i < q.w.size(); i += 2) q.w[i] = -0.0f;
  for (size_t i = 0; i < z.w.size(); i += 2) z.w[i] = 0.0f;
  const std::vector<float> got = Compute(fast(), q);
  ExpectSameBits(got, Compute(ref(), z), "-0 weights");
  for (size_t g = 0; g < q.groups; ++g) {
    for (size_t c = 0; c < q.k; ++c) ASSERT_TRUE(std::isfinite(got[g * q.ldo + c]));
  }
  // A single product of -0 (a -0 entry with a positive weight) sums to +0 from the +0 start.
  Problem s;
  s.rows = 1;
  s.ldop = s.k = s.ldo = 19;
  s.groups = 1;
  s.r = 1;
  s.op.assign(19, -0.0f);
  s.idx = {0};
  s.w = {2.0f};
  for (float v : Compute(fast(), s)) EXPECT_EQ(std::bit_cast<uint32_t>(v), 0u);
}

// The dense sweep of dense_gather_reduce_test.py: out_size {400, 840} x hidden {128, 512, 8192}
// x R {8, 5} x zero_nan {F, T}, indices a permutation of out_size, N(0, 1) weights with 20 % zeroed
// under zero_nan (those rows also poisoned here); then the large cases with out_size cut to 2048
// (upstream 16384..32768) to bound the test's memory: (7168, R 8, zero_nan), (6144, 8), (4096, 10),
// ({2880, 2944}, 4, zero_nan) — the unaligned hidden sizes.
TEST_P(GatherReduceKernelTest, UpstreamDenseSweep) {
  struct Case {
    size_t out_size, hidden, r;
    bool zero_nan;
  };
  std::vector<Case> cases;
  for (size_t out_size : {400, 840}) {
    for (size_t hidden : {128, 512, 8192}) {
      for (size_t r : {8, 5}) {
        for (bool zero_nan : {false, true}) cases.push_back({out_size, hidden, r, zero_nan});
      }
    }
  }
  for (bool zero_nan : {false, true}) cases.push_back({2048, 7168, 8, zero_nan});
  cases.push_back({2048, 6144, 8, false});
  cases.push_back({2050, 4096, 10, false});
  for (size_t hidden : {2880, 2944}) {
    for (bool zero_nan : {false, true}) cases.push_back({2048, hidden, 4, zero_nan});
  }
  for (const Case& c : cases) {
    const std::string what = "out_size " + std::to_string(c.out_size) + " hidden " + std::to_string(c.hidden) +
                             " R " + std::to_string(c.r) + " zero_nan " + std::to_string(c.zero_nan);
    Problem p = RandomProblem(rng_, c.out_size, c.out_size / c.r, c.r, c.hidden, true, c.zero_nan ? 0.2 : 0.0,
                              false);
    std::iota(p.idx.begin(), p.idx.end(), 0);
    std::shuffle(p.idx.begin(), p.idx.end(), rng_);
    if (c.zero_nan) {  // poison the rows of zero-weighted slots (each row has one slot)
      for (size_t i = 0; i < p.idx.size(); ++i) {
        if (p.w[i] == 0.0f) std::fill_n(&p.op[p.idx[i] * p.ldop], c.hidden, kNaN);
      }
    }
    const std::vector<float> got = Compute(fast(), p);
    ExpectSameBits(got, Compute(ref(), p), what);
    EXPECT_FALSE(ExpectMatchesDefinition(p, got, what)) << what;
  }
}

// ragged_gather_reduce_v2_test.py: only rows in [start, end) are valid (expert-parallel slice);
// the mask is a zero weight on every term gathering a row outside it, and those rows are NaN.
// out_size {400, 840} x (start, end) {(3, 338), (10, 255)} x hidden {128, 512, 8192} x R {8, 5}.
TEST_P(GatherReduceKernelTest, UpstreamRaggedMaskSweep) {
  for (size_t out_size : {400, 840}) {
    for (auto [start, end] : {std::pair<size_t, size_t>{3, 338}, std::pair<size_t, size_t>{10, 255}}) {
      for (size_t hidden : {128, 512, 8192}) {
        for (size_t r : {8, 5}) {
          const std::string what = "out_size " + std::to_string(out_size) + " range " + std::to_string(start) +
                                   ".." + std::to_string(end) + " hidden " + std::to_string(hidden) + " R " +
                                   std::to_string(r);
          Problem p = RandomProblem(rng_, out_size, out_size / r, r, hidden, true, 0.0, false);
          std::iota(p.idx.begin(), p.idx.end(), 0);
          std::shuffle(p.idx.begin(), p.idx.end(), rng_);
          for (size_t i = 0; i < p.idx.size(); ++i) {
            const size_t row = p.idx[i];
            if (row >= start && row < end) continue;
            p.w[i] = 0.0f;
            std::fill_n(&p.op[row * p.ldop], hidden, kNaN);
          }
          const std::vector<float> got = Compute(fast(), p);
          ExpectSameBits(got, Compute(ref(), p), what);
          EXPECT_FALSE(ExpectMatchesDefinition(p, got, what)) << what;
        }
      }
    }
  }
}

// §1 / §7.2: the combine of a sorted MoE. For random expert ids [T, k] (with empty experts, and a
// case with every token on one expert), order = stable_argsort(ids) lays the slots out by expert
// and revert = argsort(argsort(ids)) is its inverse. Gathering y_sorted (row i = slot order[i]'s
// output) through revert must give exactly the combine of the slot-ordered rows.
TEST_P(GatherReduceKernelTest, SortedCombineIndices) {
  for (size_t experts : {1, 4, 32}) {
    for (size_t k : {1, 2, 4, 8}) {
      if (k > experts && experts > 1) continue;
      for (size_t tokens : {1, 7, 64}) {
        for (bool one_expert : {false, true}) {
          const size_t slots = tokens * k, hidden = 2880;
          std::uniform_int_distribution<int32_t> expert(0, static_cast<int32_t>(experts) / 2);  // upper half empty
          std::vector<int32_t> ids(slots);
          for (auto& e : ids) e = one_expert ? 0 : expert(rng_);
          std::vector<int32_t> order(slots);
          std::iota(order.begin(), order.end(), 0);
          std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return ids[a] < ids[b]; });
          std::vector<int32_t> revert(slots);
          for (size_t i = 0; i < slots; ++i) revert[order[i]] = static_cast<int32_t>(i);
          Problem by_slot = RandomProblem(rng_, slots, tokens, k, hidden, true, 0.1, false);
          std::iota(by_slot.idx.begin(), by_slot.idx.end(), 0);
          for (size_t f = 0; f < slots; ++f) {  // padding slots: weight 0, and a NaN row
            if (by_slot.w[f] == 0.0f) std::fill_n(&by_slot.op[f * by_slot.ldop], hidden, kNaN);
          }
          Problem sorted = by_slot;
          for (size_t i = 0; i < slots; ++i) {
            std::memcpy(&sorted.op[i * sorted.ldop], &by_slot.op[order[i] * by_slot.ldop], hidden * sizeof(float));
          }
          sorted.idx = revert;
          const std::string what = "experts " + std::to_string(experts) + " k " + std::to_string(k) + " tokens " +
                                   std::to_string(tokens) + " one_expert " + std::to_string(one_expert);
          ExpectSameBits(Compute(fast(), sorted), Compute(ref(), by_slot), what);
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllIsas, GatherReduceKernelTest,
                         ::testing::Values(Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kAmx),
                         [](const auto& info) { return std::string(IsaName(info.param)); });

TEST(GatherReduceKernel, TablesNameTheirImplementation) {
  EXPECT_STREQ(KernelsFor(Isa::kScalar).gather_reduce_isa, "scalar");
  if (IsaSupported(Isa::kAvx2)) {
    EXPECT_STREQ(KernelsFor(Isa::kAvx2).gather_reduce_isa, "avx2");
  }
  if (IsaSupported(Isa::kAvx512)) {
    EXPECT_STREQ(KernelsFor(Isa::kAvx512).gather_reduce_isa, "avx512");
  }
  ASSERT_NE(ActiveKernels().gather_reduce, nullptr);
}

// ---- the thread-parallel wrapper ----------------------------------------------------------

// Restores the default pool size when a test that changed it ends.
class PoolSize {
 public:
  ~PoolSize() { SetGlobalThreadCount(DefaultThreadCount()); }
};

// Every thread count and every number of groups gives the bits of one kernel call, and a group's
// row does not depend on the other groups of the call (batch invariance): few groups take the
// column split, many groups the row split.
TEST(GatherReduceParallel, BitIdenticalForEveryThreadCountAndBatch) {
  PoolSize restore;
  std::mt19937 rng(7);
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    if (!IsaSupported(isa)) continue;
    const KernelTable& t = KernelsFor(isa);
    for (size_t groups : {1, 2, 5, 300}) {
      for (size_t k : {33, 2880, 20001}) {
        if (k > 2880 && groups > 5) continue;
        const Problem p = RandomProblem(rng, 97, groups, 4, k, true, 0.2, true);
        const std::vector<float> want = Compute(t, p);
        for (int threads : {1, 2, 3, 8}) {
          SetGlobalThreadCount(threads);
          std::vector<float> got(p.groups * p.ldo, kSentinel);
          GatherReduce(t, p.op.data(), p.rows, p.ldop, p.idx.data(), p.weights(), p.groups, p.r, p.k, got.data(),
                       p.ldo);
          ExpectSameBits(got, want,
                         std::string(IsaName(isa)) + " groups " + std::to_string(groups) + " k " + std::to_string(k) +
                             " threads " + std::to_string(threads));
        }
        // Group g alone.
        for (size_t g : {size_t{0}, groups / 2, groups - 1}) {
          std::vector<float> alone(p.ldo, kSentinel);
          GatherReduce(t, p.op.data(), p.rows, p.ldop, &p.idx[g * p.r], p.weights() ? &p.w[g * p.r] : nullptr, 1,
                       p.r, p.k, alone.data(), p.ldo);
          ExpectSameBits(alone, std::vector<float>(want.begin() + g * p.ldo, want.begin() + (g + 1) * p.ldo),
                         "group " + std::to_string(g) + " alone");
        }
      }
    }
  }
}

TEST(GatherReduceParallel, RejectsOutOfRangeIndicesBeforeWriting) {
  std::mt19937 rng(8);
  Problem p = RandomProblem(rng, 10, 50, 4, 2880, true, 0.0, false);
  for (int32_t bad : {-1, 10, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()}) {
    p.idx[123] = bad;
    std::vector<float> out(p.groups * p.ldo, kSentinel);
    const std::string msg = ErrorOf([&] {
      GatherReduce(p.op.data(), p.rows, p.ldop, p.idx.data(), p.weights(), p.groups, p.r, p.k, out.data(), p.ldo);
    });
    EXPECT_NE(msg.find("gather_reduce: index " + std::to_string(bad) + " at position 123 (group 30, term 3)"),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find("outside the 10 rows"), std::string::npos) << msg;
    for (float v : out) ASSERT_EQ(v, kSentinel);
  }
  // A zero weight does not excuse a bad index: the index is still validated.
  p.idx[123] = 10;
  p.w[123] = 0.0f;
  std::vector<float> out(p.groups * p.ldo);
  EXPECT_NE(ErrorOf([&] {
              GatherReduce(p.op.data(), p.rows, p.ldop, p.idx.data(), p.weights(), p.groups, p.r, p.k, out.data(),
                           p.ldo);
            }).find("index 10"),
            std::string::npos);
}

TEST(GatherReduceParallel, EmptyProblemsWriteNothing) {
  std::vector<float> out(8, kSentinel);
  const float op[4] = {1, 2, 3, 4};
  GatherReduce(op, 1, 4, nullptr, nullptr, 0, 4, 4, out.data(), 4);  // no groups
  for (float v : out) EXPECT_EQ(v, kSentinel);
  const int32_t idx[2] = {0, 0};
  GatherReduce(op, 1, 4, idx, nullptr, 2, 1, 0, out.data(), 4);  // no columns
  for (float v : out) EXPECT_EQ(v, kSentinel);
  GatherReduce(op, 1, 4, nullptr, nullptr, 2, 0, 4, out.data(), 4);  // no terms: +0
  for (float v : out) EXPECT_EQ(std::bit_cast<uint32_t>(v), 0u);
}

}  // namespace
}  // namespace tessera
