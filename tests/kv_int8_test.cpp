// The int8 KV cache element (kernels/kv_int8.h, --kv-type int8): the quantizer's layout and error
// bound, its edge cases, and attention over int8 rows against attention
// over the unquantized rows.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/kv_int8.h"
#include "model/kv_cache.h"

namespace tessera {
namespace {

TEST(KvInt8, HeadLayoutIsCodesThenOneScalePer32Channels) {
  EXPECT_EQ(KvInt8HeadBytes(128), 128u + 4 * 4);
  EXPECT_EQ(KvInt8HeadBytes(64), 64u + 2 * 4);
  EXPECT_EQ(KvInt8HeadBytes(80), 80u + 3 * 4);  // the last block holds 16 channels
  EXPECT_EQ(KvInt8HeadBytes(7), 7u + 4);
  EXPECT_EQ(KvHeadBytes(128, KvType::kInt8), 144u);
  EXPECT_EQ(KvHeadBytes(128, KvType::kBF16), 256u);
  EXPECT_EQ(KvHeadBytes(128, KvType::kF32), 512u);
  EXPECT_EQ(ParseKvType("int8"), KvType::kInt8);
  EXPECT_STREQ(KvTypeName(KvType::kInt8), "int8");
}

// Every value within half a step of its block's scale; each block's largest magnitude is code
// +-127 exactly; codes round to nearest; the stored scale is amax / 127.
TEST(KvInt8, QuantizerIsWithinHalfAStepPerBlock) {
  std::mt19937 rng(5);
  for (size_t d : {1, 7, 16, 32, 33, 64, 80, 128}) {
    std::vector<float> x(d);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    for (size_t i = 0; i < d; ++i) x[i] = dist(rng) * (i % 32 == 5 ? 40.0f : 1.0f);  // an outlier per block
    std::vector<int8_t> head(KvInt8HeadBytes(d));
    QuantizeKvInt8(x.data(), d, head.data());
    for (size_t b0 = 0; b0 < d; b0 += kKvInt8Block) {
      const size_t b1 = std::min(d, b0 + kKvInt8Block);
      float amax = 0.0f;
      int max_code = 0;
      for (size_t c = b0; c < b1; ++c) amax = std::max(amax, std::fabs(x[c]));
      const float scale = KvInt8Scale(head.data(), d, b0);
      EXPECT_EQ(scale, amax / 127.0f) << d << " " << b0;
      for (size_t c = b0; c < b1; ++c) {
        EXPECT_EQ(KvInt8Value(head.data(), d, c), static_cast<float>(head[c]) * scale);
        EXPECT_LE(std::fabs(KvInt8Value(head.data(), d, c) - x[c]), 0.5f * scale * (1.0f + 1e-5f)) << d << " " << c;
        max_code = std::max(max_code, std::abs(static_cast<int>(head[c])));
      }
      EXPECT_EQ(max_code, 127) << d << " " << b0;
    }
  }
}

TEST(KvInt8, ZeroBlocksAndNonFiniteValues) {
  const size_t d = 64;
  std::vector<float> x(d, 0.0f);
  x[40] = 3.0f;
  std::vector<int8_t> head(KvInt8HeadBytes(d), 0x33);
  QuantizeKvInt8(x.data(), d, head.data());
  EXPECT_EQ(KvInt8Scale(head.data(), d, 0), 0.0f);  // block 0 all zeros: scale 0, codes 0
  for (size_t c = 0; c < 32; ++c) EXPECT_EQ(head[c], 0);
  EXPECT_EQ(head[40], 127);
  EXPECT_NEAR(KvInt8Value(head.data(), d, 40), 3.0f, 1e-6f);
  x[3] = std::numeric_limits<float>::infinity();
  QuantizeKvInt8(x.data(), d, head.data());
  EXPECT_TRUE(std::isnan(KvInt8Value(head.data(), d, 0)));  // carried on as NaN, never a UB cast
  EXPECT_FALSE(std::isnan(KvInt8Value(head.data(), d, 40)));
  x[3] = std::nanf("");
  QuantizeKvInt8(x.data(), d, head.data());
  EXPECT_TRUE(std::isnan(KvInt8Value(head.data(), d, 5)));
}

// Attention over int8 rows against the same attention over the f32 rows they were quantized from:
// the quantization error (half a step of amax / 127 per value) moves scores and outputs by well
// under a percent of their size for Gaussian keys and values. Every ISA.
TEST(KvInt8, AttentionStaysCloseToTheUnquantizedRows) {
  std::mt19937 rng(9);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    if (!IsaSupported(isa)) continue;
    const KernelTable& kt = KernelsFor(isa);
    for (size_t d : {64, 80, 128}) {
      const size_t n = 200;
      std::vector<float> q(d), kf(n * d), vf(n * d);
      for (auto& x : q) x = dist(rng);
      for (auto& x : kf) x = dist(rng);
      for (auto& x : vf) x = dist(rng);
      const size_t hb = KvInt8HeadBytes(d);
      std::vector<int8_t> kq(n * hb), vq(n * hb);
      std::vector<const float*> kfr(n), vfr(n);
      std::vector<const int8_t*> kqr(n), vqr(n);
      for (size_t j = 0; j < n; ++j) {
        QuantizeKvInt8(&kf[j * d], d, &kq[j * hb]);
        QuantizeKvInt8(&vf[j * d], d, &vq[j * hb]);
        kfr[j] = &kf[j * d];
        vfr[j] = &vf[j * d];
        kqr[j] = &kq[j * hb];
        vqr[j] = &vq[j * hb];
      }
      const float scale = 1.0f / std::sqrt(static_cast<float>(d));
      std::vector<float> scratch(n), want(d), got(d);
      kt.attend_f32(q.data(), d, kfr.data(), vfr.data(), 0, n, scale, -30.0f, scratch.data(), want.data());
      kt.attend_int8(q.data(), d, kqr.data(), vqr.data(), 0, n, scale, -30.0f, scratch.data(), got.data());
      double err = 0.0, norm = 0.0;
      for (size_t c = 0; c < d; ++c) {
        err += (got[c] - want[c]) * (got[c] - want[c]);
        norm += want[c] * want[c];
      }
      EXPECT_LT(std::sqrt(err / norm), 0.02) << IsaName(isa) << " d=" << d;
      EXPECT_GT(std::sqrt(err / norm), 0.0) << "int8 rows cannot be the f32 rows exactly";
    }
  }
}

}  // namespace
}  // namespace tessera
