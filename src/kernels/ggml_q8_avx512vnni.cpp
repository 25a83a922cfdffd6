// AVX-512 VNNI kernels of kernels/ggml_q8.h (GGUF q8_0, q4_0 and k-quants against q8 activations), on the
// building blocks of q8_avx512vnni_tiles.h; the result is the scalar reference's bit for bit.
//  - q8_0: the int8 tile as is (u8 operand q + 128), its binary16 block scales widened by
//    vcvtph2ps per block (Panel::s_half).
//  - q4_0: decode streams the nibbles (u8 operand u, offset 8) through DirectTile; GEMMs decode
//    each panel once into u8 weights and f32 scales for the int8 tile, as the int4 kernel does.
//  - q4_K, q5_K, q6_K: KTile decodes the codes in registers for decode and GEMM alike (a few
//    and/shift/or per 64-byte vector, amortised over the tile's rows): nibbles, the fifth (q5_K) or
//    fifth and sixth (q6_K) bits from their own stream, sub-block scales (and mins) widened from
//    bytes and multiplied by the super-block's binary16 d (dmin) once per block.
#include <immintrin.h>

#include <cstdint>
#include <type_traits>

#include "core/error.h"
#include "kernels/ggml_q8.h"
#include "kernels/kernels.h"
#include "kernels/q8.h"
#include "kernels/q8_avx512vnni_tiles.h"
#include "kernels/scratch.h"

namespace tessera {
namespace {

using namespace q8_vnni;

constexpr uint32_t kQ4_0 = 2, kQ8_0 = 8, kQ4_K = 12, kQ5_K = 13, kQ6_K = 14;
constexpr int32_t kQ4Offset = 8;  // q4_0 weights u - 8 enter as u

inline __m512 HalfScales(const uint16_t* s) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s)));
}

// q4_0 codes for DirectTile: the nibbles as they are, one binary16 scale per block.
struct Q4_0Codes {
  static constexpr size_t kPrefetch = kPrefetchBytes;
  const uint16_t* scales;  // group 0's [k/32][16]
  size_t scale_stride;
  __m512i nibble = _mm512_set1_epi8(0x0F);

  template <int G>
  void Block(size_t b, __m512 (&s)[G]) {
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) {
      const uint16_t* e = scales + g * scale_stride + b * kQ8Group;
      if (b % 2 == 0) _mm_prefetch(reinterpret_cast<const char*>(e) + kPrefetchBytes, _MM_HINT_T0);
      s[g] = HalfScales(e);
    }
  }
  __m512i Low(__m512i v, int) const { return _mm512_and_si512(v, nibble); }
  __m512i High(__m512i v, int) const { return _mm512_and_si512(_mm512_srli_epi16(v, 4), nibble); }
};

void MatmulQ8_0(Q8Rows x, size_t m, size_t k, const GgmlQ8Weights& wt, size_t n_begin, size_t n_end,
                const float* bias, float* y, size_t ldy) {
  const size_t nb = k / kQ8Block;
  const Rows rows{x.q, x.d, StartValues(x, m, nb, kInt8Offset, ThreadScratchBytes(m * nb * sizeof(int32_t))), k, nb};
  const Out out{y, ldy, bias, n_end};
  const size_t g_begin = n_begin / kQ8Group, g_end = (n_end + kQ8Group - 1) / kQ8Group;
  auto panel_at = [&](size_t g) {
    Panel p{wt.codes + g * (k * kQ8Group), k * kQ8Group, nullptr, nb * kQ8Group, kQ8Group};
    p.s_half = wt.scales + g * nb * kQ8Group;
    return p;
  };
  if (m <= kStreamMaxRows) {
    for (size_t g = g_begin; g < g_end; ++g) {
      const Panel panel = panel_at(g);
      for (size_t i0 = 0; i0 < m; i0 += kDirectMaxRows) {
        GemvTileFor(Min(kDirectMaxRows, m - i0))(rows, i0, panel, g * kQ8Group, out);
      }
    }
    return;
  }
  for (size_t g = g_begin; g < g_end; g += kGemmGroups) {
    const size_t groups = Min(kGemmGroups, g_end - g);
    const size_t next_groups = g + groups < g_end ? Min(kGemmGroups, g_end - g - groups) : 0;
    const Panel panel = panel_at(g);
    const bool first = g == g_begin;
    ForRowBlocks(m, [&](size_t i, size_t r) {
      const Panel p = WithNextShare(panel, wt.codes + (g + groups) * (k * kQ8Group), next_groups * k * kQ8Group, i, r, m);
      TileFor(r, groups, first && i == 0)(rows, i, p, g * kQ8Group, out);
    });
  }
}

// Decodes `groups` q4_0 groups into u8 weights (the nibbles, int8 layout) and f32 block scales.
void DecodeQ4_0Panel(const uint8_t* codes, const uint16_t* scales, size_t k, size_t groups, uint8_t* w, float* s) {
  const __m512i nibble = _mm512_set1_epi8(0x0F);
  const size_t nb = k / kQ8Block;
  for (size_t g = 0; g < groups; ++g) {
    const uint8_t* cg = codes + g * (k * kQ8Group / 2);
    uint8_t* wg = w + g * (k * kQ8Group);
    for (size_t h = 0; h < k / 8; ++h) {
      _mm_prefetch(reinterpret_cast<const char*>(cg + h * kStepBytes) + kPrefetchBytes, _MM_HINT_T0);
      const __m512i v = _mm512_loadu_si512(cg + h * kStepBytes);
      _mm512_store_si512(wg + 2 * h * kStepBytes, _mm512_and_si512(v, nibble));
      _mm512_store_si512(wg + (2 * h + 1) * kStepBytes, _mm512_and_si512(_mm512_srli_epi16(v, 4), nibble));
    }
    for (size_t b = 0; b < nb; ++b) _mm512_store_ps(s + (g * nb + b) * kQ8Group, HalfScales(scales + (g * nb + b) * kQ8Group));
  }
}

void MatmulQ4_0(Q8Rows x, size_t m, size_t k, const GgmlQ8Weights& wt, size_t n_begin, size_t n_end,
                const float* bias, float* y, size_t ldy) {
  const size_t nb = k / kQ8Block;
  const size_t g_begin = n_begin / kQ8Group, g_end = (n_end + kQ8Group - 1) / kQ8Group;
  const size_t code_stride = k * kQ8Group / 2, scale_stride = nb * kQ8Group;
  const Out out{y, ldy, bias, n_end};
  if (m <= kStreamMaxRows) {
    const Rows rows{x.q, x.d, StartValues(x, m, nb, kQ4Offset, ThreadScratchBytes(m * nb * sizeof(int32_t))), k, nb};
    DirectMatmul<Q4_0Codes>(rows, m, wt.codes, code_stride, g_begin, g_end, [&](size_t g) {
      return Q4_0Codes{wt.scales + g * scale_stride, scale_stride};
    }, out);
    return;
  }
  DecodedPanelGemm(x, m, k, kQ4Offset, wt.codes, code_stride, g_begin, g_end,
                   [&](size_t g, size_t groups, uint8_t* w, float* s) {
                     DecodeQ4_0Panel(wt.codes + g * code_stride, wt.scales + g * scale_stride, k, groups, w, s);
                   }, out);
}

// ---- k-quants -----------------------------------------------------------------------------------

// The activation side of a k-quant call: row i's codes, block scales and sums, and (q6_K) the
// start values of its 16-value sub-blocks, kMagicBits - 32 sum16[i, t].
struct KRows {
  const int8_t* q;
  const float* d;
  const int32_t* sum;
  const int32_t* init16;
  size_t k, nb;
};

// One k-quant type's weights for a tile: per group g (group 0's pointers, the next groups at the
// strides), decoded in registers. Block(b) loads block b's sub-block scales (and mins, and the q5_K
// high bits); Operand(g, h, half, v) turns code vector h (0..3) of the block into the u8 operand of
// its low (half 0) or high (half 1) four k values.
template <uint32_t kType, int G>
struct KCodes {
  static constexpr int kSubs = kType == kQ6_K ? 2 : 1;  // sub-blocks per 32-value block
  static constexpr bool kMins = kType != kQ6_K;
  const uint8_t* codes;
  size_t code_stride;
  const uint8_t* highs;
  size_t high_stride;
  const uint8_t* sub;
  size_t sub_stride;
  const uint16_t* super;
  size_t super_stride;
  __m512 d[G] = {}, dmin[G] = {}, s[G][kSubs] = {}, mn[G] = {};
  __m512i hv[G] = {};
  const __m512i nibble = _mm512_set1_epi8(0x0F);

  void Block(size_t b) {
#pragma GCC unroll 2
    for (int g = 0; g < G; ++g) {
      if (b % 8 == 0) {
        const uint16_t* sp = super + g * super_stride + (b / 8) * 2 * kQ8Group;
        d[g] = HalfScales(sp);
        if constexpr (kMins) dmin[g] = HalfScales(sp + kQ8Group);
      }
      if constexpr (kType == kQ6_K) {
        const uint8_t* sc = sub + g * sub_stride + 2 * b * kQ8Group;
#pragma GCC unroll 2
        for (int t = 0; t < 2; ++t) {
          const __m512i v = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sc + t * kQ8Group)));
          s[g][t] = _mm512_mul_ps(d[g], _mm512_cvtepi32_ps(v));
        }
      } else {
        // get_scale_min_k4 on 16 lanes: packed byte i of every row is one 16-byte vector.
        const uint8_t* packed = sub + g * sub_stride + (b / 8) * 12 * kQ8Group;
        auto byte = [&](size_t i) {
          return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(packed + i * kQ8Group)));
        };
        const size_t j = b % 8;
        const __m512i low6 = _mm512_set1_epi32(63), low4 = _mm512_set1_epi32(15);
        __m512i scv, mv;
        if (j < 4) {
          scv = _mm512_and_si512(byte(j), low6);
          mv = _mm512_and_si512(byte(j + 4), low6);
        } else {
          const __m512i both = byte(j + 4);
          scv = _mm512_or_si512(_mm512_and_si512(both, low4), _mm512_slli_epi32(_mm512_srli_epi32(byte(j - 4), 6), 4));
          mv = _mm512_or_si512(_mm512_srli_epi32(both, 4), _mm512_slli_epi32(_mm512_srli_epi32(byte(j), 6), 4));
        }
        s[g][0] = _mm512_mul_ps(d[g], _mm512_cvtepi32_ps(scv));
        mn[g] = _mm512_mul_ps(dmin[g], _mm512_cvtepi32_ps(mv));
      }
      if constexpr (kType == kQ5_K) hv[g] = _mm512_loadu_si512(highs + g * high_stride + b * 64);
    }
  }

  // Code vector h of block b: for q6_K its 16-value chunk's high bits are loaded with its first
  // vector (h even).
  __m512i Load(int g, size_t b, int h) {
    const uint8_t* src = codes + g * code_stride + (4 * b + h) * kStepBytes;
    _mm_prefetch(reinterpret_cast<const char*>(src) + kPrefetchBytes, _MM_HINT_T0);
    if constexpr (kType == kQ6_K) {
      if (h % 2 == 0) {
        const uint8_t* hp = highs + g * high_stride + (2 * b + h / 2) * 64;
        _mm_prefetch(reinterpret_cast<const char*>(hp) + kPrefetchBytes / 2, _MM_HINT_T0);
        hv[g] = _mm512_loadu_si512(hp);
      }
    }
    return _mm512_loadu_si512(src);
  }

  __m512i Operand(int g, int h, int half, __m512i v) const {
    const __m512i low = half == 0 ? _mm512_and_si512(v, nibble) : _mm512_and_si512(_mm512_srli_epi16(v, 4), nibble);
    if constexpr (kType == kQ4_K) return low;
    if constexpr (kType == kQ5_K) {
      // Bit p = 2 h + half of each byte to bit 4 (shifts within 16-bit lanes; the bits that cross
      // into the neighbouring byte land outside bit 4).
      const int p = 2 * h + half;
      __m512i bit;
      switch (p) {
        case 0: bit = _mm512_slli_epi16(hv[g], 4); break;
        case 1: bit = _mm512_slli_epi16(hv[g], 3); break;
        case 2: bit = _mm512_slli_epi16(hv[g], 2); break;
        case 3: bit = _mm512_slli_epi16(hv[g], 1); break;
        case 4: bit = hv[g]; break;
        case 5: bit = _mm512_srli_epi16(hv[g], 1); break;
        case 6: bit = _mm512_srli_epi16(hv[g], 2); break;
        default: bit = _mm512_srli_epi16(hv[g], 3); break;
      }
      return _mm512_or_si512(low, _mm512_and_si512(bit, _mm512_set1_epi8(0x10)));
    }
    // q6_K: bits 2 p, 2 p + 1 (p = 2 (h % 2) + half) to bits 4, 5.
    const int p = 2 * (h % 2) + half;
    __m512i bits;
    switch (p) {
      case 0: bits = _mm512_slli_epi16(hv[g], 4); break;
      case 1: bits = _mm512_slli_epi16(hv[g], 2); break;
      case 2: bits = hv[g]; break;
      default: bits = _mm512_srli_epi16(hv[g], 2); break;
    }
    return _mm512_or_si512(low, _mm512_and_si512(bits, _mm512_set1_epi8(0x30)));
  }
};

// Rows i0 .. i0 + R - 1 against G groups of k-quant codes (columns col .. col + 16 G - 1): the
// header's result, sub-block by sub-block, P partial integer accumulators per sub-block.
template <int R, int G, uint32_t kType, int P>
void KTile(const KRows& x, size_t i0, KCodes<kType, G> c, size_t col, const Out& o) {
  using Codes = KCodes<kType, G>;
  constexpr int kVectors = 4 / Codes::kSubs;  // code vectors per sub-block
  __m512 acc[R][G];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 2
    for (int g = 0; g < G; ++g) acc[r][g] = _mm512_setzero_ps();
  }
  const int8_t* q = x.q + i0 * x.k;
  for (size_t b = 0; b < x.nb; ++b) {
    c.Block(b);
    const int8_t* qb = q + b * kQ8Block;
#pragma GCC unroll 2
    for (int t = 0; t < Codes::kSubs; ++t) {
      __m512i dot[R][G][P];
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        const int32_t start = kType == kQ6_K ? x.init16[(i0 + r) * 2 * x.nb + 2 * b + t] : kMagicBits;
#pragma GCC unroll 2
        for (int g = 0; g < G; ++g) {
          dot[r][g][0] = _mm512_set1_epi32(start);
#pragma GCC unroll 4
          for (int part = 1; part < P; ++part) dot[r][g][part] = _mm512_setzero_si512();
        }
      }
#pragma GCC unroll 4
      for (int hh = 0; hh < kVectors; ++hh) {
        const int h = t * kVectors + hh;
        __m512i lo[G], hi[G];
#pragma GCC unroll 2
        for (int g = 0; g < G; ++g) {
          const __m512i v = c.Load(g, b, h);
          lo[g] = c.Operand(g, h, 0, v);
          hi[g] = c.Operand(g, h, 1, v);
        }
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
          const __m512i ql = _mm512_set1_epi32(Load32(qb + r * x.k + 8 * h));
          const __m512i qh = _mm512_set1_epi32(Load32(qb + r * x.k + 8 * h + 4));
#pragma GCC unroll 2
          for (int g = 0; g < G; ++g) {
            dot[r][g][(2 * hh) % P] = _mm512_dpbusd_epi32(dot[r][g][(2 * hh) % P], lo[g], ql);
            dot[r][g][(2 * hh + 1) % P] = _mm512_dpbusd_epi32(dot[r][g][(2 * hh + 1) % P], hi[g], qh);
          }
        }
      }
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        const __m512 dr = _mm512_set1_ps(x.d[(i0 + r) * x.nb + b]);
#pragma GCC unroll 2
        for (int g = 0; g < G; ++g) acc[r][g] = BlockFma(SumParts<P>(dot[r][g]), dr, c.s[g][t], acc[r][g]);
      }
    }
    if constexpr (Codes::kMins) {
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        const __m512 dr = _mm512_set1_ps(x.d[(i0 + r) * x.nb + b]);
        const __m512 neg_sum = _mm512_set1_ps(-static_cast<float>(x.sum[(i0 + r) * x.nb + b]));
#pragma GCC unroll 2
        for (int g = 0; g < G; ++g) acc[r][g] = _mm512_fmadd_ps(neg_sum, _mm512_mul_ps(dr, c.mn[g]), acc[r][g]);
      }
    }
  }
  StoreTile<R, G>(acc, i0, col, o);
}

template <uint32_t kType, int G>
using KTileFn = void (*)(const KRows&, size_t, KCodes<kType, G>, size_t, const Out&);

template <uint32_t kType>
KTileFn<kType, 1> KDecodeTileFor(size_t rows) {
  switch (rows) {
    case 1: return KTile<1, 1, kType, DecodeParts(1)>;
    case 2: return KTile<2, 1, kType, DecodeParts(2)>;
    case 3: return KTile<3, 1, kType, DecodeParts(3)>;
    default: return KTile<4, 1, kType, DecodeParts(4)>;
  }
}

template <uint32_t kType, int G>
KTileFn<kType, G> KGemmTileFor(size_t rows) {
  switch (rows) {
    case 1: return KTile<1, G, kType, 1>;
    case 2: return KTile<2, G, kType, 1>;
    case 3: return KTile<3, G, kType, 1>;
    case 4: return KTile<4, G, kType, 1>;
    case 5: return KTile<5, G, kType, 1>;
    default: return KTile<6, G, kType, 1>;
  }
}

template <uint32_t kType>
void MatmulK(Q8Rows x, size_t m, size_t k, const GgmlQ8Weights& wt, size_t n_begin, size_t n_end, const float* bias,
             float* y, size_t ldy) {
  const size_t nb = k / kQ8Block;
  const GgmlQ8Sizes sizes = GgmlQ8SizesOf(kType, kQ8Group, k);  // one group's parts
  const int32_t* init16 = kType == kQ6_K ? GgmlQ6KStartValues(x.q, m, k, kMagicBits) : nullptr;
  const KRows rows{x.q, x.d, x.sum, init16, k, nb};
  const Out out{y, ldy, bias, n_end};
  const size_t g_begin = n_begin / kQ8Group, g_end = (n_end + kQ8Group - 1) / kQ8Group;
  auto codes_at = [&](size_t g, auto groups) {
    using C = KCodes<kType, decltype(groups)::value>;
    return C{wt.codes + g * sizes.codes, sizes.codes, wt.highs + g * sizes.highs, sizes.highs,
             wt.sub + g * sizes.sub, sizes.sub, wt.scales + g * sizes.scales, sizes.scales};
  };
  if (m <= kStreamMaxRows) {
    for (size_t g = g_begin; g < g_end; ++g) {
      const auto c = codes_at(g, std::integral_constant<int, 1>{});
      for (size_t i0 = 0; i0 < m; i0 += kDirectMaxRows) {
        KDecodeTileFor<kType>(Min(kDirectMaxRows, m - i0))(rows, i0, c, g * kQ8Group, out);
      }
    }
    return;
  }
  for (size_t g = g_begin; g < g_end; g += kGemmGroups) {
    if (g + 1 < g_end) {
      const auto c = codes_at(g, std::integral_constant<int, 2>{});
      ForRowBlocks(m, [&](size_t i, size_t r) { KGemmTileFor<kType, 2>(r)(rows, i, c, g * kQ8Group, out); });
    } else {
      const auto c = codes_at(g, std::integral_constant<int, 1>{});
      ForRowBlocks(m, [&](size_t i, size_t r) { KGemmTileFor<kType, 1>(r)(rows, i, c, g * kQ8Group, out); });
    }
  }
}

void MatmulQ8Ggml(Q8Rows x, size_t m, size_t k, const GgmlQ8Weights& w, size_t n_begin, size_t n_end,
                  const float* bias, float* y, size_t ldy) {
  if (m == 0 || n_begin >= n_end) return;
  switch (w.type) {
    case kQ8_0: return MatmulQ8_0(x, m, k, w, n_begin, n_end, bias, y, ldy);
    case kQ4_0: return MatmulQ4_0(x, m, k, w, n_begin, n_end, bias, y, ldy);
    case kQ4_K: return MatmulK<kQ4_K>(x, m, k, w, n_begin, n_end, bias, y, ldy);
    case kQ5_K: return MatmulK<kQ5_K>(x, m, k, w, n_begin, n_end, bias, y, ldy);
    case kQ6_K: return MatmulK<kQ6_K>(x, m, k, w, n_begin, n_end, bias, y, ldy);
    default: TESSERA_CHECK(false);
  }
}

}  // namespace

void FillAvx512VnniGgmlQ8(KernelTable& t) {
  t.matmul_q8_ggml = MatmulQ8Ggml;
  t.matmul_q8_ggml_isa = "avx512vnni";
}

}  // namespace tessera
