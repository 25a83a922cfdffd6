// N:M sparse linear kernels (kernels/nm_linear.h; ../shared/reference/sparsity.md §10, §11, §14):
// the mask builder's canonical completion and its over-full-group error, the two results'
// definitions checked on the scalar reference independently, every instruction set's
// matmul_nm_bf16 / matmul_q8_nm_int8 against the reference bit for bit on fresh random N:M
// matrices (every M from 2 to 16, k with tails past the last group and past 16 / 64 columns,
// n not a multiple of 16, m around the row tiles, column splits, ldy > n, bias on and off), the
// int8 kernel against the dense int8 format of the same dense-with-zeros weights (bit for bit), and
// accuracy of both against a double-precision product (sparsity.md §14's validation list).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "core/dtype.h"
#include "kernels/kernels.h"
#include "kernels/nm_linear.h"
#include "kernels/q8.h"
#include "test_util.h"

namespace tessera {
namespace {

constexpr float kSentinel = -12345.0f;

uint32_t Bits(float f) { return std::bit_cast<uint32_t>(f); }

const KernelTable& Reference() { return KernelsFor(Isa::kScalar); }

// Every table to check: each supported level as dispatched, plus AVX-512's kernels without VBMI2
// (a CPU with AVX-512 but no VBMI2 runs them; this one may have it).
struct NamedTable {
  std::string name;
  KernelTable table;
};
std::vector<NamedTable> Tables() {
  std::vector<NamedTable> out;
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    if (IsaSupported(isa)) out.push_back({IsaName(isa), KernelsFor(isa)});
  }
  if (IsaSupported(Isa::kAvx512)) {
    KernelTable plain = KernelsFor(Isa::kAvx512);
    FillAvx2Nm(plain);
    FillAvx512Nm(plain);  // bf16: AVX-512 without VBMI2; int8: AVX2 (no VNNI + VBMI2 kernel)
    out.push_back({"avx512 without vbmi2", plain});
  }
  return out;
}

// A random N:M matrix: dense bf16 rows with N of every M kept (some groups under-filled, some
// rows all zero), packed both ways.
struct NmMatrix {
  size_t n = 0, k = 0, kept_per_row = 0;
  int kept = 0, group = 0;
  std::vector<uint16_t> dense;  // [n, k] bf16, zeros at pruned columns
  std::vector<uint64_t> masks;  // row-major [n, words]
  std::vector<uint16_t> bf16_values;  // row-major [n, kept_per_row]
  std::vector<int8_t> int8_values;
  std::vector<uint8_t> bf16_packed, int8_packed;  // nm_linear.h's layout
  std::vector<float> scales;  // int8 per-row scales
  std::vector<float> bias;
  NmWeights bf16() const { return NmWeights{bf16_packed.data(), NmRowBytes(k, kept_per_row, 2), nullptr}; }
  NmWeights int8() const { return NmWeights{int8_packed.data(), NmRowBytes(k, kept_per_row, 1), scales.data()}; }
  float W(size_t j, size_t c) const { return Bf16ToF32(dense[j * k + c]); }
};

NmMatrix RandomNm(std::mt19937& rng, size_t n, size_t k, int kept, int group) {
  NmMatrix w;
  w.n = n, w.k = k, w.kept = kept, w.group = group;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> pick(0, 9);
  w.dense.assign(n * k, 0);
  const size_t M = static_cast<size_t>(group), whole = k / M * M;
  for (size_t j = 0; j < n; ++j) {
    if (pick(rng) == 0) continue;  // an all-zero row
    for (size_t g0 = 0; g0 < whole; g0 += M) {
      std::vector<size_t> slots(M);
      for (size_t s = 0; s < M; ++s) slots[s] = s;
      std::shuffle(slots.begin(), slots.end(), rng);
      // Under-filled now and then: fewer non-zeros than kept.
      const int fill = pick(rng) == 0 ? std::uniform_int_distribution<int>(0, kept)(rng) : kept;
      for (int s = 0; s < fill; ++s) w.dense[j * k + g0 + slots[static_cast<size_t>(s)]] = F32ToBf16(normal(rng));
    }
    for (size_t c = whole; c < k; ++c) w.dense[j * k + c] = F32ToBf16(normal(rng));
  }
  w.kept_per_row = NmKeptPerRow(k, kept, group);
  const size_t words = NmMaskWords(k);
  w.masks.assign(n * words, 0);
  w.bf16_values.assign(n * w.kept_per_row, 0);
  w.int8_values.assign(n * w.kept_per_row, 0);
  w.scales.assign(n, 0.0f);
  std::vector<float> row(k);
  std::vector<int8_t> q(k);
  for (size_t j = 0; j < n; ++j) {
    const uint16_t* d = &w.dense[j * k];
    size_t bad = 0;
    EXPECT_TRUE(NmMaskOfRow(k, kept, group, [&](size_t c) { return (d[c] & 0x7fff) == 0; }, &w.masks[j * words], &bad));
    EXPECT_EQ(NmKeptCount(&w.masks[j * words], k), w.kept_per_row);
    NmGatherKept(&w.masks[j * words], d, k, &w.bf16_values[j * w.kept_per_row]);
    for (size_t c = 0; c < k; ++c) row[c] = Bf16ToF32(d[c]);
    EXPECT_TRUE(QuantizeRowToInt8(row.data(), k, q.data(), &w.scales[j]));
    NmGatherKept(&w.masks[j * words], q.data(), k, &w.int8_values[j * w.kept_per_row]);
  }
  // Packed with a poison byte in the slack (the kernels may load it but must not use it).
  w.bf16_packed.assign(NmPackedBytes(n, NmRowBytes(k, w.kept_per_row, 2)), 0xA5);
  w.int8_packed.assign(NmPackedBytes(n, NmRowBytes(k, w.kept_per_row, 1)), 0xA5);
  for (size_t g = 0; g * kNmRowGroup < n; ++g) {
    NmPackGroup(g, n, k, w.kept_per_row, 2, w.masks.data(), reinterpret_cast<const uint8_t*>(w.bf16_values.data()),
                w.bf16_packed.data());
    NmPackGroup(g, n, k, w.kept_per_row, 1, w.masks.data(), reinterpret_cast<const uint8_t*>(w.int8_values.data()),
                w.int8_packed.data());
  }
  w.bias.resize(n);
  for (auto& b : w.bias) b = normal(rng);
  return w;
}

std::vector<float> RandomActivations(std::mt19937& rng, size_t m, size_t k) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(m * k);
  for (auto& v : x) v = normal(rng);
  return x;
}

void RunNm(const KernelTable& t, bool int8, const NmMatrix& w, const std::vector<float>& x, const Q8Activations& xq,
           size_t m, size_t n_begin, size_t n_end, bool bias, float* y, size_t ldy) {
  const float* b = bias ? w.bias.data() : nullptr;
  if (int8) {
    t.matmul_q8_nm_int8(xq.rows(), m, w.k, w.int8(), n_begin, n_end, b, y, ldy);
  } else {
    t.matmul_nm_bf16(x.data(), m, w.k, w.bf16(), n_begin, n_end, b, y, ldy);
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
      if (Bits(g) != Bits(w) && !(std::isnan(g) && std::isnan(w)) && failures++ == 0) {
        first << "y[" << i << "," << j << "] = " << g << ", want " << w << (inside ? "" : " (outside the range)");
      }
    }
  }
  if (failures == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << failures << " bad outputs; first: " << first.str();
}

// ---- masks -----------------------------------------------------------------------------------

TEST(NmMask, CompletesUnderFilledGroupsWithTheirLowestZeroColumnsAndKeepsTheTail) {
  // sparsity.md §5's row [5, 0, 0, 7 | 0, 9, 0, 0] at 2:4, plus a tail of 3 columns.
  const std::vector<float> row = {5, 0, 0, 7, 0, 9, 0, 0, 0, 1, 0};
  uint64_t mask = 0;
  ASSERT_TRUE(NmMaskOfRow(row.size(), 2, 4, [&](size_t c) { return row[c] == 0.0f; }, &mask, nullptr));
  // Group 0 keeps columns 0 and 3; group 1 column 5 and, completing it, column 4; the tail 8..10.
  EXPECT_EQ(mask, (1u << 0) | (1u << 3) | (1u << 4) | (1u << 5) | (1u << 8) | (1u << 9) | (1u << 10));
  EXPECT_EQ(NmKeptCount(&mask, row.size()), NmKeptPerRow(row.size(), 2, 4));
  std::vector<float> kept(NmKeptPerRow(row.size(), 2, 4));
  NmGatherKept(&mask, row.data(), row.size(), kept.data());
  EXPECT_EQ(kept, (std::vector<float>{5, 7, 0, 9, 0, 1, 0}));
}

TEST(NmMask, RejectsAGroupWithMoreNonZerosThanKept) {
  // sparsity.md §5: with 1:4 the row is invalid (group 0 has two non-zeros); never truncated.
  const std::vector<float> row = {0, 0, 0, 1, 5, 0, 0, 7};
  uint64_t mask = 0;
  size_t bad = 99;
  EXPECT_FALSE(NmMaskOfRow(row.size(), 1, 4, [&](size_t c) { return row[c] == 0.0f; }, &mask, &bad));
  EXPECT_EQ(bad, 1u);
  const uint64_t over = 0b10010000 | 0b1;
  EXPECT_FALSE(NmMaskFollowsPattern(&over, 8, 1, 4, &bad));
  EXPECT_EQ(bad, 1u);
  const uint64_t fine = 0b10000001;
  EXPECT_TRUE(NmMaskFollowsPattern(&fine, 8, 1, 4, nullptr));
}

TEST(NmMask, SpansWordBoundariesForEveryGroupSize) {
  std::mt19937 rng(7);
  for (int group = 2; group <= 16; ++group) {
    for (int kept = 1; kept < group; kept += (group > 8 ? 3 : 1)) {
      const NmMatrix w = RandomNm(rng, 3, 200, kept, group);
      for (size_t j = 0; j < w.n; ++j) {
        const uint64_t* mask = &w.masks[j * NmMaskWords(w.k)];
        EXPECT_TRUE(NmMaskFollowsPattern(mask, w.k, kept, group, nullptr));
        std::vector<float> dense(w.k);
        NmRowToDense(w.bf16(), w.n, w.k, 2, j, dense.data());
        for (size_t c = 0; c < w.k; ++c) ASSERT_EQ(Bits(dense[c]), Bits(w.W(j, c))) << kept << ":" << group << " c " << c;
      }
    }
  }
}

// ---- the definitions, on the reference ---------------------------------------------------------

TEST(NmLinear, ReferenceFollowsTheDefinedPairedLaneOrder) {
  std::mt19937 rng(11);
  for (size_t k : {1u, 15u, 16u, 17u, 100u, 257u}) {
    const NmMatrix w = RandomNm(rng, 5, k, 2, 4);
    const std::vector<float> x = RandomActivations(rng, 2, k);
    std::vector<float> y(2 * w.n);
    Reference().matmul_nm_bf16(x.data(), 2, k, w.bf16(), 0, w.n, w.bias.data(), y.data(), w.n);
    for (size_t i = 0; i < 2; ++i) {
      for (size_t j = 0; j < w.n; ++j) {
        float lane[16] = {};
        for (size_t c = 0; c < k; ++c) lane[c % 32 / 2] = std::fma(w.W(j, c), x[i * k + c], lane[c % 32 / 2]);
        float b[8];
        for (int l = 0; l < 8; ++l) b[l] = lane[l] + lane[l + 8];
        for (int l = 0; l < 4; ++l) b[l] += b[l + 4];
        for (int l = 0; l < 2; ++l) b[l] += b[l + 2];
        const float want = (b[0] + b[1]) + w.bias[j];
        EXPECT_EQ(Bits(y[i * w.n + j]), Bits(want)) << "k " << k << " y[" << i << "," << j << "]";
      }
    }
  }
}

TEST(NmLinear, Int8EqualsTheDenseInt8FormatOfTheSameWeightsBitForBit) {
  std::mt19937 rng(12);
  for (const auto& [kept, group] : std::vector<std::pair<int, int>>{{2, 4}, {4, 8}, {1, 4}, {3, 16}, {5, 7}}) {
    const size_t n = 37, k = 320, m = 5;
    const NmMatrix w = RandomNm(rng, n, k, kept, group);
    std::vector<float> dense(n * k);
    for (size_t j = 0; j < n; ++j) {
      for (size_t c = 0; c < k; ++c) dense[j * k + c] = w.W(j, c);
    }
    std::vector<uint8_t> values(Q8Int8Bytes(n, k));
    std::vector<float> scales(Q8PaddedColumns(n));
    ASSERT_TRUE(QuantizeF32ToQ8Int8(dense.data(), n, k, values.data(), scales.data(), nullptr));
    const std::vector<float> x = RandomActivations(rng, m, k);
    const Q8Activations xq = QuantizeQ8Reference(x, m, k);
    for (const NamedTable& named : Tables()) {
      const KernelTable& t = named.table;
      std::vector<float> want(m * n), got(m * n);
      t.matmul_q8_int8(xq.rows(), m, k, values.data(), scales.data(), 0, n, w.bias.data(), want.data(), n);
      t.matmul_q8_nm_int8(xq.rows(), m, k, w.int8(), 0, n, w.bias.data(), got.data(), n);
      EXPECT_TRUE(SameOutputs(want, got, m, n, 0, n)) << named.name << " " << kept << ":" << group;
    }
  }
}

// ---- every ISA against the reference -----------------------------------------------------------

struct Case {
  size_t n, k, m;
  int kept, group;
};

void CheckAgainstReference(bool int8, const std::vector<Case>& cases, uint32_t seed) {
  std::mt19937 rng(seed);
  for (const Case& cs : cases) {
    const NmMatrix w = RandomNm(rng, cs.n, cs.k, cs.kept, cs.group);
    const std::vector<float> x = RandomActivations(rng, cs.m, cs.k);
    const Q8Activations xq = int8 ? QuantizeQ8Reference(x, cs.m, cs.k) : Q8Activations{};
    const size_t ldy = cs.n + 3;
    for (bool bias : {false, true}) {
      std::vector<float> want(cs.m * ldy, kSentinel);
      RunNm(Reference(), int8, w, x, xq, cs.m, 0, cs.n, bias, want.data(), ldy);
      // Accuracy of the reference against a double-precision product of the same weights.
      for (size_t i = 0; i < cs.m; ++i) {
        for (size_t j = 0; j < cs.n; ++j) {
          double exact = bias ? w.bias[j] : 0.0, scale = bias ? std::fabs(w.bias[j]) : 0.0;
          for (size_t c = 0; c < cs.k; ++c) {
            exact += static_cast<double>(w.W(j, c)) * x[i * cs.k + c];
            scale += std::fabs(static_cast<double>(w.W(j, c)) * x[i * cs.k + c]);
          }
          // int8: weights and activations each carry half a step of 1/127 of their amax.
          const double tol = int8 ? 0.02 * scale + 1e-3 : 1e-5 * scale + 1e-6;
          ASSERT_NEAR(want[i * ldy + j], exact, tol) << cs.kept << ":" << cs.group << " n " << cs.n << " k " << cs.k;
        }
      }
      for (const NamedTable& named : Tables()) {
        const KernelTable& t = named.table;
        const std::string& isa = named.name;
        // The whole range, then a split at a multiple of 16.
        std::vector<float> got(cs.m * ldy, kSentinel);
        RunNm(t, int8, w, x, xq, cs.m, 0, cs.n, bias, got.data(), ldy);
        EXPECT_TRUE(SameOutputs(want, got, cs.m, ldy, 0, cs.n))
            << isa << (int8 ? " int8 " : " bf16 ") << cs.kept << ":" << cs.group << " n " << cs.n << " k "
            << cs.k << " m " << cs.m << " bias " << bias;
        if (cs.n > 16) {
          std::vector<float> split(cs.m * ldy, kSentinel);
          RunNm(t, int8, w, x, xq, cs.m, 16, cs.n, bias, split.data(), ldy);
          RunNm(t, int8, w, x, xq, cs.m, 0, 16, bias, split.data(), ldy);
          EXPECT_TRUE(SameOutputs(want, split, cs.m, ldy, 0, cs.n)) << isa << " split";
        }
        // Batch invariance: each row alone gives its bits in the batch.
        for (size_t i = 0; i < cs.m; i += 3) {
          std::vector<float> one(ldy, kSentinel);
          const std::vector<float> xi(x.begin() + static_cast<std::ptrdiff_t>(i * cs.k),
                                      x.begin() + static_cast<std::ptrdiff_t>((i + 1) * cs.k));
          Q8Activations qi;
          if (int8) {
            qi.m = 1, qi.k = cs.k;
            qi.q.assign(xq.q.begin() + static_cast<std::ptrdiff_t>(i * cs.k), xq.q.begin() + static_cast<std::ptrdiff_t>((i + 1) * cs.k));
            qi.d.assign(xq.d.begin() + static_cast<std::ptrdiff_t>(i * cs.k / 32), xq.d.begin() + static_cast<std::ptrdiff_t>((i + 1) * cs.k / 32));
            qi.sum.assign(xq.sum.begin() + static_cast<std::ptrdiff_t>(i * cs.k / 32), xq.sum.begin() + static_cast<std::ptrdiff_t>((i + 1) * cs.k / 32));
          }
          RunNm(t, int8, w, xi, qi, 1, 0, cs.n, bias, one.data(), ldy);
          const std::vector<float> want_row(want.begin() + static_cast<std::ptrdiff_t>(i * ldy),
                                            want.begin() + static_cast<std::ptrdiff_t>((i + 1) * ldy));
          EXPECT_TRUE(SameOutputs(want_row, one, 1, ldy, 0, cs.n)) << isa << " row " << i << " alone";
        }
      }
    }
  }
}

TEST(NmLinear, Bf16EveryIsaMatchesTheReferenceBitForBit) {
  std::vector<Case> cases = {{16, 64, 1, 2, 4}, {17, 100, 3, 2, 4}, {33, 129, 5, 4, 8}, {1, 7, 2, 1, 4},
                             {40, 256, 9, 2, 4}, {15, 33, 4, 3, 16}, {20, 200, 1, 7, 8}, {18, 96, 8, 5, 7},
                             {33, 100, 33, 2, 4}};  // m past the kernels' activation blocks
  std::mt19937 rng(5);
  // Fresh random patterns, every M, odd shapes.
  for (int r = 0; r < 12; ++r) {
    const int group = std::uniform_int_distribution<int>(2, 16)(rng);
    const int kept = std::uniform_int_distribution<int>(1, group - 1)(rng);
    cases.push_back({std::uniform_int_distribution<size_t>(1, 50)(rng), std::uniform_int_distribution<size_t>(1, 300)(rng),
                     std::uniform_int_distribution<size_t>(1, 9)(rng), kept, group});
  }
  CheckAgainstReference(false, cases, 21);
}

TEST(NmLinear, Int8EveryIsaMatchesTheReferenceBitForBit) {
  std::vector<Case> cases = {{16, 64, 1, 2, 4}, {17, 96, 3, 2, 4}, {33, 160, 5, 4, 8}, {1, 32, 2, 1, 4},
                             {40, 256, 9, 2, 4}, {15, 32, 4, 3, 16}, {20, 224, 1, 7, 8}, {18, 96, 8, 5, 7},
                             {33, 160, 17, 2, 4}, {20, 96, 40, 4, 8}};  // m where the dense int8 kernel takes over
  std::mt19937 rng(6);
  for (int r = 0; r < 12; ++r) {
    const int group = std::uniform_int_distribution<int>(2, 16)(rng);
    const int kept = std::uniform_int_distribution<int>(1, group - 1)(rng);
    cases.push_back({std::uniform_int_distribution<size_t>(1, 50)(rng), 32 * std::uniform_int_distribution<size_t>(1, 10)(rng),
                     std::uniform_int_distribution<size_t>(1, 9)(rng), kept, group});
  }
  CheckAgainstReference(true, cases, 22);
}

TEST(NmLinear, ANonFiniteActivationAtAPrunedColumnGivesNaNAsTheDenseProductWould) {
  std::mt19937 rng(9);
  const NmMatrix w = RandomNm(rng, 16, 64, 2, 4);
  std::vector<float> x = RandomActivations(rng, 1, 64);
  // A column row 0 prunes.
  size_t pruned = 0;
  while ((w.masks[0] >> pruned) & 1) ++pruned;
  ASSERT_LT(pruned, 64u);
  x[pruned] = std::numeric_limits<float>::infinity();
  for (const NamedTable& named : Tables()) {
    std::vector<float> y(16);
    named.table.matmul_nm_bf16(x.data(), 1, 64, w.bf16(), 0, 16, nullptr, y.data(), 16);
    EXPECT_TRUE(std::isnan(y[0])) << named.name;
  }
}

TEST(NmLinear, ReportsTheKernelPathsInUse) {
  const KernelTable& t = ActiveKernels();
  EXPECT_NE(std::string(t.matmul_nm_bf16_isa), "");
  EXPECT_NE(std::string(t.matmul_q8_nm_int8_isa), "");
  if (IsaSupported(Isa::kAvx512)) {
    const CpuFeatures& f = GetCpuFeatures();
    EXPECT_EQ(std::string(KernelsFor(Isa::kAvx512).matmul_nm_bf16_isa), f.avx512_vbmi2 ? "avx512vbmi2" : "avx512");
    if (f.avx512_vnni && f.avx512_vbmi2) {
      EXPECT_EQ(std::string(KernelsFor(Isa::kAvx512).matmul_q8_nm_int8_isa), "avx512vnni");
    } else {
      GTEST_SKIP() << "this CPU lacks AVX512-VNNI or VBMI2: the int8 kernel runs the AVX2 path";
    }
  }
}

}  // namespace
}  // namespace tessera
