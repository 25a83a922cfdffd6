// AVX-512 (F/BW/VL/DQ) matmul kernels: y[:, n_begin:n_end] = x W^T + bias with W in BF16, F16,
// F32 or MXFP4 (contract in kernels.h). Weights are decoded exactly to f32 (BF16: a 16-bit shift;
// F16: vcvtph2ps; F32: as is; MXFP4: a 16-entry E2M1 table scaled by the E8M0 power of two) and
// multiplied with f32 activations in f32 FMAs; activations are never rounded to a narrower type.
// BF16, F16 and F32 share one implementation (the dense kernels, templated on the weight loader
// below), so the three formats have the same summation order.
//
// Summation order (the same for every m, so results are batch-invariant: a row of y has the same
// bits whether it is computed alone, in a decode batch or inside a long prefill): output (i, j)
// is the sum of kLanes = 16 lane sums followed by the bias,
//   y = ReduceLanes(S_0 .. S_15) + bias,   S_l = sequential FMAs over the elements of lane l,
// where step t of lane l is element 16t + l (BF16, F16, F32; elements past k count as 0 * 0)
// or, for MXFP4, element 32g + kPerm32[16h + l] with t = 2g + h (the order the nibble decoder
// produces).
// Two ways of evaluating it, chosen by m:
//  - m <= kDotMaxRows (decode, speculative verification; MXFP4: m <= 8): dot form. One pass
//    streams kDotCols weight rows once, decodes each 16-weight vector once and multiplies it into
//    up to 4 rows (more rows: see Dot); the 16 lanes of one zmm accumulator are S_0 .. S_15.
//    Memory-bound at small m: the decode must stay cheaper than the DRAM stream.
//  - m > kDotMaxRows (prefill): lane-split GEMM. x is rearranged once per call to
//    [row][k block][lane][step]. For each 64 output columns, the weights are decoded once into a
//    panel [k block][lane][step][64 columns] (<= 64 k floats, in L2); then, for each chunk of 48
//    rows, k block and lane, a micro-kernel keeps a <= 6 x 64 tile of S_l in 24 zmm registers,
//    loading one panel row (4 zmm) and broadcasting one x value per row per step (outer-product
//    form: 24 FMAs per 10 loads) while the lane's panel slice (<= 32 KB) stays in L1 for every
//    row block. The chunk's lane sums (4 KB per row, in L2 across k blocks) are then reduced with
//    the same tree. Every weight byte is still read once per call.
// Results are also independent of n_begin/n_end: columns never interact, so any split of the
// columns across threads gives identical bits.
//
// Nothing here may run before the CPU check: no dynamic initialisers (tables are constexpr) and
// no STL templates whose out-of-line copies the linker could share with baseline files.
// Loops over register arrays carry `#pragma GCC unroll` so that the arrays stay in registers at
// -O2 too (RelWithDebInfo), not only at the -O3 of Release builds.
#include <immintrin.h>

#include <bit>
#include <cstdint>
#include <cstdlib>

#include "core/error.h"
#include "kernels/fp8_avx512.h"
#include "kernels/kernels.h"
#include "kernels/scratch.h"
#include "kernels/matmul_fill.h"
#include "kernels/mxfp4.h"

namespace tessera {
namespace {

constexpr size_t kLanes = 16;      // partial sums per output (one zmm of f32)
constexpr size_t kDotMaxRows = 9;  // m up to this uses the dot form (speculative k + 1 <= 9)
constexpr size_t kDotCols = 4;     // weight rows (output columns) per dot pass
// 5 <= m <= kDotMaxRows (BF16, F16, F32): kDotCols weight rows widened to f32 once per chunk of
// this many elements (4 x 512 B, in L1), then multiplied into the rows in groups of <= 4.
constexpr size_t kWidenChunk = 128;
// MXFP4 dot passes prefetch the weights this many passes ahead: without it the hardware
// prefetchers reach only about 40% of the read bandwidth on that pattern (measured).
constexpr size_t kPrefetchTiles = 2;
// 16- and 32-bit weight rows: each of a pass's rows is prefetched this many bytes ahead of where
// it is read. Passes ahead (as for MXFP4) put the prefetches 4 rows away, 90 KB to 460 KB ahead
// on the dense families' long rows, and held BF16 decode to 0.6-0.8 of the read ceiling
// (docs/BENCHMARKS.md, "Dense families").
constexpr size_t kPrefetchAheadBytes = 1024;
static_assert(kDotCols * kMxfp4BlockBytes == 64, "one prefetched line per block step");
constexpr size_t kNr = 64;        // GEMM columns per panel (4 zmm)
constexpr int kMaxMr = 6;         // GEMM micro-tile rows (6 x 4 accumulators)
constexpr size_t kMaxKc = 2048;   // k block: one lane's panel slice is kc / 16 x 256 B <= 32 KB
constexpr size_t kRowChunk = 48;  // GEMM rows whose lane sums (4 KB per row) are live at once

inline size_t Min(size_t a, size_t b) { return a < b ? a : b; }
inline size_t CeilDiv(size_t a, size_t b) { return (a + b - 1) / b; }
inline size_t RoundUp(size_t a, size_t b) { return CeilDiv(a, b) * b; }
inline __mmask16 Mask16(size_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << n) - 1);
}

// ---- decoding -----------------------------------------------------------------------------------

// Weight loaders of the dense formats: Load(p) decodes the 16 weights at p exactly to f32,
// Load(p, mask) the lanes in mask (the others are 0; nothing outside them is read).
struct Bf16Weights {
  using Elem = uint16_t;
  static inline __m512 Load(const uint16_t* p) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static inline __m512 Load(const uint16_t* p, __mmask16 mask) {
    const __m256i h = _mm256_maskz_loadu_epi16(mask, p);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
};
// IEEE binary16: vcvtph2ps is exact for every value (f16 subnormals are normal f32 numbers).
struct F16Weights {
  using Elem = uint16_t;
  static inline __m512 Load(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static inline __m512 Load(const uint16_t* p, __mmask16 mask) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask, p));
  }
};
// F32 weights as they are. The empty asm keeps the loaded vector in a register, so that GCC
// does not fold the load into each of the R FMAs that use it (R loads per weight vector: the load
// ports, not the FMAs, would bound the dot form with the weights in cache; see WidenedSteps).
struct F32Weights {
  using Elem = float;
  static inline __m512 Load(const float* p) {
    __m512 v = _mm512_loadu_ps(p);
    asm("" : "+v"(v));
    return v;
  }
  static inline __m512 Load(const float* p, __mmask16 mask) {
    __m512 v = _mm512_maskz_loadu_ps(mask, p);
    asm("" : "+v"(v));
    return v;
  }
};
// The dot passes prefetch one 64-byte line per weight row every this many elements.
template <typename W>
constexpr size_t kPrefetchElems = 64 / sizeof(typename W::Elem);

// Bit pattern of the f32 kE2M1Values[code] * 2^(s - 127), built from integers because constant
// evaluation refuses results that overflow: magnitude (1 + f) 2^q times 2^(s - 127) is normal,
// a subnormal (exact: 2 significant bits, smallest 2^-128), or inf; 0 * inf (s = 255) is the
// default NaN the hardware (and so the reference decoder) produces.
constexpr uint32_t E2M1TimesScaleBits(uint32_t code, uint32_t s) {
  constexpr int kExponent[8] = {0, -1, 0, 0, 1, 1, 2, 2};  // q of 0, .5, 1, 1.5, 2, 3, 4, 6
  constexpr uint32_t kHalf[8] = {0, 0, 0, 1, 0, 1, 0, 1};   // f = 0.5?
  const uint32_t sign = (code & 8) << 28;
  const uint32_t mag = code & 7;
  if (mag == 0) return s == 255 ? 0xffc00000u : sign;
  const int exponent = kExponent[mag] + static_cast<int>(s);  // biased: q + (s - 127) + 127
  if (exponent >= 255) return sign | 0x7f800000u;
  if (exponent >= 1) return sign | static_cast<uint32_t>(exponent) << 23 | kHalf[mag] << 22;
  return sign | ((0x800000u | kHalf[mag] << 22) >> (1 - exponent));
}

// The 16 E2M1 values times 2^(s - 127) for every E8M0 scale byte s (16 KB, built at compile
// time): one load replaces a multiply per block, and the few scales real weights use stay in L1.
// Each entry is exact (E2M1 values have 2 significant bits; scale 0 gives subnormals) and equals
// the reference's kE2M1Values[c] * E8M0ScaleToF32(s), including inf and 0 * inf = NaN for s = 255.
struct ScaledE2M1Tables {
  alignas(64) float values[256][16];
};
constexpr ScaledE2M1Tables MakeScaledE2M1Tables() {
  ScaledE2M1Tables t{};
  for (uint32_t s = 0; s < 256; ++s) {
    for (uint32_t c = 0; c < 16; ++c) t.values[s][c] = std::bit_cast<float>(E2M1TimesScaleBits(c, s));
  }
  return t;
}
constexpr ScaledE2M1Tables kScaledE2M1 = MakeScaledE2M1Tables();

// One MXFP4 block (16 code bytes) decodes into two vectors without widening the bytes: the block
// is broadcast to all four 128-bit lanes, so lane L holds dword L % 4 (codes 8(L%4) .. 8(L%4)+7),
// and a per-lane shift brings nibble q to bits 0-3, where vpermps reads its index. Vector A takes
// nibbles q = L / 4, vector B nibbles q = L / 4 + 4, so
//   A lane L = element 8 (L % 4) + L / 4,   B lane L = element 8 (L % 4) + L / 4 + 4.
// Activations are permuted to the same order, so this costs nothing in the inner loops.
// kPerm32[s]: element of the block in lane s of A (s < 16) or lane s - 16 of B.
alignas(64) constexpr int32_t kPerm32[32] = {0, 8,  16, 24, 1, 9,  17, 25, 2, 10, 18,
                                             26, 3, 11, 19, 27, 4, 12, 20, 28, 5, 13,
                                             21, 29, 6, 14, 22, 30, 7, 15, 23, 31};

struct Mxfp4Decoder {
  __m512i shift_a = _mm512_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12);
  __m512i shift_b = _mm512_setr_epi32(16, 16, 16, 16, 20, 20, 20, 20, 24, 24, 24, 24, 28, 28, 28, 28);

  void Decode(const uint8_t* codes, uint8_t scale, __m512& a, __m512& b) const {
    const __m512 table = _mm512_load_ps(kScaledE2M1.values[scale]);
    const __m512i block =
        _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes)));
    a = _mm512_permutexvar_ps(_mm512_srlv_epi32(block, shift_a), table);
    b = _mm512_permutexvar_ps(_mm512_srlv_epi32(block, shift_b), table);
  }
};

// xp[r, 32g + s] = x[r, 32g + kPerm32[s]] for r < rows: activations in decode order.
void PermuteActivations(const float* x, size_t rows, size_t k, float* xp) {
  const __m512i idx_a = _mm512_load_si512(kPerm32), idx_b = _mm512_load_si512(kPerm32 + 16);
  for (size_t i = 0; i < rows * k; i += kMxfp4BlockSize) {
    const __m512 lo = _mm512_loadu_ps(x + i), hi = _mm512_loadu_ps(x + i + 16);
    _mm512_store_ps(xp + i, _mm512_permutex2var_ps(lo, idx_a, hi));
    _mm512_store_ps(xp + i + 16, _mm512_permutex2var_ps(lo, idx_b, hi));
  }
}

// The reduction tree of the 16 lane sums, written out so that the dot form (lanes of one
// register) and the GEMM (one register per lane, 16 columns each) perform the same additions:
// lanes l + l+8, then + l+4, then + l+2, then + l+1.
inline float ReduceLanes(__m512 v) {
  const __m256 a = _mm256_add_ps(_mm512_castps512_ps256(v),
                                 _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
  const __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  const __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
  return _mm_cvtss_f32(_mm_add_ss(c, _mm_movehdup_ps(c)));
}
inline __m512 ReduceLanes(const __m512 s[kLanes]) {
  __m512 a[8];
#pragma GCC unroll 8
  for (int l = 0; l < 8; ++l) a[l] = _mm512_add_ps(s[l], s[l + 8]);
#pragma GCC unroll 4
  for (int l = 0; l < 4; ++l) a[l] = _mm512_add_ps(a[l], a[l + 4]);
  a[0] = _mm512_add_ps(a[0], a[2]);
  a[1] = _mm512_add_ps(a[1], a[3]);
  return _mm512_add_ps(a[0], a[1]);
}

// ---- dot form (m <= kDotMaxRows) ----------------------------------------------------------------

inline float Finish(__m512 acc, const float* bias, size_t j) {
  return ReduceLanes(acc) + (bias ? bias[j] : 0.0f);
}

// Steps [i, end) of R rows of x (stride k) against C consecutive weight rows starting at w,
// into acc[r][c] (i a multiple of 16; end a multiple of 16 or k, a partial last step masked, its
// elements past the end counting as 0 * 0). pf: where to prefetch, the same offsets
// kPrefetchAheadBytes further along each row (one line per row per 64 bytes of weights: every
// other step for 16-bit weights, every step for F32), which the hardware prefetchers alone do not
// keep up with. Step t of every
// accumulator is elements 16t .. 16t+15 whatever the split into calls.
template <typename W, int R, int C>
__attribute__((always_inline)) inline void DotSteps(const float* x, size_t k, size_t i, size_t end,
                                                    const typename W::Elem* w, const char* pf,
                                                    __m512 (&acc)[R][C]) {
  using Elem = typename W::Elem;
  for (; i + 16 <= end; i += 16) {
    if constexpr (C > 1) {
      if (i % kPrefetchElems<W> == 0) {
#pragma GCC unroll 16
        for (int c = 0; c < C; ++c) _mm_prefetch(pf + (c * k + i) * sizeof(Elem), _MM_HINT_T0);
      }
    }
    __m512 xv[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) xv[r] = _mm512_loadu_ps(x + r * k + i);
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) {
      const __m512 wv = W::Load(w + c * k + i);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) acc[r][c] = _mm512_fmadd_ps(wv, xv[r], acc[r][c]);
    }
  }
  if (i < end) {
    const __mmask16 mask = Mask16(end - i);
    __m512 xv[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) xv[r] = _mm512_maskz_loadu_ps(mask, x + r * k + i);
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) {
      const __m512 wv = W::Load(w + c * k + i, mask);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) acc[r][c] = _mm512_fmadd_ps(wv, xv[r], acc[r][c]);
    }
  }
}

// R rows of x against C weight rows over the whole k, streaming; writes y[r, c] (stride ldy).
template <typename W, int R, int C>
void DotTile(const float* x, size_t k, const typename W::Elem* w, const float* bias, float* y,
             size_t ldy) {
  __m512 acc[R][C];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
  }
  DotSteps<W, R, C>(x, k, 0, k, w, reinterpret_cast<const char*>(w) + kPrefetchAheadBytes, acc);
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) y[r * ldy + c] = Finish(acc[r][c], bias, c);
  }
}

// Steps [i0, i1) of G rows of x against the kDotCols weight rows widened into wf (f32, element
// i at wf[c][i - i0], zeros past k), accumulators acc_io[r * kDotCols + c] on entry and exit.
// The same FMAs in the same order as DotSteps (the widened vector is the same value).
template <int G>
__attribute__((always_inline)) inline void WidenedSteps(const float* x, size_t k, size_t i0, size_t i1,
                                                        const float (*wf)[kWidenChunk], __m512* acc_io) {
  constexpr int C = kDotCols;
  __m512 acc[G][C];
#pragma GCC unroll 16
  for (int r = 0; r < G; ++r) {
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) acc[r][c] = acc_io[r * C + c];
  }
  // Whole steps with plain loads, then the masked last one (k % 16 != 0), so the mask is
  // computed once per chunk rather than per step (measured alone, within the noise).
  const auto step = [&](size_t i, auto load_x) __attribute__((always_inline)) {
    __m512 xv[G];
#pragma GCC unroll 16
    for (int r = 0; r < G; ++r) xv[r] = load_x(x + r * k + i);
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) {
      __m512 wv = _mm512_load_ps(wf[c] + (i - i0));
      // One load per weight vector: GCC would otherwise fold the load into each of the G FMAs,
      // and the load ports, not the FMAs, would bound the loop. Measured with the weights in
      // cache (9 rows, 1 thread, 64 x 2880 in L2: 78 -> 97 GFLOP/s; attn_q, 23.6 MB, 2 threads,
      // from the 260 MB L3: 1.47 -> 1.17-1.22 ms); streaming from DRAM (lm_head) it is within
      // the noise, as that case is bound by the DRAM stream stalling while the core computes.
      asm("" : "+v"(wv));
#pragma GCC unroll 16
      for (int r = 0; r < G; ++r) acc[r][c] = _mm512_fmadd_ps(wv, xv[r], acc[r][c]);
    }
  };
  size_t i = i0;
  for (; i + 16 <= i1; i += 16) step(i, [](const float* p) { return _mm512_loadu_ps(p); });
  if (i < i1) {
    const __mmask16 mask = Mask16(i1 - i);
    step(i, [mask](const float* p) { return _mm512_maskz_loadu_ps(mask, p); });
  }
#pragma GCC unroll 16
  for (int r = 0; r < G; ++r) {
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) acc_io[r * C + c] = acc[r][c];
  }
}

// R (5 to 9) rows against kDotCols weight rows: each chunk of the weights is widened to f32 once
// (into L1) and then multiplied into the rows in groups of <= 4 (the register tile), so the
// widening, a third of the work in three passes over BF16, is paid once (F32 weights are only
// copied, to keep one code path for every format); R rows of x (up to 104 KB at k = 2880) stream
// from L2.
template <typename W, int R>
void DotTileWidened(const float* x, size_t k, const typename W::Elem* w, const float* bias, float* y,
                    size_t ldy) {
  using Elem = typename W::Elem;
  constexpr int C = kDotCols, R0 = 4, R1 = R - R0 < 4 ? R - R0 : 4, R2 = R - R0 - R1;
  static_assert(R > 4 && R2 <= 4, "two or three row groups");
  alignas(64) float wf[C][kWidenChunk];
  __m512 acc[R * C];
#pragma GCC unroll 64
  for (int v = 0; v < R * C; ++v) acc[v] = _mm512_setzero_ps();
  const char* pf = reinterpret_cast<const char*>(w) + kPrefetchAheadBytes;
  for (size_t i0 = 0; i0 < k; i0 += kWidenChunk) {
    const size_t i1 = i0 + kWidenChunk < k ? i0 + kWidenChunk : k;
    for (size_t i = i0; i < i1; i += 16) {
      if (i % kPrefetchElems<W> == 0) {
#pragma GCC unroll 16
        for (int c = 0; c < C; ++c) _mm_prefetch(pf + (c * k + i) * sizeof(Elem), _MM_HINT_T0);
      }
      const __mmask16 mask = Mask16(i1 - i);
#pragma GCC unroll 16
      for (int c = 0; c < C; ++c) _mm512_store_ps(wf[c] + (i - i0), W::Load(w + c * k + i, mask));
    }
    WidenedSteps<R0>(x, k, i0, i1, wf, acc);
    WidenedSteps<R1>(x + R0 * k, k, i0, i1, wf, acc + R0 * C);
    if constexpr (R2 > 0) WidenedSteps<R2>(x + (R0 + R1) * k, k, i0, i1, wf, acc + (R0 + R1) * C);
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) y[r * ldy + c] = Finish(acc[r * C + c], bias, c);
  }
}

// R <= 4 rows: one pass per kDotCols weight rows. 5 to 9 rows (speculative verification): the
// widened tiles above (measured on the attn_q shape, 2 threads: 5 rows 0.95-0.98 ms vs 1.15 for
// one pass of 5 x 4 accumulators over k chunks and 1.25 for two passes over BF16; 9 rows 1.45-1.5
// vs 1.9). The column tail takes passes of <= 4 rows over each single weight row.
template <typename W, int R>
void Dot(const float* x, size_t k, const typename W::Elem* w, size_t n_begin, size_t n_end,
         const float* bias, float* y, size_t ldy) {
  size_t j = n_begin;
  for (; j + kDotCols <= n_end; j += kDotCols) {
    if constexpr (R <= 4) {
      DotTile<W, R, kDotCols>(x, k, w + j * k, bias ? bias + j : nullptr, y + j, ldy);
    } else {
      DotTileWidened<W, R>(x, k, w + j * k, bias ? bias + j : nullptr, y + j, ldy);
    }
  }
  constexpr int R0 = R < 4 ? R : 4, R1 = R - R0 < 4 ? R - R0 : 4, R2 = R - R0 - R1;
  static_assert(R2 <= 4, "at most three passes");
  for (; j < n_end; ++j) {
    const float* b = bias ? bias + j : nullptr;
    DotTile<W, R0, 1>(x, k, w + j * k, b, y + j, ldy);
    if constexpr (R1 > 0) DotTile<W, R1, 1>(x + R0 * k, k, w + j * k, b, y + R0 * ldy + j, ldy);
    if constexpr (R2 > 0) DotTile<W, R2, 1>(x + (R0 + R1) * k, k, w + j * k, b, y + (R0 + R1) * ldy + j, ldy);
  }
}

// As DotTile for MXFP4: xp holds R rows of permuted activations (PermuteActivations); codes
// and scales point at weight row j0 (C rows follow, `groups` blocks each). Steps 2g and 2g + 1
// are the A and B vectors of block g.
template <int R, int C>
void DotTileMxfp4(const float* xp, size_t k, const uint8_t* codes, const uint8_t* scales,
                  const float* bias, float* y, size_t ldy) {
  const Mxfp4Decoder dec;
  const size_t groups = k / kMxfp4BlockSize;
  __m512 acc[R][C];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
  }
  // The C rows' codes are contiguous (16 C bytes per block step); prefetch the same span
  // kPrefetchTiles passes ahead, one line per block step for C = 4, plus the scales.
  const char* pf_codes =
      reinterpret_cast<const char*>(codes) + kPrefetchTiles * C * groups * kMxfp4BlockBytes;
  const char* pf_scales = reinterpret_cast<const char*>(scales) + kPrefetchTiles * C * groups;
  for (size_t g = 0; g < groups; ++g) {
    if constexpr (C == kDotCols) {
      _mm_prefetch(pf_codes + g * 64, _MM_HINT_T0);
      if (g % 16 == 0) _mm_prefetch(pf_scales + g * 4, _MM_HINT_T0);
    }
    __m512 xa[R], xb[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      xa[r] = _mm512_load_ps(xp + r * k + g * kMxfp4BlockSize);
      xb[r] = _mm512_load_ps(xp + r * k + g * kMxfp4BlockSize + 16);
    }
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) {
      const size_t block = c * groups + g;
      __m512 wa, wb;
      dec.Decode(codes + block * kMxfp4BlockBytes, scales[block], wa, wb);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        acc[r][c] = _mm512_fmadd_ps(wa, xa[r], acc[r][c]);
        acc[r][c] = _mm512_fmadd_ps(wb, xb[r], acc[r][c]);
      }
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) y[r * ldy + c] = Finish(acc[r][c], bias, c);
  }
}

template <int R>
void DotMxfp4(const float* x, size_t k, const uint8_t* codes, const uint8_t* scales,
              size_t n_begin, size_t n_end, const float* bias, float* y, size_t ldy) {
  float* xp = ThreadScratchFloats(R * k);
  PermuteActivations(x, R, k, xp);
  const size_t groups = k / kMxfp4BlockSize;
  // Rows [0, 4) then [4, R) per tile of weight rows (still in L1 for the second pass).
  constexpr int R0 = R <= 4 ? R : 4, R1 = R - R0;
  size_t j = n_begin;
  for (; j + kDotCols <= n_end; j += kDotCols) {
    const uint8_t* c = codes + j * groups * kMxfp4BlockBytes;
    DotTileMxfp4<R0, kDotCols>(xp, k, c, scales + j * groups, bias ? bias + j : nullptr, y + j, ldy);
    if constexpr (R1 > 0) {
      DotTileMxfp4<R1, kDotCols>(xp + R0 * k, k, c, scales + j * groups, bias ? bias + j : nullptr,
                                 y + R0 * ldy + j, ldy);
    }
  }
  for (; j < n_end; ++j) {
    const uint8_t* c = codes + j * groups * kMxfp4BlockBytes;
    DotTileMxfp4<R0, 1>(xp, k, c, scales + j * groups, bias ? bias + j : nullptr, y + j, ldy);
    if constexpr (R1 > 0) {
      DotTileMxfp4<R1, 1>(xp + R0 * k, k, c, scales + j * groups, bias ? bias + j : nullptr, y + R0 * ldy + j, ldy);
    }
  }
}

// ---- lane-split GEMM (m > kDotMaxRows) ----------------------------------------------------------

// In-register transpose: r[i] lane t -> r[t] lane i.
inline void Transpose16x16(__m512 r[16]) {
  __m512 t[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  // u[g][e]: 128-bit lane l holds rows 4g..4g+3 at element 4l + e.
  __m512 u[4][4];
#pragma GCC unroll 4
  for (int g = 0; g < 4; ++g) {
    u[g][0] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], _MM_SHUFFLE(1, 0, 1, 0));
    u[g][1] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], _MM_SHUFFLE(3, 2, 3, 2));
    u[g][2] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], _MM_SHUFFLE(1, 0, 1, 0));
    u[g][3] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
#pragma GCC unroll 4
  for (int e = 0; e < 4; ++e) {
    const __m512 x_lo = _mm512_shuffle_f32x4(u[0][e], u[1][e], _MM_SHUFFLE(2, 0, 2, 0));
    const __m512 x_hi = _mm512_shuffle_f32x4(u[0][e], u[1][e], _MM_SHUFFLE(3, 1, 3, 1));
    const __m512 y_lo = _mm512_shuffle_f32x4(u[2][e], u[3][e], _MM_SHUFFLE(2, 0, 2, 0));
    const __m512 y_hi = _mm512_shuffle_f32x4(u[2][e], u[3][e], _MM_SHUFFLE(3, 1, 3, 1));
    r[e] = _mm512_shuffle_f32x4(x_lo, y_lo, _MM_SHUFFLE(2, 0, 2, 0));
    r[8 + e] = _mm512_shuffle_f32x4(x_lo, y_lo, _MM_SHUFFLE(3, 1, 3, 1));
    r[4 + e] = _mm512_shuffle_f32x4(x_hi, y_hi, _MM_SHUFFLE(2, 0, 2, 0));
    r[12 + e] = _mm512_shuffle_f32x4(x_hi, y_hi, _MM_SHUFFLE(3, 1, 3, 1));
  }
}

// k is cut into blocks of nearly equal size (a multiple of 32, so block starts are step boundaries
// for both formats): block b covers [b * size, min(k, (b + 1) * size)) and has Steps(kc) steps.
struct KBlocks {
  size_t size;
};
KBlocks PlanKBlocks(size_t k) {
  return {RoundUp(CeilDiv(k, CeilDiv(k, kMaxKc)), kMxfp4BlockSize)};
}
inline size_t Steps(size_t kc) { return CeilDiv(kc, kLanes); }

// Lane-major activations: for every k block [pc, pc + kc) with S = Steps(kc) steps,
// xl[i, pc + l S + t] = the x element of step t of lane l (0 past k); row stride RoundUp(k, 16).
// load_step(i, pc, t) returns step t (16 lanes) of row i in the block at pc; 16 steps are
// transposed at a time.
template <typename LoadStep>
void LaneMajorActivations(size_t m, size_t k, const KBlocks& kb, float* xl, size_t ldxl,
                          const LoadStep& load_step) {
  for (size_t i = 0; i < m; ++i) {
    for (size_t pc = 0; pc < k; pc += kb.size) {
      const size_t steps = Steps(Min(kb.size, k - pc));
      for (size_t t0 = 0; t0 < steps; t0 += 16) {
        __m512 r[16];
#pragma GCC unroll 16
        for (size_t u = 0; u < 16; ++u) {
          r[u] = t0 + u < steps ? load_step(i, pc, t0 + u) : _mm512_setzero_ps();
        }
        Transpose16x16(r);
        const __mmask16 mask = Mask16(steps - t0);
        float* dst = xl + i * ldxl + pc + t0;
#pragma GCC unroll 16
        for (size_t l = 0; l < kLanes; ++l) _mm512_mask_storeu_ps(dst + l * steps, mask, r[l]);
      }
    }
  }
}

// Panel layout for columns [j0, j0 + nc) (nc <= 64) and one k block [pc, pc + kc) with S steps:
// row l S + t holds the weights of step t of lane l for the 64 columns (zero for columns past nc
// and elements past k), so each lane's rows are contiguous. Each column's steps are decoded as in
// the dot form and 16 columns are transposed at a time.
template <typename W>
void PackDense(const typename W::Elem* w, size_t k, size_t j0, size_t nc, size_t pc, size_t kc,
               float* panel) {
  const size_t steps = Steps(kc);
  for (size_t strip = 0; strip < kNr; strip += 16) {
    const size_t cols = strip < nc ? Min(16, nc - strip) : 0;
    for (size_t t = 0; t < steps; ++t) {
      const __mmask16 mask = Mask16(kc - 16 * t);
      __m512 r[16];
#pragma GCC unroll 16
      for (size_t i = 0; i < 16; ++i) {
        r[i] = i < cols ? W::Load(w + (j0 + strip + i) * k + pc + 16 * t, mask)
                        : _mm512_setzero_ps();
      }
      Transpose16x16(r);
#pragma GCC unroll 16
      for (size_t l = 0; l < kLanes; ++l) {
        _mm512_store_ps(panel + (l * steps + t) * kNr + strip, r[l]);
      }
    }
  }
}

void PackMxfp4(const uint8_t* codes, const uint8_t* scales, size_t k, size_t j0, size_t nc,
               size_t pc, size_t kc, float* panel) {
  const Mxfp4Decoder dec;
  const size_t groups = k / kMxfp4BlockSize;
  const size_t steps = Steps(kc);
  for (size_t strip = 0; strip < kNr; strip += 16) {
    const size_t cols = strip < nc ? Min(16, nc - strip) : 0;
    for (size_t g = 0; g < kc / kMxfp4BlockSize; ++g) {
      __m512 a[16], b[16];
#pragma GCC unroll 16
      for (size_t i = 0; i < 16; ++i) {
        if (i < cols) {
          const size_t block = (j0 + strip + i) * groups + pc / kMxfp4BlockSize + g;
          dec.Decode(codes + block * kMxfp4BlockBytes, scales[block], a[i], b[i]);
        } else {
          a[i] = b[i] = _mm512_setzero_ps();
        }
      }
      Transpose16x16(a);
      Transpose16x16(b);
#pragma GCC unroll 16
      for (size_t l = 0; l < kLanes; ++l) {
        _mm512_store_ps(panel + (l * steps + 2 * g) * kNr + strip, a[l]);
        _mm512_store_ps(panel + (l * steps + 2 * g + 1) * kNr + strip, b[l]);
      }
    }
  }
}

// One lane of one row block: s[i, 0:64] (stride lds) = (first ? 0 : s[i, 0:64]) +
// sum over t < steps, in order, of panel[t, 0:64] * x[i, t] (x stride ldx).
template <int MR>
void MicroKernel(const float* x, size_t ldx, const float* panel, size_t steps, float* s,
                 size_t lds, bool first) {
  __m512 acc[MR][4];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) {
      acc[i][q] = first ? _mm512_setzero_ps() : _mm512_load_ps(s + i * lds + 16 * q);
    }
  }
#pragma GCC unroll 4
  for (size_t t = 0; t < steps; ++t) {
    const float* p = panel + t * kNr;
    __m512 w[4];
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) w[q] = _mm512_load_ps(p + 16 * q);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const __m512 xb = _mm512_set1_ps(x[i * ldx + t]);
#pragma GCC unroll 4
      for (int q = 0; q < 4; ++q) acc[i][q] = _mm512_fmadd_ps(w[q], xb, acc[i][q]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) _mm512_store_ps(s + i * lds + 16 * q, acc[i][q]);
  }
}

using MicroKernelFn = void (*)(const float*, size_t, const float*, size_t, float*, size_t, bool);
constexpr MicroKernelFn kMicroKernels[kMaxMr + 1] = {
    nullptr,        MicroKernel<1>, MicroKernel<2>, MicroKernel<3>,
    MicroKernel<4>, MicroKernel<5>, MicroKernel<6>};

// Writes y[r0 : r0 + rows, jc : jc + nc] from the lane sums of those rows: the reduction tree of
// ReduceLanes, then the bias, as in the dot form.
void ReduceRows(const float* sums, size_t r0, size_t rows, size_t jc, size_t nc, const float* bias,
                float* y, size_t ldy) {
  constexpr size_t kSumsRow = kLanes * kNr;
  __mmask16 mask[4];
#pragma GCC unroll 4
  for (int q = 0; q < 4; ++q) mask[q] = Mask16(nc > 16u * q ? nc - 16 * q : 0);
  for (size_t i = 0; i < rows; ++i) {
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) {
      __m512 lane_sums[kLanes];
#pragma GCC unroll 16
      for (size_t l = 0; l < kLanes; ++l) {
        lane_sums[l] = _mm512_load_ps(sums + i * kSumsRow + l * kNr + 16 * q);
      }
      const __m512 b =
          bias ? _mm512_maskz_loadu_ps(mask[q], bias + jc + 16 * q) : _mm512_setzero_ps();
      _mm512_mask_storeu_ps(y + (r0 + i) * ldy + jc + 16 * q, mask[q],
                            _mm512_add_ps(ReduceLanes(lane_sums), b));
    }
  }
}

// The GEMM loop nest shared by both weight formats. xl: lane-major activations (stride ldxl);
// pack(j0, nc, pc, kc, panel) decodes one k block of a panel; panel: 64 x RoundUp(k, 16) floats
// (every k block of 64 columns, block pc at 64 pc); sums: kRowChunk x kLanes x 64 floats.
template <typename Pack>
void Gemm(const float* xl, size_t ldxl, size_t m, size_t k, const KBlocks& kb, size_t n_begin,
          size_t n_end, const float* bias, float* y, size_t ldy, float* panel, float* sums,
          const Pack& pack) {
  constexpr size_t kSumsRow = kLanes * kNr;  // floats of lane sums per row
  for (size_t jc = n_begin; jc < n_end; jc += kNr) {
    const size_t nc = Min(kNr, n_end - jc);
    for (size_t pc = 0; pc < k; pc += kb.size) {
      pack(jc, nc, pc, Min(kb.size, k - pc), panel + kNr * pc);
    }
    // Row chunks keep their lane sums (4 KB per row) in L2 next to the panel.
    for (size_t r0 = 0; r0 < m; r0 += kRowChunk) {
      const size_t rows = Min(kRowChunk, m - r0);
      // Row blocks of nearly equal height <= kMaxMr (17 rows -> 6, 6, 5).
      const size_t num_blocks = CeilDiv(rows, kMaxMr);
      const size_t base_rows = rows / num_blocks, extra_rows = rows % num_blocks;
      for (size_t pc = 0; pc < k; pc += kb.size) {
        const size_t steps = Steps(Min(kb.size, k - pc));
        // Lanes outside, row blocks inside: the lane's panel slice stays in L1.
        for (size_t l = 0; l < kLanes; ++l) {
          const float* slice = panel + kNr * pc + l * steps * kNr;
          size_t row = 0;
          for (size_t b = 0; b < num_blocks; ++b) {
            const size_t mr = base_rows + (b < extra_rows ? 1 : 0);
            kMicroKernels[mr](xl + (r0 + row) * ldxl + pc + l * steps, ldxl, slice, steps,
                              sums + row * kSumsRow + l * kNr, kSumsRow, pc == 0);
            row += mr;
          }
        }
      }
      ReduceRows(sums, r0, rows, jc, nc, bias, y, ldy);
    }
  }
}

// Scratch for one GEMM call: panel, lane sums and lane-major activations, each 64-byte aligned.
struct GemmScratch {
  float* panel;
  float* sums;
  float* xl;
  size_t ldxl;
};
GemmScratch GetGemmScratch(size_t m, size_t k) {
  const size_t ldxl = RoundUp(k, kLanes);
  const size_t panel = kNr * ldxl, sums = kRowChunk * kLanes * kNr;
  float* base = ThreadScratchFloats(panel + sums + m * ldxl);
  return {base, base + panel, base + panel + sums, ldxl};
}

// k == 0: every output is the empty sum plus the bias, as in the reference.
void BiasOnly(size_t m, size_t n_begin, size_t n_end, const float* bias, float* y, size_t ldy) {
  for (size_t i = 0; i < m; ++i)
    for (size_t j = n_begin; j < n_end; ++j) y[i * ldy + j] = 0.0f + (bias ? bias[j] : 0.0f);
}

// ---- FP8 rows (kernels.h matmul_fp8_dot) -------------------------------------------------------

// R rows of x against C FP8 weight rows (codes row c at codes + c k, its scales at
// scales + c scale_stride): each step's 16 weights decoded and scaled exactly as decode_fp8_row
// gives them, then the FMAs of DotSteps over F32 weights in the same order and the same Finish,
// so the bits are matmul_f32's over the decoded rows.
template <int R, int C>
void DotTileFp8(const float* x, size_t k, const uint8_t* codes, const float* scales, size_t scale_stride,
                size_t block_cols, const float* bias, float* y, size_t ldy) {
  __m512 acc[R][C];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
  }
  // One step: 16 columns from i, each row's weights times its scale vector.
  const auto step = [&](size_t i, const __m512 (&scale)[C]) __attribute__((always_inline)) {
    const __mmask16 mask = Mask16(k - i);
    if (i % 64 == 0) {
#pragma GCC unroll 16
      for (int c = 0; c < C; ++c) _mm_prefetch(reinterpret_cast<const char*>(codes + c * k + i) + 1024, _MM_HINT_T0);
    }
    __m512 xv[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) xv[r] = _mm512_maskz_loadu_ps(mask, x + r * k + i);
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) {
      const __m512 w = _mm512_mul_ps(DecodeFp8x16(codes + c * k + i, mask), scale[c]);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) acc[r][c] = _mm512_fmadd_ps(w, xv[r], acc[r][c]);
    }
  };
  __m512 scale[C];
  if (block_cols % 16 == 0) {  // each step inside one scale block: the scales once per block
    for (size_t b0 = 0, block = 0; b0 < k; b0 += block_cols, ++block) {
#pragma GCC unroll 16
      for (int c = 0; c < C; ++c) scale[c] = _mm512_set1_ps(scales[c * scale_stride + block] * 256.0f);
      const size_t b1 = k - b0 < block_cols ? k : b0 + block_cols;
      for (size_t i = b0; i < b1; i += 16) step(i, scale);
    }
  } else {  // a block boundary may fall inside a step: per-lane scales
    for (size_t i = 0; i < k; i += 16) {
      for (int c = 0; c < C; ++c) scale[c] = Fp8LaneScales(scales + c * scale_stride, block_cols, i, k);
      step(i, scale);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) y[r * ldy + c] = Finish(acc[r][c], bias, c);
  }
}

template <int R>
void DotFp8(const float* x, size_t k, const uint8_t* codes, const float* scales, size_t scale_stride, size_t block_cols,
            size_t n_begin, size_t n_end, const float* bias, float* y, size_t ldy) {
  size_t j = n_begin;
  for (; j + kDotCols <= n_end; j += kDotCols) {
    DotTileFp8<R, kDotCols>(x, k, codes + j * k, scales + j * scale_stride, scale_stride, block_cols,
                            bias ? bias + j : nullptr, y + j, ldy);
  }
  for (; j < n_end; ++j) {
    DotTileFp8<R, 1>(x, k, codes + j * k, scales + j * scale_stride, scale_stride, block_cols, bias ? bias + j : nullptr,
                     y + j, ldy);
  }
}

void MatmulFp8Dot(const float* x, size_t m, size_t k, const uint8_t* codes, const float* scales, size_t scale_stride,
                  size_t block_cols, size_t n_begin, size_t n_end, const float* bias, float* y, size_t ldy) {
  if (n_begin >= n_end) return;
  switch (m) {
    case 1: return DotFp8<1>(x, k, codes, scales, scale_stride, block_cols, n_begin, n_end, bias, y, ldy);
    case 2: return DotFp8<2>(x, k, codes, scales, scale_stride, block_cols, n_begin, n_end, bias, y, ldy);
    case 3: return DotFp8<3>(x, k, codes, scales, scale_stride, block_cols, n_begin, n_end, bias, y, ldy);
    case 4: return DotFp8<4>(x, k, codes, scales, scale_stride, block_cols, n_begin, n_end, bias, y, ldy);
    default: TESSERA_CHECK(m <= 4);
  }
}

// ---- entry points -------------------------------------------------------------------------------

// BF16, F16 and F32 weights (W: the loader).
template <typename W>
void MatmulDense(const float* x, size_t m, size_t k, const typename W::Elem* w, size_t n_begin,
                 size_t n_end, const float* bias, float* y, size_t ldy) {
  if (m == 0 || n_begin >= n_end) return;
  if (k == 0) return BiasOnly(m, n_begin, n_end, bias, y, ldy);
  static_assert(kDotMaxRows == 9);
  switch (m) {
    case 1: return Dot<W, 1>(x, k, w, n_begin, n_end, bias, y, ldy);
    case 2: return Dot<W, 2>(x, k, w, n_begin, n_end, bias, y, ldy);
    case 3: return Dot<W, 3>(x, k, w, n_begin, n_end, bias, y, ldy);
    case 4: return Dot<W, 4>(x, k, w, n_begin, n_end, bias, y, ldy);
    case 5: return Dot<W, 5>(x, k, w, n_begin, n_end, bias, y, ldy);
    case 6: return Dot<W, 6>(x, k, w, n_begin, n_end, bias, y, ldy);
    case 7: return Dot<W, 7>(x, k, w, n_begin, n_end, bias, y, ldy);
    case 8: return Dot<W, 8>(x, k, w, n_begin, n_end, bias, y, ldy);
    case 9: return Dot<W, 9>(x, k, w, n_begin, n_end, bias, y, ldy);
    default: break;
  }
  const KBlocks kb = PlanKBlocks(k);
  const GemmScratch s = GetGemmScratch(m, k);
  // Step t of a block: elements pc + 16t .. pc + 16t + 15, zero past k.
  LaneMajorActivations(m, k, kb, s.xl, s.ldxl, [&](size_t i, size_t pc, size_t t) {
    const size_t c = pc + 16 * t;
    return _mm512_maskz_loadu_ps(Mask16(k - c), x + i * k + c);
  });
  Gemm(s.xl, s.ldxl, m, k, kb, n_begin, n_end, bias, y, ldy, s.panel, s.sums,
       [&](size_t j0, size_t nc, size_t pc, size_t kc, float* panel) {
         PackDense<W>(w, k, j0, nc, pc, kc, panel);
       });
}

void MatmulMxfp4(const float* x, size_t m, size_t k, const uint8_t* codes, const uint8_t* scales,
                 size_t n_begin, size_t n_end, const float* bias, float* y, size_t ldy) {
  if (m == 0 || n_begin >= n_end) return;
  if (k == 0) return BiasOnly(m, n_begin, n_end, bias, y, ldy);
  switch (m) {
    case 1: return DotMxfp4<1>(x, k, codes, scales, n_begin, n_end, bias, y, ldy);
    case 2: return DotMxfp4<2>(x, k, codes, scales, n_begin, n_end, bias, y, ldy);
    case 3: return DotMxfp4<3>(x, k, codes, scales, n_begin, n_end, bias, y, ldy);
    case 4: return DotMxfp4<4>(x, k, codes, scales, n_begin, n_end, bias, y, ldy);
    case 5: return DotMxfp4<5>(x, k, codes, scales, n_begin, n_end, bias, y, ldy);
    case 6: return DotMxfp4<6>(x, k, codes, scales, n_begin, n_end, bias, y, ldy);
    case 7: return DotMxfp4<7>(x, k, codes, scales, n_begin, n_end, bias, y, ldy);
    case 8: return DotMxfp4<8>(x, k, codes, scales, n_begin, n_end, bias, y, ldy);
    default: break;
  }
  const KBlocks kb = PlanKBlocks(k);
  const GemmScratch s = GetGemmScratch(m, k);
  // Steps 2g and 2g + 1 of a block: the A and B lanes of MXFP4 block g (kPerm32 order).
  const __m512i idx_a = _mm512_load_si512(kPerm32), idx_b = _mm512_load_si512(kPerm32 + 16);
  LaneMajorActivations(m, k, kb, s.xl, s.ldxl, [&](size_t i, size_t pc, size_t t) {
    const float* block = x + i * k + pc + (t / 2) * kMxfp4BlockSize;
    return _mm512_permutex2var_ps(_mm512_loadu_ps(block), t % 2 == 0 ? idx_a : idx_b,
                                  _mm512_loadu_ps(block + 16));
  });
  Gemm(s.xl, s.ldxl, m, k, kb, n_begin, n_end, bias, y, ldy, s.panel, s.sums,
       [&](size_t j0, size_t nc, size_t pc, size_t kc, float* panel) {
         PackMxfp4(codes, scales, k, j0, nc, pc, kc, panel);
       });
}

}  // namespace

void FillAvx512Matmul(KernelTable& t) {
  t.matmul_bf16 = MatmulDense<Bf16Weights>;
  t.matmul_bf16_isa = "avx512";
  t.matmul_f16 = MatmulDense<F16Weights>;
  t.matmul_f16_isa = "avx512";
  t.matmul_f32 = MatmulDense<F32Weights>;
  t.matmul_f32_isa = "avx512";
  t.matmul_mxfp4 = MatmulMxfp4;
  t.matmul_fp8_dot = MatmulFp8Dot;
  t.matmul_fp8_dot_isa = "avx512";
  t.matmul_mxfp4_isa = "avx512";
}

}  // namespace tessera
