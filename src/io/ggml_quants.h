// ggml's block formats (the tensor types of GGUF files, io/gguf.h): the scalar reference
// dequantization, value for value as ggml-quants.c's dequantize_row_* defines it (each product
// and difference rounded to float32 separately, as written there; no fused multiply-add).
// Layouts per block (ggml-common.h; d, m, dmin are binary16):
//   q4_0  32 values, 18 B: d, 16 B of nibbles (value j low nibble, j + 16 high), (q - 8) d
//   q4_1  32 values, 20 B: d, m, nibbles as q4_0, q d + m
//   q5_0  32 values, 22 B: d, u32 high bits, nibbles; (q | high << 4) - 16, times d
//   q5_1  32 values, 24 B: d, m, u32 high bits, nibbles; q d + m
//   q8_0  32 values, 34 B: d, 32 int8; q d
//   mxfp4 32 values, 17 B: e8m0 exponent e, 16 B of e2m1 nibbles (doubled values) times 2^(e - 128)
//   q2_K 256 values, 84 B: 16 scale bytes (4-bit scale, 4-bit min), 64 B of 2-bit codes, d, dmin
//   q3_K 256 values, 110 B: 32 B high-bit mask, 64 B of 2-bit codes, 12 B of 6-bit scales, d
//   q4_K 256 values, 144 B: d, dmin, 12 B of 6-bit scales and mins, 128 B of nibbles
//   q5_K 256 values, 176 B: d, dmin, 12 B scales and mins, 32 B high bits, 128 B of nibbles
//   q6_K 256 values, 210 B: 128 B low nibbles, 64 B high 2-bit pairs, 16 int8 scales, d
#pragma once

#include <cstddef>
#include <cstdint>

namespace tessera {

// Dequantizes `n` values (a multiple of the type's block size) of ggml type `type_id` (ggml.h
// numbering: 0 f32, 1 f16, 2 q4_0, 3 q4_1, 6 q5_0, 7 q5_1, 8 q8_0, 10-14 q2_K-q6_K, 30 bf16,
// 39 mxfp4) from `src` into `dst`. Returns false for a type it does not define (nothing written).
bool DequantizeGgmlRow(uint32_t type_id, const uint8_t* src, float* dst, size_t n);

// The integers of one 256-value k-quant block, from which dequantize_row_* computes its values:
//   q4_K / q5_K  value c = float(d) * sub[c / 32] * u[c] - float(dmin) * min[c / 32]
//                (u in 0..15 / 0..31; sub, min the 6-bit scales and mins; each product rounded)
//   q6_K         value c = float(d) * int8(sub[c / 16]) * (u[c] - 32)   (u in 0..63)
// d and dmin are the binary16 bits (dmin 0 for q6_K).
struct GgmlKBlock {
  uint8_t u[256];
  uint8_t sub[16];
  uint8_t min[8];
  uint16_t d, dmin;
};
// type_id 12 (q4_K), 13 (q5_K) or 14 (q6_K); false for any other type.
bool UnpackGgmlKBlock(uint32_t type_id, const uint8_t* block, GgmlKBlock& out);

}  // namespace tessera
