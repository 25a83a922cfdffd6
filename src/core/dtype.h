// Element types as they appear in checkpoints, and exact scalar conversions.
//
// The table in dtype.cpp is the single description of every type: its safetensors name, its
// size, and whether tessera can convert it to float. Loading, checking and writing all read it.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

namespace tessera {

enum class DType : uint8_t {
  kBool, kU8, kI8, kU16, kI16, kU32, kI32, kU64, kI64,
  kF16, kBF16, kF32, kF64,
  kF8E4M3, kF8E5M2, kF8E8M0,
};

struct DTypeInfo {
  DType dtype;
  std::string_view name;  // safetensors spelling, e.g. "BF16", "F8_E4M3"
  size_t size;            // bytes per element
  bool is_float;
};

const DTypeInfo& GetDTypeInfo(DType dtype);
inline size_t DTypeSize(DType dtype) { return GetDTypeInfo(dtype).size; }
inline std::string_view DTypeName(DType dtype) { return GetDTypeInfo(dtype).name; }
// nullopt for a name safetensors does not define or tessera cannot hold.
std::optional<DType> DTypeFromName(std::string_view name);

// ---- exact conversions ----------------------------------------------------------------------

inline float Bf16ToF32(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Round to nearest even; NaN stays a quiet NaN.
inline uint16_t F32ToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1);
  return static_cast<uint16_t>(bits >> 16);
}

float F16ToF32(uint16_t h);
uint16_t F32ToF16(float f);  // round to nearest even, overflow to inf
float F8E4M3ToF32(uint8_t v);  // OCP E4M3FN: no infinities, 0x7f/0xff are NaN
// Round to nearest even; magnitudes past 448 saturate to +-448 (e4m3fn has no infinity; torch's
// cast would give NaN, DeepSeek's quantizer clamps first); NaN -> 0x7f.
uint8_t F32ToF8E4M3(float f);
float F8E5M2ToF32(uint8_t v);
float E8M0ToF32(uint8_t v);    // 2^(v-127); 255 is NaN per OCP

// Converts one element at `src` of type `dtype` to float (integers by value).
float ElementToF32(DType dtype, const void* src);

}  // namespace tessera
