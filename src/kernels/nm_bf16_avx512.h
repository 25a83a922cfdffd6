// The AVX-512 N:M sparse bf16 kernel (nm_linear.h), included by two files compiled with different
// flags: nm_linear_avx512.cpp (AVX-512 F/BW/VL/DQ) and nm_linear_avx512vbmi2.cpp (plus VBMI2,
// whose vpexpandw expands 32 bf16 values at once). Each includer names the namespace
// (NM_BF16_NAMESPACE) so that the two copies do not collide.
//
// Per 32 columns of a weight row, its 32 mask bits say how many kept values to take (popcount);
// they are expanded into the 32 word lanes of a vector (zeros at pruned columns), whose 32-bit
// lane l then holds columns 2l (low half) and 2l + 1 (high half): a shift and a mask give both as
// float32, and two FMAs add column 2l, then 2l + 1, into lane l, which is nm_linear.h's order
// (lane (c % 32) / 2) and the reference's bits. The activations are split into even and odd
// columns to match, once per call.
//   m == 1 (decode): one pass over each full 16-row group's stream, one accumulator per row.
//   otherwise: the group is expanded once into a float32 tile in cache (even and odd halves per
//     32 columns), then 4 x 4 (rows x activations) register tiles run over it (sparsity.md §14
//     idea 3: prefill reuses a dense micro-kernel on decompressed tiles).
#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/nm_linear.h"

namespace tessera::NM_BF16_NAMESPACE {

inline __mmask16 TailMask(size_t remaining) {
  return remaining >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << remaining) - 1);
}

// nm_linear.h's reduction: lanes l and l + 8, then l + 4, then l + 2, then 0 and 1.
inline float ReduceLanes(__m512 a) {
  const __m256 b = _mm256_add_ps(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1));
  const __m128 c = _mm_add_ps(_mm256_castps256_ps128(b), _mm256_extractf128_ps(b, 1));
  const __m128 d = _mm_add_ps(c, _mm_movehl_ps(c, c));
  return _mm_cvtss_f32(_mm_add_ss(d, _mm_shuffle_ps(d, d, 1)));
}

// The 32 columns of one mask slice as even and odd float32 vectors: the next popcount(keep) bf16
// values at p, expanded into their word lanes.
inline void Expand32(const uint8_t*& p, uint32_t keep, __m512& even, __m512& odd) {
#ifdef __AVX512VBMI2__
  __m512i raw = _mm512_loadu_si512(p);
  asm("" : "+v"(raw));  // keeps the load out of vpexpandw (its memory form is slow on Zen 4)
  const __m512i words = _mm512_maskz_expand_epi16(keep, raw);
#else
  // Two 16-value expands into float32 lanes in column order, then back to packed words.
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  const unsigned first = static_cast<unsigned>(std::popcount(keep & 0xffffu));
  const __m256i h2 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2 * first));
  const __m512i lo = _mm512_maskz_expand_epi32(static_cast<__mmask16>(keep), _mm512_cvtepu16_epi32(h));
  const __m512i hi = _mm512_maskz_expand_epi32(static_cast<__mmask16>(keep >> 16), _mm512_cvtepu16_epi32(h2));
  const __m512i words = _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi32_epi16(lo)), _mm512_cvtepi32_epi16(hi), 1);
#endif
  p += 2 * static_cast<size_t>(std::popcount(keep));
  even = _mm512_castsi512_ps(_mm512_slli_epi32(words, 16));
  odd = _mm512_castsi512_ps(_mm512_and_si512(words, _mm512_set1_epi32(static_cast<int>(0xFFFF0000u))));
}

// x[c .. c + 32) (zeros past k) split into even and odd columns.
inline void SplitActivations(const float* x, size_t c, size_t k, __m512& even, __m512& odd) {
  const __m512 a = c < k ? _mm512_maskz_loadu_ps(TailMask(k - c), x + c) : _mm512_setzero_ps();
  const __m512 b = c + 16 < k ? _mm512_maskz_loadu_ps(TailMask(k - c - 16), x + c + 16) : _mm512_setzero_ps();
  const __m512i even_index = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  even = _mm512_permutex2var_ps(a, even_index, b);
  odd = _mm512_permutex2var_ps(a, _mm512_add_epi32(even_index, _mm512_set1_epi32(1)), b);
}

inline void Store(float sum, const float* bias, size_t j, float* out) { *out = bias ? sum + bias[j] : sum; }

inline constexpr size_t kPrefetchBytes = 2048;

// Decode: a full group of 16 rows against one activation row, straight from the stream.
inline void GroupTimesVector(const uint8_t* p, size_t k, const float* x, size_t j0, const float* bias, float* y) {
  __m512 acc[kNmRowGroup];
  for (auto& a : acc) a = _mm512_setzero_ps();
  for (size_t t = 0; t < NmMaskWords(k); ++t) {
    uint64_t masks[kNmRowGroup];  // a constant-size copy (vector moves)
    std::memcpy(masks, p, sizeof(masks));
    p += sizeof(masks);
    __m512 xe[2], xo[2];
    SplitActivations(x, t * 64, k, xe[0], xo[0]);
    SplitActivations(x, t * 64 + 32, k, xe[1], xo[1]);
#pragma GCC unroll 16
    for (size_t r = 0; r < kNmRowGroup; ++r) {
      // The stream ahead, about a line per row read (the loads' addresses wait for popcounts, so
      // the core cannot run ahead of them as on a dense stream).
      _mm_prefetch(reinterpret_cast<const char*>(p) + kPrefetchBytes, _MM_HINT_T0);
#pragma GCC unroll 2
      for (size_t s = 0; s < 2; ++s) {
        __m512 even, odd;
        Expand32(p, static_cast<uint32_t>(masks[r] >> (32 * s)), even, odd);
        acc[r] = _mm512_fmadd_ps(odd, xo[s], _mm512_fmadd_ps(even, xe[s], acc[r]));
      }
    }
  }
  for (size_t r = 0; r < kNmRowGroup; ++r) Store(ReduceLanes(acc[r]), bias, j0 + r, y + j0 + r);
}

// Rows [0, rows) of one group expanded into tile [rows][ld] floats (ld = k rounded up to 32): per
// 32 columns, their 16 even columns then their 16 odd ones, zeros past k.
inline void ExpandGroup(const uint8_t* p, size_t rows, size_t k, float* tile, size_t ld) {
  for (size_t t = 0; t < NmMaskWords(k); ++t) {
    const uint8_t* masks = p;  // rows x u64, read one at a time (a copy loop becomes rep movs)
    p += rows * 8;
    for (size_t r = 0; r < rows; ++r) {
      for (size_t s = 0; s < 2 && t * 64 + 32 * s < ld; ++s) {
        __m512 even, odd;
        Expand32(p, static_cast<uint32_t>(NmLoadMask(masks, r) >> (32 * s)), even, odd);
        float* out = tile + r * ld + t * 64 + 32 * s;
        _mm512_storeu_ps(out, even);
        _mm512_storeu_ps(out + 16, odd);
      }
    }
  }
}

// y rows [i0, i0 + I) x tile rows [r0, r0 + J); xs: the activations split as the tile is.
template <size_t J, size_t I>
void TileKernel(const float* tile, size_t ld, size_t r0, const float* xs, size_t i0, const float* bias, size_t j0,
                float* y, size_t ldy) {
  __m512 acc[J][I];
  for (size_t a = 0; a < J; ++a) {
    for (size_t b = 0; b < I; ++b) acc[a][b] = _mm512_setzero_ps();
  }
  for (size_t c = 0; c < ld; c += 32) {
    __m512 xe[I], xo[I];
    for (size_t b = 0; b < I; ++b) {
      xe[b] = _mm512_loadu_ps(xs + (i0 + b) * ld + c);
      xo[b] = _mm512_loadu_ps(xs + (i0 + b) * ld + c + 16);
    }
    for (size_t a = 0; a < J; ++a) {
      const __m512 we = _mm512_loadu_ps(tile + (r0 + a) * ld + c), wo = _mm512_loadu_ps(tile + (r0 + a) * ld + c + 16);
      for (size_t b = 0; b < I; ++b) acc[a][b] = _mm512_fmadd_ps(wo, xo[b], _mm512_fmadd_ps(we, xe[b], acc[a][b]));
    }
  }
  for (size_t a = 0; a < J; ++a) {
    for (size_t b = 0; b < I; ++b) Store(ReduceLanes(acc[a][b]), bias, j0 + r0 + a, y + (i0 + b) * ldy + j0 + r0 + a);
  }
}

template <size_t J>
void TileRows(const float* tile, size_t ld, size_t r0, const float* xs, size_t m, const float* bias, size_t j0, float* y,
              size_t ldy) {
  size_t i = 0;
  for (; i + 4 <= m; i += 4) TileKernel<J, 4>(tile, ld, r0, xs, i, bias, j0, y, ldy);
  switch (m - i) {
    case 3: TileKernel<J, 3>(tile, ld, r0, xs, i, bias, j0, y, ldy); break;
    case 2: TileKernel<J, 2>(tile, ld, r0, xs, i, bias, j0, y, ldy); break;
    case 1: TileKernel<J, 1>(tile, ld, r0, xs, i, bias, j0, y, ldy); break;
    default: break;
  }
}

// Activation rows per pass over a thread's groups in the tiled path: each group is expanded once
// per pass, and the passes' split activations (32 rows of k floats) stay in cache across groups.
inline constexpr size_t kActivationBlock = 32;

inline void MatmulNmBf16(const float* x, size_t m, size_t k, NmWeights w, size_t n_begin, size_t n_end,
                         const float* bias, float* y, size_t ldy) {
  const size_t ld = (k + 31) / 32 * 32;
  if (m == 1 && (n_end - n_begin) % kNmRowGroup == 0) {
    for (size_t j0 = n_begin; j0 < n_end; j0 += kNmRowGroup) GroupTimesVector(w.data + j0 * w.row_bytes, k, x, j0, bias, y);
    return;
  }
  thread_local std::vector<float> tile, xs;
  xs.resize(m * ld);  // the activations split as the tile is, once per call
  for (size_t i = 0; i < m; ++i) {
    for (size_t c = 0; c < ld; c += 32) {
      __m512 even, odd;
      SplitActivations(x + i * k, c, k, even, odd);
      _mm512_storeu_ps(&xs[i * ld + c], even);
      _mm512_storeu_ps(&xs[i * ld + c + 16], odd);
    }
  }
  tile.resize(kNmRowGroup * ld);
  for (size_t i0 = 0; i0 < m; i0 += kActivationBlock) {
    const size_t mb = std::min(kActivationBlock, m - i0);
    const float* xb = xs.data() + i0 * ld;
    float* yb = y + i0 * ldy;
    for (size_t j0 = n_begin; j0 < n_end; j0 += kNmRowGroup) {
      const size_t rows = std::min(kNmRowGroup, n_end - j0);
      if (mb == 1 && rows == kNmRowGroup) {
        GroupTimesVector(w.data + j0 * w.row_bytes, k, x + i0 * k, j0, bias, yb);
        continue;
      }
      ExpandGroup(w.data + j0 * w.row_bytes, rows, k, tile.data(), ld);
      size_t r = 0;
      for (; r + 4 <= rows; r += 4) TileRows<4>(tile.data(), ld, r, xb, mb, bias, j0, yb, ldy);
      switch (rows - r) {
        case 3: TileRows<3>(tile.data(), ld, r, xb, mb, bias, j0, yb, ldy); break;
        case 2: TileRows<2>(tile.data(), ld, r, xb, mb, bias, j0, yb, ldy); break;
        case 1: TileRows<1>(tile.data(), ld, r, xb, mb, bias, j0, yb, ldy); break;
        default: break;
      }
    }
  }
}

}  // namespace tessera::NM_BF16_NAMESPACE
