// AVX2 + FMA (+ F16C) matmul kernels: y[:, n_begin:n_end] = x W^T + bias with W in BF16, F16,
// F32 or MXFP4 (contract in kernels.h); BF16, F16 and F32 share one implementation (templated on
// the weight loader), so they have the same summation order. Same design as matmul_avx512.cpp
// (read its header), sized for 8-lane registers and 16 ymm: output (i, j) =
// ReduceLanes(S_0 .. S_7) + bias, where lane l's step t is element 8t + l (BF16, F16, F32; zero
// past k) or, for MXFP4, element 32g + kPerm32[8u + l] with t = 4g + u (the nibble decoder's
// order). The dot form (m <= kDotMaxRows, kDotCols(R) weight rows per pass)
// keeps S_0 .. S_7 in the lanes of one accumulator; the lane-split GEMM (m > kDotMaxRows) keeps
// <= 6 rows x 16 columns of one S_l in 12 accumulators over a [lane][step][16 columns] panel.
// Both evaluate the same sums in the same order, so a row's bits do not depend on m, and columns
// never interact, so they do not depend on [n_begin, n_end) either. Exact decoding, f32
// activations and f32 FMAs throughout.
//
// Nothing here may run before the CPU check: no dynamic initialisers (tables are constexpr) and
// no STL templates whose out-of-line copies the linker could share with baseline files.
// Loops over register arrays carry `#pragma GCC unroll` so that the arrays stay in registers at
// -O2 too (RelWithDebInfo), not only at the -O3 of Release builds.
#include <immintrin.h>

#include <bit>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "kernels/kernels.h"
#include "kernels/scratch.h"
#include "kernels/matmul_fill.h"
#include "kernels/mxfp4.h"

namespace tessera {
namespace {

constexpr size_t kLanes = 8;       // partial sums per output (one ymm of f32)
constexpr size_t kDotMaxRows = 4;  // m up to this uses the dot form
constexpr size_t kNr = 16;         // GEMM columns per panel (2 ymm)
constexpr int kMaxMr = 6;          // GEMM micro-tile rows (6 x 2 accumulators)
constexpr size_t kMaxKc = 2048;    // k block: one lane's panel slice is kc / 8 x 64 B <= 16 KB
constexpr size_t kRowChunk = 48;   // GEMM rows whose lane sums (512 B per row) are live at once
// MXFP4 dot passes prefetch the weights this many passes ahead: the hardware prefetchers alone
// reach only about 40% of the read bandwidth on this access pattern (measured with AVX-512).
constexpr size_t kPrefetchTiles = 2;

// Weight rows per dot pass: R rows x C columns of accumulators plus R activation vectors must fit
// in 16 registers.
template <int R>
constexpr int kDotCols = R <= 2 ? 4 : 2;

inline size_t Min(size_t a, size_t b) { return a < b ? a : b; }
inline size_t CeilDiv(size_t a, size_t b) { return (a + b - 1) / b; }
inline size_t RoundUp(size_t a, size_t b) { return CeilDiv(a, b) * b; }

// Lane masks for maskload/maskstore: the first min(n, 8) lanes set.
alignas(64) constexpr int32_t kMaskWindow[16] = {-1, -1, -1, -1, -1, -1, -1, -1,
                                                 0,  0,  0,  0,  0,  0,  0,  0};
inline __m256i Mask8(size_t n) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kMaskWindow + 8 - Min(n, 8)));
}

// ---- decoding -----------------------------------------------------------------------------------

// Weight loaders of the dense formats: Load(p) decodes the 8 weights at p exactly to f32,
// LoadPartial(p, n) the first n (< 8), zero-padded (no read past p + n).
struct Bf16Weights {
  using Elem = uint16_t;
  static inline __m256 Load(const uint16_t* p) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  static inline __m256 LoadPartial(const uint16_t* p, size_t n) {
    alignas(16) uint16_t buf[8] = {};
    std::memcpy(buf, p, n * sizeof(uint16_t));
    return Load(buf);
  }
};
// IEEE binary16 through F16C: vcvtph2ps is exact for every value (f16 subnormals are normal f32
// numbers). FillAvx2Matmul installs these kernels only when the CPU has F16C.
struct F16Weights {
  using Elem = uint16_t;
  static inline __m256 Load(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static inline __m256 LoadPartial(const uint16_t* p, size_t n) {
    alignas(16) uint16_t buf[8] = {};
    std::memcpy(buf, p, n * sizeof(uint16_t));
    return Load(buf);
  }
};
// F32 weights as they are. The empty asm keeps the loaded vector in a register, so that GCC
// does not fold the load into each of the R FMAs that use it (R loads per weight vector).
struct F32Weights {
  using Elem = float;
  static inline __m256 Load(const float* p) {
    __m256 v = _mm256_loadu_ps(p);
    asm("" : "+x"(v));
    return v;
  }
  static inline __m256 LoadPartial(const float* p, size_t n) {
    __m256 v = _mm256_maskload_ps(p, Mask8(n));
    asm("" : "+x"(v));
    return v;
  }
};

// The 8 non-negative E2M1 values times 2^(s - 127) for every E8M0 scale byte s (8 KB, built at
// compile time), each pre-xored with (code << 28) for the sign trick in Mxfp4Decoder: one load
// replaces a multiply and an xor per block. The products are exact (E2M1 values have 2
// significant bits; scale 0 gives subnormals) and equal the reference's kE2M1Values[c] *
// E8M0ScaleToF32(s), including inf and 0 * inf = NaN for s = 255.
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
struct ScaledE2M1Tables {
  alignas(32) uint32_t bits[256][8];
};
constexpr ScaledE2M1Tables MakeScaledE2M1Tables() {
  ScaledE2M1Tables t{};
  for (uint32_t s = 0; s < 256; ++s) {
    for (uint32_t c = 0; c < 8; ++c) t.bits[s][c] = E2M1TimesScaleBits(c, s) ^ (c << 28);
  }
  return t;
}
constexpr ScaledE2M1Tables kScaledE2M1 = MakeScaledE2M1Tables();

// One MXFP4 block (16 code bytes) decodes into four vectors: the block is broadcast to both
// 128-bit lanes (lane L holds dword L % 4 = codes 8(L%4) .. 8(L%4)+7) and vector t shifts nibble
// q = 2t + L/4 of it to bits 0-3, so
//   vector t, lane L = element 8 (L % 4) + 2t + L / 4.
// vpermps reads index bits 0-2 (the magnitude, from the 8 positive table entries scaled by
// 2^(s-127), exact) and bit 3, the sign, is xor-ed into bit 31.
// Element of the block held by row s = 8t + L (0..31) of a packed panel / permuted activations:
constexpr int kPerm32[32] = {0, 8, 16, 24, 1, 9, 17, 25, 2, 10, 18, 26, 3, 11, 19, 27,
                             4, 12, 20, 28, 5, 13, 21, 29, 6, 14, 22, 30, 7, 15, 23, 31};
constexpr bool PermutationFollowsTheDecoder() {
  for (int s = 0; s < 32; ++s) {
    const int t = s / 8, lane = s % 8;
    if (kPerm32[s] != 8 * (lane % 4) + 2 * t + lane / 4) return false;
  }
  return true;
}
static_assert(PermutationFollowsTheDecoder());

struct Mxfp4Decoder {
  __m256i shift0 = _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4);
  __m256i eight = _mm256_set1_epi32(8);

  void Decode(const uint8_t* codes, uint8_t scale, __m256 out[4]) const {
    // idx << 28 puts the nibble's sign at bit 31 but also its magnitude bits c at 28..30; the
    // table entry for c is pre-xored with c << 28, so one xor applies the sign and cancels them.
    const __m256 table =
        _mm256_load_ps(reinterpret_cast<const float*>(kScaledE2M1.bits[scale]));
    const __m256i block =
        _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes)));
    __m256i shift = shift0;
#pragma GCC unroll 4
    for (int t = 0; t < 4; ++t) {
      const __m256i idx = _mm256_srlv_epi32(block, shift);
      const __m256 value = _mm256_permutevar8x32_ps(table, idx);
      out[t] = _mm256_xor_ps(value, _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28)));
      shift = _mm256_add_epi32(shift, eight);
    }
  }
};

// The four decoder-order vectors of one 32-float block of activations: vector t is
// [X0[2t], X1[2t], X2[2t], X3[2t], X0[2t+1], ..., X3[2t+1]] for the block's 8-float quarters
// X0..X3 (lane l = element kPerm32[8t + l]): a 4x4 transpose of float pairs, then an in-vector
// permute.
inline void PermuteBlock(const float* x, __m256 out[4]) {
  const __m256i order = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
  __m256d p[4];
#pragma GCC unroll 4
  for (int q = 0; q < 4; ++q) p[q] = _mm256_castps_pd(_mm256_loadu_ps(x + 8 * q));
  const __m256d a = _mm256_unpacklo_pd(p[0], p[1]), b = _mm256_unpackhi_pd(p[0], p[1]);
  const __m256d c = _mm256_unpacklo_pd(p[2], p[3]), d = _mm256_unpackhi_pd(p[2], p[3]);
  const __m256d pairs[4] = {_mm256_permute2f128_pd(a, c, 0x20), _mm256_permute2f128_pd(b, d, 0x20),
                            _mm256_permute2f128_pd(a, c, 0x31), _mm256_permute2f128_pd(b, d, 0x31)};
#pragma GCC unroll 4
  for (int t = 0; t < 4; ++t) {
    out[t] = _mm256_permutevar8x32_ps(_mm256_castpd_ps(pairs[t]), order);
  }
}

// xp[r, 32g + s] = x[r, 32g + kPerm32[s]] for r < rows: activations in decode order.
void PermuteActivations(const float* x, size_t rows, size_t k, float* xp) {
  for (size_t i = 0; i < rows * k; i += kMxfp4BlockSize) {
    __m256 v[4];
    PermuteBlock(x + i, v);
#pragma GCC unroll 4
    for (int t = 0; t < 4; ++t) _mm256_store_ps(xp + i + 8 * t, v[t]);
  }
}

// The reduction tree of the 8 lane sums, written out so that the dot form (lanes of one
// register) and the GEMM (one register per lane, 8 columns each) perform the same additions:
// lanes l + l+4, then + l+2, then + l+1.
inline float ReduceLanes(__m256 v) {
  const __m128 b = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
  return _mm_cvtss_f32(_mm_add_ss(c, _mm_movehdup_ps(c)));
}
inline __m256 ReduceLanes(const __m256 s[kLanes]) {
  __m256 a[4];
#pragma GCC unroll 4
  for (int l = 0; l < 4; ++l) a[l] = _mm256_add_ps(s[l], s[l + 4]);
  a[0] = _mm256_add_ps(a[0], a[2]);
  a[1] = _mm256_add_ps(a[1], a[3]);
  return _mm256_add_ps(a[0], a[1]);
}

// ---- dot form (m <= kDotMaxRows) ----------------------------------------------------------------

inline float Finish(__m256 acc, const float* bias, size_t j) {
  return ReduceLanes(acc) + (bias ? bias[j] : 0.0f);
}

// R rows of x (stride k) against C consecutive weight rows starting at w; writes y[r, c]
// (stride ldy) for c < C. The accumulation order of each (r, c) does not depend on C.
template <typename W, int R, int C>
void DotTile(const float* x, size_t k, const typename W::Elem* w, const float* bias, float* y,
             size_t ldy) {
  __m256 acc[R][C];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_ps();
  }
  size_t i = 0;
  for (; i + 8 <= k; i += 8) {
    __m256 xv[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) xv[r] = _mm256_loadu_ps(x + r * k + i);
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) {
      const __m256 wv = W::Load(w + c * k + i);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) acc[r][c] = _mm256_fmadd_ps(wv, xv[r], acc[r][c]);
    }
  }
  if (i < k) {
    const __m256i mask = Mask8(k - i);
    __m256 xv[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) xv[r] = _mm256_maskload_ps(x + r * k + i, mask);
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) {
      const __m256 wv = W::LoadPartial(w + c * k + i, k - i);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) acc[r][c] = _mm256_fmadd_ps(wv, xv[r], acc[r][c]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) y[r * ldy + c] = Finish(acc[r][c], bias, c);
  }
}

template <typename W, int R>
void Dot(const float* x, size_t k, const typename W::Elem* w, size_t n_begin, size_t n_end,
         const float* bias, float* y, size_t ldy) {
  constexpr size_t C = kDotCols<R>;
  size_t j = n_begin;
  for (; j + C <= n_end; j += C) {
    DotTile<W, R, C>(x, k, w + j * k, bias ? bias + j : nullptr, y + j, ldy);
  }
  for (; j < n_end; ++j) DotTile<W, R, 1>(x, k, w + j * k, bias ? bias + j : nullptr, y + j, ldy);
}

// As DotTile for MXFP4: xp holds R rows of permuted activations (PermuteActivations); codes
// and scales point at weight row j0 (C rows follow, `groups` blocks each).
template <int R, int C>
void DotTileMxfp4(const float* xp, size_t k, const uint8_t* codes, const uint8_t* scales,
                  const float* bias, float* y, size_t ldy) {
  const Mxfp4Decoder dec;
  const size_t groups = k / kMxfp4BlockSize;
  __m256 acc[R][C];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_ps();
  }
  // The C rows' codes are contiguous (16 C bytes per block step); prefetch the same span
  // kPrefetchTiles passes ahead, a line per 64 bytes, plus the scales.
  const char* pf_codes =
      reinterpret_cast<const char*>(codes) + kPrefetchTiles * C * groups * kMxfp4BlockBytes;
  const char* pf_scales = reinterpret_cast<const char*>(scales) + kPrefetchTiles * C * groups;
  for (size_t g = 0; g < groups; ++g) {
    if constexpr (C > 1) {
      const size_t offset = g * C * kMxfp4BlockBytes;
      if (offset % 64 == 0) _mm_prefetch(pf_codes + offset, _MM_HINT_T0);
      if ((g * C) % 64 == 0) _mm_prefetch(pf_scales + g * C, _MM_HINT_T0);
    }
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) {
      const size_t block = c * groups + g;
      __m256 wv[4];
      dec.Decode(codes + block * kMxfp4BlockBytes, scales[block], wv);
#pragma GCC unroll 4
      for (int t = 0; t < 4; ++t) {
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          const __m256 xv = _mm256_load_ps(xp + r * k + g * kMxfp4BlockSize + 8 * t);
          acc[r][c] = _mm256_fmadd_ps(wv[t], xv, acc[r][c]);
        }
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
  constexpr size_t C = kDotCols<R>;
  float* xp = ThreadScratchFloats(R * k);
  PermuteActivations(x, R, k, xp);
  const size_t groups = k / kMxfp4BlockSize;
  size_t j = n_begin;
  for (; j + C <= n_end; j += C) {
    DotTileMxfp4<R, C>(xp, k, codes + j * groups * kMxfp4BlockBytes, scales + j * groups,
                       bias ? bias + j : nullptr, y + j, ldy);
  }
  for (; j < n_end; ++j) {
    DotTileMxfp4<R, 1>(xp, k, codes + j * groups * kMxfp4BlockBytes, scales + j * groups,
                       bias ? bias + j : nullptr, y + j, ldy);
  }
}

// ---- lane-split GEMM (m > kDotMaxRows) ----------------------------------------------------------

// In-register transpose: r[i] lane t -> r[t] lane i.
inline void Transpose8x8(__m256 r[8]) {
  __m256 t[8], s[8];
#pragma GCC unroll 16
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
#pragma GCC unroll 16
  for (int i = 0; i < 8; i += 4) {
    s[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    s[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    s[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    s[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
#pragma GCC unroll 16
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_permute2f128_ps(s[i], s[i + 4], 0x20);
    r[i + 4] = _mm256_permute2f128_ps(s[i], s[i + 4], 0x31);
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
// xl[i, pc + l S + t] = the x element of step t of lane l (0 past k); row stride ldxl.
// load_steps(i, pc, t0, r) writes steps t0 .. t0+7 (8 lanes each) of row i in the block at pc
// (steps past S may hold anything); they are transposed together.
template <typename LoadSteps>
void LaneMajorActivations(size_t m, size_t k, const KBlocks& kb, float* xl, size_t ldxl,
                          const LoadSteps& load_steps) {
  for (size_t i = 0; i < m; ++i) {
    for (size_t pc = 0; pc < k; pc += kb.size) {
      const size_t steps = Steps(Min(kb.size, k - pc));
      for (size_t t0 = 0; t0 < steps; t0 += 8) {
        __m256 r[8];
        load_steps(i, pc, t0, r);
        Transpose8x8(r);
        const __m256i mask = Mask8(steps - t0);
        float* dst = xl + i * ldxl + pc + t0;
#pragma GCC unroll 8
        for (size_t l = 0; l < kLanes; ++l) _mm256_maskstore_ps(dst + l * steps, mask, r[l]);
      }
    }
  }
}

// Panel layout for columns [j0, j0 + nc) (nc <= 16) and one k block [pc, pc + kc) with S steps:
// row l S + t holds the weights of step t of lane l for the 16 columns (zero for columns past nc
// and elements past k), so each lane's rows are contiguous. Each column's steps are decoded as in
// the dot form and 8 columns are transposed at a time.
template <typename W>
void PackDense(const typename W::Elem* w, size_t k, size_t j0, size_t nc, size_t pc, size_t kc,
               float* panel) {
  const size_t steps = Steps(kc);
  for (size_t strip = 0; strip < kNr; strip += 8) {
    const size_t cols = strip < nc ? Min(8, nc - strip) : 0;
    for (size_t t = 0; t < steps; ++t) {
      const size_t n = Min(8, kc - 8 * t);
      __m256 r[8];
#pragma GCC unroll 8
      for (size_t i = 0; i < 8; ++i) {
        const typename W::Elem* src = w + (j0 + strip + i) * k + pc + 8 * t;
        r[i] = i >= cols ? _mm256_setzero_ps() : n == 8 ? W::Load(src) : W::LoadPartial(src, n);
      }
      Transpose8x8(r);
#pragma GCC unroll 8
      for (size_t l = 0; l < kLanes; ++l) {
        _mm256_store_ps(panel + (l * steps + t) * kNr + strip, r[l]);
      }
    }
  }
}

void PackMxfp4(const uint8_t* codes, const uint8_t* scales, size_t k, size_t j0, size_t nc,
               size_t pc, size_t kc, float* panel) {
  const Mxfp4Decoder dec;
  const size_t groups = k / kMxfp4BlockSize;
  const size_t steps = Steps(kc);
  for (size_t strip = 0; strip < kNr; strip += 8) {
    const size_t cols = strip < nc ? Min(8, nc - strip) : 0;
    for (size_t g = 0; g < kc / kMxfp4BlockSize; ++g) {
      __m256 v[4][8];  // v[u][i]: step 4g + u of column i
#pragma GCC unroll 8
      for (size_t i = 0; i < 8; ++i) {
        __m256 d[4];
        if (i < cols) {
          const size_t block = (j0 + strip + i) * groups + pc / kMxfp4BlockSize + g;
          dec.Decode(codes + block * kMxfp4BlockBytes, scales[block], d);
        } else {
          d[0] = d[1] = d[2] = d[3] = _mm256_setzero_ps();
        }
#pragma GCC unroll 4
        for (int u = 0; u < 4; ++u) v[u][i] = d[u];
      }
#pragma GCC unroll 4
      for (size_t u = 0; u < 4; ++u) {
        Transpose8x8(v[u]);
#pragma GCC unroll 8
        for (size_t l = 0; l < kLanes; ++l) {
          _mm256_store_ps(panel + (l * steps + 4 * g + u) * kNr + strip, v[u][l]);
        }
      }
    }
  }
}

// One lane of one row block: s[i, 0:16] (stride lds) = (first ? 0 : s[i, 0:16]) +
// sum over t < steps, in order, of panel[t, 0:16] * x[i, t] (x stride ldx).
template <int MR>
void MicroKernel(const float* x, size_t ldx, const float* panel, size_t steps, float* s,
                 size_t lds, bool first) {
  __m256 acc[MR][2];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    acc[i][0] = first ? _mm256_setzero_ps() : _mm256_load_ps(s + i * lds);
    acc[i][1] = first ? _mm256_setzero_ps() : _mm256_load_ps(s + i * lds + 8);
  }
#pragma GCC unroll 4
  for (size_t t = 0; t < steps; ++t) {
    const __m256 w0 = _mm256_load_ps(panel + t * kNr), w1 = _mm256_load_ps(panel + t * kNr + 8);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const __m256 xb = _mm256_broadcast_ss(x + i * ldx + t);
      acc[i][0] = _mm256_fmadd_ps(w0, xb, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(w1, xb, acc[i][1]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    _mm256_store_ps(s + i * lds, acc[i][0]);
    _mm256_store_ps(s + i * lds + 8, acc[i][1]);
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
  const __m256i mask[2] = {Mask8(nc), Mask8(nc > 8 ? nc - 8 : 0)};
  for (size_t i = 0; i < rows; ++i) {
#pragma GCC unroll 2
    for (int q = 0; q < 2; ++q) {
      __m256 lane_sums[kLanes];
#pragma GCC unroll 8
      for (size_t l = 0; l < kLanes; ++l) {
        lane_sums[l] = _mm256_load_ps(sums + i * kSumsRow + l * kNr + 8 * q);
      }
      const __m256 b = bias ? _mm256_maskload_ps(bias + jc + 8 * q, mask[q]) : _mm256_setzero_ps();
      _mm256_maskstore_ps(y + (r0 + i) * ldy + jc + 8 * q, mask[q],
                          _mm256_add_ps(ReduceLanes(lane_sums), b));
    }
  }
}

// The GEMM loop nest shared by both weight formats. xl: lane-major activations (stride ldxl);
// pack(j0, nc, pc, kc, panel) decodes one k block of a panel; panel: 16 x RoundUp(k, 8) floats
// (every k block of 16 columns, block pc at 16 pc); sums: kRowChunk x kLanes x 16 floats.
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
    // Row chunks keep their lane sums in L1/L2 next to the panel.
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
  const size_t ldxl = RoundUp(k, 16);  // keeps every row 64-byte aligned
  const size_t panel = kNr * ldxl, sums = kRowChunk * kLanes * kNr;
  float* base = ThreadScratchFloats(panel + sums + m * ldxl);
  return {base, base + panel, base + panel + sums, ldxl};
}

// k == 0: every output is the empty sum plus the bias, as in the reference.
void BiasOnly(size_t m, size_t n_begin, size_t n_end, const float* bias, float* y, size_t ldy) {
  for (size_t i = 0; i < m; ++i) {
    for (size_t j = n_begin; j < n_end; ++j) y[i * ldy + j] = 0.0f + (bias ? bias[j] : 0.0f);
  }
}

// ---- entry points -------------------------------------------------------------------------------

// BF16, F16 and F32 weights (W: the loader).
template <typename W>
void MatmulDense(const float* x, size_t m, size_t k, const typename W::Elem* w, size_t n_begin,
                 size_t n_end, const float* bias, float* y, size_t ldy) {
  if (m == 0 || n_begin >= n_end) return;
  if (k == 0) return BiasOnly(m, n_begin, n_end, bias, y, ldy);
  static_assert(kDotMaxRows == 4);
  switch (m) {
    case 1: return Dot<W, 1>(x, k, w, n_begin, n_end, bias, y, ldy);
    case 2: return Dot<W, 2>(x, k, w, n_begin, n_end, bias, y, ldy);
    case 3: return Dot<W, 3>(x, k, w, n_begin, n_end, bias, y, ldy);
    case 4: return Dot<W, 4>(x, k, w, n_begin, n_end, bias, y, ldy);
    default: break;
  }
  const KBlocks kb = PlanKBlocks(k);
  const GemmScratch s = GetGemmScratch(m, k);
  // Step t of a block: elements pc + 8t .. pc + 8t + 7, zero past k.
  LaneMajorActivations(m, k, kb, s.xl, s.ldxl, [&](size_t i, size_t pc, size_t t0, __m256 r[8]) {
    for (size_t u = 0; u < 8; ++u) {
      const size_t c = pc + 8 * (t0 + u);
      r[u] = c < k ? _mm256_maskload_ps(x + i * k + c, Mask8(k - c)) : _mm256_setzero_ps();
    }
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
    default: break;
  }
  const KBlocks kb = PlanKBlocks(k);
  const GemmScratch s = GetGemmScratch(m, k);
  // Steps 4g .. 4g + 3 of a block: the four decoder vectors of MXFP4 block g (kPerm32 order),
  // i.e. two blocks per 8 steps; blocks past the k block are never stored.
  LaneMajorActivations(m, k, kb, s.xl, s.ldxl, [&](size_t i, size_t pc, size_t t0, __m256 r[8]) {
    const size_t kc = Min(kb.size, k - pc);
    for (size_t h = 0; h < 2; ++h) {
      const size_t c = pc + (t0 / 4 + h) * kMxfp4BlockSize;
      if (c < pc + kc) {
        PermuteBlock(x + i * k + c, r + 4 * h);
      } else {
        for (size_t u = 0; u < 4; ++u) r[4 * h + u] = _mm256_setzero_ps();
      }
    }
  });
  Gemm(s.xl, s.ldxl, m, k, kb, n_begin, n_end, bias, y, ldy, s.panel, s.sums,
       [&](size_t j0, size_t nc, size_t pc, size_t kc, float* panel) {
         PackMxfp4(codes, scales, k, j0, nc, pc, kc, panel);
       });
}

}  // namespace

void FillAvx2Matmul(KernelTable& t) {
  t.matmul_bf16 = MatmulDense<Bf16Weights>;
  t.matmul_bf16_isa = "avx2";
  // Isa::kAvx2 already requires F16C (CpuFeatures::BestIsa), as every AVX2 CPU we target has it;
  // checked here too so that the F16 entry falls back to the reference should that ever change.
  if (GetCpuFeatures().f16c) {
    t.matmul_f16 = MatmulDense<F16Weights>;
    t.matmul_f16_isa = "avx2";
  }
  t.matmul_f32 = MatmulDense<F32Weights>;
  t.matmul_f32_isa = "avx2";
  t.matmul_mxfp4 = MatmulMxfp4;
  t.matmul_mxfp4_isa = "avx2";
}

}  // namespace tessera
