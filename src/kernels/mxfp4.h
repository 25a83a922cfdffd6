// MXFP4 as stored in gpt-oss checkpoints: exact scalar decoding.
//
// Layout (../shared/reference/gpt-oss.md §2.3, quantization.md A.1/A.5): a block is 32
// consecutive weights along the input (reduction) dimension, stored as 16 bytes of E2M1 codes in
// `*_blocks` plus one E8M0 byte in `*_scales`. For a logical matrix W[out, in]:
//   blocks: [out, in/32, 16] u8   byte b of block g: low nibble = W[o, 32g + 2b],
//                                 high nibble = W[o, 32g + 2b + 1]
//   scales: [out, in/32]     u8   W = E2M1(code) * 2^(scale - 127)
// (the checkpoint adds a leading expert dimension to both). Every decoded value is exact in
// FP32 and BF16. Scale byte 255 decodes to +inf and 0 to 2^-127, as in the OpenAI and HF
// reference decoders (OCP calls 255 NaN; real weights contain neither).
//
// This is the scalar reference that kernels and tests compare against, not a fast path.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tessera {

inline constexpr int kMxfp4BlockSize = 32;       // weights per block
inline constexpr int kMxfp4BlockBytes = 16;      // code bytes per block (two codes per byte)
inline constexpr int kE8M0Bias = 127;

// E2M1 code -> value; bit 3 is the sign (code 8 is -0).
inline constexpr float kE2M1Values[16] = {+0.0f, +0.5f, +1.0f, +1.5f, +2.0f, +3.0f, +4.0f, +6.0f,
                                          -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

// 2^(scale - 127); 255 -> +inf, 0 -> 2^-127 (an FP32 subnormal).
float E8M0ScaleToF32(uint8_t scale);

// Decodes one block: 16 code bytes and its scale byte -> 32 floats.
void DecodeMxfp4Block(const uint8_t* codes, uint8_t scale, float* out);

// Decodes one row of `in` weights (in % 32 == 0): `codes` holds in/2 bytes and `scales` in/32
// bytes, exactly as one [o] slice of `*_blocks` / `*_scales`.
void DecodeMxfp4Row(const uint8_t* codes, const uint8_t* scales, size_t in, float* out);

}  // namespace tessera
