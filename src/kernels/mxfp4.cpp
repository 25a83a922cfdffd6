#include "kernels/mxfp4.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"

namespace tessera {

void PackMxfp4Codes(const uint8_t* codes32, uint8_t* bytes16) {
  for (int b = 0; b < kMxfp4BlockBytes; ++b) {
    bytes16[b] = static_cast<uint8_t>((codes32[2 * b] & 0x0F) | ((codes32[2 * b + 1] & 0x0F) << 4));
  }
}

void UnpackMxfp4Codes(const uint8_t* bytes16, uint8_t* codes32) {
  for (int b = 0; b < kMxfp4BlockBytes; ++b) {
    codes32[2 * b] = bytes16[b] & 0x0F;
    codes32[2 * b + 1] = bytes16[b] >> 4;
  }
}

float E8M0ScaleToF32(uint8_t scale) {
  // ldexp is exact here: the result is a power of two (subnormal for scale 0).
  if (scale == 255) return std::numeric_limits<float>::infinity();
  return std::ldexp(1.0f, static_cast<int>(scale) - kE8M0Bias);
}

void DecodeMxfp4Block(const uint8_t* codes, uint8_t scale, float* out) {
  const float s = E8M0ScaleToF32(scale);
  for (int b = 0; b < kMxfp4BlockBytes; ++b) {
    out[2 * b] = kE2M1Values[codes[b] & 0x0F] * s;
    out[2 * b + 1] = kE2M1Values[codes[b] >> 4] * s;
  }
}

void DecodeMxfp4Row(const uint8_t* codes, const uint8_t* scales, size_t in, float* out) {
  TESSERA_CHECK(in % kMxfp4BlockSize == 0);
  for (size_t g = 0; g < in / kMxfp4BlockSize; ++g) {
    DecodeMxfp4Block(codes + g * kMxfp4BlockBytes, scales[g], out + g * kMxfp4BlockSize);
  }
}

uint8_t F32ToE2M1(float v) {
  const uint8_t sign = std::signbit(v) ? 8 : 0;
  const float a = std::fabs(v);
  // The magnitude code counts the midpoints between neighbouring E2M1 magnitudes
  // {0, .5, 1, 1.5, 2, 3, 4, 6} that `a` passes (all exact floats): `>` where a tie must stay on
  // the lower, even code, `>=` where it must go up to the even one. Above 5 everything is 6
  // (nearest, or saturation). Branch-free, so the block loop vectorises.
  const int m = (a > 0.25f) + (a >= 0.75f) + (a > 1.25f) + (a >= 1.75f) + (a > 2.5f) + (a >= 3.5f) + (a > 5.0f);
  return static_cast<uint8_t>(sign | m);
}

bool QuantizeMxfp4Block(const float* in32, uint8_t* codes16, uint8_t* scale) {
  float amax = 0.0f;
  for (int j = 0; j < kMxfp4BlockSize; ++j) {
    if (!std::isfinite(in32[j])) return false;
    amax = std::max(amax, std::fabs(in32[j]));
  }
  int e = static_cast<int>(kMxfp4ZeroBlockScale) - kE8M0Bias;
  if (amax > 0.0f) {
    // amax = f * 2^exp with f in [0.5, 1) (frexp normalises subnormals too), so
    // floor(log2 amax) = exp - 1; minus 2, the largest E2M1 exponent (6 = 1.5 * 2^2).
    int exp = 0;
    std::frexp(amax, &exp);
    e = std::max(exp - 1 - 2, -kE8M0Bias);  // at most 127 - 2 = 125 for a finite amax
  }
  *scale = static_cast<uint8_t>(e + kE8M0Bias);
  // 2^-e is a normal float for e in [-127, 125], and multiplying by it is exact while the product
  // is normal; products below 2^-126 may round but are far below the first threshold 0.25 and
  // keep their sign.
  const float inv_scale = std::ldexp(1.0f, -e);
  uint8_t codes[kMxfp4BlockSize];
  for (int j = 0; j < kMxfp4BlockSize; ++j) codes[j] = F32ToE2M1(in32[j] * inv_scale);
  PackMxfp4Codes(codes, codes16);
  return true;
}

bool QuantizeMxfp4Row(const float* in, size_t n, uint8_t* codes, uint8_t* scales) {
  TESSERA_CHECK(n % kMxfp4BlockSize == 0);
  for (size_t g = 0; g < n / kMxfp4BlockSize; ++g) {
    if (!QuantizeMxfp4Block(in + g * kMxfp4BlockSize, codes + g * kMxfp4BlockBytes, scales + g)) return false;
  }
  return true;
}

bool QuantizeMxfp4Matrix(const float* w, size_t rows, size_t in, uint8_t* blocks, uint8_t* scales) {
  TESSERA_CHECK(in % kMxfp4BlockSize == 0);
  const size_t groups = in / kMxfp4BlockSize;
  for (size_t r = 0; r < rows; ++r) {
    if (!QuantizeMxfp4Row(w + r * in, in, blocks + r * groups * kMxfp4BlockBytes, scales + r * groups)) return false;
  }
  return true;
}

}  // namespace tessera
