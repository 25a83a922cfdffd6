// AVX-512 (F/BW/VL/DQ) versions of the basic conversion and dot kernels. Tails use masked
// loads, so no scalar remainder loop is needed.
#include <immintrin.h>

#include "core/cpu_features.h"
#include "kernels/kernels.h"
#include "kernels/matmul_fill.h"

namespace tessera {
namespace {

inline __m512 LoadBf16x16(const uint16_t* p, __mmask16 mask) {
  const __m256i h = _mm256_maskz_loadu_epi16(mask, p);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

inline __mmask16 TailMask(size_t remaining) {
  return remaining >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << remaining) - 1);
}

void ConvertBf16F32(const uint16_t* src, float* dst, size_t n) {
  for (size_t i = 0; i < n; i += 16) {
    const __mmask16 m = TailMask(n - i);
    _mm512_mask_storeu_ps(dst + i, m, LoadBf16x16(src + i, m));
  }
}

float DotBf16F32(const uint16_t* w, const float* x, size_t n) {
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    acc0 = _mm512_fmadd_ps(LoadBf16x16(w + i, 0xffff), _mm512_loadu_ps(x + i), acc0);
    acc1 = _mm512_fmadd_ps(LoadBf16x16(w + i + 16, 0xffff), _mm512_loadu_ps(x + i + 16), acc1);
  }
  for (; i < n; i += 16) {
    const __mmask16 m = TailMask(n - i);
    acc0 = _mm512_fmadd_ps(LoadBf16x16(w + i, m), _mm512_maskz_loadu_ps(m, x + i), acc0);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
}

}  // namespace

void FillAvx512Kernels(KernelTable& t) {
  t.convert_bf16_f32 = ConvertBf16F32;
  t.convert_bf16_f32_isa = "avx512";
  t.dot_bf16_f32 = DotBf16F32;
  t.dot_bf16_f32_isa = "avx512";
  FillAvx512Matmul(t);  // matmul_avx512.cpp
  FillAvx512Rope(t);  // rope_avx512.cpp
  FillAvx512Attention(t);  // attention_avx512.cpp
  FillAvx512GatherReduce(t);  // gather_reduce_avx512.cpp
  FillAvx512Int4(t);  // int4_avx512.cpp
  FillAvx512Fp8(t);   // fp8_avx512.cpp
  if (GetCpuFeatures().avx512_bf16 && GetCpuFeatures().avx512_vbmi) FillAvx512Bf16Fp8(t);  // fp8_avx512bf16.cpp
  FillAvx512Nm(t);  // nm_linear_avx512.cpp
  if (GetCpuFeatures().avx512_vbmi2) FillAvx512Vbmi2Nm(t);  // nm_linear_avx512vbmi2.cpp
  if (GetCpuFeatures().avx512_vnni) FillAvx512VnniQ8(t);  // q8_avx512vnni.cpp
  if (GetCpuFeatures().avx512_vnni) FillAvx512VnniGgmlQ8(t);  // ggml_q8_avx512vnni.cpp
  if (GetCpuFeatures().avx512_vnni && GetCpuFeatures().avx512_vbmi2) FillAvx512VnniNm(t);  // nm_linear_avx512vnni.cpp
}

}  // namespace tessera
