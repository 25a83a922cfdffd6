#include <immintrin.h>

#include <cstdint>

#include "kernels/peak.h"

namespace tessera {

// vpdpbusd zmm: 16 lanes x 4 u8 x s8 products per instruction; 16 chains.
int DpbusdPeakLoopAvx512Vnni(long iterations) {
  __m512i acc[kPeakChains];
  for (int i = 0; i < kPeakChains; ++i) acc[i] = _mm512_set1_epi32(i);
  const __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-2);
  for (long it = 0; it < iterations; ++it) {
#pragma GCC unroll 16
    for (int i = 0; i < kPeakChains; ++i) acc[i] = _mm512_dpbusd_epi32(acc[i], a, b);
  }
  for (int i = 1; i < kPeakChains; ++i) acc[0] = _mm512_add_epi32(acc[0], acc[i]);
  // The lanes wrap (the value only keeps the loop alive); summed as unsigned, since the
  // header's _mm512_reduce_add_epi32 adds ints in C, where overflow is undefined.
  alignas(64) uint32_t lanes[16];
  _mm512_store_si512(lanes, acc[0]);
  uint32_t sum = 0;
  for (uint32_t lane : lanes) sum += lane;
  return static_cast<int>(sum);
}

}  // namespace tessera
