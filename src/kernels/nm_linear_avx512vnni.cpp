// AVX-512 VNNI + VBMI2 N:M sparse int8 kernel (nm_linear.h, q8.h's result). Per 64 columns of a
// weight row, its 64 mask bits expand the next popcount kept int8 values into their byte lanes
// (vpexpandb, zeros elsewhere). vpdpbusd wants one unsigned operand: the expanded weights are
// flipped to offset binary (w + 128, a pruned column 128) and 128 * the activation block's sum
// (q8.h's sum[b]) is subtracted after the reduction, so every dot is exact. Sixteen
// weight rows' vectors are then reduced together (a transpose-add) into one vector of per-row
// block dots for each of the chunk's two 32-column blocks, and f32 accumulation follows q8.h:
// acc = fma(float(dot_b), d[i, b] * scale[j], acc), block by block.
#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/nm_linear.h"

namespace tessera {
namespace {

constexpr size_t kRowTile = 4;


// v[r] (r < 16): lanes 0..7 partial dots of block "lo", lanes 8..15 of block "hi" for weight row
// r. Returns per-row totals: lo[r], hi[r]. Integer adds, so any order gives the same sums.
inline void Reduce16x16(const __m512i* v, __m512i& lo, __m512i& hi) {
  __m512i a[8], b[4], d[2];
  for (int r = 0; r < 8; ++r) {
    a[r] = _mm512_add_epi32(_mm512_unpacklo_epi32(v[2 * r], v[2 * r + 1]), _mm512_unpackhi_epi32(v[2 * r], v[2 * r + 1]));
  }
  // a[r], 128-bit lane L: [row 2r lanes 0+2, row 2r+1 lanes 0+2, row 2r lanes 1+3, row 2r+1 lanes 1+3]
  // of that lane's 4. b[q] (64-bit unpacks move pairs of those): rows 4q .. 4q+3, each the sum of
  // its lanes 4L .. 4L+3.
  for (int q = 0; q < 4; ++q) {
    b[q] = _mm512_add_epi32(_mm512_unpacklo_epi64(a[2 * q], a[2 * q + 1]), _mm512_unpackhi_epi64(a[2 * q], a[2 * q + 1]));
  }
  for (int h = 0; h < 2; ++h) {
    const __m512i even = _mm512_shuffle_i32x4(b[2 * h], b[2 * h + 1], 0x88);  // 128-bit lanes 0, 2 of each
    const __m512i odd = _mm512_shuffle_i32x4(b[2 * h], b[2 * h + 1], 0xDD);   // lanes 1, 3
    d[h] = _mm512_add_epi32(even, odd);  // [rows 8h..8h+3 lo, same hi, rows 8h+4..8h+7 lo, same hi]
  }
  lo = _mm512_shuffle_i32x4(d[0], d[1], 0x88);
  hi = _mm512_shuffle_i32x4(d[0], d[1], 0xDD);
}

// Prefill: from this many activation rows on, each group is expanded once into the dense int8
// format's layout (q8.h: [k/4][16][4] bytes of w + 128) and multiplied by the dense int8 kernel,
// whose result nm-int8 is defined to equal bit for bit.
constexpr size_t kDenseKernelRows = 16;

void GroupToQ8Layout(const uint8_t* p, size_t rows, size_t k, uint8_t* out) {
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  std::memset(out, 0x80, k * kNmRowGroup);  // missing rows: zero weights
  alignas(64) uint8_t dense[64];
  for (size_t t = 0; t < NmMaskWords(k); ++t) {
    const uint8_t* masks = p;
    p += rows * 8;
    for (size_t r = 0; r < rows; ++r) {
      const uint64_t keep = NmLoadMask(masks, r);
      __m512i raw = _mm512_loadu_si512(p);
      asm("" : "+v"(raw));
      _mm512_store_si512(dense, _mm512_xor_si512(_mm512_maskz_expand_epi8(keep, raw), flip));
      p += std::popcount(keep);
      // Quad q of this chunk (columns 64 t + 4 q ..) goes to row r's 4 bytes of its 64-byte line.
      const size_t quads = std::min<size_t>(16, (k - 64 * t) / 4);
      for (size_t q = 0; q < quads; ++q) std::memcpy(out + (16 * t + q) * 64 + r * 4, dense + 4 * q, 4);
    }
  }
}

void MatmulQ8NmInt8(Q8Rows x, size_t m, size_t k, NmWeights w, size_t n_begin, size_t n_end, const float* bias,
                    float* y, size_t ldy) {
  const size_t nb = k / 32;
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  if (m >= kDenseKernelRows) {
    const KernelTable& dense = KernelsFor(Isa::kAvx512);
    thread_local std::vector<uint8_t> group;
    group.resize(k * kNmRowGroup);
    for (size_t j0 = n_begin; j0 < n_end; j0 += kNmRowGroup) {
      const size_t rows = std::min(kNmRowGroup, n_end - j0);
      float scales[kNmRowGroup] = {};
      std::memcpy(scales, w.scales + j0, rows * sizeof(float));
      GroupToQ8Layout(w.data + j0 * w.row_bytes, rows, k, group.data());
      dense.matmul_q8_int8(x, m, k, group.data(), scales, 0, rows, bias ? bias + j0 : nullptr, y + j0, ldy);
    }
    return;
  }
  for (size_t j0 = n_begin; j0 < n_end; j0 += kNmRowGroup) {
    const size_t rows = std::min(kNmRowGroup, n_end - j0);
    const __mmask16 row_mask = static_cast<__mmask16>((1u << rows) - 1);
    const __m512 scale = _mm512_maskz_loadu_ps(row_mask, w.scales + j0);
    for (size_t i0 = 0; i0 < m; i0 += kRowTile) {
      const size_t tile = std::min(kRowTile, m - i0);
      const uint8_t* p = w.data + j0 * w.row_bytes;  // the group's stream, read once per tile
      __m512 acc[kRowTile];
      for (size_t t = 0; t < kRowTile; ++t) acc[t] = _mm512_setzero_ps();
      for (size_t b = 0; b < nb; b += 2) {
        const bool pair = b + 1 < nb;
        const __mmask64 x_keep = pair ? ~__mmask64{0} : __mmask64{0xffffffffu};
        const uint8_t* masks = p;  // rows x u64, read one at a time (a copy loop becomes rep movs)
        p += rows * 8;
        __m512i wv[kNmRowGroup];  // offset binary: w + 128, pruned columns 128
        for (size_t r = 0; r < kNmRowGroup; ++r) {
          if (r < rows) {
            // Register-form expand: the memory form is several times slower on Zen 4, and the
            // empty asm keeps the compiler from folding the load back into it.
            __m512i raw = _mm512_loadu_si512(p);
            asm("" : "+v"(raw));
            wv[r] = _mm512_xor_si512(_mm512_maskz_expand_epi8(NmLoadMask(masks, r), raw), flip);
            p += std::popcount(NmLoadMask(masks, r));
          } else {
            wv[r] = flip;
          }
        }
        for (size_t t = 0; t < tile; ++t) {
          const size_t i = i0 + t;
          const __m512i xq = _mm512_maskz_loadu_epi8(x_keep, x.q + i * k + b * 32);
          __m512i v[kNmRowGroup];
          for (size_t r = 0; r < kNmRowGroup; ++r) v[r] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wv[r], xq);
          __m512i lo, hi;
          Reduce16x16(v, lo, hi);
          // sum (w + 128) q = dot + 128 sum q: the block sums of the activations undo the offset.
          lo = _mm512_sub_epi32(lo, _mm512_set1_epi32(128 * x.sum[i * nb + b]));
          if (pair) hi = _mm512_sub_epi32(hi, _mm512_set1_epi32(128 * x.sum[i * nb + b + 1]));
          const float* d = x.d + i * nb;
          acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(lo), _mm512_mul_ps(_mm512_set1_ps(d[b]), scale), acc[t]);
          if (pair) acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(hi), _mm512_mul_ps(_mm512_set1_ps(d[b + 1]), scale), acc[t]);
        }
      }
      const __m512 bias_v = bias ? _mm512_maskz_loadu_ps(row_mask, bias + j0) : _mm512_setzero_ps();
      for (size_t t = 0; t < tile; ++t) {
        const __m512 out = bias ? _mm512_add_ps(acc[t], bias_v) : acc[t];
        _mm512_mask_storeu_ps(y + (i0 + t) * ldy + j0, row_mask, out);
      }
    }
  }
}

}  // namespace

void FillAvx512VnniNm(KernelTable& t) {
  t.matmul_q8_nm_int8 = MatmulQ8NmInt8;
  t.matmul_q8_nm_int8_isa = "avx512vnni";
}

}  // namespace tessera
