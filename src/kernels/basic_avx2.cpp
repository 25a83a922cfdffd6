// AVX2 + FMA versions of the basic conversion and dot kernels.
#include <immintrin.h>

#include "core/dtype.h"
#include "kernels/kernels.h"
#include "kernels/matmul_fill.h"

namespace tessera {
namespace {

inline __m256 LoadBf16x8(const uint16_t* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

void ConvertBf16F32(const uint16_t* src, float* dst, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, LoadBf16x8(src + i));
  for (; i < n; ++i) dst[i] = Bf16ToF32(src[i]);
}

float DotBf16F32(const uint16_t* w, const float* x, size_t n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(LoadBf16x8(w + i), _mm256_loadu_ps(x + i), acc0);
    acc1 = _mm256_fmadd_ps(LoadBf16x8(w + i + 8), _mm256_loadu_ps(x + i + 8), acc1);
  }
  for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(LoadBf16x8(w + i), _mm256_loadu_ps(x + i), acc0);
  acc0 = _mm256_add_ps(acc0, acc1);
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc0), _mm256_extractf128_ps(acc0, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  float sum = _mm_cvtss_f32(s);
  for (; i < n; ++i) sum += Bf16ToF32(w[i]) * x[i];
  return sum;
}

}  // namespace

void FillAvx2Kernels(KernelTable& t) {
  t.convert_bf16_f32 = ConvertBf16F32;
  t.convert_bf16_f32_isa = "avx2";
  t.dot_bf16_f32 = DotBf16F32;
  t.dot_bf16_f32_isa = "avx2";
  FillAvx2Matmul(t);  // matmul_avx2.cpp
  FillAvx2Rope(t);  // rope_avx2.cpp
  FillAvx2Attention(t);  // attention_avx2.cpp
  FillAvx2GatherReduce(t);  // gather_reduce_avx2.cpp
  FillAvx2Q8(t);  // q8_avx2.cpp
  FillAvx2Int4(t);  // int4_avx2.cpp
  FillAvx2Fp8(t);   // fp8_avx2.cpp
  FillAvx2Nm(t);  // nm_linear_avx2.cpp
}

}  // namespace tessera
