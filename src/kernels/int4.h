// Group-quantized 4-bit weights (AWQ: AutoAWQ GEMM and compressed-tensors int4,
// ../shared/reference/quantization.md Part B, dense-decoders.md §10), in the one packed layout
// both their kernels read:
//
//   W[j, c] = (q[j, c] - z[j, c / G]) * s[j, c / G]      q, z unsigned 4-bit codes (0 .. 15),
//                                                        s float32, G the group size
// (AutoAWQ stores q and z as is; compressed-tensors stores signed q + 8 and z + 8, whose
// difference is the same; symmetric schemes have z = 8.) The checkpoints' fp16 / bf16 scales
// widen exactly to float32, and (q - z) * s is then exact in float32 too (at most 5 + 11
// significant bits), so every path reads exactly the dequantized weights transformers uses.
//
// Layout of W[n, k] (n padded to a multiple of kQ8Group = 16 with q = z = 0, s = 0; k % 8 == 0,
// G % 8 == 0, k % G == 0), group g of 16 output rows holding rows 16 g .. 16 g + 15:
//   codes  [n/16][k/8][16][4] u8: byte (g, k8, r, kk) = q[16 g + r, 8 k8 + kk]
//                                                      | q[16 g + r, 8 k8 + 4 + kk] << 4
//          (the q8 MXFP4 layout of q8.h: one 64-byte vector is 8 k values of 16 rows, the low
//          nibbles the first 4, so a vpdpbusd lane gets 4 consecutive k values of its row)
//   zeros  [n/16][k/G][16] u8  z of row 16 g + r, group t at (g * (k/G) + t) * 16 + r
//   scales [n/16][k/G][16] f32 s, same indexing
// A thread's column range is then one sequential stream of codes and one of zeros and scales.
//
// Two kernels (kernels.h):
//   matmul_int4     exact: float32 activations; y[i, j] = the sum over c = 0, 1, .., k - 1 in that
//                   order of fmaf(W[j, c], x[i, c], acc) from acc = +0, then + bias[j] when there
//                   is a bias. Every ISA gives these bits.
//   matmul_q8_int4  fast (G % 32 == 0): q8 activations (q8.h), the q8 result with integer weights
//                   w = q - z (in [-15, 15]) and block scales s[j, b] = s[j, 32 b / G]:
//                     dot_b = sum over the block of xq[i, c] (q[j, c] - z[j, c/G])   (exact)
//                     acc = fmaf(float(dot_b), d[i, b] * s[j, 32 b / G], acc);  + bias[j]
//                   Zero points enter as integers, so there is no per-element float epilogue.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/q8.h"

namespace tessera {

// Bytes / entries of the packed layout of W[n, k] with group size `group`.
inline size_t Int4CodeBytes(size_t n, size_t k) { return Q8PaddedColumns(n) * k / 2; }
inline size_t Int4GroupEntries(size_t n, size_t k, size_t group) { return Q8PaddedColumns(n) * (k / group); }

// Whether (k, group) can be packed (k % 8 == 0, group % 8 == 0, k % group == 0), and whether the
// q8 kernel can run them (group % 32 == 0 as well).
inline bool Int4ShapeOk(size_t k, size_t group) { return group > 0 && k % 8 == 0 && group % 8 == 0 && k % group == 0; }
inline bool Int4Q8Ok(size_t k, size_t group) { return Int4ShapeOk(k, group) && group % kQ8Block == 0; }

// Writes row j of the packed layout (buffers of the sizes above, zero-filled beforehand so that
// padding rows stay zero) from its codes q[k], zeros z[k/group] and scales s[k/group].
void PackInt4Row(size_t j, size_t k, size_t group, const uint8_t* q, const uint8_t* z, const float* s,
                 uint8_t* codes, uint8_t* zeros, float* scales);

// Row j of a packed matrix dequantized, out[c] = float(q - z) * s (tests and tools).
void DequantizeInt4Row(const Int4Weights& w, size_t k, size_t j, float* out);

}  // namespace tessera
