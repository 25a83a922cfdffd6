// AVX2 + F16C decode_fp8_row (kernels.h), as fp8_avx512.cpp explains: the codes' low seven bits
// shifted into binary16 (value / 256), the sign from the sign-extended byte, vcvtph2ps, times 256
// times the block's scale: the reference's bits.
#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "core/dtype.h"
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

// matmul_fp8_bf16 (kernels.h) with f32 FMAs: rows of W decoded to their e4m3 values (scale 1),
// activations rounded to bfloat16 and widened back, both laid out in 16-value steps that never
// straddle a block (zeros past a block's end), so a block sum is two 8-lane FMA chains.
constexpr size_t kStep = 16;

struct Layout {
  std::vector<uint32_t> begin, count, block;  // per step
  size_t Padded() const { return begin.size() * kStep; }
};

Layout LayoutOf(size_t k, size_t block_cols) {
  Layout layout;
  for (size_t start = 0; start < k; start += block_cols) {
    const size_t end = std::min(start + block_cols, k);
    for (size_t c = start; c < end; c += kStep) {
      layout.begin.push_back(static_cast<uint32_t>(c));
      layout.count.push_back(static_cast<uint32_t>(std::min(kStep, end - c)));
      layout.block.push_back(static_cast<uint32_t>(start / block_cols));
    }
  }
  return layout;
}

// The padded values of one row: float(code) / 256 through binary16, times 256 (exact).
void DecodeUnscaled(const uint8_t* codes, const Layout& layout, float* dst) {
  const float ones = 1.0f;
  for (size_t s = 0; s < layout.begin.size(); ++s) {
    alignas(16) uint8_t step[kStep] = {};
    std::copy_n(codes + layout.begin[s], layout.count[s], step);
    DecodeFp8Row(step, &ones, kStep, kStep, dst + s * kStep);
  }
}

void MatmulFp8Bf16(const float* x, size_t m, size_t k, const uint8_t* codes, const float* scales, size_t scale_stride,
                   size_t block_cols, size_t n_begin, size_t n_end, const float* bias, float* y, size_t ldy) {
  if (m == 0 || n_begin >= n_end) return;
  const Layout layout = LayoutOf(k, block_cols);
  const size_t padded = layout.Padded();
  thread_local std::vector<float> rounded, decoded;
  if (rounded.size() < m * padded) rounded.resize(m * padded);
  for (size_t i = 0; i < m; ++i) {
    for (size_t s = 0; s < layout.begin.size(); ++s) {
      float* dst = &rounded[i * padded + s * kStep];
      for (size_t l = 0; l < kStep; ++l) {
        dst[l] = l < layout.count[s] ? Bf16ToF32(F32ToBf16(x[i * k + layout.begin[s] + l])) : 0.0f;
      }
    }
  }
  // W rows decoded a chunk at a time (about 256 KB), every activation row against the chunk.
  const size_t chunk_rows = std::clamp<size_t>((size_t{256} << 10) / (padded * sizeof(float)), 1, 64);
  if (decoded.size() < chunk_rows * padded) decoded.resize(chunk_rows * padded);
  for (size_t j0 = n_begin; j0 < n_end; j0 += chunk_rows) {
    const size_t j1 = std::min(j0 + chunk_rows, n_end);
    for (size_t j = j0; j < j1; ++j) DecodeUnscaled(codes + j * k, layout, &decoded[(j - j0) * padded]);
    for (size_t i = 0; i < m; ++i) {
      const float* xr = &rounded[i * padded];
      for (size_t j = j0; j < j1; ++j) {
        const float* w = &decoded[(j - j0) * padded];
        __m256 total = _mm256_setzero_ps(), low = _mm256_setzero_ps(), high = _mm256_setzero_ps();
        for (size_t s = 0; s < layout.begin.size(); ++s) {
          low = _mm256_fmadd_ps(_mm256_loadu_ps(xr + s * kStep), _mm256_loadu_ps(w + s * kStep), low);
          high = _mm256_fmadd_ps(_mm256_loadu_ps(xr + s * kStep + 8), _mm256_loadu_ps(w + s * kStep + 8), high);
          if (s + 1 == layout.begin.size() || layout.block[s + 1] != layout.block[s]) {
            const __m256 scale = _mm256_set1_ps(scales[j * scale_stride + layout.block[s]]);
            total = _mm256_fmadd_ps(_mm256_add_ps(low, high), scale, total);
            low = high = _mm256_setzero_ps();
          }
        }
        const __m128 quad = _mm_add_ps(_mm256_castps256_ps128(total), _mm256_extractf128_ps(total, 1));
        const __m128 pair = _mm_add_ps(quad, _mm_movehl_ps(quad, quad));
        const float sum = _mm_cvtss_f32(_mm_add_ss(pair, _mm_movehdup_ps(pair)));
        y[i * ldy + j] = sum + (bias != nullptr ? bias[j] : 0.0f);
      }
    }
  }
}

}  // namespace

void FillAvx2Fp8(KernelTable& t) {
  t.decode_fp8_row = DecodeFp8Row;
  t.decode_fp8_row_isa = "avx2";
  t.matmul_fp8_bf16 = MatmulFp8Bf16;
  t.matmul_fp8_bf16_isa = "avx2";
}

}  // namespace tessera
