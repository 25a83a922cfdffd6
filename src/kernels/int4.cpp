#include "kernels/int4.h"

#include "core/error.h"

namespace tessera {

void PackInt4Row(size_t j, size_t k, size_t group, const uint8_t* q, const uint8_t* z, const float* s,
                 uint8_t* codes, uint8_t* zeros, float* scales) {
  TESSERA_CHECK(Int4ShapeOk(k, group));
  const size_t g = j / kQ8Group, r = j % kQ8Group, groups = k / group;
  uint8_t* block = codes + g * (k * kQ8Group / 2) + r * 4;
  for (size_t k8 = 0; k8 < k / 8; ++k8) {
    for (size_t kk = 0; kk < 4; ++kk) {
      block[k8 * 64 + kk] = static_cast<uint8_t>((q[8 * k8 + kk] & 0x0F) | (q[8 * k8 + 4 + kk] & 0x0F) << 4);
    }
  }
  for (size_t t = 0; t < groups; ++t) {
    zeros[(g * groups + t) * kQ8Group + r] = z[t] & 0x0F;
    scales[(g * groups + t) * kQ8Group + r] = s[t];
  }
}

void DequantizeInt4Row(const Int4Weights& w, size_t k, size_t j, float* out) {
  const size_t g = j / kQ8Group, r = j % kQ8Group, groups = k / w.group;
  const uint8_t* block = w.codes + g * (k * kQ8Group / 2) + r * 4;
  for (size_t c = 0; c < k; ++c) {
    const uint8_t byte = block[(c / 8) * 64 + c % 4];
    const int q = (c % 8) < 4 ? byte & 0x0F : byte >> 4;
    const size_t e = (g * groups + c / w.group) * kQ8Group + r;
    out[c] = static_cast<float>(q - int{w.zeros[e]}) * w.scales[e];
  }
}

}  // namespace tessera
