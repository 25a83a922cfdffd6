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

void RopeApply(float* x, size_t tokens, size_t heads, size_t token_stride, size_t head_stride,
               const float* cs, size_t cs_stride, size_t half, RopePairing pairing) {
  // Interleaved: pair i is (2i, 2i + 1); split-half: (i, i + half).
  const size_t step = pairing == RopePairing::kInterleaved ? 2 : 1;
  const size_t partner = pairing == RopePairing::kInterleaved ? 1 : half;
  for (size_t t = 0; t < tokens; ++t) {
    const float* cos = cs + t * cs_stride;
    const float* sin = cos + half;
    for (size_t h = 0; h < heads; ++h) {
      float* v = x + t * token_stride + h * head_stride;
      for (size_t i = 0; i < half; ++i) {
        float& a = v[i * step];
        float& b = v[i * step + partner];
        const float a0 = a, b0 = b;
        a = a0 * cos[i] - b0 * sin[i];
        b = b0 * cos[i] + a0 * sin[i];
      }
    }
  }
}

// Baseline x86-64 has no FMA, so each product is rounded before the add, as kernels.h specifies.
void GatherReduce(const float* op, size_t ldop, const int32_t* idx, const float* w, size_t groups, size_t r,
                  size_t k, float* out, size_t ldo) {
  for (size_t g = 0; g < groups; ++g) {
    float* o = out + g * ldo;
    for (size_t c = 0; c < k; ++c) o[c] = 0.0f;
    for (size_t j = 0; j < r; ++j) {
      const float wj = w ? w[g * r + j] : 1.0f;
      if (wj == 0.0f) continue;  // zero-weight masking: 0 * NaN must not reach the sum
      const float* row = op + static_cast<size_t>(idx[g * r + j]) * ldop;
      for (size_t c = 0; c < k; ++c) o[c] += wj * row[c];
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
  t.rope_apply = RopeApply;
  t.rope_apply_isa = "scalar";
  t.gather_reduce = GatherReduce;
  t.gather_reduce_isa = "scalar";
}

}  // namespace tessera
