// Ceilings shared by the kernel benchmarks: the machine's read bandwidth, measured in the same
// run as the kernels it is compared with (BM_ReadBandwidth records the best rate per thread count
// in g_best_bandwidth).
#pragma once

#include <benchmark/benchmark.h>
#include <immintrin.h>

// gcc 12's AVX-512 headers trip -Wuninitialized inside _mm512_reduce_add_ps (as CMakeLists.txt
// notes for the *_avx512.cpp files).
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <vector>

#include "core/cpu_features.h"
#include "core/thread_pool.h"

namespace tessera::bench {

// A buffer far larger than the L3, streamed once per iteration.
inline constexpr size_t kStreamBytes = size_t{1} << 30;
inline constexpr int kMaxThreads = 2;

inline double g_best_bandwidth[kMaxThreads + 1] = {};  // bytes/s per thread count

__attribute__((target("avx512f"))) inline float SumAvx512(const float* p, size_t n) {
  __m512 acc[8];
  for (auto& a : acc) a = _mm512_setzero_ps();
  for (size_t i = 0; i + 128 <= n; i += 128) {
    for (int u = 0; u < 8; ++u) acc[u] = _mm512_add_ps(acc[u], _mm512_load_ps(p + i + 16 * u));
  }
  for (int u = 1; u < 8; ++u) acc[0] = _mm512_add_ps(acc[0], acc[u]);
  return _mm512_reduce_add_ps(acc[0]);
}

__attribute__((target("avx2"))) inline float SumAvx2(const float* p, size_t n) {
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

inline float StreamSum(const float* p, size_t n) {
  return GetCpuFeatures().avx512f && GetCpuFeatures().os_avx512 ? SumAvx512(p, n) : SumAvx2(p, n);
}

inline void BM_ReadBandwidth(benchmark::State& state, int threads) {
  SetGlobalThreadCount(threads);
  static float* buffer = [] {
    auto* p = static_cast<float*>(std::aligned_alloc(64, kStreamBytes));
    for (size_t i = 0; i < kStreamBytes / sizeof(float); ++i) p[i] = 1.0f;
    return p;
  }();
  const size_t n = kStreamBytes / sizeof(float);
  const size_t part = n / threads;  // multiple of 128 floats
  std::vector<float> sums(threads);
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    GlobalPool().Run(threads, [&](size_t t, int) { sums[t] = StreamSum(buffer + t * part, part); });
    benchmark::DoNotOptimize(sums.data());
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double rate = static_cast<double>(kStreamBytes) * state.iterations() / seconds;
  g_best_bandwidth[threads] = std::max(g_best_bandwidth[threads], rate);
  state.counters["GB"] = benchmark::Counter(kStreamBytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace tessera::bench
