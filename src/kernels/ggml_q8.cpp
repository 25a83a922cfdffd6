// Packing and the scalar definition of kernels/ggml_q8.h.
#include "kernels/ggml_q8.h"

#include <cstring>

#include "core/dtype.h"
#include "core/error.h"
#include "io/ggml_quants.h"

namespace tessera {
namespace {

constexpr uint32_t kQ4_0 = 2, kQ8_0 = 8, kQ4_K = 12, kQ5_K = 13, kQ6_K = 14;

bool IsK(uint32_t type) { return type == kQ4_K || type == kQ5_K || type == kQ6_K; }

// Byte of the nibble code layout (int4.h order) holding value kk of lane r in group g.
size_t NibbleByte(size_t g, size_t k, size_t r, size_t kk) { return g * (k * kQ8Group / 2) + (kk / 8) * 64 + r * 4 + kk % 4; }

void PutNibble(uint8_t* codes, size_t g, size_t k, size_t r, size_t kk, uint8_t u) {
  uint8_t& byte = codes[NibbleByte(g, k, r, kk)];
  byte = static_cast<uint8_t>((kk % 8) < 4 ? (byte & 0xF0) | (u & 0x0F) : (byte & 0x0F) | ((u & 0x0F) << 4));
}

uint8_t GetNibble(const uint8_t* codes, size_t g, size_t k, size_t r, size_t kk) {
  const uint8_t byte = codes[NibbleByte(g, k, r, kk)];
  return (kk % 8) < 4 ? byte & 0x0F : byte >> 4;
}

// Where the high bits of value kk (lane r, group g) live: byte index and bit (q5_K: 1 bit, q6_K: 2).
std::pair<size_t, int> HighBit(uint32_t type, size_t g, size_t k, size_t r, size_t kk) {
  if (type == kQ5_K) {
    const size_t b = kk / 32, within = kk % 32;
    const int bit = static_cast<int>(2 * (within / 8) + (within % 8) / 4);
    return {(g * (k / 32) + b) * 64 + r * 4 + within % 4, bit};
  }
  const size_t c = kk / 16, within = kk % 16;
  return {(g * (k / 16) + c) * 64 + r * 4 + within % 4, static_cast<int>(2 * (within / 4))};
}

}  // namespace

bool GgmlQ8Supported(uint32_t type) { return type == kQ8_0 || type == kQ4_0 || IsK(type); }
size_t GgmlQ8RowBlock(uint32_t type) { return IsK(type) ? 256 : 32; }
size_t GgmlQ8SubBlock(uint32_t type) { return type == kQ6_K ? 16 : 32; }
bool GgmlQ8HasMins(uint32_t type) { return type == kQ4_K || type == kQ5_K; }

GgmlQ8Sizes GgmlQ8SizesOf(uint32_t type, size_t n, size_t k) {
  TESSERA_CHECK(GgmlQ8Supported(type) && k % GgmlQ8RowBlock(type) == 0);
  const size_t np = Q8PaddedColumns(n);
  GgmlQ8Sizes s;
  if (type == kQ8_0) {
    s.codes = Q8Int8Bytes(n, k);
    s.scales = np * (k / 32);
    return s;
  }
  s.codes = np * k / 2;
  if (type == kQ4_0) {
    s.scales = np * (k / 32);
    return s;
  }
  s.scales = np * (k / 256) * 2;
  s.sub = type == kQ6_K ? np * (k / 16) : np * (k / 256) * 12;
  if (type == kQ5_K) s.highs = np * (k / 32) * 4;
  if (type == kQ6_K) s.highs = np * (k / 16) * 4;
  return s;
}

void PackGgmlQ8Row(uint32_t type, size_t j, size_t k, const uint8_t* blocks, const GgmlQ8Weights& out) {
  const size_t g = j / kQ8Group, r = j % kQ8Group;
  uint8_t* codes = const_cast<uint8_t*>(out.codes);
  uint16_t* scales = const_cast<uint16_t*>(out.scales);
  if (!IsK(type)) {
    const size_t nb = k / 32;
    for (size_t b = 0; b < nb; ++b) {
      const uint8_t* block = blocks + b * (type == kQ8_0 ? 34 : 18);
      std::memcpy(&scales[(g * nb + b) * kQ8Group + r], block, 2);
      for (size_t c = 0; c < 32; ++c) {
        const size_t kk = b * 32 + c;
        if (type == kQ8_0) {
          codes[g * (k * kQ8Group) + (kk / 4) * 64 + r * 4 + kk % 4] = static_cast<uint8_t>(static_cast<int8_t>(block[2 + c]) + 128);
        } else {  // q4_0: value c < 16 is the low nibble of byte c, value c + 16 its high nibble
          PutNibble(codes, g, k, r, kk, c < 16 ? block[2 + c] & 0x0F : block[2 + c - 16] >> 4);
        }
      }
    }
    return;
  }
  uint8_t* highs = const_cast<uint8_t*>(out.highs);
  uint8_t* sub = const_cast<uint8_t*>(out.sub);
  const size_t block_bytes = type == kQ4_K ? 144 : type == kQ5_K ? 176 : 210, supers = k / 256;
  GgmlKBlock kb;
  for (size_t sb = 0; sb < supers; ++sb) {
    UnpackGgmlKBlock(type, blocks + sb * block_bytes, kb);
    scales[((g * supers + sb) * 2) * kQ8Group + r] = kb.d;
    scales[((g * supers + sb) * 2 + 1) * kQ8Group + r] = kb.dmin;
    for (size_t c = 0; c < 256; ++c) {
      const size_t kk = sb * 256 + c;
      PutNibble(codes, g, k, r, kk, kb.u[c]);
      if (type != kQ4_K) {
        const auto [at, bit] = HighBit(type, g, k, r, kk);
        highs[at] = static_cast<uint8_t>(highs[at] | ((kb.u[c] >> 4) << bit));
      }
    }
    if (type == kQ6_K) {
      for (size_t t = 0; t < 16; ++t) sub[(g * (k / 16) + sb * 16 + t) * kQ8Group + r] = kb.sub[t];
    } else {  // the block's 12 bytes of packed 6-bit scales and mins, as stored
      for (size_t i = 0; i < 12; ++i) sub[((g * supers + sb) * 12 + i) * kQ8Group + r] = blocks[sb * block_bytes + 4 + i];
    }
  }
}

void GgmlQ8Column(const GgmlQ8Weights& w, size_t k, size_t j, int8_t* weights, float* scales, float* mins) {
  const size_t g = j / kQ8Group, r = j % kQ8Group, nb = k / 32;
  for (size_t b = 0; b < nb; ++b) mins[b] = 0.0f;
  if (!IsK(w.type)) {
    for (size_t kk = 0; kk < k; ++kk) {
      weights[kk] = w.type == kQ8_0
                        ? static_cast<int8_t>(int{w.codes[g * (k * kQ8Group) + (kk / 4) * 64 + r * 4 + kk % 4]} - 128)
                        : static_cast<int8_t>(GetNibble(w.codes, g, k, r, kk) - 8);
    }
    for (size_t b = 0; b < nb; ++b) scales[b] = F16ToF32(w.scales[(g * nb + b) * kQ8Group + r]);
    return;
  }
  const size_t supers = k / 256;
  for (size_t kk = 0; kk < k; ++kk) {
    int u = GetNibble(w.codes, g, k, r, kk);
    if (w.type != kQ4_K) {
      const auto [at, bit] = HighBit(w.type, g, k, r, kk);
      u |= ((w.highs[at] >> bit) & (w.type == kQ5_K ? 1 : 3)) << 4;
    }
    weights[kk] = static_cast<int8_t>(w.type == kQ6_K ? u - 32 : u);
  }
  for (size_t kk = 0; kk < k; kk += GgmlQ8SubBlock(w.type)) {
    const size_t sb = kk / 256;
    const float d = F16ToF32(w.scales[((g * supers + sb) * 2) * kQ8Group + r]);
    if (w.type == kQ6_K) {
      scales[kk / 16] = d * static_cast<float>(static_cast<int8_t>(w.sub[(g * (k / 16) + kk / 16) * kQ8Group + r]));
      continue;
    }
    const float dmin = F16ToF32(w.scales[((g * supers + sb) * 2 + 1) * kQ8Group + r]);
    uint8_t packed[12];
    for (size_t i = 0; i < 12; ++i) packed[i] = w.sub[((g * supers + sb) * 12 + i) * kQ8Group + r];
    const int j = static_cast<int>((kk % 256) / 32);
    // get_scale_min_k4: sub-block j's 6-bit scale and min.
    const int sc = j < 4 ? packed[j] & 63 : (packed[j + 4] & 0xF) | ((packed[j - 4] >> 6) << 4);
    const int mn = j < 4 ? packed[j + 4] & 63 : (packed[j + 4] >> 4) | ((packed[j] >> 6) << 4);
    scales[kk / 32] = d * static_cast<float>(sc);
    mins[kk / 32] = dmin * static_cast<float>(mn);
  }
}

}  // namespace tessera
