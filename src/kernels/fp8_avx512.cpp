// AVX-512 decode_fp8_row (kernels.h): e4m3fn codes to float32 through binary16. A code's seven
// low bits shifted left by 7 are the binary16 with the same fraction bits and exponent field,
// whose value is the e4m3 value times 2^-8 (binary16's bias 15 against e4m3's 7; e4m3
// subnormals land on binary16 subnormals, which vcvtph2ps widens exactly); the sign comes from the
// sign-extended byte. Times 256 (exact), times the block's scale (one rounding): the reference's
// bits.
#include <immintrin.h>

#include "kernels/kernels.h"

namespace tessera {
namespace {

// 16 codes to their e4m3 values / 256.
inline __m512 DecodeScaledDown(__m128i codes) {
  const __m256i words = _mm256_slli_epi16(_mm256_cvtepi8_epi16(codes), 7);
  return _mm512_cvtph_ps(_mm256_and_si256(words, _mm256_set1_epi16(static_cast<short>(0xbf80))));
}

void DecodeFp8Row(const uint8_t* codes, const float* scales, size_t block_cols, size_t k, float* dst) {
  size_t c = 0;
  for (; c < k; c += 16) {
    const size_t n = k - c < 16 ? k - c : 16;
    const __mmask16 mask = static_cast<__mmask16>(n == 16 ? 0xffff : (1u << n) - 1);
    const __m512 v = DecodeScaledDown(_mm_maskz_loadu_epi8(mask, codes + c));
    __m512 scale;
    if (c / block_cols == (c + n - 1) / block_cols) {
      scale = _mm512_set1_ps(scales[c / block_cols] * 256.0f);
    } else {  // a block boundary inside these 16 (block_cols not a multiple of 16)
      alignas(64) float lanes[16];
      for (size_t i = 0; i < 16; ++i) lanes[i] = i < n ? scales[(c + i) / block_cols] * 256.0f : 0.0f;
      scale = _mm512_load_ps(lanes);
    }
    _mm512_mask_storeu_ps(dst + c, mask, _mm512_mul_ps(v, scale));
  }
}

}  // namespace

void FillAvx512Fp8(KernelTable& t) {
  t.decode_fp8_row = DecodeFp8Row;
  t.decode_fp8_row_isa = "avx512";
}

}  // namespace tessera
