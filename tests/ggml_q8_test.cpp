// GGUF block types on the q8 path (kernels/ggml_q8.h): the packer keeps exactly ggml's dequantized
// weights (w * s equal to DequantizeGgmlRow's values, transcribed from ggml-quants.c), and every
// instruction set's matmul_q8_ggml gives the scalar reference's bits on fresh random blocks with
// awkward shapes (m around the tile heights and the decode/GEMM switch, n not a multiple of 16,
// column splits, ldy > n, bias on and off), and each row's result does not depend on the batch.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "core/cpu_features.h"
#include "core/dtype.h"
#include "io/gguf.h"
#include "kernels/ggml_q8.h"
#include "io/ggml_quants.h"
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

// A matrix of random ggml blocks (binary16 scales of magnitude 1e-4 .. 1e-1, some negative, a
// few zero) and its packed form.
struct GgmlMatrix {
  uint32_t type = 0;
  size_t n = 0, k = 0, row_bytes = 0;
  std::vector<uint8_t> blocks;  // [n] rows of ggml blocks
  std::vector<uint8_t> codes;
  std::vector<uint16_t> scales;
  std::vector<uint8_t> highs, sub;
  std::vector<float> bias;
  GgmlQ8Weights weights() const { return GgmlQ8Weights{type, codes.data(), scales.data(), highs.data(), sub.data()}; }
};

GgmlMatrix RandomGgml(std::mt19937& rng, uint32_t type, size_t n, size_t k) {
  GgmlMatrix w;
  w.type = type, w.n = n, w.k = k;
  const GgmlTypeInfo& info = *FindGgmlType(type);
  w.row_bytes = k / info.block_size * info.block_bytes;
  std::uniform_int_distribution<int> byte(0, 255), pick(0, 19);
  std::uniform_real_distribution<float> log_scale(-4.0f, -1.0f);
  w.blocks.resize(n * w.row_bytes);
  for (auto& b : w.blocks) b = static_cast<uint8_t>(byte(rng));
  // The binary16 fields of each block (ggml-common.h): d, and dmin for the k-quants with mins.
  const std::vector<size_t> halves = type == 14 ? std::vector<size_t>{208} : type >= 12 ? std::vector<size_t>{0, 2}
                                                                                        : std::vector<size_t>{0};
  for (size_t at = 0; at < w.blocks.size(); at += info.block_bytes) {
    for (const size_t field : halves) {
      const int p = pick(rng);
      const float mag = p == 0 ? 0.0f : std::pow(10.0f, log_scale(rng));
      const uint16_t d = F32ToF16(p == 1 ? -mag : mag);
      std::memcpy(&w.blocks[at + field], &d, 2);
    }
  }
  const GgmlQ8Sizes sizes = GgmlQ8SizesOf(type, n, k);
  w.codes.assign(sizes.codes, 0);
  w.scales.assign(sizes.scales, 0);
  w.highs.assign(sizes.highs + 1, 0);
  w.sub.assign(sizes.sub + 1, 0);
  for (size_t j = 0; j < n; ++j) PackGgmlQ8Row(type, j, k, &w.blocks[j * w.row_bytes], w.weights());
  std::normal_distribution<float> normal(0.0f, 1.0f);
  w.bias.resize(n);
  for (auto& b : w.bias) b = normal(rng);
  return w;
}

std::vector<float> RandomActivations(std::mt19937& rng, size_t m, size_t k) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> log_scale(-2.0f, 2.0f);
  std::vector<float> x(m * k);
  for (size_t i = 0; i < m * k / 32; ++i) {
    const float scale = std::pow(10.0f, log_scale(rng));
    for (size_t c = 0; c < 32; ++c) x[i * 32 + c] = normal(rng) * scale;
  }
  return x;
}

void RunGgml(const KernelTable& t, const GgmlMatrix& w, const Q8Activations& xq, size_t i0, size_t m, size_t n_begin,
         size_t n_end, bool bias, float* y, size_t ldy) {
  const size_t nb = w.k / kQ8Block;
  const Q8Rows rows{xq.q.data() + i0 * w.k, xq.d.data() + i0 * nb, xq.sum.data() + i0 * nb};
  t.matmul_q8_ggml(rows, m, w.k, w.weights(), n_begin, n_end, bias ? w.bias.data() : nullptr, y, ldy);
}

::testing::AssertionResult SameBits(const std::vector<float>& want, const std::vector<float>& got) {
  for (size_t i = 0; i < want.size(); ++i) {
    if (Bits(want[i]) != Bits(got[i])) {
      return ::testing::AssertionFailure() << "output " << i << ": " << got[i] << ", want " << want[i];
    }
  }
  return ::testing::AssertionSuccess();
}

constexpr uint32_t kTypes[] = {8, 2, 12, 13, 14};  // q8_0, q4_0, q4_K, q5_K, q6_K

TEST(GgmlQ8Packing, KeepsGgmlsDequantizedWeightsAndPadsWithZeros) {
  std::mt19937 rng(5);
  for (const uint32_t type : kTypes) {
    const size_t n = 37, k = 512, sub = GgmlQ8SubBlock(type);
    const GgmlMatrix w = RandomGgml(rng, type, n, k);
    std::vector<float> want(k), scales(k / sub), mins(k / 32);
    std::vector<int8_t> ints(k);
    for (size_t j = 0; j < Q8PaddedColumns(n); ++j) {
      GgmlQ8Column(w.weights(), k, j, ints.data(), scales.data(), mins.data());
      // ggml's value: w * s - mn, each product rounded (q6_K: (d * sc) * (u - 32)).
      auto value = [&](size_t c) {
        const float product = static_cast<float>(ints[c]) * scales[c / sub];
        return GgmlQ8HasMins(type) ? scales[c / sub] * static_cast<float>(ints[c]) - mins[c / 32] : product;
      };
      if (j >= n) {
        for (size_t c = 0; c < k; ++c) ASSERT_EQ(value(c), 0.0f) << "padding row " << j;
        continue;
      }
      ASSERT_TRUE(DequantizeGgmlRow(type, &w.blocks[j * w.row_bytes], want.data(), k));
      for (size_t c = 0; c < k; ++c) {
        ASSERT_EQ(Bits(value(c)), Bits(want[c])) << FindGgmlType(type)->name << " row " << j << " col " << c;
      }
    }
  }
}

class GgmlQ8IsaTest : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (!IsaSupported(GetParam())) GTEST_SKIP() << IsaName(GetParam()) << " not supported here";
  }
  const KernelTable& table() { return KernelsFor(GetParam()); }
  const uint32_t seed_ = std::random_device{}();
  std::mt19937 rng_{seed_};
};

TEST_P(GgmlQ8IsaTest, MatchesReferenceBits) {
  SCOPED_TRACE(testing::Message() << "seed=" << seed_ << " isa=" << table().matmul_q8_ggml_isa);
  const KernelTable& ref = KernelsFor(Isa::kScalar);
  for (const uint32_t type : kTypes) {
    for (size_t k : {32, 96, 256, 512, 1024}) {
      if (k % GgmlQ8RowBlock(type) != 0) continue;
      for (size_t n : {1, 15, 17, 33, 70}) {
        const GgmlMatrix w = RandomGgml(rng_, type, n, k);
        for (size_t m : {0, 1, 2, 3, 4, 5, 7, 9, 10, 17}) {
          const Q8Activations xq = QuantizeQ8Reference(RandomActivations(rng_, m, k), m, k);
          const size_t ldy = n + 3, groups = (n + 15) / 16;
          for (bool bias : {false, true}) {
            SCOPED_TRACE(testing::Message() << FindGgmlType(type)->name << " k=" << k << " m=" << m << " n=" << n
                                            << " bias=" << bias);
            std::vector<float> want(m * ldy, kSentinel), got(m * ldy, kSentinel), split(m * ldy, kSentinel);
            RunGgml(ref, w, xq, 0, m, 0, n, bias, want.data(), ldy);
            RunGgml(table(), w, xq, 0, m, 0, n, bias, got.data(), ldy);
            ASSERT_TRUE(SameBits(want, got));
            const size_t cut = std::min(n, 16 * std::uniform_int_distribution<size_t>(0, groups)(rng_));
            RunGgml(table(), w, xq, 0, m, 0, cut, bias, split.data(), ldy);
            RunGgml(table(), w, xq, 0, m, cut, n, bias, split.data(), ldy);
            ASSERT_TRUE(SameBits(want, split)) << "split at " << cut;
          }
        }
      }
    }
  }
}

// A row's outputs alone equal its outputs inside a batch (decode-sized and GEMM-sized batches).
TEST_P(GgmlQ8IsaTest, RowsAreBatchInvariant) {
  SCOPED_TRACE(testing::Message() << "seed=" << seed_);
  for (const uint32_t type : kTypes) {
    const size_t n = 48, k = 512, m = 13;
    const GgmlMatrix w = RandomGgml(rng_, type, n, k);
    const Q8Activations xq = QuantizeQ8Reference(RandomActivations(rng_, m, k), m, k);
    std::vector<float> batch(m * n);
    RunGgml(table(), w, xq, 0, m, 0, n, true, batch.data(), n);
    for (size_t i = 0; i < m; ++i) {
      std::vector<float> alone(n);
      RunGgml(table(), w, xq, i, 1, 0, n, true, alone.data(), n);
      ASSERT_TRUE(SameBits(std::vector<float>(batch.begin() + i * n, batch.begin() + (i + 1) * n), alone)) << "row " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, GgmlQ8IsaTest, ::testing::Values(Isa::kScalar, Isa::kAvx2, Isa::kAvx512),
                         [](const ::testing::TestParamInfo<Isa>& info) { return std::string(IsaName(info.param)); });

}  // namespace
}  // namespace tessera
