// The AVX-512 VNNI q8 matmul building blocks (kernels/q8.h's result), shared by the kernels of
// q8_avx512vnni.cpp (MXFP4, int8, int4) and ggml_q8_avx512vnni.cpp (GGUF block types); included only
// by files compiled with AVX512-VNNI. q8_avx512vnni.cpp's header comment explains the scheme: u8
// weights (value + offset) against broadcast signed activation bytes, the block's int32
// accumulator started at kMagicBits - offset sum[i, b] so that its bits read as f32 are
// 1.5 * 2^23 + dot, one FMA per block with the weights' block scales, 16 output columns per lane
// vector.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/kernels.h"
#include "kernels/q8.h"
#include "kernels/scratch.h"

namespace tessera {
namespace q8_vnni {
// Internal linkage: each including kernel file gets its own copies (all compiled for VNNI).
namespace {
constexpr size_t kSteps = kQ8Block / 4;              // 4-byte k steps (vpdpbusd) per block
constexpr size_t kStepBytes = kQ8Group * 4;          // one step of one group: 64 bytes
constexpr int32_t kMagicBits = 0x4B400000;           // f32 bits of 1.5 * 2^23
constexpr float kMagic = 12582912.0f;                // 1.5 * 2^23
constexpr int32_t kInt8Offset = 128;                 // int8 weights are stored as W8 + 128
constexpr int32_t kMxfp4Offset = 12;                 // decoded MXFP4 weights are 2 E2M1 + 12
constexpr int32_t kInt4Offset = 16;                  // int4 weights enter as q - z + 16
constexpr size_t kInt4PrefetchBytes = 4096;          // int4 code streams (4 per decode tile)
constexpr size_t kInt4MetaAhead = 4;                 // weight groups ahead for int4 zeros/scales
constexpr size_t kDirectMaxRows = 4;                 // rows of one decode-sized tile
// m up to this streams the weights as decode does: each tile of groups runs for rows [0, 4),
// [4, 8) and [8, m) while its weights are still in L1/L2 (verifying up to 8 speculative drafts
// reads every weight once instead of decoding GEMM panels for a handful of rows; measured on the
// gate_up shape, 9 rows: 0.80 ms through the GEMM path, 0.69 streamed).
constexpr size_t kStreamMaxRows = 9;
// Decode-sized tiles (m <= kDirectMaxRows, every format) read one group at a time, so a thread's
// column chunk is one sequential weight stream as in the read probe; 4 groups side by side (4
// interleaved streams) read slower (docs/BENCHMARKS.md, 2026-12-04). The independent work that
// keeps the stream in flight comes from DecodeParts(R) partial accumulators per row instead.
constexpr int kDirectGroups = 1;
constexpr int DecodeParts(int rows) { return rows == 1 ? 4 : 2; }
constexpr int kGemmRows = 6;                         // GEMM tile: kGemmRows x kGemmGroups groups
constexpr int kGemmGroups = 2;
// Software prefetch distance of the streamed weights (decode-sized calls and the first row block
// of a GEMM, where they come from DRAM), in bytes ahead of each stream.
constexpr size_t kPrefetchBytes = 2048;

inline size_t Min(size_t a, size_t b) { return a < b ? a : b; }
inline __mmask16 Mask16(size_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << n) - 1);
}
inline int32_t Load32(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

inline size_t Align64(size_t bytes) { return (bytes + 63) / 64 * 64; }

// ---- matmul building blocks ---------------------------------------------------------------------

// The activation side of one call: row i at q + i k, its block scales and accumulator start
// values (kMagicBits - offset sum[i, b]) at d + i nb and init + i nb.
struct Rows {
  const int8_t* q;
  const float* d;
  const int32_t* init;
  size_t k, nb;
};

// G groups of u8 weights (w + offset) in the packed int8 layout [k/4][16][4], group g at
// w + g w_stride; the f32 block scales of group g, block b at s + g s_group + b s_block.
// next (or nullptr): next_lines cache lines of weights the GEMM reads after this panel, which the
// tile prefetches into L2, spread over its blocks (each row block takes its share of the next
// panel), so that the DRAM stream of a GEMM overlaps the arithmetic instead of stalling the first
// row block of every panel.
struct Panel {
  const uint8_t* w;
  size_t w_stride;
  const float* s;
  size_t s_group, s_block;
  const uint8_t* next = nullptr;
  size_t next_lines = 0;
  // Binary16 block scales instead of s (GGUF q8_0), at the same strides; widened exactly.
  const uint16_t* s_half = nullptr;
};

// Where the tile's results go: columns [col, col + 16 G), those at or past n_end dropped.
struct Out {
  float* y;
  size_t ldy;
  const float* bias;
  size_t n_end;
};

// init[i nb + b] = kMagicBits - offset sum[i, b] for the m rows (see the file comment).
int32_t* StartValues(Q8Rows x, size_t m, size_t nb, int32_t offset, uint8_t* scratch) {
  int32_t* init = reinterpret_cast<int32_t*>(scratch);
  for (size_t i = 0; i < m * nb; ++i) init[i] = kMagicBits - offset * x.sum[i];
  return init;
}

// acc = fmaf(float(dot), d * s, acc) per lane, with dot the block's integer accumulator.
inline __m512 BlockFma(__m512i dot, __m512 d, __m512 s, __m512 acc) {
  const __m512 dotf = _mm512_sub_ps(_mm512_castsi512_ps(dot), _mm512_set1_ps(kMagic));
  return _mm512_fmadd_ps(dotf, _mm512_mul_ps(d, s), acc);
}

// The block's integer dot product from its P partial accumulators (exact in any order).
template <int P>
inline __m512i SumParts(const __m512i (&parts)[P]) {
  __m512i sum = parts[0];
#pragma GCC unroll 4
  for (int part = 1; part < P; ++part) sum = _mm512_add_epi32(sum, parts[part]);
  return sum;
}

template <int R, int G>
inline void StoreTile(const __m512 (&acc)[R][G], size_t i0, size_t col, const Out& o) {
#pragma GCC unroll 4
  for (int g = 0; g < G; ++g) {
    const size_t c = col + g * kQ8Group;
    if (c >= o.n_end) break;
    const __mmask16 mask = Mask16(o.n_end - c);
    const __m512 bias = o.bias ? _mm512_maskz_loadu_ps(mask, o.bias + c) : _mm512_setzero_ps();
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      // The reference adds the bias only when there is one (acc + 0 would turn -0 into +0).
      const __m512 v = o.bias ? _mm512_add_ps(acc[r][g], bias) : acc[r][g];
      _mm512_mask_storeu_ps(o.y + (i0 + r) * o.ldy + c, mask, v);
    }
  }
}

// Rows i0 .. i0 + R - 1 against the panel's G groups (columns col .. col + 16 G - 1).
// P > 1 splits each block's integer dot product over P accumulators (k step t into t mod P),
// summed at the block's end: integer addition is exact in any order, so the bits do not change,
// and a one-group decode tile gets P independent vpdpbusd chains from one weight stream.
template <int R, int G, bool kPrefetch, int P = 1>
void Tile(const Rows& x, size_t i0, const Panel& p, size_t col, const Out& o) {
  __m512 acc[R][G];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) acc[r][g] = _mm512_setzero_ps();
  }
  const int8_t* q = x.q + i0 * x.k;
  const float* d = x.d + i0 * x.nb;
  const int32_t* init = x.init + i0 * x.nb;
  const size_t next_per_block = x.nb > 0 ? (p.next_lines + x.nb - 1) / x.nb : 0;
  for (size_t b = 0; b < x.nb; ++b) {
    __m512i dot[R][G][P];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m512i start = _mm512_set1_epi32(init[r * x.nb + b]);
#pragma GCC unroll 4
      for (int g = 0; g < G; ++g) {
        dot[r][g][0] = start;
#pragma GCC unroll 4
        for (int part = 1; part < P; ++part) dot[r][g][part] = _mm512_setzero_si512();
      }
    }
    if (p.next != nullptr) {
      for (size_t l = b * next_per_block; l < Min((b + 1) * next_per_block, p.next_lines); ++l) {
        _mm_prefetch(reinterpret_cast<const char*>(p.next) + l * 64, _MM_HINT_T1);
      }
    }
    const uint8_t* wb = p.w + b * kSteps * kStepBytes;
    const int8_t* qb = q + b * kQ8Block;
#pragma GCC unroll 8
    for (size_t t = 0; t < kSteps; ++t) {
      __m512i w[G];
#pragma GCC unroll 4
      for (int g = 0; g < G; ++g) {
        const uint8_t* src = wb + g * p.w_stride + t * kStepBytes;
        if constexpr (kPrefetch) _mm_prefetch(reinterpret_cast<const char*>(src) + kPrefetchBytes, _MM_HINT_T0);
        w[g] = _mm512_loadu_si512(src);
      }
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        const __m512i qv = _mm512_set1_epi32(Load32(qb + r * x.k + 4 * t));
#pragma GCC unroll 4
        for (int g = 0; g < G; ++g) dot[r][g][t % P] = _mm512_dpbusd_epi32(dot[r][g][t % P], w[g], qv);
      }
    }
    __m512 s[G];
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) {
      const size_t at = g * p.s_group + b * p.s_block;
      s[g] = p.s_half != nullptr ? _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p.s_half + at)))
                                 : _mm512_loadu_ps(p.s + at);
    }
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m512 dr = _mm512_set1_ps(d[r * x.nb + b]);
#pragma GCC unroll 4
      for (int g = 0; g < G; ++g) acc[r][g] = BlockFma(SumParts<P>(dot[r][g]), dr, s[g], acc[r][g]);
    }
  }
  StoreTile<R, G>(acc, i0, col, o);
}


// Rows i0 .. i0 + R - 1 against G groups of codes read straight from the packed layout
// (decode): codes point at the first group's, the next groups follow at code_stride. Each code
// vector's low and high halves are the u8 operands of two vpdpbusd.
// Codes: Block(b, s) loads block b's scales (and whatever else changes per block), Low(v, g) and
// High(v, g) turn a 64-byte code vector into the u8 operands of its two k steps.
template <int R, int G, typename Codes, int P = 1>
void DirectTile(const Rows& x, size_t i0, const uint8_t* codes, size_t code_stride, const Codes& format, size_t col,
                const Out& o) {
  Codes c = format;
  __m512 acc[R][G];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) acc[r][g] = _mm512_setzero_ps();
  }
  const int8_t* q = x.q + i0 * x.k;
  const float* d = x.d + i0 * x.nb;
  const int32_t* init = x.init + i0 * x.nb;
  __m512 s[G];
  for (size_t b = 0; b < x.nb; ++b) {
    c.template Block<G>(b, s);
    __m512i dot[R][G][P];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m512i start = _mm512_set1_epi32(init[r * x.nb + b]);
#pragma GCC unroll 4
      for (int g = 0; g < G; ++g) {
        dot[r][g][0] = start;
#pragma GCC unroll 4
        for (int part = 1; part < P; ++part) dot[r][g][part] = _mm512_setzero_si512();
      }
    }
    const uint8_t* cb = codes + b * (kSteps / 2) * kStepBytes;
    const int8_t* qb = q + b * kQ8Block;
#pragma GCC unroll 4
    for (size_t h = 0; h < kSteps / 2; ++h) {  // one code vector: 8 k values
      __m512i lo[G], hi[G];
#pragma GCC unroll 4
      for (int g = 0; g < G; ++g) {
        const uint8_t* src = cb + g * code_stride + h * kStepBytes;
        _mm_prefetch(reinterpret_cast<const char*>(src) + Codes::kPrefetch, _MM_HINT_T0);
        const __m512i v = _mm512_loadu_si512(src);
        lo[g] = c.Low(v, g);
        hi[g] = c.High(v, g);
      }
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        const __m512i ql = _mm512_set1_epi32(Load32(qb + r * x.k + 8 * h));
        const __m512i qh = _mm512_set1_epi32(Load32(qb + r * x.k + 8 * h + 4));
#pragma GCC unroll 4
        for (int g = 0; g < G; ++g) {
          // Low and high halves of code vector h are k steps 2h and 2h + 1.
          dot[r][g][(2 * h) % P] = _mm512_dpbusd_epi32(dot[r][g][(2 * h) % P], lo[g], ql);
          dot[r][g][(2 * h + 1) % P] = _mm512_dpbusd_epi32(dot[r][g][(2 * h + 1) % P], hi[g], qh);
        }
      }
    }
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m512 dr = _mm512_set1_ps(d[r * x.nb + b]);
#pragma GCC unroll 4
      for (int g = 0; g < G; ++g) acc[r][g] = BlockFma(SumParts<P>(dot[r][g]), dr, s[g], acc[r][g]);
    }
  }
  StoreTile<R, G>(acc, i0, col, o);
}


// ---- dispatch -----------------------------------------------------------------------------------

using TileFn = void (*)(const Rows&, size_t, const Panel&, size_t, const Out&);

template <int G, bool kPrefetch>
TileFn TileFor(size_t rows) {
  static_assert(kGemmRows == 6, "one case per row count");
  switch (rows) {
    case 1: return Tile<1, G, kPrefetch>;
    case 2: return Tile<2, G, kPrefetch>;
    case 3: return Tile<3, G, kPrefetch>;
    case 4: return Tile<4, G, kPrefetch>;
    case 5: return Tile<5, G, kPrefetch>;
    default: return Tile<6, G, kPrefetch>;
  }
}

TileFn TileFor(size_t rows, size_t groups, bool prefetch) {
  static_assert(kGemmGroups == 2, "one case per group count");
  if (groups == 1) return prefetch ? TileFor<1, true>(rows) : TileFor<1, false>(rows);
  return prefetch ? TileFor<2, true>(rows) : TileFor<2, false>(rows);
}

// Decode-sized int8 calls (m <= kDirectMaxRows): one group per tile, streamed.
TileFn GemvTileFor(size_t rows) {
  static_assert(kDirectGroups == 1 && kDirectMaxRows == 4, "one case per row count");
  switch (rows) {
    case 1: return Tile<1, 1, true, DecodeParts(1)>;
    case 2: return Tile<2, 1, true, DecodeParts(2)>;
    case 3: return Tile<3, 1, true, DecodeParts(3)>;
    default: return Tile<4, 1, true, DecodeParts(4)>;
  }
}

template <typename Codes>
using DirectFn = void (*)(const Rows&, size_t, const uint8_t*, size_t, const Codes&, size_t, const Out&);

template <typename Codes>
DirectFn<Codes> DirectFor(size_t rows) {
  static_assert(kDirectGroups == 1 && kDirectMaxRows == 4, "one case per row count");
  switch (rows) {
    case 1: return DirectTile<1, 1, Codes, DecodeParts(1)>;
    case 2: return DirectTile<2, 1, Codes, DecodeParts(2)>;
    case 3: return DirectTile<3, 1, Codes, DecodeParts(3)>;
    default: return DirectTile<4, 1, Codes, DecodeParts(4)>;
  }
}

// Decode-sized calls (m <= kStreamMaxRows) of either code format: one group at a time, row
// blocks of kDirectMaxRows over each while its codes are in L1/L2.
// format_at(g): the Codes of group g's scales (and zeros).
template <typename Codes, typename FormatAt>
void DirectMatmul(const Rows& rows, size_t m, const uint8_t* codes, size_t code_stride, size_t g_begin, size_t g_end,
                  const FormatAt& format_at, const Out& out) {
  for (size_t g = g_begin; g < g_end; ++g) {
    const Codes format = format_at(g);
    for (size_t i0 = 0; i0 < m; i0 += kDirectMaxRows) {
      DirectFor<Codes>(Min(kDirectMaxRows, m - i0))(rows, i0, codes + g * code_stride, code_stride, format,
                                                    g * kQ8Group, out);
    }
  }
}


// ---- matmuls ------------------------------------------------------------------------------------

// The panel with rows [i, i + r)'s share of the `bytes` that follow it in memory (Panel::next).
Panel WithNextShare(Panel p, const uint8_t* next, size_t bytes, size_t i, size_t r, size_t m) {
  const size_t lines = bytes / 64, begin = lines * i / m, end = lines * (i + r) / m;
  p.next = next + begin * 64;
  p.next_lines = end - begin;
  return p;
}

// Calls fn(i0, rows) for row blocks covering [0, m): as few blocks as kGemmRows allows, their
// heights differing by at most one (m = 32: 6, 6, 5, 5, 5, 5 rather than 6 x 5 + 2), so no block
// is a thin, inefficient tail.
template <typename Fn>
void ForRowBlocks(size_t m, const Fn& fn) {
  const size_t blocks = (m + kGemmRows - 1) / kGemmRows;
  const size_t base = m / blocks, taller = m % blocks;
  size_t i = 0;
  for (size_t blk = 0; blk < blocks; ++blk) {
    const size_t rows = base + (blk < taller ? 1 : 0);
    fn(i, rows);
    i += rows;
  }
}


// The GEMM of a 4-bit format (m > kStreamMaxRows): each panel of kGemmGroups groups is decoded
// once by decode(g, groups, w, s) into u8 weights (value + offset, the int8 layout) and f32 block
// scales in this thread's scratch, kept in L2 while every row block passes over it; the first row
// block prefetches the next panel's codes (code_stride bytes per group). The activation side's start
// values use `offset`.
template <typename Decode>
void DecodedPanelGemm(Q8Rows x, size_t m, size_t k, int32_t offset, const uint8_t* codes, size_t code_stride,
                      size_t g_begin, size_t g_end, const Decode& decode, const Out& out) {
  const size_t nb = k / kQ8Block, scale_stride = nb * kQ8Group;
  // Scratch: start values, then the panel's weights (kGemmGroups k 16 bytes) and block scales.
  const size_t init_bytes = Align64(m * nb * sizeof(int32_t));
  const size_t w_bytes = kGemmGroups * k * kQ8Group;
  uint8_t* scratch = ThreadScratchBytes(init_bytes + w_bytes + kGemmGroups * scale_stride * sizeof(float));
  const Rows rows{x.q, x.d, StartValues(x, m, nb, offset, scratch), k, nb};
  uint8_t* w = scratch + init_bytes;
  float* s = reinterpret_cast<float*>(w + w_bytes);
  for (size_t g = g_begin; g < g_end; g += kGemmGroups) {
    const size_t groups = Min(kGemmGroups, g_end - g);
    decode(g, groups, w, s);
    const size_t next_groups = g + groups < g_end ? Min(kGemmGroups, g_end - g - groups) : 0;
    const Panel panel{w, k * kQ8Group, s, scale_stride, kQ8Group};
    ForRowBlocks(m, [&](size_t i, size_t r) {
      const Panel p = WithNextShare(panel, codes + (g + groups) * code_stride, next_groups * code_stride, i, r, m);
      TileFor(r, groups, false)(rows, i, p, g * kQ8Group, out);
    });
  }
}

}  // namespace
}  // namespace q8_vnni
}  // namespace tessera
