#include <immintrin.h>

#include "kernels/peak.h"

namespace tessera {

// ymm FMAs: 8 lanes; 16 chains (more than 4-cycle latency x 2 ports).
float FmaPeakLoopAvx2(long iterations) {
  __m256 acc[kPeakChains];
  for (int i = 0; i < kPeakChains; ++i) acc[i] = _mm256_set1_ps(static_cast<float>(i));
  const __m256 a = _mm256_set1_ps(0.999f), b = _mm256_set1_ps(1e-3f);
  for (long it = 0; it < iterations; ++it) {
#pragma GCC unroll 16
    for (int i = 0; i < kPeakChains; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
  }
  for (int i = 1; i < kPeakChains; ++i) acc[0] = _mm256_add_ps(acc[0], acc[i]);
  alignas(32) float out[8];
  _mm256_store_ps(out, acc[0]);
  return out[0];
}

}  // namespace tessera
