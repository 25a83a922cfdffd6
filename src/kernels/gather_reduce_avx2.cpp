// AVX2 gather-reduce (KernelTable::gather_reduce, the MoE combine); the structure of
// gather_reduce_avx512.cpp with 8-lane vectors: blocks of 32 columns in four ymm accumulators,
// then 8-column blocks, then a masked tail (vmaskmov neither reads nor writes masked-off lanes).
// Each lane follows the scalar reference's operation sequence, so the bits are the reference's.
#include <immintrin.h>

#include "kernels/kernels.h"

namespace tessera {
namespace {

constexpr size_t kTermChunk = 16;  // as in gather_reduce_avx512.cpp

// Keeps gcc from fusing the product into the add (see gather_reduce_avx512.cpp). No instruction.
inline __m256 Rounded(__m256 v) {
  asm("" : "+x"(v));
  return v;
}

// Lanes [0, remaining) set, remaining < 8.
inline __m256i TailMask8(size_t remaining) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(remaining)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// out[c, c + 32) = (first ? +0 : out) + sum_t wt[t] * rows[t][c, c + 32).
inline void Block32(const float* const* rows, const float* wt, size_t n, bool first, size_t c, float* o) {
  __m256 a0, a1, a2, a3;
  if (first) {
    a0 = a1 = a2 = a3 = _mm256_setzero_ps();
  } else {
    a0 = _mm256_loadu_ps(o + c);
    a1 = _mm256_loadu_ps(o + c + 8);
    a2 = _mm256_loadu_ps(o + c + 16);
    a3 = _mm256_loadu_ps(o + c + 24);
  }
  for (size_t t = 0; t < n; ++t) {
    const __m256 w = _mm256_set1_ps(wt[t]);
    const float* p = rows[t] + c;
    a0 = _mm256_add_ps(a0, Rounded(_mm256_mul_ps(w, _mm256_loadu_ps(p))));
    a1 = _mm256_add_ps(a1, Rounded(_mm256_mul_ps(w, _mm256_loadu_ps(p + 8))));
    a2 = _mm256_add_ps(a2, Rounded(_mm256_mul_ps(w, _mm256_loadu_ps(p + 16))));
    a3 = _mm256_add_ps(a3, Rounded(_mm256_mul_ps(w, _mm256_loadu_ps(p + 24))));
  }
  _mm256_storeu_ps(o + c, a0);
  _mm256_storeu_ps(o + c + 8, a1);
  _mm256_storeu_ps(o + c + 16, a2);
  _mm256_storeu_ps(o + c + 24, a3);
}

inline void Block8(const float* const* rows, const float* wt, size_t n, bool first, size_t c, float* o) {
  __m256 a = first ? _mm256_setzero_ps() : _mm256_loadu_ps(o + c);
  for (size_t t = 0; t < n; ++t) {
    a = _mm256_add_ps(a, Rounded(_mm256_mul_ps(_mm256_set1_ps(wt[t]), _mm256_loadu_ps(rows[t] + c))));
  }
  _mm256_storeu_ps(o + c, a);
}

inline void BlockTail(const float* const* rows, const float* wt, size_t n, bool first, size_t c, __m256i m,
                      float* o) {
  __m256 a = first ? _mm256_setzero_ps() : _mm256_maskload_ps(o + c, m);
  for (size_t t = 0; t < n; ++t) {
    a = _mm256_add_ps(a, Rounded(_mm256_mul_ps(_mm256_set1_ps(wt[t]), _mm256_maskload_ps(rows[t] + c, m))));
  }
  _mm256_maskstore_ps(o + c, m, a);
}

void GatherReduce(const float* op, size_t ldop, const int32_t* idx, const float* w, size_t groups, size_t r,
                  size_t k, float* out, size_t ldo) {
  const float* rows[kTermChunk];
  float wt[kTermChunk];
  for (size_t g = 0; g < groups; ++g) {
    float* o = out + g * ldo;
    // j0 == 0 runs even when r == 0 so that an empty group is written as +0.
    for (size_t j0 = 0; j0 == 0 || j0 < r; j0 += kTermChunk) {
      const size_t j1 = r - j0 < kTermChunk ? r : j0 + kTermChunk;
      size_t n = 0;
      for (size_t j = j0; j < j1; ++j) {
        const float wj = w ? w[g * r + j] : 1.0f;
        if (wj == 0.0f) continue;  // zero-weight masking (NaN / Inf rows contribute exactly 0)
        rows[n] = op + static_cast<size_t>(idx[g * r + j]) * ldop;
        wt[n++] = wj;
      }
      const bool first = j0 == 0;
      if (n == 0 && !first) continue;
      size_t c = 0;
      for (; c + 32 <= k; c += 32) Block32(rows, wt, n, first, c, o);
      for (; c + 8 <= k; c += 8) Block8(rows, wt, n, first, c, o);
      if (c < k) BlockTail(rows, wt, n, first, c, TailMask8(k - c), o);
    }
  }
}

}  // namespace

void FillAvx2GatherReduce(KernelTable& t) {
  t.gather_reduce = GatherReduce;
  t.gather_reduce_isa = "avx2";
}

}  // namespace tessera
