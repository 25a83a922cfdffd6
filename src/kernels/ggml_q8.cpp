// Packing and the scalar definition of kernels/ggml_q8.h.
#include "kernels/ggml_q8.h"

#include <cstring>

#include "core/dtype.h"
#include "core/error.h"
#include "io/ggml_quants.h"
#include "kernels/scratch.h"

namespace tessera {
namespace {

constexpr uint32_t kQ4_0 = 2, kQ8_0 = 8, kQ4_K = 12, kQ5_K = 13, kQ6_K = 14;

bool IsK(uint32_t type) { return type == kQ4_K || type == kQ5_K || type == kQ6_K; }

// Byte of the nibble code layout (int4.h order) holding value kk of lane r in group g.
size_t NibbleByte(size_t g, size_t k, size_t r, size_t kk) { return g * (k * kQ8Group / 2) + (kk / 8) * 64 + r * 4 + kk % 4; }

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

const int32_t* GgmlQ6KStartValues(const int8_t* q, size_t m, size_t k, int32_t magic) {
  auto* start = reinterpret_cast<int32_t*>(ThreadScratchBytes(m * (k / 16) * sizeof(int32_t)));
  for (size_t i = 0; i < m * (k / 16); ++i) {
    int32_t sum = 0;
    for (size_t c = 0; c < 16; ++c) sum += q[i * 16 + c];
    start[i] = magic - 32 * sum;
  }
  return start;
}

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
  uint16_t* scales = const_cast<uint16_t*>(out.scales);
  // Lane r's bytes of 8-value step s: 4 bytes at step s's 64-byte vector, offset 4 r.
  uint8_t* codes = const_cast<uint8_t*>(out.codes) + g * (k * kQ8Group / (type == kQ8_0 ? 1 : 2)) + r * 4;
  // u[0 .. 8 n) of lane r from k offset 8 s0 on, into the nibble layout (NibbleByte).
  auto put_nibbles = [&](size_t s0, const uint8_t* u, size_t n) {
    for (size_t s = 0; s < n; ++s) {
      uint8_t* dst = codes + (s0 + s) * 64;
      for (int i = 0; i < 4; ++i) dst[i] = static_cast<uint8_t>((u[8 * s + i] & 0x0F) | ((u[8 * s + 4 + i] & 0x0F) << 4));
    }
  };
  if (!IsK(type)) {
    const size_t nb = k / 32;
    for (size_t b = 0; b < nb; ++b) {
      const uint8_t* block = blocks + b * (type == kQ8_0 ? 34 : 18);
      std::memcpy(&scales[(g * nb + b) * kQ8Group + r], block, 2);
      if (type == kQ8_0) {  // q + 128, four values per 64-byte step
        for (size_t s = 0; s < 8; ++s) {
          for (int i = 0; i < 4; ++i) codes[(8 * b + s) * 64 + i] = static_cast<uint8_t>(block[2 + 4 * s + i] ^ 0x80);
        }
      } else {  // q4_0: value c < 16 is the low nibble of byte c, value c + 16 its high nibble
        uint8_t u[32];
        for (int c = 0; c < 16; ++c) u[c] = block[2 + c] & 0x0F, u[c + 16] = block[2 + c] >> 4;
        put_nibbles(4 * b, u, 4);
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
    put_nibbles(32 * sb, kb.u, 32);
    if (type == kQ5_K) {  // HighBit: bit 2 h + half of byte i = bit 4 of u[32 b + 8 h + 4 half + i]
      for (size_t b = 0; b < 8; ++b) {
        uint8_t* dst = highs + (g * (k / 32) + sb * 8 + b) * 64 + r * 4;
        for (int i = 0; i < 4; ++i) {
          int byte = 0;
          for (int bit = 0; bit < 8; ++bit) byte |= ((kb.u[32 * b + 4 * bit + i] >> 4) & 1) << bit;
          dst[i] = static_cast<uint8_t>(byte);
        }
      }
    } else if (type == kQ6_K) {  // bits 2 p, 2 p + 1 of byte i = bits 4, 5 of u[16 c + 4 p + i]
      for (size_t c = 0; c < 16; ++c) {
        uint8_t* dst = highs + (g * (k / 16) + sb * 16 + c) * 64 + r * 4;
        for (int i = 0; i < 4; ++i) {
          int byte = 0;
          for (int p = 0; p < 4; ++p) byte |= ((kb.u[16 * c + 4 * p + i] >> 4) & 3) << (2 * p);
          dst[i] = static_cast<uint8_t>(byte);
        }
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
