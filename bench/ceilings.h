// Ceilings shared by the kernel benchmarks: the machine's read bandwidth, measured in the same
// run as the kernels it is compared with (BM_ReadBandwidth records the best rate per thread count
// in g_best_bandwidth).
#pragma once

#include <benchmark/benchmark.h>
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <span>
#include <string>
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

// Row counts of the matmul sweeps: 1 to 9 decode and speculative verification (k + 1 rows,
// k <= 8), the rest prefill.
inline constexpr size_t kMatmulRowCounts[] = {1, 2, 4, 5, 8, 9, 32, 128, 512};

// Registers `<prefix><shape.name>/m:M/threads:T` for every shape, every row count M that
// runs(shape, M) accepts and T = 1 .. kMaxThreads, each calling fn(state, shape, M, T).
template <typename Shape, typename Runs, typename Fn>
void RegisterMatmulSweep(const std::string& prefix, std::span<const Shape> shapes, const Runs& runs, const Fn& fn) {
  for (const Shape& shape : shapes) {
    for (size_t m : kMatmulRowCounts) {
      if (!runs(shape, m)) continue;
      for (int t = 1; t <= kMaxThreads; ++t) {
        const std::string name = prefix + shape.name + "/m:" + std::to_string(m) + "/threads:" + std::to_string(t);
        benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& state) { fn(state, shape, m, t); })
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond);
      }
    }
  }
}

}  // namespace tessera::bench
