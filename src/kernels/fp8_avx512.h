// The AVX-512 e4m3fn decoding shared by decode_fp8_row (fp8_avx512.cpp) and the fused FP8 dot
// kernel (matmul_avx512.cpp): a code's seven low bits shifted left by 7 are the binary16 with the
// same fraction bits and exponent field, whose value is the e4m3 value times 2^-8 (binary16's bias
// 15 against e4m3's 7; e4m3 subnormals land on binary16 subnormals, which vcvtph2ps widens
// exactly); the sign comes from the sign-extended byte. Times 256 (exact) times the block's scale
// (one rounding) gives the reference's dequantized bits. For files compiled with AVX-512.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

namespace tessera {

// 16 codes (lanes outside `mask` read as 0) to their values / 256.
inline __m512 DecodeFp8x16(const uint8_t* p, __mmask16 mask) {
  const __m256i words = _mm256_slli_epi16(_mm256_cvtepi8_epi16(_mm_maskz_loadu_epi8(mask, p)), 7);
  return _mm512_cvtph_ps(_mm256_and_si256(words, _mm256_set1_epi16(static_cast<short>(0xbf80))));
}

// 256 x the scale of each of columns [c, c + 16) (0 past k) of a row whose scales cover
// block_cols columns each: for steps that a block boundary crosses.
inline __m512 Fp8LaneScales(const float* scales, size_t block_cols, size_t c, size_t k) {
  alignas(64) float lanes[16];
  for (size_t l = 0; l < 16; ++l) lanes[l] = c + l < k ? scales[(c + l) / block_cols] * 256.0f : 0.0f;
  return _mm512_load_ps(lanes);
}

}  // namespace tessera
