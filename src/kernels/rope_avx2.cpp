// AVX2 + FMA rotary embedding (KernelTable::rope_apply). Eight channels per step; each output is
// fma(a, cos, -(b sin)) or fma(b, cos, a sin), so it differs from the scalar reference by at most
// an ulp of |a cos| + |b sin|. Tails run the same formula one pair at a time.
#include <immintrin.h>

#include <cmath>

#include "kernels/kernels.h"

namespace tessera {
namespace {

inline void RotatePair(float& a, float& b, float c, float s) {
  const float a0 = a, b0 = b;
  a = std::fma(a0, c, -(b0 * s));
  b = std::fma(b0, c, a0 * s);
}

void RopeSplitHalf(float* v, const float* cos, const float* sin, size_t half) {
  size_t i = 0;
  for (; i + 8 <= half; i += 8) {
    const __m256 a = _mm256_loadu_ps(v + i), b = _mm256_loadu_ps(v + half + i);
    const __m256 c = _mm256_loadu_ps(cos + i), s = _mm256_loadu_ps(sin + i);
    _mm256_storeu_ps(v + i, _mm256_fmsub_ps(a, c, _mm256_mul_ps(b, s)));
    _mm256_storeu_ps(v + half + i, _mm256_fmadd_ps(b, c, _mm256_mul_ps(a, s)));
  }
  for (; i < half; ++i) RotatePair(v[i], v[half + i], cos[i], sin[i]);
}

// Four pairs per vector: x = [a0 b0 a1 b1 ...], cos/sin duplicated per pair, and the swapped
// vector [b0 a0 b1 a1 ...] times [-s0 s0 -s1 s1 ...] supplies the cross terms.
void RopeInterleaved(float* v, const float* cos, const float* sin, size_t half) {
  const __m256i dup = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);
  const __m256 sign = _mm256_setr_ps(-1.0f, 1.0f, -1.0f, 1.0f, -1.0f, 1.0f, -1.0f, 1.0f);
  size_t i = 0;
  for (; i + 4 <= half; i += 4) {
    const __m256 x = _mm256_loadu_ps(v + 2 * i);
    const __m256 c = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_loadu_ps(cos + i)), dup);
    const __m256 s = _mm256_mul_ps(
        _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_loadu_ps(sin + i)), dup), sign);
    const __m256 swapped = _mm256_permute_ps(x, 0xB1);
    _mm256_storeu_ps(v + 2 * i, _mm256_fmadd_ps(x, c, _mm256_mul_ps(swapped, s)));
  }
  for (; i < half; ++i) RotatePair(v[2 * i], v[2 * i + 1], cos[i], sin[i]);
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

void FillAvx2Rope(KernelTable& t) {
  t.rope_apply = RopeApply;
  t.rope_apply_isa = "avx2";
}

}  // namespace tessera
