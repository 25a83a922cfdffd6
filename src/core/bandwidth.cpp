#include "core/bandwidth.h"

#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <vector>

#include "core/cpu_features.h"
#include "core/error.h"
#include "core/thread_pool.h"

namespace tessera {
namespace {

__attribute__((target("avx512f"))) float SumAvx512(const float* p, size_t n) {
  __m512 acc[8];
  for (auto& a : acc) a = _mm512_setzero_ps();
  for (size_t i = 0; i + 128 <= n; i += 128) {
    for (int u = 0; u < 8; ++u) acc[u] = _mm512_add_ps(acc[u], _mm512_load_ps(p + i + 16 * u));
  }
  for (int u = 1; u < 8; ++u) acc[0] = _mm512_add_ps(acc[0], acc[u]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, acc[0]);
  float s = 0.0f;
  for (float v : lanes) s += v;
  return s;
}

__attribute__((target("avx2"))) float SumAvx2(const float* p, size_t n) {
  __m256 acc[8];
  for (auto& a : acc) a = _mm256_setzero_ps();
  for (size_t i = 0; i + 64 <= n; i += 64) {
    for (int u = 0; u < 8; ++u) acc[u] = _mm256_add_ps(acc[u], _mm256_load_ps(p + i + 8 * u));
  }
  for (int u = 1; u < 8; ++u) acc[0] = _mm256_add_ps(acc[0], acc[u]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, acc[0]);
  float s = 0.0f;
  for (float v : lanes) s += v;
  return s;
}

float SumSse(const float* p, size_t n) {
  __m128 acc[4] = {_mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps()};
  for (size_t i = 0; i + 16 <= n; i += 16) {
    for (int u = 0; u < 4; ++u) acc[u] = _mm_add_ps(acc[u], _mm_load_ps(p + i + 4 * u));
  }
  alignas(16) float lanes[4];
  _mm_store_ps(lanes, _mm_add_ps(_mm_add_ps(acc[0], acc[1]), _mm_add_ps(acc[2], acc[3])));
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}

}  // namespace

float StreamSumF32(const float* p, size_t n) {
  const CpuFeatures& f = GetCpuFeatures();
  if (f.avx512f && f.os_avx512) return SumAvx512(p, n);
  if (f.avx2 && f.os_avx) return SumAvx2(p, n);
  return SumSse(p, n);
}

double MeasureReadBandwidth(size_t bytes, int threads, int repetitions) {
  threads = std::clamp(threads, 1, GlobalPool().num_threads());
  const size_t unit = 512 * static_cast<size_t>(threads);
  bytes = bytes / unit * unit;
  TESSERA_CHECK(bytes > 0 && repetitions > 0);
  float* buffer = static_cast<float*>(std::aligned_alloc(64, bytes));
  if (buffer == nullptr) Fail("out of memory allocating ", bytes, " bytes for the bandwidth measurement");
  const size_t n = bytes / sizeof(float), part = n / threads;
  // Each thread touches its own part first, so pages are faulted in before timing.
  GlobalPool().Run(threads, [&](size_t t, int) { std::fill(buffer + t * part, buffer + (t + 1) * part, 1.0f); });
  std::vector<float> sums(threads);
  double best = 0.0;
  for (int r = 0; r < repetitions; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    GlobalPool().Run(threads, [&](size_t t, int) { sums[t] = StreamSumF32(buffer + t * part, part); });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, static_cast<double>(bytes) / s);
  }
  volatile float sink = sums[0];
  (void)sink;
  std::free(buffer);
  return best;
}

}  // namespace tessera
