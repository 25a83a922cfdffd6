// GGUF block types on the q8 path (the fast path's int8 activations, kernels/q8.h): each type's
// blocks repacked once at load into the 16-row interleaved layout the vpdpbusd kernels stream, at
// the file's bytes per weight, and multiplied with kernels/q8.h's result
//   acc = +0;  acc = fmaf(float(dot_b), d[i, b] * s[j, b], acc) for b = 0 .. k/32 - 1;  + bias
// where dot_b is the exact integer dot product of the activation block with the type's integer
// weights w and s[j, b] its block scale (binary16, widened exactly):
//   q8_0  w = q (int8), s = d       values [n/16][k/4][16][4] u8 = q + 128 (q8.h's int8 layout)
//   q4_0  w = u - 8 (u the nibble), s = d
//                                   codes [n/16][k/8][16][4] u8, int4.h's order: byte (g, k8, r, kk)
//                                   = u[16 g + r, 8 k8 + kk] | u[16 g + r, 8 k8 + 4 + kk] << 4
// with scales [n/16][k/32][16] u16 (d of row 16 g + r, block b at (g * k/32 + b) * 16 + r) and n
// padded to a multiple of 16 with zero rows. The dequantized weight is w * s, which is exactly
// ggml's dequantize_row_* value, so the only rounding is the activations' (as for int8 and
// MXFP4). Every ISA computes this result bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/kernels.h"
#include "kernels/q8.h"

namespace tessera {

// Whether `type` (a ggml type id) has a q8 form here (q8_0, q4_0).
bool GgmlQ8Supported(uint32_t type);
// Bytes of the codes and entries of the scales of W[n, k] (k a multiple of 32).
size_t GgmlQ8CodeBytes(uint32_t type, size_t n, size_t k);
inline size_t GgmlQ8ScaleEntries(size_t n, size_t k) { return Q8PaddedColumns(n) * (k / kQ8Block); }

// Packs row j of W (its k / block_size ggml blocks at `blocks`) into codes / scales (buffers of
// the sizes above; padding rows zero-filled by the caller).
void PackGgmlQ8Row(uint32_t type, size_t j, size_t k, const uint8_t* blocks, uint8_t* codes, uint16_t* scales);

// Row j's integer weights w[k] and block scales s[k/32] (the scalar reference and tests).
void GgmlQ8Column(const GgmlQ8Weights& w, size_t k, size_t j, int8_t* weights, float* scales);

}  // namespace tessera
