// AVX-512 rotary embedding (KernelTable::rope_apply). Sixteen channels per step with masked
// tails; each output is fma(a, cos, -(b sin)) or fma(b, cos, a sin), as in rope_avx2.cpp.
#include <immintrin.h>

#include "kernels/kernels.h"

namespace tessera {
namespace {

inline __mmask16 TailMask16(size_t remaining) {
  return remaining >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << remaining) - 1);
}

void RopeSplitHalf(float* v, const float* cos, const float* sin, size_t half) {
  for (size_t i = 0; i < half; i += 16) {
    const __mmask16 m = TailMask16(half - i);
    const __m512 a = _mm512_maskz_loadu_ps(m, v + i), b = _mm512_maskz_loadu_ps(m, v + half + i);
    const __m512 c = _mm512_maskz_loadu_ps(m, cos + i), s = _mm512_maskz_loadu_ps(m, sin + i);
    _mm512_mask_storeu_ps(v + i, m, _mm512_fmsub_ps(a, c, _mm512_mul_ps(b, s)));
    _mm512_mask_storeu_ps(v + half + i, m, _mm512_fmadd_ps(b, c, _mm512_mul_ps(a, s)));
  }
}

// Eight pairs per vector: x = [a0 b0 a1 b1 ...], cos/sin duplicated per pair, and the swapped
// vector [b0 a0 ...] times [-s0 s0 ...] supplies the cross terms. A tail of r < 8 pairs uses a
// 2r-lane mask on x and an r-lane mask on cos/sin.
void RopeInterleaved(float* v, const float* cos, const float* sin, size_t half) {
  const __m512i dup = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
  const __m512 sign = _mm512_setr_ps(-1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1);
  for (size_t i = 0; i < half; i += 8) {
    const size_t r = half - i >= 8 ? 8 : half - i;
    const __mmask8 mc = static_cast<__mmask8>((1u << r) - 1);
    const __mmask16 mx = TailMask16(2 * r);
    const __m512 x = _mm512_maskz_loadu_ps(mx, v + 2 * i);
    const __m512 c = _mm512_permutexvar_ps(dup, _mm512_castps256_ps512(_mm256_maskz_loadu_ps(mc, cos + i)));
    const __m512 s = _mm512_mul_ps(
        _mm512_permutexvar_ps(dup, _mm512_castps256_ps512(_mm256_maskz_loadu_ps(mc, sin + i))), sign);
    const __m512 swapped = _mm512_permute_ps(x, 0xB1);
    _mm512_mask_storeu_ps(v + 2 * i, mx, _mm512_fmadd_ps(x, c, _mm512_mul_ps(swapped, s)));
  }
}

void RopeApply(float* x, size_t tokens, size_t heads, size_t token_stride, size_t head_stride,
               const float* cs, size_t cs_stride, size_t half, RopePairing pairing) {
  for (size_t t = 0; t < tokens; ++t) {
    const float* cos = cs + t * cs_stride;
    const float* sin = cos + half;
    for (size_t h = 0; h < heads; ++h) {
      float* v = x + t * token_stride + h * head_stride;
      if (pairing == RopePairing::kInterleaved) {
        RopeInterleaved(v, cos, sin, half);
      } else {
        RopeSplitHalf(v, cos, sin, half);
      }
    }
  }
}

}  // namespace

void FillAvx512Rope(KernelTable& t) {
  t.rope_apply = RopeApply;
  t.rope_apply_isa = "avx512";
}

}  // namespace tessera
