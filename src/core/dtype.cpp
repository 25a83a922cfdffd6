#include "core/dtype.h"

#include <cmath>
#include <limits>

#include "core/error.h"

namespace tessera {
namespace {

constexpr DTypeInfo kDTypes[] = {
    {DType::kBool, "BOOL", 1, false},      {DType::kU8, "U8", 1, false},
    {DType::kI8, "I8", 1, false},          {DType::kU16, "U16", 2, false},
    {DType::kI16, "I16", 2, false},        {DType::kU32, "U32", 4, false},
    {DType::kI32, "I32", 4, false},        {DType::kU64, "U64", 8, false},
    {DType::kI64, "I64", 8, false},        {DType::kF16, "F16", 2, true},
    {DType::kBF16, "BF16", 2, true},       {DType::kF32, "F32", 4, true},
    {DType::kF64, "F64", 8, true},         {DType::kF8E4M3, "F8_E4M3", 1, true},
    {DType::kF8E5M2, "F8_E5M2", 1, true},  {DType::kF8E8M0, "F8_E8M0", 1, true},
};

}  // namespace

const DTypeInfo& GetDTypeInfo(DType dtype) {
  const auto& info = kDTypes[static_cast<size_t>(dtype)];
  TESSERA_CHECK(info.dtype == dtype);
  return info;
}

std::optional<DType> DTypeFromName(std::string_view name) {
  for (const auto& info : kDTypes) {
    if (info.name == name) return info.dtype;
  }
  return std::nullopt;
}

float F16ToF32(uint16_t h) {
  const uint32_t sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  float value;
  if (exp == 0) {
    value = std::ldexp(static_cast<float>(mant), -24);
  } else if (exp == 31) {
    value = mant ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  } else {
    value = std::ldexp(static_cast<float>(mant | 0x400), static_cast<int>(exp) - 25);
  }
  return sign ? -value : value;
}

uint16_t F32ToF16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00;                  // NaN
  if (abs >= 0x477ff000u) return sign | 0x7c00;                 // rounds to >= 65520: inf
  if (abs < 0x38800000u) {                                      // below the smallest normal
    float a;
    std::memcpy(&a, &abs, 4);
    // Subnormal step 2^-24; nearbyint rounds half to even in the default mode.
    return sign | static_cast<uint16_t>(std::nearbyint(a * 16777216.0f));
  }
  uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1);
  return sign | static_cast<uint16_t>((rounded - 0x38000000u) >> 13);
}

float F8E4M3ToF32(uint8_t v) {
  const int sign = v >> 7, exp = (v >> 3) & 0xf, mant = v & 0x7;
  if (exp == 0xf && mant == 0x7) return std::numeric_limits<float>::quiet_NaN();
  const float value = exp == 0 ? std::ldexp(static_cast<float>(mant), -9)
                               : std::ldexp(static_cast<float>(mant | 8), exp - 10);
  return sign ? -value : value;
}

uint8_t F32ToF8E4M3(float f) {
  if (std::isnan(f)) return 0x7f;
  const uint8_t sign = std::signbit(f) ? 0x80 : 0x00;
  const float a = std::fabs(f);
  if (a >= 448.0f) return sign | 0x7e;
  if (a < 0.015625f) {  // below 2^-6: subnormals, step 2^-9 (8 steps round up to 2^-6 = 0x08)
    return sign | static_cast<uint8_t>(std::nearbyint(a * 512.0f));
  }
  int e = 0;
  const float fraction = std::frexp(a, &e);  // a = fraction 2^e, fraction in [0.5, 1)
  int biased = e - 1 + 7;
  int mant = static_cast<int>(std::nearbyint((2.0f * fraction - 1.0f) * 8.0f));  // exact product, RNE
  if (mant == 8) {
    mant = 0;
    ++biased;
  }
  if (biased > 15 || (biased == 15 && mant == 7)) return sign | 0x7e;
  return sign | static_cast<uint8_t>(biased << 3 | mant);
}

float F8E5M2ToF32(uint8_t v) { return F16ToF32(static_cast<uint16_t>(v) << 8); }

float E8M0ToF32(uint8_t v) {
  if (v == 0xff) return std::numeric_limits<float>::quiet_NaN();
  return std::ldexp(1.0f, static_cast<int>(v) - 127);
}

float ElementToF32(DType dtype, const void* src) {
  auto load = [src](auto zero) {
    decltype(zero) v;
    std::memcpy(&v, src, sizeof(v));
    return v;
  };
  switch (dtype) {
    case DType::kBool: return load(uint8_t{}) ? 1.0f : 0.0f;
    case DType::kU8: return load(uint8_t{});
    case DType::kI8: return load(int8_t{});
    case DType::kU16: return load(uint16_t{});
    case DType::kI16: return load(int16_t{});
    case DType::kU32: return static_cast<float>(load(uint32_t{}));
    case DType::kI32: return static_cast<float>(load(int32_t{}));
    case DType::kU64: return static_cast<float>(load(uint64_t{}));
    case DType::kI64: return static_cast<float>(load(int64_t{}));
    case DType::kF16: return F16ToF32(load(uint16_t{}));
    case DType::kBF16: return Bf16ToF32(load(uint16_t{}));
    case DType::kF32: return load(float{});
    case DType::kF64: return static_cast<float>(load(double{}));
    case DType::kF8E4M3: return F8E4M3ToF32(load(uint8_t{}));
    case DType::kF8E5M2: return F8E5M2ToF32(load(uint8_t{}));
    case DType::kF8E8M0: return E8M0ToF32(load(uint8_t{}));
  }
  return 0.0f;
}

}  // namespace tessera
