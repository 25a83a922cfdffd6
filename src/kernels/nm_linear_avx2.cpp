// AVX2 N:M sparse kernels (nm_linear.h). AVX2 has no expand instruction, so each 8-bit slice of
// a row's mask selects a precomputed permutation: bf16 values widened to float32 are moved into
// their lanes with vpermps (pruned lanes zeroed), int8 values with pshufb. The bf16 kernel keeps
// nm_linear.h's 16 lanes as two 8-lane accumulators; the int8 kernel makes each block's exact
// integer dot with vpmaddubsw on |w| and sign(w) * x (no saturation: 2 * 127 * 127 < 2^15).
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/nm_linear.h"

namespace tessera {
namespace {

constexpr size_t kRowTile = 4;


// Lane l of entry `mask`: the rank of bit l among the set bits, with the sign bit set (kept), or 0
// (pruned): vpermps reads the low 3 bits, the sign bit becomes the keep mask.
struct PermTable {
  alignas(32) std::array<std::array<int32_t, 8>, 256> lanes{};
  constexpr PermTable() {
    for (unsigned mask = 0; mask < 256; ++mask) {
      int rank = 0;
      for (int l = 0; l < 8; ++l) {
        if ((mask >> l) & 1) lanes[mask][l] = static_cast<int32_t>(0x80000000u | static_cast<uint32_t>(rank++));
      }
    }
  }
};
constexpr PermTable kPerm;

// Byte l of entry `mask`: the rank of bit l among the set bits, or 0x80 (pshufb writes zero).
struct ShuffleTable {
  std::array<uint64_t, 256> bytes{};
  constexpr ShuffleTable() {
    for (unsigned mask = 0; mask < 256; ++mask) {
      uint64_t v = 0;
      int rank = 0;
      for (int l = 0; l < 8; ++l) v |= uint64_t{((mask >> l) & 1) ? static_cast<uint8_t>(rank++) : uint8_t{0x80}} << (8 * l);
      bytes[mask] = v;
    }
  }
};
constexpr ShuffleTable kShuffle;

// Eight columns whose keep mask is `keep`: the next popcount(keep) bf16 values at p, in place.
inline __m256 Expand8Bf16(const uint8_t*& p, unsigned keep) {
  const __m256i idx = _mm256_load_si256(reinterpret_cast<const __m256i*>(kPerm.lanes[keep].data()));
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  p += 2 * static_cast<size_t>(std::popcount(keep));
  const __m256 v = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  return _mm256_and_ps(_mm256_permutevar8x32_ps(v, idx), _mm256_castsi256_ps(_mm256_srai_epi32(idx, 31)));
}

// Sixteen columns of int8 values (keep: 16 mask bits): one pshufb over the next 16 bytes at p.
inline __m128i Expand16Int8(const uint8_t*& p, unsigned keep) {
  const unsigned lo = keep & 0xffu, hi = keep >> 8;
  const unsigned low_count = static_cast<unsigned>(std::popcount(lo));
  // The high half's sources follow the low half's; 0x80 entries stay >= 0x80 after the add.
  const uint64_t hi_ctrl = kShuffle.bytes[hi] + low_count * 0x0101010101010101ull;
  const __m128i ctrl = _mm_set_epi64x(static_cast<long long>(hi_ctrl), static_cast<long long>(kShuffle.bytes[lo]));
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  p += low_count + static_cast<unsigned>(std::popcount(hi));
  return _mm_shuffle_epi8(v, ctrl);
}

// Even and odd columns of 16 floats in column order (a: 0..7, b: 8..15), each 8 in order.
inline void SplitPairs(__m256 a, __m256 b, __m256& even, __m256& odd) {
  even = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0x88)), 0xD8));
  odd = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0xDD)), 0xD8));
}

// Expands rows [0, rows) of one group's stream into tile [rows][ld] (ld = k rounded up to 64,
// zeros past k): int8 values in column order, or bf16 values as float32 with each 32 columns
// stored as their 16 even columns then their 16 odd ones (nm_linear.h's lane l holds columns
// 2l and 2l + 1 of every 32).
void ExpandGroup(const uint8_t* p, size_t rows, size_t k, bool int8, void* tile, size_t ld) {
  for (size_t t = 0; t < NmMaskWords(k); ++t) {
    const uint8_t* masks = p;  // rows x u64, read one at a time (a copy loop becomes rep movs)
    p += rows * 8;
    for (size_t r = 0; r < rows; ++r) {
      for (size_t s = 0; s < 2; ++s) {
        const size_t col = r * ld + t * 64 + 32 * s;
        const unsigned keep = static_cast<unsigned>(NmLoadMask(masks, r) >> (32 * s));
        if (int8) {
          int8_t* out = static_cast<int8_t*>(tile) + col;
          _mm_storeu_si128(reinterpret_cast<__m128i*>(out), Expand16Int8(p, keep & 0xffffu));
          _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 16), Expand16Int8(p, keep >> 16));
          continue;
        }
        __m256 v[4];
        for (size_t q = 0; q < 4; ++q) v[q] = Expand8Bf16(p, (keep >> (8 * q)) & 0xffu);
        __m256 even_lo, odd_lo, even_hi, odd_hi;
        SplitPairs(v[0], v[1], even_lo, odd_lo);
        SplitPairs(v[2], v[3], even_hi, odd_hi);
        float* out = static_cast<float*>(tile) + col;
        _mm256_storeu_ps(out, even_lo);
        _mm256_storeu_ps(out + 8, even_hi);
        _mm256_storeu_ps(out + 16, odd_lo);
        _mm256_storeu_ps(out + 24, odd_hi);
      }
    }
  }
}

inline __m256 MaskedLoad8(const float* x, size_t remaining) {
  if (remaining >= 8) return _mm256_loadu_ps(x);
  alignas(32) float buf[8] = {};
  std::memcpy(buf, x, remaining * sizeof(float));
  return _mm256_load_ps(buf);
}

// nm_linear.h's reduction of lanes lo[0..7], hi[0..7] (= lanes 8..15).
inline float ReduceLanes(__m256 lo, __m256 hi) {
  const __m256 b = _mm256_add_ps(lo, hi);
  const __m128 c = _mm_add_ps(_mm256_castps256_ps128(b), _mm256_extractf128_ps(b, 1));
  const __m128 d = _mm_add_ps(c, _mm_movehl_ps(c, c));
  return _mm_cvtss_f32(_mm_add_ss(d, _mm_shuffle_ps(d, d, 1)));
}

// y rows [i0, i0 + I) x tile rows [r0, r0 + J); xs: the activations split as the tile is. Lane
// l < 8 of `lo` and lane l of `hi` (lane 8 + l) take the even, then the odd column of their pair.
template <size_t J, size_t I>
void TileKernel(const float* tile, size_t ld, size_t r0, const float* xs, size_t i0, const float* bias, size_t j0,
                float* y, size_t ldy) {
  __m256 lo[J][I], hi[J][I];
  for (size_t a = 0; a < J; ++a) {
    for (size_t b = 0; b < I; ++b) lo[a][b] = hi[a][b] = _mm256_setzero_ps();
  }
  for (size_t c = 0; c < ld; c += 32) {
    for (size_t a = 0; a < J; ++a) {
      const float* w = tile + (r0 + a) * ld + c;
      const __m256 we_lo = _mm256_loadu_ps(w), we_hi = _mm256_loadu_ps(w + 8);
      const __m256 wo_lo = _mm256_loadu_ps(w + 16), wo_hi = _mm256_loadu_ps(w + 24);
      for (size_t b = 0; b < I; ++b) {
        const float* x = xs + (i0 + b) * ld + c;
        lo[a][b] = _mm256_fmadd_ps(wo_lo, _mm256_loadu_ps(x + 16), _mm256_fmadd_ps(we_lo, _mm256_loadu_ps(x), lo[a][b]));
        hi[a][b] = _mm256_fmadd_ps(wo_hi, _mm256_loadu_ps(x + 24), _mm256_fmadd_ps(we_hi, _mm256_loadu_ps(x + 8), hi[a][b]));
      }
    }
  }
  for (size_t a = 0; a < J; ++a) {
    for (size_t b = 0; b < I; ++b) {
      const float sum = ReduceLanes(lo[a][b], hi[a][b]);
      const size_t j = j0 + r0 + a;
      y[(i0 + b) * ldy + j] = bias ? sum + bias[j] : sum;
    }
  }
}

template <size_t J>
void TileRows(const float* tile, size_t ld, size_t r0, const float* xs, size_t m, const float* bias, size_t j0, float* y,
              size_t ldy) {
  size_t i = 0;
  for (; i + 2 <= m; i += 2) TileKernel<J, 2>(tile, ld, r0, xs, i, bias, j0, y, ldy);
  if (i < m) TileKernel<J, 1>(tile, ld, r0, xs, i, bias, j0, y, ldy);
}

void MatmulNmBf16(const float* x, size_t m, size_t k, NmWeights w, size_t n_begin, size_t n_end, const float* bias,
                  float* y, size_t ldy) {
  const size_t ld = NmMaskWords(k) * 64;
  thread_local std::vector<float> tile, xs;
  tile.resize(kNmRowGroup * ld);
  xs.resize(m * ld);
  for (size_t i = 0; i < m; ++i) {  // the activations split as the tile is (zeros past k)
    for (size_t c = 0; c < ld; c += 32) {
      __m256 v[4];
      for (size_t q = 0; q < 4; ++q) {
        const size_t col = c + 8 * q;
        v[q] = col < k ? MaskedLoad8(x + i * k + col, k - col) : _mm256_setzero_ps();
      }
      __m256 even_lo, odd_lo, even_hi, odd_hi;
      SplitPairs(v[0], v[1], even_lo, odd_lo);
      SplitPairs(v[2], v[3], even_hi, odd_hi);
      float* out = &xs[i * ld + c];
      _mm256_storeu_ps(out, even_lo);
      _mm256_storeu_ps(out + 8, even_hi);
      _mm256_storeu_ps(out + 16, odd_lo);
      _mm256_storeu_ps(out + 24, odd_hi);
    }
  }
  for (size_t j0 = n_begin; j0 < n_end; j0 += kNmRowGroup) {
    const size_t rows = std::min(kNmRowGroup, n_end - j0);
    ExpandGroup(w.data + j0 * w.row_bytes, rows, k, false, tile.data(), ld);
    size_t r = 0;
    for (; r + 2 <= rows; r += 2) TileRows<2>(tile.data(), ld, r, xs.data(), m, bias, j0, y, ldy);
    if (r < rows) TileRows<1>(tile.data(), ld, r, xs.data(), m, bias, j0, y, ldy);
  }
}

inline int32_t HorizontalSum(__m256i v) {
  const __m128i a = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  const __m128i b = _mm_add_epi32(a, _mm_unpackhi_epi64(a, a));
  return _mm_cvtsi128_si32(_mm_add_epi32(b, _mm_shuffle_epi32(b, 1)));
}

void MatmulQ8NmInt8(Q8Rows x, size_t m, size_t k, NmWeights w, size_t n_begin, size_t n_end, const float* bias,
                    float* y, size_t ldy) {
  const size_t nb = k / 32, ld = NmMaskWords(k) * 64;
  const __m256i ones = _mm256_set1_epi16(1);
  thread_local std::vector<int8_t> tile;
  tile.resize(kNmRowGroup * ld);
  for (size_t j0 = n_begin; j0 < n_end; j0 += kNmRowGroup) {
    const size_t rows = std::min(kNmRowGroup, n_end - j0);
    ExpandGroup(w.data + j0 * w.row_bytes, rows, k, true, tile.data(), ld);
    for (size_t r = 0; r < rows; ++r) {
      const size_t j = j0 + r;
      const float scale = w.scales[j];
      for (size_t i0 = 0; i0 < m; i0 += kRowTile) {
        const size_t count = std::min(kRowTile, m - i0);
        float acc[kRowTile] = {};
        for (size_t b = 0; b < nb; ++b) {
          const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile.data() + r * ld + b * 32));
          const __m256i w_abs = _mm256_sign_epi8(wv, wv);
          for (size_t t = 0; t < count; ++t) {
            const size_t i = i0 + t;
            const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.q + i * k + b * 32));
            const __m256i pairs = _mm256_maddubs_epi16(w_abs, _mm256_sign_epi8(q, wv));
            const int32_t dot = HorizontalSum(_mm256_madd_epi16(pairs, ones));
            acc[t] = std::fma(static_cast<float>(dot), x.d[i * nb + b] * scale, acc[t]);
          }
        }
        for (size_t t = 0; t < count; ++t) y[(i0 + t) * ldy + j] = bias ? acc[t] + bias[j] : acc[t];
      }
    }
  }
}

}  // namespace

void FillAvx2Nm(KernelTable& t) {
  t.matmul_nm_bf16 = MatmulNmBf16;
  t.matmul_nm_bf16_isa = "avx2";
  t.matmul_q8_nm_int8 = MatmulQ8NmInt8;
  t.matmul_q8_nm_int8_isa = "avx2";
}

}  // namespace tessera
