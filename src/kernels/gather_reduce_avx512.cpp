// AVX-512 gather-reduce (KernelTable::gather_reduce, the MoE combine).
//
// Per group, the terms with a non-zero weight are collected first (at most kTermChunk at a time),
// then the output row is produced in blocks of 64 columns: four zmm accumulators start at +0 and
// take each term's rounded product in order j = 0..r-1, so every output float is written once
// and every gathered row is read once, sequentially (r + 1 streams the hardware prefetcher
// follows). Lanes are independent and follow the scalar reference's operation sequence exactly,
// so the result has the reference's bits; the column tail uses masked loads and stores.
#include <immintrin.h>

#include "kernels/kernels.h"

namespace tessera {
namespace {

// Terms accumulated per pass over the output row; groups with more (MoE top-k is <= 8 in
// practice) continue from the partial sums stored in out, which are exact f32 values.
constexpr size_t kTermChunk = 16;

// Hides the product from the optimiser: gcc's C++ default -ffp-contract=fast would otherwise fuse
// the multiply into the following add (vfmadd), which rounds once and breaks bit equality with
// the scalar reference. Emits no instruction.
inline __m512 Rounded(__m512 v) {
  asm("" : "+v"(v));
  return v;
}

inline __mmask16 TailMask16(size_t remaining) {
  return remaining >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << remaining) - 1);
}

// out[c, c + 64) = (first ? +0 : out) + sum_t wt[t] * rows[t][c, c + 64).
inline void Block64(const float* const* rows, const float* wt, size_t n, bool first, size_t c, float* o) {
  __m512 a0, a1, a2, a3;
  if (first) {
    a0 = a1 = a2 = a3 = _mm512_setzero_ps();
  } else {
    a0 = _mm512_loadu_ps(o + c);
    a1 = _mm512_loadu_ps(o + c + 16);
    a2 = _mm512_loadu_ps(o + c + 32);
    a3 = _mm512_loadu_ps(o + c + 48);
  }
  for (size_t t = 0; t < n; ++t) {
    const __m512 w = _mm512_set1_ps(wt[t]);
    const float* p = rows[t] + c;
    a0 = _mm512_add_ps(a0, Rounded(_mm512_mul_ps(w, _mm512_loadu_ps(p))));
    a1 = _mm512_add_ps(a1, Rounded(_mm512_mul_ps(w, _mm512_loadu_ps(p + 16))));
    a2 = _mm512_add_ps(a2, Rounded(_mm512_mul_ps(w, _mm512_loadu_ps(p + 32))));
    a3 = _mm512_add_ps(a3, Rounded(_mm512_mul_ps(w, _mm512_loadu_ps(p + 48))));
  }
  _mm512_storeu_ps(o + c, a0);
  _mm512_storeu_ps(o + c + 16, a1);
  _mm512_storeu_ps(o + c + 32, a2);
  _mm512_storeu_ps(o + c + 48, a3);
}

// The same for 16 columns under mask m (the tail); masked-off lanes are neither read nor written.
inline void Block16(const float* const* rows, const float* wt, size_t n, bool first, size_t c, __mmask16 m,
                    float* o) {
  __m512 a = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m, o + c);
  for (size_t t = 0; t < n; ++t) {
    a = _mm512_add_ps(a, Rounded(_mm512_mul_ps(_mm512_set1_ps(wt[t]), _mm512_maskz_loadu_ps(m, rows[t] + c))));
  }
  _mm512_mask_storeu_ps(o + c, m, a);
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
      for (; c + 64 <= k; c += 64) Block64(rows, wt, n, first, c, o);
      for (; c < k; c += 16) Block16(rows, wt, n, first, c, TailMask16(k - c), o);
    }
  }
}

}  // namespace

void FillAvx512GatherReduce(KernelTable& t) {
  t.gather_reduce = GatherReduce;
  t.gather_reduce_isa = "avx512";
}

}  // namespace tessera
