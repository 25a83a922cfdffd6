// Ceilings shared by the kernel benchmarks: the machine's read bandwidth, measured in the same
// run as the kernels it is compared with (BM_ReadBandwidth records the best rate per thread count
// in g_best_bandwidth).
#pragma once

#include <benchmark/benchmark.h>
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <vector>

#include "core/bandwidth.h"
#include "core/cpu_features.h"
#include "core/thread_pool.h"

namespace tessera::bench {

// A buffer far larger than the L3, streamed once per iteration.
inline constexpr size_t kStreamBytes = size_t{1} << 30;
inline constexpr int kMaxThreads = 2;

inline double g_best_bandwidth[kMaxThreads + 1] = {};  // bytes/s per thread count

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
    GlobalPool().Run(threads, [&](size_t t, int) { sums[t] = StreamSumF32(buffer + t * part, part); });
    benchmark::DoNotOptimize(sums.data());
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double rate = static_cast<double>(kStreamBytes) * state.iterations() / seconds;
  g_best_bandwidth[threads] = std::max(g_best_bandwidth[threads], rate);
  state.counters["GB"] = benchmark::Counter(kStreamBytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// Counters of a matmul benchmark that ran state.iterations() calls in `seconds`, each reading
// `bytes` of weights and doing `ops` operations: weight_GB and `ops_name` (GFLOP, GOP) as rates,
// bw_frac against this run's read ceiling and peak_frac against `peak` (ops/s of the same
// thread count; 0 = not measured).
inline void SetMatmulCounters(benchmark::State& state, double seconds, double bytes, double ops,
                              const char* ops_name, int threads, double peak) {
  state.counters["weight_GB"] = benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters[ops_name] = benchmark::Counter(ops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  if (g_best_bandwidth[threads] > 0) {
    state.counters["bw_frac"] = bytes * state.iterations() / seconds / g_best_bandwidth[threads];
  }
  if (peak > 0) state.counters["peak_frac"] = ops * state.iterations() / seconds / peak;
}

}  // namespace tessera::bench
