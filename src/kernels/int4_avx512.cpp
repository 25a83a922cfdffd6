// AVX-512 exact int4 matmul (kernels/int4.h): the scalar reference's bits. One lane per output
// row of a packed 16-row group; each 64-byte code vector gives 8 k values of the 16 rows, taken
// in increasing k (low nibbles of byte kk = k + kk, high nibbles = k + 4 + kk), dequantized as
// float(q - z) * s (one rounding, as the reference) and accumulated by one FMA per k, so every
// lane runs the reference's sequential sum. Independent accumulators come from rows and groups:
// a tile is R <= 4 activation rows x GN groups (GN = 4 while 4 groups remain), so decode keeps 4
// FMA chains and 4 weight streams in flight.
#include <immintrin.h>

#include <cstdint>

#include "kernels/int4.h"
#include "kernels/kernels.h"

namespace tessera {
namespace {

constexpr size_t kGroupRows = kQ8Group;    // output rows per packed group (one zmm of lanes)
constexpr size_t kVectorBytes = 64;        // one code vector: 8 k values x 16 rows
constexpr size_t kPrefetchBytes = 1024;    // software prefetch distance along each code stream
constexpr size_t kMaxRows = 4;
constexpr int kWideGroups = 4;

inline __mmask16 Mask16(size_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << n) - 1);
}

struct Tile {
  const float* x;  // row i0
  size_t k;
  const uint8_t* codes;  // group g0's codes
  const uint8_t* zeros;  // group g0's zeros
  const float* scales;
  size_t code_stride, meta_stride, group;
};

template <int R, int GN>
void ExactTile(const Tile& t, size_t col, float* y, size_t ldy, const float* bias, size_t n_end) {
  __m512 acc[R][GN];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int g = 0; g < GN; ++g) acc[r][g] = _mm512_setzero_ps();
  }
  const __m512i nibble = _mm512_set1_epi32(0x0F);
  const size_t groups = t.k / t.group, vectors_per_group = t.group / 8;
  for (size_t q = 0; q < groups; ++q) {
    __m512i zero[GN];
    __m512 scale[GN];
#pragma GCC unroll 4
    for (int g = 0; g < GN; ++g) {
      const size_t e = g * t.meta_stride + q * kGroupRows;
      zero[g] = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(t.zeros + e)));
      scale[g] = _mm512_loadu_ps(t.scales + e);
    }
    for (size_t v = q * vectors_per_group; v < (q + 1) * vectors_per_group; ++v) {
      __m512i codes[GN];
#pragma GCC unroll 4
      for (int g = 0; g < GN; ++g) {
        const uint8_t* src = t.codes + g * t.code_stride + v * kVectorBytes;
        _mm_prefetch(reinterpret_cast<const char*>(src) + kPrefetchBytes, _MM_HINT_T0);
        codes[g] = _mm512_loadu_si512(src);
      }
#pragma GCC unroll 8
      for (int step = 0; step < 8; ++step) {  // k = 8 v + step
        const int shift = (step % 4) * 8 + (step / 4) * 4;
        __m512 w[GN];
#pragma GCC unroll 4
        for (int g = 0; g < GN; ++g) {
          const __m512i qv = _mm512_and_si512(_mm512_srli_epi32(codes[g], shift), nibble);
          w[g] = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(qv, zero[g])), scale[g]);
        }
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          const __m512 xv = _mm512_set1_ps(t.x[r * t.k + 8 * v + step]);
#pragma GCC unroll 4
          for (int g = 0; g < GN; ++g) acc[r][g] = _mm512_fmadd_ps(w[g], xv, acc[r][g]);
        }
      }
    }
  }
#pragma GCC unroll 4
  for (int g = 0; g < GN; ++g) {
    const size_t c = col + g * kGroupRows;
    if (c >= n_end) break;
    const __mmask16 mask = Mask16(n_end - c);
    const __m512 b = bias ? _mm512_maskz_loadu_ps(mask, bias + c) : _mm512_setzero_ps();
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      // The reference adds the bias only when there is one (acc + 0 would turn -0 into +0).
      _mm512_mask_storeu_ps(y + r * ldy + c, mask, bias ? _mm512_add_ps(acc[r][g], b) : acc[r][g]);
    }
  }
}

using TileFn = void (*)(const Tile&, size_t, float*, size_t, const float*, size_t);

template <int GN>
TileFn TileFor(size_t rows) {
  static_assert(kMaxRows == 4, "one case per row count");
  switch (rows) {
    case 1: return ExactTile<1, GN>;
    case 2: return ExactTile<2, GN>;
    case 3: return ExactTile<3, GN>;
    default: return ExactTile<4, GN>;
  }
}

void MatmulInt4(const float* x, size_t m, size_t k, Int4Weights w, size_t n_begin, size_t n_end, const float* bias,
                float* y, size_t ldy) {
  if (m == 0 || n_begin >= n_end) return;
  const size_t code_stride = k * kGroupRows / 2, meta_stride = (k / w.group) * kGroupRows;
  const size_t g_end = (n_end + kGroupRows - 1) / kGroupRows;
  for (size_t g = n_begin / kGroupRows; g < g_end;) {
    const size_t groups = g + kWideGroups <= g_end ? kWideGroups : 1;
    for (size_t i0 = 0; i0 < m; i0 += kMaxRows) {
      const size_t rows = m - i0 < kMaxRows ? m - i0 : kMaxRows;
      const Tile t{x + i0 * k, k, w.codes + g * code_stride, w.zeros + g * meta_stride, w.scales + g * meta_stride,
                   code_stride, meta_stride, w.group};
      (groups == kWideGroups ? TileFor<kWideGroups>(rows) : TileFor<1>(rows))(t, g * kGroupRows, y + i0 * ldy, ldy,
                                                                              bias, n_end);
    }
    g += groups;
  }
}

}  // namespace

void FillAvx512Int4(KernelTable& t) {
  t.matmul_int4 = MatmulInt4;
  t.matmul_int4_isa = "avx512";
}

}  // namespace tessera
