// Matmul kernels (parallel_matmul.h over ActiveKernels()) on the gpt-oss-20b shapes, with the
// machine's ceilings measured in the same run:
//   read_bandwidth/threads:T  streaming sum over a 1 GiB buffer (the decode roofline)
//   fma_peak/threads:T        independent f32 FMAs at the widest vector width (the GEMM roofline)
//   bf16/<shape>/m:M/threads:T, f16/..., f32/..., mxfp4/<shape>/m:M/threads:T
// Counters: weight_GB (weight bytes / s, in GB), GFLOP (2 m n k / s), and bw_frac / peak_frac:
// those rates divided by the best ceiling of the same thread count measured earlier in this run
// (absent when the ceilings were filtered out): the wall-clock read bandwidth, and the FMA peak
// per CPU-second (the hardware's, unaffected by other load on the machine). Decode-sized runs cycle through copies of the
// weights totalling >= 1 GiB so that they stream from DRAM, not from the (large) L3.
//
//   build-kern/matmul_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
// TESSERA_ISA=avx2 selects the AVX2 kernels.
#include <benchmark/benchmark.h>
#include <immintrin.h>

// gcc 12's AVX-512 headers trip -Wuninitialized inside _mm512_reduce_add_ps (as CMakeLists.txt
// notes for the *_avx512.cpp files).
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include "bench/ceilings.h"
#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "kernels/kernels.h"
#include "kernels/mxfp4.h"
#include "kernels/parallel_matmul.h"

namespace tessera {
namespace {

using bench::BM_ReadBandwidth;
using bench::g_best_bandwidth;
using bench::kMaxThreads;
using bench::kStreamBytes;

double g_best_flops[kMaxThreads + 1] = {};      // flop/s per thread count

uint64_t NextRandom(uint64_t& state) {  // xorshift64*: fast enough to fill gigabytes
  state ^= state >> 12;
  state ^= state << 25;
  state ^= state >> 27;
  return state * 0x2545F4914F6CDD1Dull;
}

constexpr int kFmaChains = 24;  // independent accumulators: > 2 ports x 4 cycles latency

__attribute__((target("avx512f"))) float FmaLoopAvx512(size_t iterations) {
  __m512 acc[kFmaChains];
  for (int i = 0; i < kFmaChains; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
  const __m512 a = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(0.001f);
  for (size_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 24  // keeps the accumulators in registers
    for (int i = 0; i < kFmaChains; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  }
  for (int i = 1; i < kFmaChains; ++i) acc[0] = _mm512_add_ps(acc[0], acc[i]);
  return _mm512_reduce_add_ps(acc[0]);
}

__attribute__((target("avx2,fma"))) float FmaLoopAvx2(size_t iterations) {
  __m256 acc[kFmaChains / 2];  // 12 of the 16 ymm registers
  for (int i = 0; i < kFmaChains / 2; ++i) acc[i] = _mm256_set1_ps(static_cast<float>(i));
  const __m256 a = _mm256_set1_ps(0.999f), b = _mm256_set1_ps(0.001f);
  for (size_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < kFmaChains / 2; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
  }
  for (int i = 1; i < kFmaChains / 2; ++i) acc[0] = _mm256_add_ps(acc[0], acc[i]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, acc[0]);
  return lanes[0];
}

double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

// FMA peak of the vector width the active matmul kernels use. The machine is shared, so the
// ceiling is taken per CPU-second of each thread (what the cores do while they are ours, i.e.
// 2 ports x lanes x 2 flops x clock) and summed over the threads; GFLOP is the wall-clock rate.
void BM_FmaPeak(benchmark::State& state, int threads) {
  SetGlobalThreadCount(threads);
  const bool wide = ActiveIsa() >= Isa::kAvx512;
  constexpr size_t kIterations = 1 << 20;
  const double flops_per_thread = 2.0 * kIterations * (wide ? kFmaChains * 16 : kFmaChains / 2 * 8);
  std::vector<float> sinks(threads);
  std::vector<double> cpu_seconds(threads, 0.0);
  for (auto _ : state) {
    GlobalPool().Run(threads, [&](size_t t, int) {
      const double start = ThreadCpuSeconds();
      sinks[t] = wide ? FmaLoopAvx512(kIterations) : FmaLoopAvx2(kIterations);
      cpu_seconds[t] += ThreadCpuSeconds() - start;
    });
    benchmark::DoNotOptimize(sinks.data());
  }
  double peak = 0.0;
  for (double s : cpu_seconds) peak += flops_per_thread * state.iterations() / s;
  g_best_flops[threads] = std::max(g_best_flops[threads], peak);
  state.counters["GFLOP"] = benchmark::Counter(flops_per_thread * threads * 1e-9,
                                               benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GFLOP_per_cpu_s"] = peak * 1e-9;
  state.SetLabel(wide ? "zmm" : "ymm");
}

// ---- matmuls ----------------------------------------------------------------------------------

struct Shape {
  const char* name;
  size_t n, k;
};
// gpt-oss-20b (../shared/reference/performance.md §2): attention q / k,v / o, unembedding; expert
// gate_up and down. Llama-3.1-8B's MLP (gate and up interleaved into one matrix, as the model
// holds them; down) for the long rows of the dense families. The dense shapes also serve F16 and
// F32 (checkpoints of other families).
const Shape kBf16Shapes[] = {{"attn_q", 4096, 2880},           {"attn_kv", 512, 2880},
                             {"attn_o", 2880, 4096},           {"lm_head", 201088, 2880},
                             {"llama8b_gate_up", 28672, 4096}, {"llama8b_down", 4096, 14336}};
const Shape kMxfp4Shapes[] = {{"moe_gate_up", 5760, 2880}, {"moe_down", 2880, 2880}};

enum class Format { kBf16, kF16, kF32, kMxfp4 };
const char* FormatPrefix(Format f) {
  switch (f) {
    case Format::kBf16: return "bf16/";
    case Format::kF16: return "f16/";
    case Format::kF32: return "f32/";
    case Format::kMxfp4: return "mxfp4/";
  }
  return "?/";
}

// Weight copies of one shape and format, kept between the runs of consecutive benchmarks.
// bf16 holds the BF16 or F16 bits.
struct WeightSet {
  std::string key;
  size_t copies = 0;
  size_t bf16_per_copy = 0, f32_per_copy = 0, codes_per_copy = 0, scales_per_copy = 0;
  std::vector<uint16_t> bf16;
  std::vector<float> f32;
  std::vector<uint8_t> codes, scales;
  size_t BytesPerCopy() const {
    return 2 * bf16_per_copy + 4 * f32_per_copy + codes_per_copy + scales_per_copy;
  }
};

const WeightSet& Weights(Format format, const Shape& shape) {
  static std::unique_ptr<WeightSet> cache;
  const std::string key = std::string(FormatPrefix(format)) + shape.name;
  if (cache && cache->key == key) return *cache;
  cache.reset();  // free the previous shape first
  auto set = std::make_unique<WeightSet>();
  set->key = key;
  const bool mxfp4 = format == Format::kMxfp4;
  if (mxfp4) {
    set->codes_per_copy = shape.n * shape.k / 2;
    set->scales_per_copy = shape.n * shape.k / kMxfp4BlockSize;
  } else if (format == Format::kF32) {
    set->f32_per_copy = shape.n * shape.k;
  } else {
    set->bf16_per_copy = shape.n * shape.k;
  }
  set->copies = std::max<size_t>(1, (kStreamBytes + set->BytesPerCopy() - 1) / set->BytesPerCopy());
  uint64_t rng = 0x9E3779B97F4A7C15ull;
  if (mxfp4) {
    set->codes.resize(set->copies * set->codes_per_copy);
    set->scales.resize(set->copies * set->scales_per_copy);
    for (size_t i = 0; i < set->codes_per_copy; ++i) set->codes[i] = static_cast<uint8_t>(NextRandom(rng));
    // Scales 2^-9 .. 2^0: normal f32 weights of magnitude <= 6.
    for (size_t i = 0; i < set->scales_per_copy; ++i) set->scales[i] = static_cast<uint8_t>(118 + NextRandom(rng) % 10);
    for (size_t c = 1; c < set->copies; ++c) {
      std::memcpy(&set->codes[c * set->codes_per_copy], set->codes.data(), set->codes_per_copy);
      std::memcpy(&set->scales[c * set->scales_per_copy], set->scales.data(), set->scales_per_copy);
    }
  } else if (format == Format::kF32) {
    set->f32.resize(set->copies * set->f32_per_copy);
    // Random sign and mantissa, exponent 2^-7 .. 2^2, as for BF16.
    for (size_t i = 0; i < set->f32_per_copy; ++i) {
      const uint64_t r = NextRandom(rng);
      const uint32_t bits = static_cast<uint32_t>((r & 0x807fffffu) | ((120 + (r >> 32) % 10) << 23));
      std::memcpy(&set->f32[i], &bits, 4);
    }
    for (size_t c = 1; c < set->copies; ++c) {
      std::memcpy(&set->f32[c * set->f32_per_copy], set->f32.data(), 4 * set->f32_per_copy);
    }
  } else {
    set->bf16.resize(set->copies * set->bf16_per_copy);
    // Random sign and mantissa, exponent 2^-7 .. 2^2: normal values like trained weights
    // (F16: biased exponent 8 .. 17).
    for (size_t i = 0; i < set->bf16_per_copy; ++i) {
      const uint64_t r = NextRandom(rng);
      set->bf16[i] = format == Format::kF16
                         ? static_cast<uint16_t>((r & 0x83ff) | ((8 + (r >> 16) % 10) << 10))
                         : static_cast<uint16_t>((r & 0x807f) | ((120 + (r >> 16) % 10) << 7));
    }
    for (size_t c = 1; c < set->copies; ++c) {
      std::memcpy(&set->bf16[c * set->bf16_per_copy], set->bf16.data(), 2 * set->bf16_per_copy);
    }
  }
  cache = std::move(set);
  return *cache;
}

void BM_Matmul(benchmark::State& state, Format format, Shape shape, size_t m, int threads) {
  SetGlobalThreadCount(threads);
  const WeightSet& w = Weights(format, shape);
  std::vector<float> x(m * shape.k), bias(shape.n), y(m * shape.n);
  uint64_t rng = 12345;
  for (auto& v : x) v = static_cast<float>(NextRandom(rng) % 2001) * 1e-3f - 1.0f;
  for (auto& v : bias) v = static_cast<float>(NextRandom(rng) % 2001) * 1e-3f - 1.0f;

  size_t copy = 0;
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    switch (format) {
      case Format::kMxfp4:
        MatmulMxfp4(x.data(), m, shape.k, &w.codes[copy * w.codes_per_copy],
                    &w.scales[copy * w.scales_per_copy], shape.n, bias.data(), y.data());
        break;
      case Format::kBf16:
        MatmulBf16(x.data(), m, shape.k, &w.bf16[copy * w.bf16_per_copy], shape.n, bias.data(),
                   y.data());
        break;
      case Format::kF16:
        MatmulF16(x.data(), m, shape.k, &w.bf16[copy * w.bf16_per_copy], shape.n, bias.data(),
                  y.data());
        break;
      case Format::kF32:
        MatmulF32(x.data(), m, shape.k, &w.f32[copy * w.f32_per_copy], shape.n, bias.data(),
                  y.data());
        break;
    }
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
    copy = copy + 1 == w.copies ? 0 : copy + 1;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double bytes = static_cast<double>(w.BytesPerCopy());
  const double flops = 2.0 * m * shape.n * shape.k;
  bench::SetMatmulCounters(state, seconds, bytes, flops, "GFLOP", threads, g_best_flops[threads]);
  const KernelTable& t = ActiveKernels();
  state.SetLabel(format == Format::kMxfp4 ? t.matmul_mxfp4_isa
                 : format == Format::kF16 ? t.matmul_f16_isa
                 : format == Format::kF32 ? t.matmul_f32_isa
                                          : t.matmul_bf16_isa);
}

int RegisterAll() {
  for (int t = 1; t <= kMaxThreads; ++t) {
    benchmark::RegisterBenchmark(("read_bandwidth/threads:" + std::to_string(t)).c_str(),
                                 BM_ReadBandwidth, t)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  }
  for (int t = 1; t <= kMaxThreads; ++t) {
    benchmark::RegisterBenchmark(("fma_peak/threads:" + std::to_string(t)).c_str(), BM_FmaPeak, t)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  }
  // The unembedding only ever sees the last position (or a few speculative ones).
  const auto runs = [](const Shape& shape, size_t m) { return std::string(shape.name) != "lm_head" || m <= 9; };
  for (Format format : {Format::kBf16, Format::kMxfp4, Format::kF16, Format::kF32}) {
    const bool mxfp4 = format == Format::kMxfp4;
    bench::RegisterMatmulSweep<Shape>(FormatPrefix(format),
                                      mxfp4 ? std::span<const Shape>(kMxfp4Shapes) : std::span<const Shape>(kBf16Shapes),
                                      runs, [format](benchmark::State& state, const Shape& shape, size_t m, int t) {
                                        BM_Matmul(state, format, shape, m, t);
                                      });
  }
  return 0;
}

[[maybe_unused]] const int kRegistered = RegisterAll();

}  // namespace
}  // namespace tessera
