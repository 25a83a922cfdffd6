// AVX2 q8 kernels (kernels/q8.h): the activation quantizer and the integer matmuls against MXFP4,
// int8 and int4 (kernels/int4.h) weights, with the scalar reference's bits (reference.cpp): the integer block dot
// products are exact in any order, and the f32 part is the reference's sequence
// acc = fmaf(float(dot_b), d[i, b] * s[j, b], acc), one lane per output column.
//
// vpmaddubsw multiplies unsigned by signed bytes and adds adjacent pairs into int16 with
// saturation, so every pair sum must stay below 2^15 for the result to be exact:
//  - MXFP4: weights decoded by vpshufb to 2 E2M1 + 12 in [0, 24] (unsigned), activations signed:
//    a pair is at most 2 * 24 * 127 = 6096, and the low- and high-nibble products of one code
//    vector add in int16 (12192) before vpmaddwd widens them. raw = dot + 12 sum[i, b]; the int32
//    accumulator starts at kMagicBits - 12 sum[i, b].
//  - int8: the +128 offset would give pairs up to 2 * 255 * 127, so the sign trick instead: |W8|
//    (<= 128) as the unsigned operand and vpsignb(q, W8) = +-q as the signed one, whose products
//    are W8 q exactly; pairs <= 2 * 128 * 127 = 32512. No offset: the accumulator starts at
//    kMagicBits.
// kMagicBits are the f32 bits of 1.5 * 2^23: the block's accumulator ends at kMagicBits + dot
// with |dot| < 2^22, which read as f32 is exactly 1.5 * 2^23 + dot, so one subtraction gives
// float(dot) (as in q8_avx512vnni.cpp).
//
// Lanes: the 16 columns of a packed group are two ymm halves (columns 0-7 = bytes 0-31 of a
// 64-byte step, 8-15 = bytes 32-63). A tile is R rows x one group, whose weights are read once
// per R rows (the first row block streams them, with software prefetch; later row blocks find
// them in L1/L2).
#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <limits>

#include "kernels/ggml_q8.h"
#include "kernels/int4.h"
#include "kernels/kernels.h"
#include "kernels/q8.h"

namespace tessera {
namespace {

constexpr size_t kSteps = kQ8Block / 4;      // 4-byte k steps per block
constexpr size_t kStepBytes = kQ8Group * 4;  // one step of one group: 64 bytes
constexpr int32_t kMagicBits = 0x4B400000;   // f32 bits of 1.5 * 2^23
constexpr float kMagic = 12582912.0f;
constexpr float kTinyAmax = 1e-30f;          // reference.cpp kQ8TinyAmax
constexpr int32_t kMxfp4Offset = 12;
constexpr int32_t kInt4Offset = 16;          // int4 weights enter as q - z + 16 (kernels/int4.h)
constexpr int kTileRows = 3;                 // 16 ymm: 2 R int32 accumulators + weights + constants
// Software prefetch distance of the streamed weights (the first row block of each group): with
// 1 KiB the decode-sized calls reached 0.62 (MXFP4) / 0.73 (int8) of the read bandwidth on one
// core, with 4 KiB 0.86 / 0.92 (bench/q8_bench.cpp, TESSERA_ISA=avx2).
constexpr size_t kPrefetchBytes = 4096;

// 2 E2M1(c) + 12 per code c, in both 128-bit lanes (vpshufb looks up within a lane).
alignas(32) constexpr uint8_t kMxfp4Lut[32] = {12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0,
                                               12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0};

inline size_t Min(size_t a, size_t b) { return a < b ? a : b; }
inline int32_t Load32(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// ---- quantizer ----------------------------------------------------------------------------------

inline uint32_t HorizontalMaxU32(__m256i v) {
  __m128i m = _mm_max_epu32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  m = _mm_max_epu32(m, _mm_shuffle_epi32(m, _MM_SHUFFLE(1, 0, 3, 2)));
  m = _mm_max_epu32(m, _mm_shuffle_epi32(m, _MM_SHUFFLE(2, 3, 0, 1)));
  return static_cast<uint32_t>(_mm_cvtsi128_si32(m));
}

inline int32_t HorizontalSum(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s);
}

// As the AVX-512 quantizer: amax as the integer maximum of the |x| bit patterns (NaN and inf are
// the patterns >= 0x7f800000), the reference's f32 divisions, vcvtps2dq (round to nearest even).
void QuantizeQ8(const float* x, size_t k, int8_t* q, float* d, int32_t* sum) {
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff);
  const __m256i lo = _mm256_set1_epi32(-127), hi = _mm256_set1_epi32(127);
  // vpackssdw / vpacksswb interleave the 128-bit lanes; this puts the dwords back in order.
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (size_t b = 0; b < k / kQ8Block; ++b) {
    const float* xb = x + b * kQ8Block;
    int8_t* qb = q + b * kQ8Block;
    __m256 v[4];
    __m256i a = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int u = 0; u < 4; ++u) {
      v[u] = _mm256_loadu_ps(xb + 8 * u);
      a = _mm256_max_epu32(a, _mm256_and_si256(_mm256_castps_si256(v[u]), abs_mask));
    }
    const uint32_t amax_bits = HorizontalMaxU32(a);
    float amax;
    std::memcpy(&amax, &amax_bits, sizeof(amax));
    if (amax_bits >= 0x7f800000u || amax < kTinyAmax) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(qb), _mm256_setzero_si256());
      sum[b] = 0;
      d[b] = amax_bits >= 0x7f800000u ? std::numeric_limits<float>::quiet_NaN() : 0.0f;
      continue;
    }
    d[b] = amax / 127.0f;
    const __m256 inv = _mm256_set1_ps(127.0f / amax);
    __m256i iv[4];
#pragma GCC unroll 4
    for (int u = 0; u < 4; ++u) {
      iv[u] = _mm256_min_epi32(_mm256_max_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(v[u], inv)), lo), hi);
    }
    sum[b] = HorizontalSum(_mm256_add_epi32(_mm256_add_epi32(iv[0], iv[1]), _mm256_add_epi32(iv[2], iv[3])));
    const __m256i packed = _mm256_packs_epi16(_mm256_packs_epi32(iv[0], iv[1]), _mm256_packs_epi32(iv[2], iv[3]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(qb), _mm256_permutevar8x32_epi32(packed, order));
  }
}

// ---- matmuls ------------------------------------------------------------------------------------

// The activation side of one call: row i at q + i k, block scales at d + i nb; start values of
// the block accumulators at init + i nb (MXFP4; int8 starts every block at kMagicBits).
struct Rows {
  const int8_t* q;
  const float* d;
  const int32_t* init;
  size_t k, nb;
};

// Where a tile's results go: columns [col, col + 16) of rows i0.., those at or past n_end dropped.
struct Out {
  float* y;
  size_t ldy;
  const float* bias;
  size_t n_end;
};

inline __m256 BlockFma(__m256i dot, __m256 d, __m256 s, __m256 acc) {
  const __m256 dotf = _mm256_sub_ps(_mm256_castsi256_ps(dot), _mm256_set1_ps(kMagic));
  return _mm256_fmadd_ps(dotf, _mm256_mul_ps(d, s), acc);
}

// 2^(e - 128) for 8 E8M0 bytes (e < 255), exact: the f32 bits (e - 1) << 23 for e >= 2, the
// subnormals 0x00200000 << e (2^-128, 2^-127) for e = 0, 1.
inline __m256 Mxfp4Scales(const uint8_t* e) {
  const __m256i ei = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(e)));
  const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(ei, _mm256_set1_epi32(1)), 23);
  const __m256i subnormal = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), ei);
  const __m256i is_normal = _mm256_cmpgt_epi32(ei, _mm256_set1_epi32(1));
  return _mm256_castsi256_ps(_mm256_blendv_epi8(subnormal, normal, is_normal));
}

template <int R>
void StoreTile(const __m256 (&acc)[R][2], size_t i0, size_t col, const Out& o) {
  const size_t cols = Min(kQ8Group, o.n_end - col);
  if (cols == kQ8Group) {
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m256 bias = o.bias ? _mm256_loadu_ps(o.bias + col + 8 * h) : _mm256_setzero_ps();
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        _mm256_storeu_ps(o.y + (i0 + r) * o.ldy + col + 8 * h, o.bias ? _mm256_add_ps(acc[r][h], bias) : acc[r][h]);
      }
    }
    return;
  }
  for (int r = 0; r < R; ++r) {
    alignas(32) float v[kQ8Group];
    _mm256_store_ps(v, acc[r][0]);
    _mm256_store_ps(v + 8, acc[r][1]);
    float* yr = o.y + (i0 + r) * o.ldy + col;
    // The reference adds the bias only when there is one (acc + 0 would turn -0 into +0).
    for (size_t c = 0; c < cols; ++c) yr[c] = o.bias ? v[c] + o.bias[col + c] : v[c];
  }
}

// Rows i0 .. i0 + R - 1 against one int8 group (w: its packed values, s: its 16 row scales).
// s: per-row f32 scales of the group's 16 rows; or, with kHalfBlocks, binary16 block scales
// [k/32][16] (GGUF q8_0, kernels/ggml_q8.h) read as uint16_t and widened per block.
template <int R, bool kPrefetch, bool kHalfBlocks = false>
void Int8Tile(const Rows& x, size_t i0, const uint8_t* w, const void* s, size_t col, const Out& o) {
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
  if constexpr (!kHalfBlocks) {
    s0 = _mm256_loadu_ps(static_cast<const float*>(s));
    s1 = _mm256_loadu_ps(static_cast<const float*>(s) + 8);
  }
  __m256 acc[R][2];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  const int8_t* q = x.q + i0 * x.k;
  const float* d = x.d + i0 * x.nb;
  for (size_t b = 0; b < x.nb; ++b) {
    __m256i dot[R][2];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) dot[r][0] = dot[r][1] = _mm256_set1_epi32(kMagicBits);
    if constexpr (kHalfBlocks) {
      const uint16_t* h = static_cast<const uint16_t*>(s) + b * kQ8Group;
      s0 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h)));
      s1 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + 8)));
    }
    const uint8_t* wb = w + b * kSteps * kStepBytes;
    const int8_t* qb = q + b * kQ8Block;
#pragma GCC unroll 8
    for (size_t t = 0; t < kSteps; ++t) {
      const uint8_t* src = wb + t * kStepBytes;
      if constexpr (kPrefetch) _mm_prefetch(reinterpret_cast<const char*>(src) + kPrefetchBytes, _MM_HINT_T0);
      // W8 = stored byte - 128 = stored byte ^ 0x80 as int8.
      const __m256i w0 = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src)), flip);
      const __m256i w1 = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 32)), flip);
      const __m256i a0 = _mm256_abs_epi8(w0), a1 = _mm256_abs_epi8(w1);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m256i qv = _mm256_set1_epi32(Load32(qb + r * x.k + 4 * t));
        const __m256i p0 = _mm256_maddubs_epi16(a0, _mm256_sign_epi8(qv, w0));
        const __m256i p1 = _mm256_maddubs_epi16(a1, _mm256_sign_epi8(qv, w1));
        dot[r][0] = _mm256_add_epi32(dot[r][0], _mm256_madd_epi16(p0, ones));
        dot[r][1] = _mm256_add_epi32(dot[r][1], _mm256_madd_epi16(p1, ones));
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256 dr = _mm256_set1_ps(d[r * x.nb + b]);
      acc[r][0] = BlockFma(dot[r][0], dr, s0, acc[r][0]);
      acc[r][1] = BlockFma(dot[r][1], dr, s1, acc[r][1]);
    }
  }
  StoreTile<R>(acc, i0, col, o);
}

// The u8 operand offsets of one int4 weight group for 8 rows: lane r holds the byte 16 - z[r] four
// times, so code + offset = (q - z) + 16 lies in [1, 31] (kernels/int4.h; pairs in vpmaddubsw stay
// below 2 * 31 * 127, and a code vector's low- plus high-nibble products below 2^14).
inline __m256i Int4Offsets(const uint8_t* zeros) {
  const __m256i z = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(zeros)));
  return _mm256_mullo_epi32(_mm256_sub_epi32(_mm256_set1_epi32(kInt4Offset), z), _mm256_set1_epi32(0x01010101));
}

// The two 4-bit code formats of CodeTile (u = the ymm half: columns 8 u .. 8 u + 7). Block(b, s0,
// s1) is called at every block before its codes and sets the halves' scales.
// MXFP4: vpshufb through 2 E2M1 + 12; one E8M0 scale per block ([k/32][16]).
struct Mxfp4Codes {
  const uint8_t* scales;
  __m256i lut = _mm256_load_si256(reinterpret_cast<const __m256i*>(kMxfp4Lut));
  __m256i low4 = _mm256_set1_epi8(0x0f);

  template <bool kPrefetch>
  void Block(size_t b, __m256& s0, __m256& s1) {
    const uint8_t* e = scales + b * kQ8Group;
    if (kPrefetch && b % 4 == 0) _mm_prefetch(reinterpret_cast<const char*>(e) + kPrefetchBytes, _MM_HINT_T0);
    s0 = Mxfp4Scales(e);
    s1 = Mxfp4Scales(e + 8);
  }
  __m256i Low(__m256i v, int) const { return _mm256_shuffle_epi8(lut, _mm256_and_si256(v, low4)); }
  __m256i High(__m256i v, int) const { return _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi16(v, 4), low4)); }
};

// int4: the nibble plus its group's offsets; zeros and f32 scales ([k/G][16]) change once per weight
// group of blocks_per_group blocks.
struct Int4Codes {
  const uint8_t* zeros;
  const float* scales;
  size_t blocks_per_group;
  __m256i low4 = _mm256_set1_epi8(0x0f);
  __m256i offset[2] = {};  // set by Block before the first codes

  template <bool>
  void Block(size_t b, __m256& s0, __m256& s1) {
    if (b % blocks_per_group != 0) return;
    const size_t t = b / blocks_per_group;
    offset[0] = Int4Offsets(zeros + t * kQ8Group);
    offset[1] = Int4Offsets(zeros + t * kQ8Group + 8);
    s0 = _mm256_loadu_ps(scales + t * kQ8Group);
    s1 = _mm256_loadu_ps(scales + t * kQ8Group + 8);
  }
  __m256i Low(__m256i v, int u) const { return _mm256_add_epi8(_mm256_and_si256(v, low4), offset[u]); }
  __m256i High(__m256i v, int u) const {
    return _mm256_add_epi8(_mm256_and_si256(_mm256_srli_epi16(v, 4), low4), offset[u]);
  }
};

// One 8-value step h of R rows against a group's u8 operands: lo[u] / hi[u] hold the first / last
// four k values of the step for columns 8 u .. 8 u + 7; the products go into dot[r][u].
template <int R>
inline void CodeStep(const __m256i (&lo)[2], const __m256i (&hi)[2], const int8_t* qb, size_t k, size_t h,
                     __m256i (&dot)[R][2]) {
  const __m256i ones = _mm256_set1_epi16(1);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    const __m256i ql = _mm256_set1_epi32(Load32(qb + r * k + 8 * h));
    const __m256i qh = _mm256_set1_epi32(Load32(qb + r * k + 8 * h + 4));
#pragma GCC unroll 2
    for (int u = 0; u < 2; ++u) {
      const __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(lo[u], ql), _mm256_maddubs_epi16(hi[u], qh));
      dot[r][u] = _mm256_add_epi32(dot[r][u], _mm256_madd_epi16(p, ones));
    }
  }
}

// Rows i0 .. i0 + R - 1 against one group of 4-bit codes ([k/8][16][4]).
template <int R, bool kPrefetch, typename Codes>
void CodeTile(const Rows& x, size_t i0, const uint8_t* codes, const Codes& format, size_t col, const Out& o) {
  Codes c = format;
  __m256 acc[R][2];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  const int8_t* q = x.q + i0 * x.k;
  const float* d = x.d + i0 * x.nb;
  const int32_t* init = x.init + i0 * x.nb;
  __m256 s0 = _mm256_setzero_ps(), s1 = s0;  // set by Block before the first use
  for (size_t b = 0; b < x.nb; ++b) {
    c.template Block<kPrefetch>(b, s0, s1);
    __m256i dot[R][2];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) dot[r][0] = dot[r][1] = _mm256_set1_epi32(init[r * x.nb + b]);
    const uint8_t* cb = codes + b * (kSteps / 2) * kStepBytes;
    const int8_t* qb = q + b * kQ8Block;
#pragma GCC unroll 4
    for (size_t h = 0; h < kSteps / 2; ++h) {
      const uint8_t* src = cb + h * kStepBytes;
      if constexpr (kPrefetch) _mm_prefetch(reinterpret_cast<const char*>(src) + kPrefetchBytes, _MM_HINT_T0);
      __m256i lo[2], hi[2];
#pragma GCC unroll 2
      for (int u = 0; u < 2; ++u) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 32 * u));
        lo[u] = c.Low(v, u);
        hi[u] = c.High(v, u);
      }
      CodeStep<R>(lo, hi, qb, x.k, h, dot);
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256 dr = _mm256_set1_ps(d[r * x.nb + b]);
      acc[r][0] = BlockFma(dot[r][0], dr, s0, acc[r][0]);
      acc[r][1] = BlockFma(dot[r][1], dr, s1, acc[r][1]);
    }
  }
  StoreTile<R>(acc, i0, col, o);
}

using Int8Fn = void (*)(const Rows&, size_t, const uint8_t*, const void*, size_t, const Out&);

template <bool kPrefetch, bool kHalfBlocks = false>
Int8Fn Int8TileFor(size_t rows) {
  static_assert(kTileRows == 3, "one case per row count");
  return rows == 1 ? Int8Tile<1, kPrefetch, kHalfBlocks>
                   : rows == 2 ? Int8Tile<2, kPrefetch, kHalfBlocks> : Int8Tile<3, kPrefetch, kHalfBlocks>;
}

// GGUF q4_0 (kernels/ggml_q8.h): the nibble as is (u in [0, 15], o = 8), binary16 block scales.
struct Q4_0Codes {
  const uint16_t* scales;  // [k/32][16]
  __m256i low4 = _mm256_set1_epi8(0x0f);

  template <bool kPrefetch>
  void Block(size_t b, __m256& s0, __m256& s1) {
    const uint16_t* h = scales + b * kQ8Group;
    if (kPrefetch && b % 2 == 0) _mm_prefetch(reinterpret_cast<const char*>(h) + kPrefetchBytes, _MM_HINT_T0);
    s0 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h)));
    s1 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + 8)));
  }
  __m256i Low(__m256i v, int) const { return _mm256_and_si256(v, low4); }
  __m256i High(__m256i v, int) const { return _mm256_and_si256(_mm256_srli_epi16(v, 4), low4); }
};

// Either 4-bit code format, group by group; the first row block streams each group from memory,
// the later ones find it in cache. format_at(g): the Codes of group g.
template <typename Codes, typename FormatAt>
void CodeMatmul(const Rows& rows, size_t m, size_t k, const uint8_t* codes, size_t n_begin, size_t n_end,
                const FormatAt& format_at, const Out& out) {
  static_assert(kTileRows == 3, "one case per row count");
  using Fn = void (*)(const Rows&, size_t, const uint8_t*, const Codes&, size_t, const Out&);
  constexpr Fn kFirst[3] = {CodeTile<1, true, Codes>, CodeTile<2, true, Codes>, CodeTile<3, true, Codes>};
  constexpr Fn kLater[3] = {CodeTile<1, false, Codes>, CodeTile<2, false, Codes>, CodeTile<3, false, Codes>};
  for (size_t g = n_begin / kQ8Group; g * kQ8Group < n_end; ++g) {
    const uint8_t* c = codes + g * (k * kQ8Group / 2);
    const Codes format = format_at(g);
    for (size_t i = 0; i < m; i += kTileRows) {
      const size_t r = Min(kTileRows, m - i);
      (i == 0 ? kFirst : kLater)[r - 1](rows, i, c, format, g * kQ8Group, out);
    }
  }
}

void MatmulQ8Int8(Q8Rows x, size_t m, size_t k, const uint8_t* values, const float* scales, size_t n_begin,
                  size_t n_end, const float* bias, float* y, size_t ldy) {
  if (m == 0 || n_begin >= n_end) return;
  const Rows rows{x.q, x.d, nullptr, k, k / kQ8Block};
  const Out out{y, ldy, bias, n_end};
  for (size_t g = n_begin / kQ8Group; g * kQ8Group < n_end; ++g) {
    const uint8_t* w = values + g * (k * kQ8Group);
    // The first row block streams the group from memory; the later ones find it in cache.
    for (size_t i = 0; i < m; i += kTileRows) {
      const size_t r = Min(kTileRows, m - i);
      (i == 0 ? Int8TileFor<true>(r) : Int8TileFor<false>(r))(rows, i, w, scales + g * kQ8Group, g * kQ8Group, out);
    }
  }
}

// Start values kMagicBits - offset sum[i, b] of the block accumulators (MXFP4, int4), per thread.
int32_t* StartValues(Q8Rows x, size_t count, int32_t offset) {
  struct Buffer {
    int32_t* data = nullptr;
    size_t capacity = 0;
    ~Buffer() { delete[] data; }
  };
  thread_local Buffer buffer;
  if (count > buffer.capacity) {
    delete[] buffer.data;
    buffer.data = new int32_t[count];
    buffer.capacity = count;
  }
  for (size_t i = 0; i < count; ++i) buffer.data[i] = kMagicBits - offset * x.sum[i];
  return buffer.data;
}

void MatmulQ8Mxfp4(Q8Rows x, size_t m, size_t k, const uint8_t* codes, const uint8_t* scales, size_t n_begin,
                   size_t n_end, const float* bias, float* y, size_t ldy) {
  if (m == 0 || n_begin >= n_end) return;
  const size_t nb = k / kQ8Block;
  const Rows rows{x.q, x.d, StartValues(x, m * nb, kMxfp4Offset), k, nb};
  CodeMatmul<Mxfp4Codes>(rows, m, k, codes, n_begin, n_end,
                         [&](size_t g) { return Mxfp4Codes{scales + g * (nb * kQ8Group)}; }, Out{y, ldy, bias, n_end});
}

void MatmulQ8Int4(Q8Rows x, size_t m, size_t k, Int4Weights w, size_t n_begin, size_t n_end, const float* bias,
                  float* y, size_t ldy) {
  if (m == 0 || n_begin >= n_end) return;
  const size_t nb = k / kQ8Block, meta_stride = (k / w.group) * kQ8Group;
  const Rows rows{x.q, x.d, StartValues(x, m * nb, kInt4Offset), k, nb};
  CodeMatmul<Int4Codes>(rows, m, k, w.codes, n_begin, n_end, [&](size_t g) {
    return Int4Codes{w.zeros + g * meta_stride, w.scales + g * meta_stride, w.group / kQ8Block};
  }, Out{y, ldy, bias, n_end});
}

// ---- GGUF k-quants (kernels/ggml_q8.h) ------------------------------------------------------------
// q4_K, q5_K and q6_K codes decoded in registers per code vector (the nibble, the q5_K fifth or
// q6_K fifth and sixth bits from their own stream) into the u8 operand u, with the sub-block
// scales (and mins) widened from bytes and multiplied by the super-block's binary16 d (dmin) once
// per block, as ggml_q8_avx512vnni.cpp's KTile does. vpmaddubsw pairs stay exact: u <= 63 and
// |q| <= 127 give pairs <= 16002, and a code vector's low- plus high-nibble products <= 32004.

constexpr uint32_t kQ4_K = 12, kQ5_K = 13, kQ6_K = 14;

// The activation side: row i's codes, block scales and sums, and (q6_K) the start values of its
// 16-value sub-blocks, kMagicBits - 32 sum16[i, t] (the operands carry u = w + 32).
struct KRows {
  const int8_t* q;
  const float* d;
  const int32_t* sum;
  const int32_t* init16;
  size_t k, nb;
};

// One group's k-quant weights (half u = columns 8 u .. 8 u + 7 = bytes 32 u .. 32 u + 31 of each
// 64-byte vector, and bytes 8 u .. 8 u + 7 of each 16-byte per-row stream).
template <uint32_t kType>
struct KCodes {
  static constexpr int kSubs = kType == kQ6_K ? 2 : 1;  // sub-blocks per 32-value block
  static constexpr bool kMins = kType != kQ6_K;
  const uint8_t* codes;
  const uint8_t* highs;
  const uint8_t* sub;
  const uint16_t* super;
  __m256 d[2] = {}, dmin[2] = {}, s[kSubs][2] = {}, mn[2] = {};
  __m256i hv[2] = {};

  static __m256i Bytes32(const uint8_t* p) { return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))); }

  template <bool kPrefetch>
  void Block(size_t b) {
#pragma GCC unroll 2
    for (int u = 0; u < 2; ++u) {
      if (b % 8 == 0) {
        const uint16_t* sp = super + (b / 8) * 2 * kQ8Group + 8 * u;
        d[u] = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sp)));
        if constexpr (kMins) dmin[u] = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sp + kQ8Group)));
      }
      if constexpr (kType == kQ6_K) {
#pragma GCC unroll 2
        for (int t = 0; t < 2; ++t) {
          const uint8_t* sc = sub + (2 * b + t) * kQ8Group + 8 * u;
          const __m256i v = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc)));
          s[t][u] = _mm256_mul_ps(d[u], _mm256_cvtepi32_ps(v));
        }
      } else {
        // get_scale_min_k4 on 8 lanes: packed byte i of every row is one 16-byte vector.
        const uint8_t* packed = sub + (b / 8) * 12 * kQ8Group + 8 * u;
        if (kPrefetch && b % 8 == 0) _mm_prefetch(reinterpret_cast<const char*>(packed) + kPrefetchBytes, _MM_HINT_T0);
        const size_t j = b % 8;
        const __m256i low6 = _mm256_set1_epi32(63), low4 = _mm256_set1_epi32(15);
        __m256i scv, mv;
        if (j < 4) {
          scv = _mm256_and_si256(Bytes32(packed + j * kQ8Group), low6);
          mv = _mm256_and_si256(Bytes32(packed + (j + 4) * kQ8Group), low6);
        } else {
          const __m256i both = Bytes32(packed + (j + 4) * kQ8Group);
          scv = _mm256_or_si256(_mm256_and_si256(both, low4),
                                _mm256_slli_epi32(_mm256_srli_epi32(Bytes32(packed + (j - 4) * kQ8Group), 6), 4));
          mv = _mm256_or_si256(_mm256_srli_epi32(both, 4), _mm256_slli_epi32(_mm256_srli_epi32(Bytes32(packed + j * kQ8Group), 6), 4));
        }
        s[0][u] = _mm256_mul_ps(d[u], _mm256_cvtepi32_ps(scv));
        mn[u] = _mm256_mul_ps(dmin[u], _mm256_cvtepi32_ps(mv));
      }
      if constexpr (kType == kQ5_K) hv[u] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(highs + b * 64 + 32 * u));
    }
  }

  // Code vector h (0..3) of block b, both halves; for q6_K its 16-value chunk's high bits come
  // with its first vector (h even).
  template <bool kPrefetch>
  void Load(size_t b, int h, __m256i (&v)[2]) {
    const uint8_t* src = codes + (4 * b + h) * kStepBytes;
    if constexpr (kPrefetch) _mm_prefetch(reinterpret_cast<const char*>(src) + kPrefetchBytes, _MM_HINT_T0);
    if constexpr (kType == kQ6_K) {
      if (h % 2 == 0) {
        const uint8_t* hp = highs + (2 * b + h / 2) * 64;
        if constexpr (kPrefetch) _mm_prefetch(reinterpret_cast<const char*>(hp) + kPrefetchBytes / 2, _MM_HINT_T0);
        hv[0] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(hp));
        hv[1] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(hp + 32));
      }
    }
    v[0] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src));
    v[1] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 32));
  }

  // The u8 operand of the low (half_k 0) or high (1) four k values of code vector h, half u.
  __m256i Operand(int h, int half_k, int u, __m256i v) const {
    const __m256i nibble = _mm256_set1_epi8(0x0F);
    const __m256i low = half_k == 0 ? _mm256_and_si256(v, nibble) : _mm256_and_si256(_mm256_srli_epi16(v, 4), nibble);
    if constexpr (kType == kQ4_K) return low;
    if constexpr (kType == kQ5_K) {
      // Bit p = 2 h + half_k of each byte to bit 4 (16-bit shifts; what crosses into the
      // neighbouring byte lands outside bit 4).
      __m256i bit;
      switch (2 * h + half_k) {
        case 0: bit = _mm256_slli_epi16(hv[u], 4); break;
        case 1: bit = _mm256_slli_epi16(hv[u], 3); break;
        case 2: bit = _mm256_slli_epi16(hv[u], 2); break;
        case 3: bit = _mm256_slli_epi16(hv[u], 1); break;
        case 4: bit = hv[u]; break;
        case 5: bit = _mm256_srli_epi16(hv[u], 1); break;
        case 6: bit = _mm256_srli_epi16(hv[u], 2); break;
        default: bit = _mm256_srli_epi16(hv[u], 3); break;
      }
      return _mm256_or_si256(low, _mm256_and_si256(bit, _mm256_set1_epi8(0x10)));
    }
    // q6_K: bits 2 p, 2 p + 1 (p = 2 (h % 2) + half_k) to bits 4, 5.
    __m256i bits;
    switch (2 * (h % 2) + half_k) {
      case 0: bits = _mm256_slli_epi16(hv[u], 4); break;
      case 1: bits = _mm256_slli_epi16(hv[u], 2); break;
      case 2: bits = hv[u]; break;
      default: bits = _mm256_srli_epi16(hv[u], 2); break;
    }
    return _mm256_or_si256(low, _mm256_and_si256(bits, _mm256_set1_epi8(0x30)));
  }
};

// Rows i0 .. i0 + R - 1 against one group: the header's result, sub-block by sub-block.
template <int R, bool kPrefetch, uint32_t kType>
void KTile(const KRows& x, size_t i0, KCodes<kType> c, size_t col, const Out& o) {
  using Codes = KCodes<kType>;
  constexpr int kVectors = 4 / Codes::kSubs;  // code vectors per sub-block
  __m256 acc[R][2];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  const int8_t* q = x.q + i0 * x.k;
  for (size_t b = 0; b < x.nb; ++b) {
    c.template Block<kPrefetch>(b);
    const int8_t* qb = q + b * kQ8Block;
#pragma GCC unroll 2
    for (int t = 0; t < Codes::kSubs; ++t) {
      __m256i dot[R][2];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const int32_t start = kType == kQ6_K ? x.init16[(i0 + r) * 2 * x.nb + 2 * b + t] : kMagicBits;
        dot[r][0] = dot[r][1] = _mm256_set1_epi32(start);
      }
#pragma GCC unroll 4
      for (int hh = 0; hh < kVectors; ++hh) {
        const int h = t * kVectors + hh;
        __m256i v[2], lo[2], hi[2];
        c.template Load<kPrefetch>(b, h, v);
#pragma GCC unroll 2
        for (int u = 0; u < 2; ++u) {
          lo[u] = c.Operand(h, 0, u, v[u]);
          hi[u] = c.Operand(h, 1, u, v[u]);
        }
        CodeStep<R>(lo, hi, qb, x.k, h, dot);
      }
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m256 dr = _mm256_set1_ps(x.d[(i0 + r) * x.nb + b]);
        acc[r][0] = BlockFma(dot[r][0], dr, c.s[t][0], acc[r][0]);
        acc[r][1] = BlockFma(dot[r][1], dr, c.s[t][1], acc[r][1]);
      }
    }
    if constexpr (Codes::kMins) {
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m256 dr = _mm256_set1_ps(x.d[(i0 + r) * x.nb + b]);
        const __m256 neg_sum = _mm256_set1_ps(-static_cast<float>(x.sum[(i0 + r) * x.nb + b]));
        acc[r][0] = _mm256_fmadd_ps(neg_sum, _mm256_mul_ps(dr, c.mn[0]), acc[r][0]);
        acc[r][1] = _mm256_fmadd_ps(neg_sum, _mm256_mul_ps(dr, c.mn[1]), acc[r][1]);
      }
    }
  }
  StoreTile<R>(acc, i0, col, o);
}

template <uint32_t kType>
void MatmulK(Q8Rows x, size_t m, size_t k, const GgmlQ8Weights& wt, size_t n_begin, size_t n_end, const float* bias,
             float* y, size_t ldy) {
  const size_t nb = k / kQ8Block;
  const GgmlQ8Sizes sizes = GgmlQ8SizesOf(kType, kQ8Group, k);  // one group's parts
  const int32_t* init16 = kType == kQ6_K ? GgmlQ6KStartValues(x.q, m, k, kMagicBits) : nullptr;
  const KRows rows{x.q, x.d, x.sum, init16, k, nb};
  const Out out{y, ldy, bias, n_end};
  using Fn = void (*)(const KRows&, size_t, KCodes<kType>, size_t, const Out&);
  static_assert(kTileRows == 3, "one case per row count");
  constexpr Fn kFirst[3] = {KTile<1, true, kType>, KTile<2, true, kType>, KTile<3, true, kType>};
  constexpr Fn kLater[3] = {KTile<1, false, kType>, KTile<2, false, kType>, KTile<3, false, kType>};
  for (size_t g = n_begin / kQ8Group; g * kQ8Group < n_end; ++g) {
    const KCodes<kType> c{wt.codes + g * sizes.codes, wt.highs + g * sizes.highs, wt.sub + g * sizes.sub,
                          wt.scales + g * sizes.scales};
    // The first row block streams the group from memory; the later ones find it in cache.
    for (size_t i = 0; i < m; i += kTileRows) {
      const size_t r = Min(kTileRows, m - i);
      (i == 0 ? kFirst : kLater)[r - 1](rows, i, c, g * kQ8Group, out);
    }
  }
}

// GGUF blocks (kernels/ggml_q8.h): q8_0 through the int8 tile with per-block scales, q4_0 through
// the 4-bit code tile, the k-quants through KTile.
void MatmulQ8Ggml(Q8Rows x, size_t m, size_t k, const GgmlQ8Weights& w, size_t n_begin, size_t n_end,
                  const float* bias, float* y, size_t ldy) {
  if (m == 0 || n_begin >= n_end) return;
  const size_t nb = k / kQ8Block;
  const Out out{y, ldy, bias, n_end};
  switch (w.type) {
    case 8: {  // q8_0
      const Rows rows{x.q, x.d, nullptr, k, nb};
      for (size_t g = n_begin / kQ8Group; g * kQ8Group < n_end; ++g) {
        const uint8_t* values = w.codes + g * (k * kQ8Group);
        const uint16_t* scales = w.scales + g * (nb * kQ8Group);
        for (size_t i = 0; i < m; i += kTileRows) {
          const size_t r = Min(kTileRows, m - i);
          (i == 0 ? Int8TileFor<true, true>(r) : Int8TileFor<false, true>(r))(rows, i, values, scales, g * kQ8Group, out);
        }
      }
      return;
    }
    case 2: {  // q4_0
      const Rows rows{x.q, x.d, StartValues(x, m * nb, 8), k, nb};
      CodeMatmul<Q4_0Codes>(rows, m, k, w.codes, n_begin, n_end,
                            [&](size_t g) { return Q4_0Codes{w.scales + g * (nb * kQ8Group)}; }, out);
      return;
    }
    case kQ4_K: return MatmulK<kQ4_K>(x, m, k, w, n_begin, n_end, bias, y, ldy);
    case kQ5_K: return MatmulK<kQ5_K>(x, m, k, w, n_begin, n_end, bias, y, ldy);
    case kQ6_K: return MatmulK<kQ6_K>(x, m, k, w, n_begin, n_end, bias, y, ldy);
    default: KernelsFor(Isa::kScalar).matmul_q8_ggml(x, m, k, w, n_begin, n_end, bias, y, ldy);
  }
}

}  // namespace

void FillAvx2Q8(KernelTable& t) {
  t.quantize_q8 = QuantizeQ8;
  t.quantize_q8_isa = "avx2";
  t.matmul_q8_mxfp4 = MatmulQ8Mxfp4;
  t.matmul_q8_mxfp4_isa = "avx2";
  t.matmul_q8_int8 = MatmulQ8Int8;
  t.matmul_q8_int8_isa = "avx2";
  t.matmul_q8_int4 = MatmulQ8Int4;
  t.matmul_q8_int4_isa = "avx2";
  t.matmul_q8_ggml = MatmulQ8Ggml;
  t.matmul_q8_ggml_isa = "avx2";
}

}  // namespace tessera
