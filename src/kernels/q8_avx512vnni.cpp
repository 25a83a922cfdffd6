// AVX-512 VNNI q8 kernels (kernels/q8.h): the activation quantizer and the integer matmuls
// against MXFP4, int8 and int4 (kernels/int4.h) weights. Every result has the scalar reference's bits (reference.cpp):
// the integer block dot products are exact in any order, and the f32 part is the reference's
// sequence acc = fmaf(float(dot_b), d[i, b] * s[j, b], acc) over b = 0 .. k/32 - 1, one lane per
// output column.
//
// vpdpbusd multiplies unsigned by signed bytes. The weights are the unsigned operand, shifted by
// an offset o (int8: stored as W8 + 128, o = 128; MXFP4: decoded by vpermb to 2 E2M1 + 12 in
// [0, 24], o = 12; int4: q - z + 16 in [1, 31], o = 16), the activations the signed one (four bytes broadcast to the 16 lanes), so a
// block gives raw = dot + o sum[i, b]: the int32 accumulator of a block starts at
// kMagicBits - o sum[i, b] (precomputed per call; one broadcast load per block) and ends at
// kMagicBits + dot. kMagicBits are the f32 bits of 1.5 * 2^23; because |dot| <= 32 * 128 * 127
// < 2^22, that integer read as f32 is exactly 1.5 * 2^23 + dot, and one vsubps gives float(dot)
// exactly (no separate offset correction, no vcvtdq2ps).
//
// Cost model (this machine, bench/q8_bench.cpp vnni_peak): vpdpbusd zmm issues 2 per cycle, on
// the same two ports as the f32 vector ops. Per row, group and block the tile needs 8 vpdpbusd
// and 3 f32 ops (float(dot), d * s, the FMA: the reference's sequence has no cheaper form), so a
// GEMM can reach at most 8 / 11 = 73% of the vpdpbusd peak; MXFP4 decoding (vpermb) is kept out
// of the GEMM's inner loop by decoding each panel once.
//
// Lanes = the 16 output columns of one packed group (kernels/q8.h); one k step of a group is one
// 64-byte vector (int8: 4 k values per column; MXFP4: 8, low nibbles the first 4).
//  - Tile<R, G>: R rows x G groups, u8 weights already in the int8 layout (int8 weights as stored,
//    or an MXFP4 panel decoded once per call and per G groups into scratch, kept in L2 while all
//    row blocks pass over it), block scales as f32 vectors. R * G int32 and R * G f32 accumulators
//    stay in registers for the whole k; every weight vector is loaded once per row block and
//    feeds R vpdpbusd. GEMMs (m > kDirectMaxRows) use R = kGemmRows, G = kGemmGroups and
//    prefetch the next panel while computing this one; decode-sized int8 calls use R = m,
//    one group and DecodeParts(R) partial accumulators, streaming.
//  - DirectTile<R, 1, Codes> (m <= kDirectMaxRows, decode): MXFP4 or int4 codes decoded in
//    registers as they stream (Mxfp4Codes: vpermb on the low nibbles and on the word-shifted high
//    nibbles, scales by vscalefps; Int4Codes: the nibbles plus the zero points' offsets).
// The codes of consecutive groups are contiguous, so a thread's column chunk is one sequential
// stream of weights and one of scales.
// Nothing here may run before the CPU check: no dynamic initialisers and no out-of-line STL code.
#include <immintrin.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "kernels/kernels.h"
#include "kernels/int4.h"
#include "kernels/q8.h"
#include "kernels/scratch.h"

#include "kernels/q8_avx512vnni_tiles.h"

namespace tessera {
namespace {

using namespace q8_vnni;

constexpr float kTinyAmax = 1e-30f;                  // reference.cpp kQ8TinyAmax

// 2 E2M1(c) + 12 for the 16 codes c, repeated for the four 16-byte quarters: vpermb reads 6 index
// bits, so the nibble's neighbour in bits 4-5 does not matter.
alignas(64) constexpr uint8_t kMxfp4Lut[64] = {
    12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0,  //
    12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0,  //
    12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0,  //
    12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0};


// ---- quantizer ----------------------------------------------------------------------------------

// Per block: amax as the integer maximum of the |x| bit patterns (the order of non-negative
// floats; a NaN or inf shows up as bits >= 0x7f800000), then the reference's f32 divisions and
// vcvtps2dq, which rounds to nearest even in the default MXCSR mode like nearbyint.
void QuantizeQ8(const float* x, size_t k, int8_t* q, float* d, int32_t* sum) {
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff);
  const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
  for (size_t b = 0; b < k / kQ8Block; ++b) {
    const float* xb = x + b * kQ8Block;
    int8_t* qb = q + b * kQ8Block;
    const __m512 v0 = _mm512_loadu_ps(xb), v1 = _mm512_loadu_ps(xb + 16);
    const __m512i a = _mm512_max_epu32(_mm512_and_si512(_mm512_castps_si512(v0), abs_mask),
                                       _mm512_and_si512(_mm512_castps_si512(v1), abs_mask));
    const uint32_t amax_bits = _mm512_reduce_max_epu32(a);
    float amax;
    std::memcpy(&amax, &amax_bits, sizeof(amax));
    if (amax_bits >= 0x7f800000u || amax < kTinyAmax) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(qb), _mm256_setzero_si256());
      sum[b] = 0;
      d[b] = amax_bits >= 0x7f800000u ? std::numeric_limits<float>::quiet_NaN() : 0.0f;
      continue;
    }
    d[b] = amax / 127.0f;
    const __m512 inv = _mm512_set1_ps(127.0f / amax);
    __m512i i0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, inv));
    __m512i i1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, inv));
    i0 = _mm512_min_epi32(_mm512_max_epi32(i0, lo), hi);
    i1 = _mm512_min_epi32(_mm512_max_epi32(i1, lo), hi);
    sum[b] = _mm512_reduce_add_epi32(_mm512_add_epi32(i0, i1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(qb), _mm512_cvtepi32_epi8(i0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(qb + 16), _mm512_cvtepi32_epi8(i1));
  }
}



// The f32 scales 2^(e - 128) of 16 E8M0 bytes (e < 255), exact, e = 0 and 1 as subnormals.
inline __m512 Mxfp4Scales(const uint8_t* e) {
  const __m512i ei = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(e)));
  return _mm512_scalef_ps(_mm512_set1_ps(1.0f),
                          _mm512_cvtepi32_ps(_mm512_sub_epi32(ei, _mm512_set1_epi32(128))));
}

// The u8 operand offsets of one int4 weight group (kernels/int4.h) for 16 rows: lane r holds the
// byte 16 - z[r] four times, so that code + offset = (q - z) + 16 lies in [1, 31] (o = 16).
inline __m512i Int4Offsets(const uint8_t* zeros) {
  const __m512i z = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(zeros)));
  return _mm512_mullo_epi32(_mm512_sub_epi32(_mm512_set1_epi32(kInt4Offset), z), _mm512_set1_epi32(0x01010101));
}

// The two 4-bit code formats the decode tile reads in the packed layout (code vectors of 8 k
// values, low nibbles the first 4): how a code vector becomes vpdpbusd's u8 operands, and the
// scales of each block. Block(b, s) is called at every block before its codes; group g's data
// follows group 0's at the strides given.
// MXFP4: vpermb through 2 E2M1 + 12, one E8M0 scale per block.
struct Mxfp4Codes {
  static constexpr size_t kPrefetch = kPrefetchBytes;
  const uint8_t* scales;  // group 0's [k/32][16] E8M0 bytes
  size_t scale_stride;
  __m512i lut = _mm512_load_si512(kMxfp4Lut);

  template <int G>
  void Block(size_t b, __m512 (&s)[G]) {
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) {
      const uint8_t* e = scales + g * scale_stride + b * kQ8Group;
      if (b % 4 == 0) _mm_prefetch(reinterpret_cast<const char*>(e) + kPrefetchBytes, _MM_HINT_T0);
      s[g] = Mxfp4Scales(e);
    }
  }
  __m512i Low(__m512i v, int) const { return _mm512_permutexvar_epi8(v, lut); }
  __m512i High(__m512i v, int) const { return _mm512_permutexvar_epi8(_mm512_srli_epi16(v, 4), lut); }
};

// int4: the nibble plus its group's offsets (Int4Offsets); zeros and f32 scales change once per
// weight group of blocks_per_group blocks.
struct Int4Codes {
  static constexpr size_t kPrefetch = kInt4PrefetchBytes;
  const uint8_t* zeros;  // group 0's [k/G][16]
  const float* scales;
  size_t meta_stride, blocks_per_group;
  __m512i nibble = _mm512_set1_epi8(0x0F);
  __m512i offset[kDirectGroups] = {};

  template <int G>
  void Block(size_t b, __m512 (&s)[G]) {
    if (b % blocks_per_group != 0) return;
    const size_t t = b / blocks_per_group;
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) {
      const uint8_t* z = zeros + g * meta_stride + t * kQ8Group;
      const float* sc = scales + g * meta_stride + t * kQ8Group;
      // The zeros and scales of a later weight group: small streams beside the codes' that the
      // hardware prefetcher would otherwise only start on a miss.
      _mm_prefetch(reinterpret_cast<const char*>(z) + kInt4MetaAhead * kQ8Group, _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(sc + kInt4MetaAhead * kQ8Group), _MM_HINT_T0);
      offset[g] = Int4Offsets(z);
      s[g] = _mm512_loadu_ps(sc);
    }
  }
  __m512i Low(__m512i v, int g) const { return _mm512_add_epi8(_mm512_and_si512(v, nibble), offset[g]); }
  __m512i High(__m512i v, int g) const {
    return _mm512_add_epi8(_mm512_and_si512(_mm512_srli_epi16(v, 4), nibble), offset[g]);
  }
};

void MatmulQ8Int8(Q8Rows x, size_t m, size_t k, const uint8_t* values, const float* scales, size_t n_begin,
                  size_t n_end, const float* bias, float* y, size_t ldy) {
  if (m == 0 || n_begin >= n_end) return;
  const size_t nb = k / kQ8Block;
  const Rows rows{x.q, x.d, StartValues(x, m, nb, kInt8Offset, ThreadScratchBytes(m * nb * sizeof(int32_t))), k, nb};
  const Out out{y, ldy, bias, n_end};
  const size_t g_end = (n_end + kQ8Group - 1) / kQ8Group;
  if (m <= kStreamMaxRows) {
    for (size_t g = n_begin / kQ8Group; g < g_end; ++g) {
      const Panel panel{values + g * (k * kQ8Group), k * kQ8Group, scales + g * kQ8Group, kQ8Group, 0};
      for (size_t i0 = 0; i0 < m; i0 += kDirectMaxRows) {
        GemvTileFor(Min(kDirectMaxRows, m - i0))(rows, i0, panel, g * kQ8Group, out);
      }
    }
    return;
  }
  for (size_t g = n_begin / kQ8Group; g < g_end; g += kGemmGroups) {
    const size_t groups = Min(kGemmGroups, g_end - g);
    // Per-row scales: the same vector for every block. The first row block prefetches the next
    // panel; the first panel of the call streams its weights itself.
    const size_t next_groups = g + groups < g_end ? Min(kGemmGroups, g_end - g - groups) : 0;
    const Panel panel{values + g * (k * kQ8Group), k * kQ8Group, scales + g * kQ8Group, kQ8Group, 0};
    const bool first = g == n_begin / kQ8Group;
    ForRowBlocks(m, [&](size_t i, size_t r) {
      const Panel p = WithNextShare(panel, values + (g + groups) * (k * kQ8Group), next_groups * k * kQ8Group, i, r, m);
      TileFor(r, groups, first && i == 0)(rows, i, p, g * kQ8Group, out);
    });
  }
}

// Decodes `groups` MXFP4 groups into u8 weights (2 E2M1 + 12, int8 layout) and f32 block scales.
void DecodeMxfp4Panel(const uint8_t* codes, const uint8_t* scales, size_t k, size_t groups, uint8_t* w,
                      float* s) {
  const __m512i lut = _mm512_load_si512(kMxfp4Lut);
  const size_t nb = k / kQ8Block;
  for (size_t g = 0; g < groups; ++g) {
    const uint8_t* cg = codes + g * (k * kQ8Group / 2);
    uint8_t* wg = w + g * (k * kQ8Group);
    for (size_t h = 0; h < k / 8; ++h) {
      // The codes come from memory: the first row blocks of the GEMM wait for this loop.
      _mm_prefetch(reinterpret_cast<const char*>(cg + h * kStepBytes) + kPrefetchBytes, _MM_HINT_T0);
      const __m512i v = _mm512_loadu_si512(cg + h * kStepBytes);
      _mm512_store_si512(wg + 2 * h * kStepBytes, _mm512_permutexvar_epi8(v, lut));
      _mm512_store_si512(wg + (2 * h + 1) * kStepBytes, _mm512_permutexvar_epi8(_mm512_srli_epi16(v, 4), lut));
    }
    for (size_t b = 0; b < nb; ++b) {
      _mm512_store_ps(s + (g * nb + b) * kQ8Group, Mxfp4Scales(scales + (g * nb + b) * kQ8Group));
    }
  }
}

void MatmulQ8Mxfp4(Q8Rows x, size_t m, size_t k, const uint8_t* codes, const uint8_t* scales, size_t n_begin,
                   size_t n_end, const float* bias, float* y, size_t ldy) {
  if (m == 0 || n_begin >= n_end) return;
  const size_t nb = k / kQ8Block;
  const size_t g_begin = n_begin / kQ8Group, g_end = (n_end + kQ8Group - 1) / kQ8Group;
  const size_t code_stride = k * kQ8Group / 2, scale_stride = nb * kQ8Group;
  const Out out{y, ldy, bias, n_end};
  if (m <= kStreamMaxRows) {
    const Rows rows{x.q, x.d, StartValues(x, m, nb, kMxfp4Offset, ThreadScratchBytes(m * nb * sizeof(int32_t))), k, nb};
    DirectMatmul<Mxfp4Codes>(rows, m, codes, code_stride, g_begin, g_end, [&](size_t g) {
      return Mxfp4Codes{scales + g * scale_stride, scale_stride};
    }, out);
    return;
  }
  // The first row block prefetches the next panel's codes (its scales are 1/16 of that).
  DecodedPanelGemm(x, m, k, kMxfp4Offset, codes, code_stride, g_begin, g_end,
                   [&](size_t g, size_t groups, uint8_t* w, float* s) {
                     DecodeMxfp4Panel(codes + g * code_stride, scales + g * scale_stride, k, groups, w, s);
                   }, out);
}

// Decodes `groups` int4 groups into u8 weights (q - z + 16, int8 layout) and f32 block scales.
void DecodeInt4Panel(const uint8_t* codes, const uint8_t* zeros, const float* scales, size_t k, size_t group,
                     size_t groups, uint8_t* w, float* s) {
  const __m512i nibble = _mm512_set1_epi8(0x0F);
  const size_t nb = k / kQ8Block, per_group = k / group, vectors_per_group = group / 8;
  for (size_t g = 0; g < groups; ++g) {
    const uint8_t* cg = codes + g * (k * kQ8Group / 2);
    uint8_t* wg = w + g * (k * kQ8Group);
    for (size_t t = 0; t < per_group; ++t) {
      const size_t meta = (g * per_group + t) * kQ8Group;
      const __m512i offset = Int4Offsets(zeros + meta);
      for (size_t h = t * vectors_per_group; h < (t + 1) * vectors_per_group; ++h) {
        _mm_prefetch(reinterpret_cast<const char*>(cg + h * kStepBytes) + kPrefetchBytes, _MM_HINT_T0);
        const __m512i v = _mm512_loadu_si512(cg + h * kStepBytes);
        _mm512_store_si512(wg + 2 * h * kStepBytes, _mm512_add_epi8(_mm512_and_si512(v, nibble), offset));
        _mm512_store_si512(wg + (2 * h + 1) * kStepBytes,
                           _mm512_add_epi8(_mm512_and_si512(_mm512_srli_epi16(v, 4), nibble), offset));
      }
    }
    for (size_t b = 0; b < nb; ++b) {
      const size_t meta = (g * per_group + b * kQ8Block / group) * kQ8Group;
      _mm512_store_ps(s + (g * nb + b) * kQ8Group, _mm512_loadu_ps(scales + meta));
    }
  }
}

void MatmulQ8Int4(Q8Rows x, size_t m, size_t k, Int4Weights wt, size_t n_begin, size_t n_end, const float* bias,
                  float* y, size_t ldy) {
  if (m == 0 || n_begin >= n_end) return;
  const size_t nb = k / kQ8Block;
  const size_t g_begin = n_begin / kQ8Group, g_end = (n_end + kQ8Group - 1) / kQ8Group;
  const size_t code_stride = k * kQ8Group / 2, meta_stride = (k / wt.group) * kQ8Group;
  const Out out{y, ldy, bias, n_end};
  if (m <= kStreamMaxRows) {
    const Rows rows{x.q, x.d, StartValues(x, m, nb, kInt4Offset, ThreadScratchBytes(m * nb * sizeof(int32_t))), k, nb};
    DirectMatmul<Int4Codes>(rows, m, wt.codes, code_stride, g_begin, g_end, [&](size_t g) {
      return Int4Codes{wt.zeros + g * meta_stride, wt.scales + g * meta_stride, meta_stride, wt.group / kQ8Block};
    }, out);
    return;
  }
  DecodedPanelGemm(x, m, k, kInt4Offset, wt.codes, code_stride, g_begin, g_end,
                   [&](size_t g, size_t groups, uint8_t* w, float* s) {
                     DecodeInt4Panel(wt.codes + g * code_stride, wt.zeros + g * meta_stride, wt.scales + g * meta_stride,
                                     k, wt.group, groups, w, s);
                   }, out);
}

}  // namespace

void FillAvx512VnniQ8(KernelTable& t) {
  t.quantize_q8 = QuantizeQ8;
  t.quantize_q8_isa = "avx512vnni";
  t.matmul_q8_mxfp4 = MatmulQ8Mxfp4;
  t.matmul_q8_mxfp4_isa = "avx512vnni";
  t.matmul_q8_int8 = MatmulQ8Int8;
  t.matmul_q8_int8_isa = "avx512vnni";
  t.matmul_q8_int4 = MatmulQ8Int4;
  t.matmul_q8_int4_isa = "avx512vnni";
}

}  // namespace tessera
