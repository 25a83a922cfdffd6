#include "kernels/mxfp4.h"

#include <cmath>
#include <limits>

#include "core/error.h"

namespace tessera {

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

}  // namespace tessera
