// Scalar reference kernels: the definition of every kernel's result, and the fallback on any
// x86-64 CPU.
#include <vector>

#include "core/dtype.h"
#include "kernels/kernels.h"
#include "kernels/mxfp4.h"

namespace tessera {
namespace {

void ConvertBf16F32(const uint16_t* src, float* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = Bf16ToF32(src[i]);
}

float DotBf16F32(const uint16_t* w, const float* x, size_t n) {
  float sum = 0.0f;
  for (size_t i = 0; i < n; ++i) sum += Bf16ToF32(w[i]) * x[i];
  return sum;
}

void MatmulBf16(const float* x, size_t m, size_t k, const uint16_t* w, size_t n_begin, size_t n_end,
                const float* bias, float* y, size_t ldy) {
  for (size_t j = n_begin; j < n_end; ++j) {
    const uint16_t* row = w + j * k;
    for (size_t i = 0; i < m; ++i) {
      const float* xi = x + i * k;
      float sum = 0.0f;
      for (size_t c = 0; c < k; ++c) sum += Bf16ToF32(row[c]) * xi[c];
      y[i * ldy + j] = sum + (bias ? bias[j] : 0.0f);
    }
  }
}

void MatmulMxfp4(const float* x, size_t m, size_t k, const uint8_t* codes, const uint8_t* scales,
                 size_t n_begin, size_t n_end, const float* bias, float* y, size_t ldy) {
  const size_t groups = k / 32;
  std::vector<float> row(k);
  for (size_t j = n_begin; j < n_end; ++j) {
    for (size_t g = 0; g < groups; ++g) {
      const uint8_t* b = codes + (j * groups + g) * 16;
      DecodeMxfp4Block(b, scales[j * groups + g], row.data() + g * 32);
    }
    for (size_t i = 0; i < m; ++i) {
      const float* xi = x + i * k;
      float sum = 0.0f;
      for (size_t c = 0; c < k; ++c) sum += row[c] * xi[c];
      y[i * ldy + j] = sum + (bias ? bias[j] : 0.0f);
    }
  }
}

}  // namespace

void FillReferenceKernels(KernelTable& t) {
  t.convert_bf16_f32 = ConvertBf16F32;
  t.convert_bf16_f32_isa = "scalar";
  t.dot_bf16_f32 = DotBf16F32;
  t.dot_bf16_f32_isa = "scalar";
  t.matmul_bf16 = MatmulBf16;
  t.matmul_bf16_isa = "scalar";
  t.matmul_mxfp4 = MatmulMxfp4;
  t.matmul_mxfp4_isa = "scalar";
}

}  // namespace tessera
