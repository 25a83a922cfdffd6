// Packing and the scalar definition of kernels/ggml_q8.h.
#include "kernels/ggml_q8.h"

#include <cstring>

#include "core/dtype.h"
#include "core/error.h"

namespace tessera {
namespace {

constexpr uint32_t kQ4_0 = 2, kQ8_0 = 8;

uint16_t Half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return h;
}

}  // namespace

bool GgmlQ8Supported(uint32_t type) { return type == kQ8_0 || type == kQ4_0; }

size_t GgmlQ8CodeBytes(uint32_t type, size_t n, size_t k) {
  TESSERA_CHECK(GgmlQ8Supported(type));
  return type == kQ8_0 ? Q8Int8Bytes(n, k) : Q8PaddedColumns(n) * k / 2;
}

void PackGgmlQ8Row(uint32_t type, size_t j, size_t k, const uint8_t* blocks, uint8_t* codes, uint16_t* scales) {
  const size_t g = j / kQ8Group, r = j % kQ8Group, nb = k / kQ8Block;
  for (size_t b = 0; b < nb; ++b) {
    const uint8_t* block = blocks + b * (type == kQ8_0 ? 34 : 18);
    scales[(g * nb + b) * kQ8Group + r] = Half(block);
    for (size_t c = 0; c < kQ8Block; ++c) {
      const size_t kk = b * kQ8Block + c;
      if (type == kQ8_0) {
        codes[g * (k * kQ8Group) + (kk / 4) * 64 + r * 4 + kk % 4] = static_cast<uint8_t>(static_cast<int8_t>(block[2 + c]) + 128);
        continue;
      }
      // ggml q4_0: value c < 16 is the low nibble of byte c, value c + 16 its high nibble.
      const uint8_t u = c < 16 ? block[2 + c] & 0x0F : block[2 + c - 16] >> 4;
      uint8_t& byte = codes[g * (k * kQ8Group / 2) + (kk / 8) * 64 + r * 4 + kk % 4];
      byte = static_cast<uint8_t>((kk % 8) < 4 ? (byte & 0xF0) | u : (byte & 0x0F) | (u << 4));
    }
  }
}

void GgmlQ8Column(const GgmlQ8Weights& w, size_t k, size_t j, int8_t* weights, float* scales) {
  const size_t g = j / kQ8Group, r = j % kQ8Group, nb = k / kQ8Block;
  for (size_t kk = 0; kk < k; ++kk) {
    if (w.type == kQ8_0) {
      weights[kk] = static_cast<int8_t>(int{w.codes[g * (k * kQ8Group) + (kk / 4) * 64 + r * 4 + kk % 4]} - 128);
    } else {
      const uint8_t byte = w.codes[g * (k * kQ8Group / 2) + (kk / 8) * 64 + r * 4 + kk % 4];
      weights[kk] = static_cast<int8_t>(((kk % 8) < 4 ? byte & 0x0F : byte >> 4) - 8);
    }
  }
  for (size_t b = 0; b < nb; ++b) scales[b] = F16ToF32(w.scales[(g * nb + b) * kQ8Group + r]);
}

}  // namespace tessera
