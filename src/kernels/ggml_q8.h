// GGUF block types on the q8 path (the fast path's int8 activations, kernels/q8.h): each type's
// blocks repacked once at load into the 16-row interleaved layout the vpdpbusd kernels stream, at
// the file's bytes per weight (q6_K: 1 % more, a zero dmin kept for one super-block layout), and multiplied with kernels/q8.h's result generalised to
// sub-blocks of S values and optional mins:
//   acc = +0;  for each activation block b = 0 .. k/32 - 1, each of its sub-blocks t in order:
//     acc = fmaf(float(dot_t), d[i, b] * s[j, t], acc)         dot_t: exact integer dot product of
//                                                              the sub-block's activations and
//                                                              the type's integer weights w
//   then, for types with mins:  acc = fmaf(-float(sum[i, b]), d[i, b] * mn[j, b], acc)
//   y = acc (+ bias[j])
// where the dequantized weight is w * s - mn, exactly ggml's dequantize_row_* value (s and mn are
// the products ggml forms, exact in float32), so the only rounding is the activations' and the
// accumulation's. Every ISA computes this result bit for bit.
//   type  S   w               s[j, t]                 mn[j, b]
//   q8_0  32  q (int8)        d                       -
//   q4_0  32  u - 8           d                       -
//   q4_K  32  u (0..15)       d * sc_t (6-bit)        dmin * m_b (6-bit)
//   q5_K  32  u (0..31)       d * sc_t                dmin * m_b
//   q6_K  16  u - 32 (0..63)  d * sc_t (int8)         -
// Layout of W [n, k] (n padded to a multiple of 16 with zero rows; group g = rows 16 g .. 16 g + 15,
// lane r = row 16 g + r):
//   q8_0   codes [n/16][k/4][16][4] u8 = q + 128 (q8.h's int8 layout); scales [n/16][k/32][16] u16 d
//   others codes [n/16][k/8][16][4] u8, int4.h's nibble order: byte (g, k8, r, kk) holds the low
//          four bits of u[8 k8 + kk] | those of u[8 k8 + 4 + kk] << 4
//   q4_0   scales [n/16][k/32][16] u16 d
//   k-quants: scales [n/16][k/256][2][16] u16 (d, then dmin; dmin 0 for q6_K)
//     q4_K, q5_K: sub [n/16][k/256][12][16] u8: the block's 12 bytes of 6-bit scales and mins as
//                 stored (get_scale_min_k4 unpacks sub-block j's sc and m)
//     q6_K:       sub [n/16][k/16][16] u8 (the int8 sc)
//     q5_K: highs [n/16][k/32][16][4]: bit 2 h + half of byte (r, kk) is bit 4 of u[32 b + 8 h + 4 half + kk]
//     q6_K: highs [n/16][k/16][16][4]: bits 2 p, 2 p + 1 of byte (r, kk) are bits 4, 5 of u[16 c + 4 p + kk]
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/kernels.h"
#include "kernels/q8.h"

namespace tessera {

// Whether `type` (a ggml type id) has a q8 form here (q8_0, q4_0, q4_K, q5_K, q6_K).
bool GgmlQ8Supported(uint32_t type);
// The k-values a row's k must be a multiple of (32, or 256 for the k-quants).
size_t GgmlQ8RowBlock(uint32_t type);

// Byte sizes of the parts of W [n, k] (0 for parts the type does not have).
struct GgmlQ8Sizes {
  size_t codes = 0, scales = 0, highs = 0, sub = 0;  // scales: u16 entries
};
GgmlQ8Sizes GgmlQ8SizesOf(uint32_t type, size_t n, size_t k);

// Packs row j of W (its ggml blocks at `blocks`) into the parts (zero-filled beforehand, so that
// padding rows stay zero).
void PackGgmlQ8Row(uint32_t type, size_t j, size_t k, const uint8_t* blocks, const GgmlQ8Weights& out);

// Row j's integer weights w[k], sub-block scales s[k/S] and mins mn[k/32] (zero when the type has
// none), as the header defines them (the scalar reference and tests).
void GgmlQ8Column(const GgmlQ8Weights& w, size_t k, size_t j, int8_t* weights, float* scales, float* mins);
// q6_K's start values of the 16-value sub-block accumulators, `magic` - 32 sum16[i, t] (the u8
// operands of the kernels carry u = w + 32): m rows of k activations, [m][k/16], in the calling
// thread's kernel scratch (kernels/scratch.h; valid until its next use).
const int32_t* GgmlQ6KStartValues(const int8_t* q, size_t m, size_t k, int32_t magic);
// S for the type (16 for q6_K, else 32) and whether it has mins.
size_t GgmlQ8SubBlock(uint32_t type);
bool GgmlQ8HasMins(uint32_t type);

}  // namespace tessera
