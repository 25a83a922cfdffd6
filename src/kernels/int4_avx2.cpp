// AVX2 exact int4 matmul (kernels/int4.h): the scalar reference's bits. A packed 16-row group is
// two ymm halves (rows 0-7 = bytes 0-31 of a 64-byte code vector, rows 8-15 = bytes 32-63); each
// code vector gives 8 k values, taken in increasing k, dequantized as float(q - z) * s and
// accumulated by one FMA per k and lane (the reference's sequential sum). A tile is R <= 3
// activation rows x one group: 2 R accumulators, the codes, zeros and scales of both halves fit
// the 16 ymm registers.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/int4.h"
#include "kernels/kernels.h"

namespace tessera {
namespace {

constexpr size_t kGroupRows = kQ8Group;
constexpr size_t kVectorBytes = 64;
constexpr size_t kPrefetchBytes = 2048;
constexpr size_t kMaxRows = 3;

inline __m256i LoadZeros8(const uint8_t* p) {
  int64_t bytes;
  std::memcpy(&bytes, p, sizeof(bytes));
  return _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(bytes));
}

template <int R>
void ExactTile(const float* x, size_t k, const uint8_t* codes, const uint8_t* zeros, const float* scales, size_t group,
               size_t col, float* y, size_t ldy, const float* bias, size_t n_end) {
  __m256 acc[R][2];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  const __m256i nibble = _mm256_set1_epi32(0x0F);
  const size_t groups = k / group, vectors_per_group = group / 8;
  for (size_t q = 0; q < groups; ++q) {
    const __m256i zero[2] = {LoadZeros8(zeros + q * kGroupRows), LoadZeros8(zeros + q * kGroupRows + 8)};
    const __m256 scale[2] = {_mm256_loadu_ps(scales + q * kGroupRows), _mm256_loadu_ps(scales + q * kGroupRows + 8)};
    for (size_t v = q * vectors_per_group; v < (q + 1) * vectors_per_group; ++v) {
      const uint8_t* src = codes + v * kVectorBytes;
      _mm_prefetch(reinterpret_cast<const char*>(src) + kPrefetchBytes, _MM_HINT_T0);
      const __m256i half[2] = {_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src)),
                               _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 32))};
#pragma GCC unroll 8
      for (int step = 0; step < 8; ++step) {  // k = 8 v + step
        const int shift = (step % 4) * 8 + (step / 4) * 4;
        __m256 w[2];
        for (int h = 0; h < 2; ++h) {
          const __m256i qv = _mm256_and_si256(_mm256_srli_epi32(half[h], shift), nibble);
          w[h] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(qv, zero[h])), scale[h]);
        }
        for (int r = 0; r < R; ++r) {
          const __m256 xv = _mm256_broadcast_ss(x + r * k + 8 * v + step);
          acc[r][0] = _mm256_fmadd_ps(w[0], xv, acc[r][0]);
          acc[r][1] = _mm256_fmadd_ps(w[1], xv, acc[r][1]);
        }
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    alignas(32) float lanes[16];
    _mm256_store_ps(lanes, acc[r][0]);
    _mm256_store_ps(lanes + 8, acc[r][1]);
    for (size_t c = 0; c < kGroupRows && col + c < n_end; ++c) {
      // The reference adds the bias only when there is one (acc + 0 would turn -0 into +0).
      y[r * ldy + col + c] = bias ? lanes[c] + bias[col + c] : lanes[c];
    }
  }
}

void MatmulInt4(const float* x, size_t m, size_t k, Int4Weights w, size_t n_begin, size_t n_end, const float* bias,
                float* y, size_t ldy) {
  if (m == 0 || n_begin >= n_end) return;
  const size_t code_stride = k * kGroupRows / 2, meta_stride = (k / w.group) * kGroupRows;
  const size_t g_end = (n_end + kGroupRows - 1) / kGroupRows;
  for (size_t g = n_begin / kGroupRows; g < g_end; ++g) {
    for (size_t i0 = 0; i0 < m; i0 += kMaxRows) {
      const size_t rows = m - i0 < kMaxRows ? m - i0 : kMaxRows;
      auto* tile = rows == 1 ? ExactTile<1> : rows == 2 ? ExactTile<2> : ExactTile<3>;
      tile(x + i0 * k, k, w.codes + g * code_stride, w.zeros + g * meta_stride, w.scales + g * meta_stride, w.group,
           g * kGroupRows, y + i0 * ldy, ldy, bias, n_end);
    }
  }
}

}  // namespace

void FillAvx2Int4(KernelTable& t) {
  t.matmul_int4 = MatmulInt4;
  t.matmul_int4_isa = "avx2";
}

}  // namespace tessera
