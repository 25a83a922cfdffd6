// MXFP4 as stored in gpt-oss checkpoints: exact scalar decoding and the OCP MX v1.0 encoder.
//
// Layout (../shared/reference/gpt-oss.md §2.3, quantization.md A.1/A.5): a block is 32
// consecutive weights along the input (reduction) dimension, stored as 16 bytes of E2M1 codes in
// `*_blocks` plus one E8M0 byte in `*_scales`. For a logical matrix W[out, in]:
//   blocks: [out, in/32, 16] u8   byte b of block g: low nibble = W[o, 32g + 2b],
//                                 high nibble = W[o, 32g + 2b + 1]
//   scales: [out, in/32]     u8   W = E2M1(code) * 2^(scale - 127)
// (the checkpoint adds a leading expert dimension to both). Every decoded value is exact in
// FP32 and BF16 unless it overflows (scale bytes >= 253 with large codes, see below).
//
// Edge bytes of the E8M0 scale (quantization.md A.2 leaves the choice to tessera):
//   - Decoding follows the OpenAI and HF reference decoders (torch.ldexp = value * 2^(u - 127) in
//     FP32) so that decoded tensors compare equal: byte 0 is 2^-127 (an FP32 subnormal; every
//     E2M1 multiple of it is exact), byte 255 is +inf, so its nonzero codes decode to +-inf and
//     its zero codes to NaN (0 * inf). OCP calls 255 NaN; real weights contain neither.
//   - Encoding never produces 253, 254 or 255: any finite block has amax < 2^128, so its shared
//     exponent is at most 125 (byte 252). A block whose elements are all zero gets byte 0 — the
//     value the exponent rule below reaches in the limit amax -> 0+ after clamping — and codes 0
//     (+0) or 8 (-0) by the sign of each zero.
//   - NaN and +-inf inputs are rejected (QuantizeMxfp4Block returns false): E2M1 has neither, and
//     the only way to express them, scale byte 255, poisons all 32 weights of the block.
//
// This is the scalar reference that kernels and tests compare against, not a fast path.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tessera {

inline constexpr int kMxfp4BlockSize = 32;       // weights per block
inline constexpr int kMxfp4BlockBytes = 16;      // code bytes per block (two codes per byte)
inline constexpr int kE8M0Bias = 127;
// Scale byte the encoder stores for a block of zeros (see the header comment).
inline constexpr uint8_t kMxfp4ZeroBlockScale = 0;

// E2M1 code -> value; bit 3 is the sign (code 8 is -0).
inline constexpr float kE2M1Values[16] = {+0.0f, +0.5f, +1.0f, +1.5f, +2.0f, +3.0f, +4.0f, +6.0f,
                                          -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

// Checkpoint nibble order (HF/OpenAI, not ggml's j / j+16 pairing): byte b of a block holds
// code 2b in its low nibble and code 2b + 1 in its high nibble. Codes are 0..15.
void PackMxfp4Codes(const uint8_t* codes32, uint8_t* bytes16);
void UnpackMxfp4Codes(const uint8_t* bytes16, uint8_t* codes32);

// 2^(scale - 127); 255 -> +inf, 0 -> 2^-127 (an FP32 subnormal).
float E8M0ScaleToF32(uint8_t scale);

// Decodes one block: 16 code bytes and its scale byte -> 32 floats.
void DecodeMxfp4Block(const uint8_t* codes, uint8_t scale, float* out);

// Decodes one row of `in` weights (in % 32 == 0): `codes` holds in/2 bytes and `scales` in/32
// bytes, exactly as one [o] slice of `*_blocks` / `*_scales`.
void DecodeMxfp4Row(const uint8_t* codes, const uint8_t* scales, size_t in, float* out);

// ---- encoding (OCP MX v1.0, quantization.md A.3) ---------------------------------------------

// Nearest E2M1 code of a finite v (already divided by the block scale): round half to even (ties
// go to the code whose mantissa bit is 0: 0.25 -> 0, 0.75 -> 1, 1.25 -> 1, 1.75 -> 2, 2.5 -> 2,
// 3.5 -> 4, 5 -> 4), magnitudes above 6 saturate to 6, the sign is kept (negative values that
// round to zero, and -0 itself, give code 8).
uint8_t F32ToE2M1(float v);

// Encodes 32 floats into 16 code bytes (element 2b in the low nibble of byte b, 2b + 1 in the
// high nibble) and one E8M0 scale byte: E = clamp(floor(log2(max |x|)) - 2, -127, 125), then
// each x / 2^E (exact: a power-of-two scaling) through F32ToE2M1. Values in (6, 8) * 2^E
// saturate to 6 * 2^E, as the spec intends. Returns false and writes nothing when an input is
// NaN or +-inf.
bool QuantizeMxfp4Block(const float* in32, uint8_t* codes16, uint8_t* scale);

// Encodes one row of `in` weights (in % 32 == 0) into in/2 code bytes and in/32 scale bytes, the
// inverse of DecodeMxfp4Row. Returns false when an input is not finite; blocks before the first
// such block are written, later ones are not.
bool QuantizeMxfp4Row(const float* in, size_t n, uint8_t* codes, uint8_t* scales);

// Encodes a row-major matrix W[rows, in] (in % 32 == 0) into blocks [rows, in/32, 16] and scales
// [rows, in/32], row after row; false as QuantizeMxfp4Row.
bool QuantizeMxfp4Matrix(const float* w, size_t rows, size_t in, uint8_t* blocks, uint8_t* scales);

}  // namespace tessera
