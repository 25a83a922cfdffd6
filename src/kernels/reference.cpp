// Scalar reference kernels: the definition of every kernel's result, and the fallback on any
// x86-64 CPU.
#include "core/dtype.h"
#include "kernels/kernels.h"

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

}  // namespace

void FillReferenceKernels(KernelTable& t) {
  t.convert_bf16_f32 = ConvertBf16F32;
  t.convert_bf16_f32_isa = "scalar";
  t.dot_bf16_f32 = DotBf16F32;
  t.dot_bf16_f32_isa = "scalar";
}

}  // namespace tessera
