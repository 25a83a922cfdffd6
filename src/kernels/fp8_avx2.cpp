// AVX2 + F16C decode_fp8_row (kernels.h), as fp8_avx512.cpp explains: the codes' low seven bits
// shifted into binary16 (value / 256), the sign from the sign-extended byte, vcvtph2ps, times 256
// times the block's scale: the reference's bits.
#include <immintrin.h>

#include "kernels/kernels.h"

namespace tessera {
namespace {

void DecodeFp8Row(const uint8_t* codes, const float* scales, size_t block_cols, size_t k, float* dst) {
  size_t c = 0;
  for (; c + 16 <= k; c += 16) {
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + c));
    const __m256i words = _mm256_and_si256(_mm256_slli_epi16(_mm256_cvtepi8_epi16(raw), 7),
                                           _mm256_set1_epi16(static_cast<short>(0xbf80)));
    const __m256 low = _mm256_cvtph_ps(_mm256_castsi256_si128(words));
    const __m256 high = _mm256_cvtph_ps(_mm256_extracti128_si256(words, 1));
    if (c / block_cols == (c + 15) / block_cols) {
      const __m256 scale = _mm256_set1_ps(scales[c / block_cols] * 256.0f);
      _mm256_storeu_ps(dst + c, _mm256_mul_ps(low, scale));
      _mm256_storeu_ps(dst + c + 8, _mm256_mul_ps(high, scale));
    } else {
      alignas(32) float lanes[16];
      for (size_t i = 0; i < 16; ++i) lanes[i] = scales[(c + i) / block_cols] * 256.0f;
      _mm256_storeu_ps(dst + c, _mm256_mul_ps(low, _mm256_load_ps(lanes)));
      _mm256_storeu_ps(dst + c + 8, _mm256_mul_ps(high, _mm256_load_ps(lanes + 8)));
    }
  }
  // The tail as the vector lanes compute it: e4m3 / 256 through binary16, then * (256 s).
  for (; c < k; ++c) {
    const uint16_t bits = static_cast<uint16_t>((static_cast<uint16_t>(static_cast<int8_t>(codes[c])) << 7) & 0xbf80);
    dst[c] = _cvtsh_ss(bits) * (scales[c / block_cols] * 256.0f);
  }
}

}  // namespace

void FillAvx2Fp8(KernelTable& t) {
  t.decode_fp8_row = DecodeFp8Row;
  t.decode_fp8_row_isa = "avx2";
}

}  // namespace tessera
