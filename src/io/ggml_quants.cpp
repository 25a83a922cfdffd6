// The scalar dequantization of ggml's block formats (ggml_quants.h), transcribed from the
// definitions in ggml-quants.c (dequantize_row_*), expression by expression so the float32
// roundings are the same.
#include "io/ggml_quants.h"

#include <cstring>

#include "core/dtype.h"

namespace tessera {
namespace {

float Half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return F16ToF32(h);
}

// ggml's GGML_E8M0_TO_FP32_HALF: 2^(e - 128), exact for every e (e < 2 gives subnormals).
float E8m0Half(uint8_t e) {
  const uint32_t bits = e < 2 ? uint32_t{0x00200000} << e : static_cast<uint32_t>(e - 1) << 23;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

constexpr int8_t kMxfp4Doubled[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// The 6-bit scale and min of sub-block j (0..7) of a q4_K / q5_K block (get_scale_min_k4).
void ScaleMinK4(int j, const uint8_t* q, uint8_t& scale, uint8_t& min) {
  if (j < 4) {
    scale = q[j] & 63;
    min = q[j + 4] & 63;
  } else {
    scale = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    min = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4));
  }
}

void Q4_0(const uint8_t* b, float* y) {
  const float d = Half(b);
  for (int j = 0; j < 16; ++j) {
    y[j] = static_cast<float>((b[2 + j] & 0x0F) - 8) * d;
    y[j + 16] = static_cast<float>((b[2 + j] >> 4) - 8) * d;
  }
}

void Q4_1(const uint8_t* b, float* y) {
  const float d = Half(b), m = Half(b + 2);
  for (int j = 0; j < 16; ++j) {
    y[j] = static_cast<float>(b[4 + j] & 0x0F) * d + m;
    y[j + 16] = static_cast<float>(b[4 + j] >> 4) * d + m;
  }
}

void Q5_0(const uint8_t* b, float* y) {
  const float d = Half(b);
  uint32_t qh;
  std::memcpy(&qh, b + 2, 4);
  for (int j = 0; j < 16; ++j) {
    const int high0 = static_cast<int>(((qh >> j) << 4) & 0x10), high1 = static_cast<int>((qh >> (j + 12)) & 0x10);
    y[j] = static_cast<float>(((b[6 + j] & 0x0F) | high0) - 16) * d;
    y[j + 16] = static_cast<float>(((b[6 + j] >> 4) | high1) - 16) * d;
  }
}

void Q5_1(const uint8_t* b, float* y) {
  const float d = Half(b), m = Half(b + 2);
  uint32_t qh;
  std::memcpy(&qh, b + 4, 4);
  for (int j = 0; j < 16; ++j) {
    const int high0 = static_cast<int>(((qh >> j) << 4) & 0x10), high1 = static_cast<int>((qh >> (j + 12)) & 0x10);
    y[j] = static_cast<float>((b[8 + j] & 0x0F) | high0) * d + m;
    y[j + 16] = static_cast<float>((b[8 + j] >> 4) | high1) * d + m;
  }
}

void Q8_0(const uint8_t* b, float* y) {
  const float d = Half(b);
  for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(static_cast<int8_t>(b[2 + j])) * d;
}

void Mxfp4(const uint8_t* b, float* y) {
  const float d = E8m0Half(b[0]);
  for (int j = 0; j < 16; ++j) {
    y[j] = static_cast<float>(kMxfp4Doubled[b[1 + j] & 0x0F]) * d;
    y[j + 16] = static_cast<float>(kMxfp4Doubled[b[1 + j] >> 4]) * d;
  }
}

void Q2_K(const uint8_t* b, float* y) {
  const uint8_t* scales = b;
  const uint8_t* q = b + 16;
  const float d = Half(b + 80), min = Half(b + 82);
  int is = 0;
  for (int n = 0; n < 256; n += 128) {
    for (int shift = 0; shift < 8; shift += 2) {
      for (int half = 0; half < 2; ++half) {
        const uint8_t sc = scales[is++];
        const float dl = d * static_cast<float>(sc & 0xF), ml = min * static_cast<float>(sc >> 4);
        for (int l = 0; l < 16; ++l) *y++ = dl * static_cast<float>((q[l + 16 * half] >> shift) & 3) - ml;
      }
    }
    q += 32;
  }
}

void Q3_K(const uint8_t* b, float* y) {
  const uint8_t* hmask = b;
  const uint8_t* q = b + 32;
  const float d_all = Half(b + 108);
  // The sixteen 6-bit scales: low 4 bits from bytes 0-7, high 2 bits from bytes 8-11.
  uint32_t aux[4];
  std::memcpy(aux, b + 96, 12);
  const uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f, tmp = aux[2];
  aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
  aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
  aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
  aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
  int8_t scales[16];
  std::memcpy(scales, aux, 16);
  int is = 0;
  uint8_t bit = 1;
  for (int n = 0; n < 256; n += 128) {
    for (int shift = 0; shift < 8; shift += 2) {
      for (int half = 0; half < 2; ++half) {
        const float dl = d_all * static_cast<float>(scales[is++] - 32);
        for (int l = 0; l < 16; ++l) {
          const int idx = l + 16 * half;
          *y++ = dl * static_cast<float>(((q[idx] >> shift) & 3) - ((hmask[idx] & bit) ? 0 : 4));
        }
      }
      bit = static_cast<uint8_t>(bit << 1);
    }
    q += 32;
  }
}

// q4_K (high == nullptr) and q5_K (high: the 32 bytes of fifth bits).
void Q45_K(const uint8_t* b, const uint8_t* high, const uint8_t* q, float* y) {
  const float d = Half(b), min = Half(b + 2);
  const uint8_t* scales = b + 4;
  uint8_t u1 = 1, u2 = 2;
  for (int j = 0, is = 0; j < 256; j += 64, is += 2) {
    uint8_t sc, m;
    ScaleMinK4(is, scales, sc, m);
    const float d1 = d * static_cast<float>(sc), m1 = min * static_cast<float>(m);
    ScaleMinK4(is + 1, scales, sc, m);
    const float d2 = d * static_cast<float>(sc), m2 = min * static_cast<float>(m);
    for (int l = 0; l < 32; ++l) {
      const int extra = high != nullptr && (high[l] & u1) ? 16 : 0;
      *y++ = d1 * static_cast<float>((q[l] & 0xF) + extra) - m1;
    }
    for (int l = 0; l < 32; ++l) {
      const int extra = high != nullptr && (high[l] & u2) ? 16 : 0;
      *y++ = d2 * static_cast<float>((q[l] >> 4) + extra) - m2;
    }
    q += 32;
    u1 = static_cast<uint8_t>(u1 << 2);
    u2 = static_cast<uint8_t>(u2 << 2);
  }
}

void Q6_K(const uint8_t* b, float* y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
  const float d = Half(b + 208);
  for (int n = 0; n < 256; n += 128) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l] = d * static_cast<float>(sc[is + 0]) * static_cast<float>(q1);
      y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
      y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
      y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
    }
    y += 128;
    ql += 64;
    qh += 32;
    sc += 8;
  }
}

}  // namespace

bool UnpackGgmlKBlock(uint32_t type_id, const uint8_t* b, GgmlKBlock& out) {
  if (type_id == 12 || type_id == 13) {
    std::memcpy(&out.d, b, 2);
    std::memcpy(&out.dmin, b + 2, 2);
    for (int j = 0; j < 8; ++j) ScaleMinK4(j, b + 4, out.sub[j], out.min[j]);
    const uint8_t* high = type_id == 13 ? b + 16 : nullptr;
    const uint8_t* q = b + (type_id == 13 ? 48 : 16);
    // As Q45_K: 64 values per 32 bytes, low nibbles first; fifth bits u1, u2 moving up by 2.
    for (int j = 0, bit = 0; j < 256; j += 64, bit += 2, q += 32) {
      for (int l = 0; l < 32; ++l) {
        out.u[j + l] = static_cast<uint8_t>((q[l] & 0xF) | (high != nullptr && (high[l] >> bit & 1) ? 16 : 0));
        out.u[j + 32 + l] = static_cast<uint8_t>((q[l] >> 4) | (high != nullptr && (high[l] >> (bit + 1) & 1) ? 16 : 0));
      }
    }
    return true;
  }
  if (type_id != 14) return false;
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  std::memcpy(out.sub, b + 192, 16);
  std::memcpy(&out.d, b + 208, 2);
  out.dmin = 0;
  std::memset(out.min, 0, sizeof(out.min));
  for (int n = 0; n < 256; n += 128, ql += 64, qh += 32) {
    for (int l = 0; l < 32; ++l) {
      out.u[n + l] = static_cast<uint8_t>((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4));
      out.u[n + l + 32] = static_cast<uint8_t>((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4));
      out.u[n + l + 64] = static_cast<uint8_t>((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4));
      out.u[n + l + 96] = static_cast<uint8_t>((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4));
    }
  }
  return true;
}

bool DequantizeGgmlRow(uint32_t type_id, const uint8_t* src, float* dst, size_t n) {
  auto blocks = [&](size_t values, size_t bytes, auto&& one) {
    for (size_t i = 0; i < n / values; ++i) one(src + i * bytes, dst + i * values);
    return true;
  };
  switch (type_id) {
    case 0: std::memcpy(dst, src, n * 4); return true;
    case 1:
      for (size_t i = 0; i < n; ++i) dst[i] = Half(src + 2 * i);
      return true;
    case 30:
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        dst[i] = Bf16ToF32(h);
      }
      return true;
    case 2: return blocks(32, 18, Q4_0);
    case 3: return blocks(32, 20, Q4_1);
    case 6: return blocks(32, 22, Q5_0);
    case 7: return blocks(32, 24, Q5_1);
    case 8: return blocks(32, 34, Q8_0);
    case 39: return blocks(32, 17, Mxfp4);
    case 10: return blocks(256, 84, Q2_K);
    case 11: return blocks(256, 110, Q3_K);
    case 12: return blocks(256, 144, [](const uint8_t* b, float* y) { Q45_K(b, nullptr, b + 16, y); });
    case 13: return blocks(256, 176, [](const uint8_t* b, float* y) { Q45_K(b, b + 16, b + 48, y); });
    case 14: return blocks(256, 210, Q6_K);
    default: return false;
  }
}

}  // namespace tessera
