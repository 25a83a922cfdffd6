// AVX-512 decode_fp8_row (kernels.h): e4m3fn codes to float32 through binary16 (fp8_avx512.h),
// the reference's bits.
#include <immintrin.h>

#include "kernels/fp8_avx512.h"
#include "kernels/kernels.h"

namespace tessera {
namespace {

void DecodeFp8Row(const uint8_t* codes, const float* scales, size_t block_cols, size_t k, float* dst) {
  size_t c = 0;
  for (; c < k; c += 16) {
    const size_t n = k - c < 16 ? k - c : 16;
    const __mmask16 mask = static_cast<__mmask16>(n == 16 ? 0xffff : (1u << n) - 1);
    // One scale for the 16 unless a block boundary falls inside them (block_cols % 16 != 0).
    const __m512 scale = c / block_cols == (c + n - 1) / block_cols ? _mm512_set1_ps(scales[c / block_cols] * 256.0f)
                                                                    : Fp8LaneScales(scales, block_cols, c, k);
    _mm512_mask_storeu_ps(dst + c, mask, _mm512_mul_ps(DecodeFp8x16(codes + c, mask), scale));
  }
}

}  // namespace

void FillAvx512Fp8(KernelTable& t) {
  t.decode_fp8_row = DecodeFp8Row;
  t.decode_fp8_row_isa = "avx512";
}

}  // namespace tessera
