// The int8 KV cache element (--kv-type int8): one head's key or value vector of d values stored
// as d int8 codes followed by ceil(d / 32) f32 scales, one per block of 32 channels (the last
// block shorter when d % 32 != 0), like GGUF's Q8_0 but with an f32 scale:
//
//   head bytes = d + 4 ceil(d / 32)        (d = 128: 144 B against 256 B in BF16)
//   scale_b = amax_b / 127,  code_c = round-to-nearest-even(x_c / scale_b) in [-127, 127],
//   value_c = float(code_c) * scale_b      (one f32 multiply: the exact value every ISA uses).
//
// A block of zeros (or of magnitudes below kKvInt8TinyAmax) has scale 0 and codes 0. A block with
// a non-finite value stores a NaN scale, so the attention over it is NaN and the model's NaN check
// reports it (as a BF16 cache would carry the inf or NaN on).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace tessera {

inline constexpr size_t kKvInt8Block = 32;
inline constexpr float kKvInt8TinyAmax = 1e-30f;

inline constexpr size_t KvInt8HeadBytes(size_t d) { return d + 4 * ((d + kKvInt8Block - 1) / kKvInt8Block); }

// Scale of the block holding channel c of the head at `head` (d channels).
inline float KvInt8Scale(const int8_t* head, size_t d, size_t c) {
  float scale;
  std::memcpy(&scale, head + d + 4 * (c / kKvInt8Block), sizeof scale);
  return scale;
}

inline float KvInt8Value(const int8_t* head, size_t d, size_t c) {
  return static_cast<float>(head[c]) * KvInt8Scale(head, d, c);
}

// Quantizes x[d] into the head layout above at `head` (KvInt8HeadBytes(d) bytes).
inline void QuantizeKvInt8(const float* x, size_t d, int8_t* head) {
  for (size_t b0 = 0; b0 < d; b0 += kKvInt8Block) {
    const size_t b1 = b0 + kKvInt8Block < d ? b0 + kKvInt8Block : d;
    float amax = 0.0f;
    bool finite = true;
    for (size_t c = b0; c < b1; ++c) {
      finite = finite && std::isfinite(x[c]);
      amax = std::fabs(x[c]) > amax ? std::fabs(x[c]) : amax;
    }
    float scale = 0.0f;
    if (!finite) {
      scale = NAN;
      for (size_t c = b0; c < b1; ++c) head[c] = 0;
    } else if (amax < kKvInt8TinyAmax) {
      for (size_t c = b0; c < b1; ++c) head[c] = 0;
    } else {
      scale = amax / 127.0f;
      for (size_t c = b0; c < b1; ++c) {
        const float code = std::nearbyint(x[c] / scale);  // |x / scale| <= 127 up to rounding
        head[c] = static_cast<int8_t>(code > 127.0f ? 127.0f : code < -127.0f ? -127.0f : code);
      }
    }
    std::memcpy(head + d + 4 * (b0 / kKvInt8Block), &scale, sizeof scale);
  }
}

}  // namespace tessera
