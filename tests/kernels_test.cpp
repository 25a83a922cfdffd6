// Every kernel of every instruction set this machine supports, against the scalar reference,
// on fresh random inputs with awkward lengths (0, 1, odd, tails around vector widths).
#include <gtest/gtest.h>

#include <cstring>

#include <cmath>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "kernels/attend_blocked.h"
#include "kernels/kernels.h"
#include "kernels/kv_int8.h"

namespace tessera {
namespace {

class KernelIsaTest : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (!IsaSupported(GetParam())) GTEST_SKIP() << IsaName(GetParam()) << " not supported here";
  }
  const KernelTable& ref() { return KernelsFor(Isa::kScalar); }
  const KernelTable& fast() { return KernelsFor(GetParam()); }
  std::mt19937 rng_{std::random_device{}()};
};

const size_t kLengths[] = {0, 1, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 47, 64, 100, 2880, 4099};

std::vector<uint16_t> RandomBf16(std::mt19937& rng, size_t n) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = F32ToBf16(dist(rng));
  return v;
}

TEST_P(KernelIsaTest, ConvertBf16F32IsExact) {
  for (size_t n : kLengths) {
    const auto src = RandomBf16(rng_, n);
    std::vector<float> want(n + 1, -7.0f), got(n + 1, -7.0f);
    ref().convert_bf16_f32(src.data(), want.data(), n);
    fast().convert_bf16_f32(src.data(), got.data(), n);
    for (size_t i = 0; i <= n; ++i) ASSERT_EQ(want[i], got[i]) << "n=" << n << " i=" << i;  // incl. guard
  }
}

// e4m3fn rows with block scales (DeepSeek-V3's FP8 weights, deepseek.md §7): every non-NaN code,
// blocks of 16, 128 and 7 (a boundary inside a vector), awkward lengths; the same bits as the
// reference (decoding is exact and the product rounds once), NaN-free, and the reference itself
// against the format's definition: 0x7e = 448, 0x01 = 2^-9, 0x38 = 1, 0x80 = -0.
TEST_P(KernelIsaTest, DecodeFp8RowIsExact) {
  EXPECT_EQ(F8E4M3ToF32(0x7e), 448.0f);
  EXPECT_EQ(F8E4M3ToF32(0x01), 0.001953125f);
  EXPECT_EQ(F8E4M3ToF32(0x38), 1.0f);
  EXPECT_TRUE(std::signbit(F8E4M3ToF32(0x80)) && F8E4M3ToF32(0x80) == 0.0f);
  std::uniform_real_distribution<float> scale_dist(1e-4f, 3.0f);
  std::uniform_int_distribution<int> code_dist(0, 255);
  for (size_t block : {size_t{16}, size_t{128}, size_t{7}}) {
    for (size_t n : kLengths) {
      std::vector<uint8_t> codes(n);
      for (size_t c = 0; c < n; ++c) {
        codes[c] = static_cast<uint8_t>(c < 254 ? (c < 127 ? c : c + 1) : code_dist(rng_));  // every code early on
        if ((codes[c] & 0x7f) == 0x7f) codes[c] = 0x7e;
      }
      std::vector<float> scales((n + block - 1) / block + 1);
      for (float& s : scales) s = scale_dist(rng_);
      std::vector<float> want(n + 1, -7.0f), got(n + 1, -7.0f);
      ref().decode_fp8_row(codes.data(), scales.data(), block, n, want.data());
      fast().decode_fp8_row(codes.data(), scales.data(), block, n, got.data());
      for (size_t i = 0; i <= n; ++i) {
        ASSERT_EQ(std::memcmp(&want[i], &got[i], sizeof(float)), 0) << "block=" << block << " n=" << n << " i=" << i;
      }
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(want[i], F8E4M3ToF32(codes[i]) * scales[i / block]);
    }
  }
}

// The fused FP8 decode kernel gives matmul_f32's bits over the decoded rows of the same table
// (what keeps the fp8 format batch-invariant between decode and prefill).
TEST_P(KernelIsaTest, MatmulFp8DotEqualsDecodedMatmulF32) {
  const KernelTable& t = fast();
  if (t.matmul_fp8_dot == nullptr) GTEST_SKIP() << "no fused fp8 kernel at " << IsaName(GetParam());
  std::uniform_int_distribution<int> code_dist(0, 253);
  std::normal_distribution<float> x_dist(0.0f, 1.0f);
  for (size_t block : {size_t{16}, size_t{128}, size_t{7}}) {
    for (size_t k : {size_t{1}, size_t{15}, size_t{16}, size_t{33}, size_t{200}, size_t{1027}}) {
      for (size_t m = 1; m <= 4; ++m) {
        const size_t n = 11, stride = (k + block - 1) / block;
        std::vector<uint8_t> codes(n * k);
        for (auto& c : codes) c = static_cast<uint8_t>(code_dist(rng_) >= 127 ? code_dist(rng_) % 127 + 128 : code_dist(rng_) % 127);
        std::vector<float> scales(n * stride), x(m * k), bias(n), decoded(n * k);
        for (auto& s : scales) s = 1e-3f * static_cast<float>(1 + code_dist(rng_) % 50);
        for (auto& v : x) v = x_dist(rng_);
        for (auto& v : bias) v = x_dist(rng_);
        for (size_t j = 0; j < n; ++j) t.decode_fp8_row(&codes[j * k], &scales[j * stride], block, k, &decoded[j * k]);
        std::vector<float> want(m * n, -1.0f), got(m * n, -1.0f);
        t.matmul_f32(x.data(), m, k, decoded.data(), 1, n, bias.data(), want.data(), n);
        t.matmul_fp8_dot(x.data(), m, k, codes.data(), scales.data(), stride, block, 1, n, bias.data(), got.data(), n);
        for (size_t i = 0; i < m * n; ++i) {
          ASSERT_EQ(std::memcmp(&want[i], &got[i], sizeof(float)), 0) << "block=" << block << " k=" << k << " m=" << m << " i=" << i;
        }
      }
    }
  }
}

// The fast path's FP8 product (kernels.h matmul_fp8_bf16) against the scalar reference: random
// non-NaN codes, blocks that split vectors (16, 100) or not (64, 128), k around the 16/64-value
// steps, m across the decode (<= 4) and prefill (> 4) paths, a column range not starting at 0.
// The order of a block's sum is the ISA's, so the bound is the rounding of the sums of |terms|;
// a row's bits must not depend on m or on the column range (batch invariance).
TEST_P(KernelIsaTest, MatmulFp8Bf16MatchesReference) {
  const KernelTable& t = fast();
  std::uniform_int_distribution<int> code_dist(0, 253);
  std::normal_distribution<float> x_dist(0.0f, 1.0f);
  for (size_t block : {size_t{16}, size_t{64}, size_t{100}, size_t{128}}) {
    for (size_t k : {size_t{1}, size_t{15}, size_t{64}, size_t{65}, size_t{200}, size_t{1027}}) {
      for (size_t m : {size_t{1}, size_t{2}, size_t{3}, size_t{4}, size_t{5}, size_t{9}}) {
        const size_t n = 13, stride = (k + block - 1) / block;
        std::vector<uint8_t> codes(n * k);
        for (auto& c : codes) c = static_cast<uint8_t>(code_dist(rng_) % 127 + (code_dist(rng_) % 2) * 128);
        std::vector<float> scales(n * stride), x(m * k), bias(n);
        for (auto& s : scales) s = 1e-3f * static_cast<float>(1 + code_dist(rng_) % 50);
        for (auto& v : x) v = x_dist(rng_);
        for (auto& v : bias) v = x_dist(rng_);
        std::vector<float> want(m * n, -1.0f), got(m * n, -1.0f);
        ref().matmul_fp8_bf16(x.data(), m, k, codes.data(), scales.data(), stride, block, 2, n, bias.data(), want.data(), n);
        t.matmul_fp8_bf16(x.data(), m, k, codes.data(), scales.data(), stride, block, 2, n, bias.data(), got.data(), n);
        for (size_t i = 0; i < m; ++i) {
          ASSERT_EQ(got[i * n], -1.0f);  // column 0 is outside the range
          for (size_t j = 2; j < n; ++j) {
            double magnitude = std::fabs(bias[j]);
            for (size_t c = 0; c < k; ++c) {
              magnitude += std::fabs(double{Bf16ToF32(F32ToBf16(x[i * k + c]))} * F8E4M3ToF32(codes[j * k + c]) *
                                     scales[j * stride + c / block]);
            }
            const double bound = 2.0 * static_cast<double>(k + 2) * std::ldexp(1.0, -24) * magnitude + 1e-30;
            ASSERT_LE(std::fabs(double{got[i * n + j]} - want[i * n + j]), bound)
                << t.matmul_fp8_bf16_isa << " block=" << block << " k=" << k << " m=" << m << " i=" << i << " j=" << j;
          }
        }
        // Row m-1 alone, over columns [5, n): the same bits as inside the batch.
        std::vector<float> alone(n, -1.0f);
        t.matmul_fp8_bf16(&x[(m - 1) * k], 1, k, codes.data(), scales.data(), stride, block, 5, n, bias.data(), alone.data(), n);
        for (size_t j = 5; j < n; ++j) {
          ASSERT_EQ(std::memcmp(&alone[j], &got[(m - 1) * n + j], sizeof(float)), 0)
              << t.matmul_fp8_bf16_isa << " block=" << block << " k=" << k << " m=" << m << " j=" << j;
        }
      }
    }
  }
}

TEST_P(KernelIsaTest, DotBf16F32MatchesReference) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (size_t n : kLengths) {
    const auto w = RandomBf16(rng_, n);
    std::vector<float> x(n);
    for (auto& v : x) v = dist(rng_);
    // Summation order differs between paths; bound the error by the rounding of a length-n
    // sum of |terms| (gamma_n style), not by a hand-picked constant.
    double abs_sum = 0.0, exact = 0.0;
    for (size_t i = 0; i < n; ++i) {
      const double t = static_cast<double>(Bf16ToF32(w[i])) * x[i];
      exact += t;
      abs_sum += std::fabs(t);
    }
    const double bound = 2.0 * (n + 1) * std::ldexp(1.0, -24) * abs_sum + 1e-30;
    EXPECT_NEAR(ref().dot_bf16_f32(w.data(), x.data(), n), exact, bound) << "n=" << n;
    EXPECT_NEAR(fast().dot_bf16_f32(w.data(), x.data(), n), exact, bound) << "n=" << n;
  }
}

// n random key/value rows of d channels (row stride d + pad, read from `offset` < pad) in f32 and
// BF16, and the head [offset, offset + d) of each quantized to int8 (kernels/kv_int8.h) at byte
// `offset` of a row of KvInt8HeadBytes(d) + pad bytes; reached through pointers in reverse memory
// order, so a kernel cannot assume a stride.
struct KvRows {
  std::vector<float> kf, vf;
  std::vector<uint16_t> kb, vb;
  std::vector<int8_t> kq, vq;
  std::vector<const float*> kfr, vfr;
  std::vector<const uint16_t*> kbr, vbr;
  std::vector<const int8_t*> kqr, vqr;
  KvRows(std::mt19937& rng, size_t n, size_t d, size_t pad, size_t offset)
      : kfr(n), vfr(n), kbr(n), vbr(n), kqr(n), vqr(n) {
    std::normal_distribution<float> dist(0.0f, 1.0f);
    const size_t stride = d + pad;
    kf.resize(n * stride);
    vf.resize(n * stride);
    for (auto& x : kf) x = dist(rng);
    for (auto& x : vf) x = dist(rng);
    kb.resize(kf.size());
    vb.resize(vf.size());
    for (size_t i = 0; i < kf.size(); ++i) {
      kb[i] = F32ToBf16(kf[i]);
      vb[i] = F32ToBf16(vf[i]);
    }
    const size_t q_stride = KvInt8HeadBytes(d) + pad;
    kq.assign(n * q_stride, 0x55);
    vq.assign(n * q_stride, 0x55);
    for (size_t j = 0; j < n; ++j) {
      QuantizeKvInt8(&kf[j * stride + offset], d, &kq[j * q_stride + offset]);
      QuantizeKvInt8(&vf[j * stride + offset], d, &vq[j * q_stride + offset]);
    }
    for (size_t j = 0; j < n; ++j) {
      kfr[j] = &kf[(n - 1 - j) * stride];
      vfr[j] = &vf[(n - 1 - j) * stride];
      kbr[j] = &kb[(n - 1 - j) * stride];
      vbr[j] = &vb[(n - 1 - j) * stride];
      kqr[j] = &kq[(n - 1 - j) * q_stride];
      vqr[j] = &vq[(n - 1 - j) * q_stride];
    }
  }
};

// Attention of one query over n rows (kernels.h attend_*): every path within a few ulp of the
// scalar reference, for head sizes with vector tails, 1 to 300 positions, rows reached through
// scattered pointers plus an offset (as the KV cache's ring rows are), and sinks from far below to
// far above the scores (a sink that dominates leaves almost no mass for the values).
TEST_P(KernelIsaTest, AttendMatchesReference) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (size_t d : {1, 7, 16, 17, 64, 80}) {
    for (size_t n : {1, 2, 7, 8, 9, 16, 17, 33, 300}) {
      for (float sink : {-50.0f, 0.3f, 40.0f}) {
        const size_t offset = 3;
        std::vector<float> q(d);
        for (auto& x : q) x = dist(rng_);
        const KvRows rows(rng_, n, d, 5, offset);
        const auto &kfr = rows.kfr, &vfr = rows.vfr;
        const auto &kbr = rows.kbr, &vbr = rows.vbr;
        const float scale = 0.125f;
        std::vector<float> scratch(n), want(d + 1, -9.0f), got(d + 1, -9.0f);
        ref().attend_f32(q.data(), d, kfr.data(), vfr.data(), offset, n, scale, sink, scratch.data(), want.data());
        fast().attend_f32(q.data(), d, kfr.data(), vfr.data(), offset, n, scale, sink, scratch.data(), got.data());
        // |out| <= max |v| ~ 4; errors of the exp and the sums stay far below 1e-5 of that.
        for (size_t c = 0; c < d; ++c) ASSERT_NEAR(want[c], got[c], 2e-5f + 2e-5f * std::fabs(want[c])) << d << " " << n;
        ASSERT_EQ(got[d], -9.0f);
        ref().attend_bf16(q.data(), d, kbr.data(), vbr.data(), offset, n, scale, sink, scratch.data(), want.data());
        fast().attend_bf16(q.data(), d, kbr.data(), vbr.data(), offset, n, scale, sink, scratch.data(), got.data());
        for (size_t c = 0; c < d; ++c) ASSERT_NEAR(want[c], got[c], 2e-5f + 2e-5f * std::fabs(want[c])) << d << " " << n;
        ref().attend_int8(q.data(), d, rows.kqr.data(), rows.vqr.data(), offset, n, scale, sink, scratch.data(),
                          want.data());
        fast().attend_int8(q.data(), d, rows.kqr.data(), rows.vqr.data(), offset, n, scale, sink, scratch.data(),
                           got.data());
        for (size_t c = 0; c < d; ++c) {
          ASSERT_NEAR(want[c], got[c], 2e-5f + 2e-5f * std::fabs(want[c])) << "int8 " << d << " " << n;
        }
        ASSERT_EQ(got[d], -9.0f);
      }
    }
  }
}

// A GQA group of queries over shared rows (kernels.h attend_group_*): every head has exactly the
// bits the single-query entry of the same table gives it, for group sizes below, at and above the
// AVX-512 kernel's 8-head tile, with head-size tails and sinks that dominate or vanish; the model
// relies on it so that slicing a group differently (decode vs prefill, tensor parallelism) changes
// no bits.
TEST_P(KernelIsaTest, AttendGroupGivesEachHeadItsSingleQueryBits) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (size_t heads : {1, 3, 8, 9, 16}) {
    for (size_t d : {7, 64, 80}) {
      for (size_t n : {1, 17, 300}) {
        const size_t offset = 2, q_stride = d + 1, out_stride = d + 2;
        std::vector<float> q(heads * q_stride), sinks(heads);
        for (auto& x : q) x = dist(rng_);
        for (size_t h = 0; h < heads; ++h) sinks[h] = h % 3 == 0 ? -40.0f : (h % 3 == 1 ? 0.5f : 30.0f);
        const KvRows rows(rng_, n, d, 3, offset);
        const auto &kfr = rows.kfr, &vfr = rows.vfr;
        const auto &kbr = rows.kbr, &vbr = rows.vbr;
        const float scale = 0.125f;
        std::vector<float> scratch(heads * n), one(d), got(heads * out_stride, -9.0f);
        fast().attend_group_f32(q.data(), q_stride, heads, d, kfr.data(), vfr.data(), offset, n, scale, sinks.data(),
                                scratch.data(), got.data(), out_stride);
        for (size_t h = 0; h < heads; ++h) {
          fast().attend_f32(&q[h * q_stride], d, kfr.data(), vfr.data(), offset, n, scale, sinks[h], scratch.data(),
                            one.data());
          ASSERT_EQ(std::memcmp(one.data(), &got[h * out_stride], d * sizeof(float)), 0)
              << "f32 heads=" << heads << " d=" << d << " n=" << n << " head " << h;
          ASSERT_EQ(got[h * out_stride + d], -9.0f);
        }
        fast().attend_group_bf16(q.data(), q_stride, heads, d, kbr.data(), vbr.data(), offset, n, scale, sinks.data(),
                                 scratch.data(), got.data(), out_stride);
        for (size_t h = 0; h < heads; ++h) {
          fast().attend_bf16(&q[h * q_stride], d, kbr.data(), vbr.data(), offset, n, scale, sinks[h], scratch.data(),
                             one.data());
          ASSERT_EQ(std::memcmp(one.data(), &got[h * out_stride], d * sizeof(float)), 0)
              << "bf16 heads=" << heads << " d=" << d << " n=" << n << " head " << h;
        }
        fast().attend_group_int8(q.data(), q_stride, heads, d, rows.kqr.data(), rows.vqr.data(), offset, n, scale,
                                 sinks.data(), scratch.data(), got.data(), out_stride);
        for (size_t h = 0; h < heads; ++h) {
          fast().attend_int8(&q[h * q_stride], d, rows.kqr.data(), rows.vqr.data(), offset, n, scale, sinks[h],
                             scratch.data(), one.data());
          ASSERT_EQ(std::memcmp(one.data(), &got[h * out_stride], d * sizeof(float)), 0)
              << "int8 heads=" << heads << " d=" << d << " n=" << n << " head " << h;
        }
      }
    }
  }
}

// One block's partial (kernels.h attend_partial_*): every path within a few ulp of the scalar
// reference for acc, m and l; head h has exactly the bits the same table gives it alone, for group
// sizes around the AVX-512 tile (the blocked attention's split-independence rests on it).
TEST_P(KernelIsaTest, AttendPartialMatchesReferenceAndIsPerHead) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (size_t heads : {1, 3, 8, 9}) {
    for (size_t d : {7, 64, 80}) {
      for (size_t n : {1, 9, 17, 300}) {
        const size_t offset = 2, q_stride = d + 1, stride = d + 3;
        std::vector<float> q(heads * q_stride);
        for (auto& x : q) x = dist(rng_);
        const KvRows rows(rng_, n, d, 3, offset);
        const float scale = 0.125f;
        std::vector<float> scratch(heads * n), want(heads * stride, -9.0f), got(heads * stride, -9.0f), one(d + 2);
        for (int type : {0, 1, 2}) {  // f32, bf16, int8
          auto partial = [&](const KernelTable& kt, const float* query, size_t nh, float* dst, size_t dst_stride) {
            if (type == 1) {
              kt.attend_partial_bf16(query, q_stride, nh, d, rows.kbr.data(), rows.vbr.data(), offset, n, scale,
                                     scratch.data(), dst, dst_stride);
            } else if (type == 2) {
              kt.attend_partial_int8(query, q_stride, nh, d, rows.kqr.data(), rows.vqr.data(), offset, n, scale,
                                     scratch.data(), dst, dst_stride);
            } else {
              kt.attend_partial_f32(query, q_stride, nh, d, rows.kfr.data(), rows.vfr.data(), offset, n, scale,
                                    scratch.data(), dst, dst_stride);
            }
          };
          partial(ref(), q.data(), heads, want.data(), stride);
          partial(fast(), q.data(), heads, got.data(), stride);
          for (size_t h = 0; h < heads; ++h) {
            const float* w = &want[h * stride];
            const float* g = &got[h * stride];
            // acc and l are sums of up to n terms of size <= 1 * |v| (resp. <= 1): relative bounds.
            ASSERT_NEAR(w[d], g[d], 1e-5f * (1.0f + std::fabs(w[d]))) << "m, type=" << type << " n=" << n;
            ASSERT_NEAR(w[d + 1], g[d + 1], 2e-5f * w[d + 1]) << "l, type=" << type << " n=" << n;
            for (size_t c = 0; c < d; ++c) {
              ASSERT_NEAR(w[c], g[c], 2e-4f * w[d + 1] + 1e-6f) << "acc, type=" << type << " n=" << n;
            }
            ASSERT_EQ(g[d + 2], -9.0f);
            partial(fast(), &q[h * q_stride], 1, one.data(), d + 2);
            ASSERT_EQ(std::memcmp(one.data(), g, (d + 2) * sizeof(float)), 0)
                << "type=" << type << " heads=" << heads << " d=" << d << " n=" << n << " head " << h;
          }
        }
      }
    }
  }
}

// The blocked form (kernels/attend_blocked.h): below a block it is attend_group_* itself; above,
// the merged blocks equal one softmax over all positions within a few ulp (the sink included),
// and computing the blocks in any order, one head or a group at a time, gives the same bits.
TEST_P(KernelIsaTest, BlockedAttentionIsOneSoftmaxAndSplitIndependent) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const size_t heads = 3, d = 64, offset = 1, q_stride = d;
  for (size_t n : {kAttendBlock, kAttendBlock + 1, 3 * kAttendBlock - 5}) {
    for (float sink : {-40.0f, 2.0f}) {
      std::vector<float> q(heads * q_stride), sinks(heads, sink);
      for (auto& x : q) x = dist(rng_);
      const KvRows rows(rng_, n, d, 2, offset);
      const float scale = 0.125f;
      const size_t blocks = AttendBlockCount(n);
      std::vector<float> scratch(heads * n), partials(blocks * heads * (d + 2)), got(heads * d), want(heads * d);
      AttendBlocked(fast(), q.data(), q_stride, heads, d, rows.kbr.data(), rows.vbr.data(), offset, n, scale,
                    sinks.data(), scratch.data(), partials.data(), got.data(), d);
      fast().attend_group_bf16(q.data(), q_stride, heads, d, rows.kbr.data(), rows.vbr.data(), offset, n, scale,
                               sinks.data(), scratch.data(), want.data(), d);
      if (blocks == 1) {
        ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0) << "n=" << n;
        continue;
      }
      for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(want[i], got[i], 1e-5f + 1e-5f * std::fabs(want[i])) << n;
      // Blocks in reverse order, each head alone: the same bits.
      std::vector<float> alone(heads * d), mine(blocks * (d + 2));
      for (size_t h = 0; h < heads; ++h) {
        for (size_t b = blocks; b-- > 0;) {
          AttendOneBlock(fast(), &q[h * q_stride], q_stride, 1, d, rows.kbr.data(), rows.vbr.data(), offset, n, b,
                         scale, scratch.data(), &mine[b * (d + 2)]);
        }
        MergeHeadPartials(mine.data(), 1, blocks, d, &sinks[h], &alone[h * d], d);
      }
      ASSERT_EQ(std::memcmp(alone.data(), got.data(), got.size() * sizeof(float)), 0) << "n=" << n;
    }
  }
}

TEST(KernelDispatch, TablesNameTheirPaths) {
  EXPECT_STREQ(KernelsFor(Isa::kScalar).dot_bf16_f32_isa, "scalar");
  if (IsaSupported(Isa::kAvx2)) {
    EXPECT_STREQ(KernelsFor(Isa::kAvx2).dot_bf16_f32_isa, "avx2");
  }
  if (IsaSupported(Isa::kAvx512)) {
    EXPECT_STREQ(KernelsFor(Isa::kAvx512).dot_bf16_f32_isa, "avx512");
  }
  EXPECT_EQ(ActiveKernels().isa, ActiveIsa());
}

INSTANTIATE_TEST_SUITE_P(AllIsas, KernelIsaTest,
                         ::testing::Values(Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kAmx),
                         [](const auto& info) { return std::string(IsaName(info.param)); });

}  // namespace
}  // namespace tessera
