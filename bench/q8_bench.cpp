// The q8 matmuls (kernels/q8.h: MatmulQ8Mxfp4 / MatmulQ8Int8, columns split across the pool,
// activations quantized once per call outside the timed loop) on the gpt-oss-20b shapes, with the
// machine's ceilings measured in the same run:
//   read_bandwidth/threads:T  streaming sum over a 1 GiB buffer (bench/ceilings.h; decode roofline)
//   vnni_peak/threads:T       independent vpdpbusd zmm chains (the integer GEMM roofline), per
//                             CPU-second of each thread, summed over the threads
//   quantize/m:M/threads:T    the activation quantizer (QuantizeQ8) on M rows of 2880
//   q8_mxfp4/<shape>/m:M/threads:T, q8_int8/<shape>/m:M/threads:T
//   q8_int4/<shape>/m:M/threads:T  int4 weights (kernels/int4.h, group 128: AWQ) against q8 rows
//   int4_exact/<shape>/m:M/threads:T  the same weights against float32 rows (the exact path)
// Counters: weight_GB (packed weight bytes incl. scales / s), GOP (2 m n k integer-path ops / s),
// and bw_frac / peak_frac: those rates divided by the best ceiling of the same thread count
// measured earlier in this run (absent when the ceilings were filtered out). Every run cycles
// through copies of the weights totalling >= 1 GiB, so the weights stream from DRAM, not from
// the (large) L3, as they do in a model.
//
//   build-q8/q8_bench --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
// TESSERA_ISA=avx2 selects the AVX2 kernels.
#include <benchmark/benchmark.h>
#include <immintrin.h>

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
#include "kernels/int4.h"
#include "kernels/kernels.h"
#include "kernels/parallel_matmul.h"
#include "kernels/q8.h"

namespace tessera {
namespace {

using bench::BM_ReadBandwidth;
using bench::g_best_bandwidth;
using bench::kMaxThreads;
using bench::kStreamBytes;

double g_best_ops[kMaxThreads + 1] = {};  // integer multiply-add ops (2 per MAC) / s per thread count

uint64_t NextRandom(uint64_t& state) {  // xorshift64*: fast enough to fill gigabytes
  state ^= state >> 12;
  state ^= state << 25;
  state ^= state >> 27;
  return state * 0x2545F4914F6CDD1Dull;
}

double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

// ---- VNNI ceiling -------------------------------------------------------------------------------

// Independent accumulators: more than latency (5 cycles) x throughput (1 per cycle).
constexpr int kDpChains = 16;

__attribute__((target("avx512f,avx512vnni"))) int32_t DpbusdLoop(size_t iterations) {
  __m512i acc[kDpChains];
  for (int i = 0; i < kDpChains; ++i) acc[i] = _mm512_set1_epi32(i);
  const __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-2);
  for (size_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 16  // keeps the accumulators in registers
    for (int i = 0; i < kDpChains; ++i) acc[i] = _mm512_dpbusd_epi32(acc[i], a, b);
  }
  for (int i = 1; i < kDpChains; ++i) acc[0] = _mm512_add_epi32(acc[0], acc[i]);
  alignas(64) int32_t lanes[16];
  _mm512_store_si512(lanes, acc[0]);
  int32_t sum = 0;
  for (const int32_t lane : lanes) sum += lane;
  return sum;
}

// vpdpbusd zmm: 16 lanes x 4 u8 x s8 products, 2 ops each. Taken per CPU-second of each thread
// (what the cores do while they are ours; other load on the shared machine does not lower it).
void BM_VnniPeak(benchmark::State& state, int threads) {
  if (!GetCpuFeatures().avx512_vnni || !GetCpuFeatures().os_avx512) {
    state.SkipWithError("no AVX512-VNNI");
    return;
  }
  SetGlobalThreadCount(threads);
  constexpr size_t kIterations = 1 << 20;
  const double ops_per_thread = 2.0 * 64 * kDpChains * kIterations;
  std::vector<int32_t> sinks(threads);
  std::vector<double> cpu_seconds(threads, 0.0);
  for (auto _ : state) {
    GlobalPool().Run(threads, [&](size_t t, int) {
      const double start = ThreadCpuSeconds();
      sinks[t] = DpbusdLoop(kIterations);
      cpu_seconds[t] += ThreadCpuSeconds() - start;
    });
    benchmark::DoNotOptimize(sinks.data());
  }
  double peak = 0.0;
  for (double s : cpu_seconds) peak += ops_per_thread * state.iterations() / s;
  g_best_ops[threads] = std::max(g_best_ops[threads], peak);
  state.counters["GOP"] = benchmark::Counter(ops_per_thread * threads * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GOP_per_cpu_s"] = peak * 1e-9;
}

// ---- weights ------------------------------------------------------------------------------------

struct Shape {
  const char* name;
  size_t n, k;
  size_t max_m;  // larger batches are not run on this shape
};
// gpt-oss-20b (../shared/reference/performance.md §2): expert gate_up and down, and all 32 experts'
// gate_up of one layer stacked (282 MB); attention q and o, unembedding (int8 dense option), and
// Llama-3.1-8B's MLP (gate and up interleaved, 117 MB; down, 59 MB) for the dense families' long rows.
const Shape kMxfp4Shapes[] = {
    {"moe_gate_up", 5760, 2880, 512}, {"moe_down", 2880, 2880, 512}, {"moe_gate_up_x32", 32 * 5760, 2880, 4}};
const Shape kInt8Shapes[] = {{"attn_q", 4096, 2880, 512}, {"attn_o", 2880, 4096, 512}, {"lm_head", 201088, 2880, 4},
                                {"llama8b_gate_up", 28672, 4096, 4}, {"llama8b_down", 4096, 14336, 4}};

// Packed weight copies of one shape and format, kept between consecutive benchmarks.
struct WeightSet {
  std::string key;
  size_t copies = 0;
  size_t bytes_per_copy = 0;  // codes or values
  size_t scale_bytes_per_copy = 0;
  std::vector<uint8_t> bytes;
  std::vector<uint8_t> scales;    // MXFP4: E8M0 bytes
  std::vector<float> row_scales;  // int8: f32 per column
  size_t BytesPerCopy() const { return bytes_per_copy + scale_bytes_per_copy; }
};

const WeightSet& Weights(bool mxfp4, const Shape& shape) {
  static std::unique_ptr<WeightSet> cache;
  const std::string key = std::string(mxfp4 ? "mxfp4/" : "int8/") + shape.name;
  if (cache && cache->key == key) return *cache;
  cache.reset();  // free the previous shape first
  auto set = std::make_unique<WeightSet>();
  set->key = key;
  const size_t n = shape.n, k = shape.k;
  if (mxfp4) {
    set->bytes_per_copy = Q8Mxfp4CodeBytes(n, k);
    set->scale_bytes_per_copy = Q8Mxfp4ScaleBytes(n, k);
  } else {
    set->bytes_per_copy = Q8Int8Bytes(n, k);
    set->scale_bytes_per_copy = Q8PaddedColumns(n) * sizeof(float);
  }
  set->copies = std::max<size_t>(1, (kStreamBytes + set->BytesPerCopy() - 1) / set->BytesPerCopy());
  uint64_t rng = 0x9E3779B97F4A7C15ull;
  set->bytes.resize(set->copies * set->bytes_per_copy);
  // MXFP4: any code byte; int8: W8 + 128 in [1, 255].
  for (size_t i = 0; i < set->bytes_per_copy; ++i) {
    const auto r = static_cast<uint8_t>(NextRandom(rng));
    set->bytes[i] = mxfp4 || r != 0 ? r : 1;
  }
  for (size_t c = 1; c < set->copies; ++c) {
    std::memcpy(&set->bytes[c * set->bytes_per_copy], set->bytes.data(), set->bytes_per_copy);
  }
  if (mxfp4) {
    // Scales 2^-9 .. 2^0, as trained weights.
    set->scales.resize(set->copies * set->scale_bytes_per_copy);
    for (size_t i = 0; i < set->scale_bytes_per_copy; ++i) set->scales[i] = static_cast<uint8_t>(118 + NextRandom(rng) % 10);
    for (size_t c = 1; c < set->copies; ++c) {
      std::memcpy(&set->scales[c * set->scale_bytes_per_copy], set->scales.data(), set->scale_bytes_per_copy);
    }
  } else {
    const size_t np = Q8PaddedColumns(n);
    set->row_scales.resize(set->copies * np);
    for (size_t j = 0; j < np; ++j) set->row_scales[j] = 1e-3f * static_cast<float>(1 + NextRandom(rng) % 100);
    for (size_t c = 1; c < set->copies; ++c) std::copy_n(set->row_scales.begin(), np, set->row_scales.begin() + c * np);
  }
  cache = std::move(set);
  return *cache;
}

// int4 (kernels/int4.h, group 128) on Llama-3.1-8B's shapes: the AWQ checkpoints' layout.
const Shape kInt4Shapes[] = {{"llama8b_q", 4096, 4096, 512},
                             {"llama8b_gate_up", 28672, 4096, 512},
                             {"llama8b_down", 4096, 14336, 512}};
constexpr size_t kInt4Group = 128;

struct Int4Set {
  std::string key;
  size_t copies = 0, code_bytes = 0, entries = 0;
  std::vector<uint8_t> codes, zeros;
  std::vector<float> scales;
  size_t BytesPerCopy() const { return code_bytes + entries * (1 + sizeof(float)); }
  Int4Weights Copy(size_t c) const {
    return Int4Weights{&codes[c * code_bytes], &zeros[c * entries], &scales[c * entries], kInt4Group};
  }
};

const Int4Set& Int4WeightsFor(const Shape& shape) {
  static std::unique_ptr<Int4Set> cache;
  if (cache && cache->key == shape.name) return *cache;
  cache.reset();
  auto set = std::make_unique<Int4Set>();
  set->key = shape.name;
  set->code_bytes = Int4CodeBytes(shape.n, shape.k);
  set->entries = Int4GroupEntries(shape.n, shape.k, kInt4Group);
  set->copies = std::max<size_t>(1, (kStreamBytes + set->BytesPerCopy() - 1) / set->BytesPerCopy());
  uint64_t rng = 0x5DEECE66Dull;
  set->codes.resize(set->copies * set->code_bytes);
  set->zeros.resize(set->copies * set->entries);
  set->scales.resize(set->copies * set->entries);
  for (size_t i = 0; i < set->code_bytes; ++i) set->codes[i] = static_cast<uint8_t>(NextRandom(rng));
  for (size_t i = 0; i < set->entries; ++i) {
    set->zeros[i] = static_cast<uint8_t>(7 + NextRandom(rng) % 3);
    set->scales[i] = 1e-3f * static_cast<float>(1 + NextRandom(rng) % 100);
  }
  for (size_t c = 1; c < set->copies; ++c) {
    std::memcpy(&set->codes[c * set->code_bytes], set->codes.data(), set->code_bytes);
    std::memcpy(&set->zeros[c * set->entries], set->zeros.data(), set->entries);
    std::copy_n(set->scales.begin(), set->entries, set->scales.begin() + c * set->entries);
  }
  cache = std::move(set);
  return *cache;
}

std::vector<float> RandomActivations(size_t m, size_t k) {
  std::vector<float> x(m * k);
  uint64_t rng = 12345;
  for (auto& v : x) v = static_cast<float>(NextRandom(rng) % 2001) * 1e-3f - 1.0f;
  return x;
}

// ---- benchmarks ---------------------------------------------------------------------------------

void BM_Quantize(benchmark::State& state, size_t m, int threads) {
  SetGlobalThreadCount(threads);
  const size_t k = 2880;
  const std::vector<float> x = RandomActivations(m, k);
  Q8Activations xq;
  for (auto _ : state) {
    QuantizeQ8(x.data(), m, k, k, xq);
    benchmark::DoNotOptimize(xq.q.data());
    benchmark::ClobberMemory();
  }
  state.counters["GB"] = benchmark::Counter(m * k * sizeof(float) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(ActiveKernels().quantize_q8_isa);
}

void BM_MatmulQ8(benchmark::State& state, bool mxfp4, Shape shape, size_t m, int threads) {
  SetGlobalThreadCount(threads);
  const WeightSet& w = Weights(mxfp4, shape);
  const std::vector<float> x = RandomActivations(m, shape.k);
  std::vector<float> bias(shape.n), y(m * shape.n);
  uint64_t rng = 777;
  for (auto& v : bias) v = static_cast<float>(NextRandom(rng) % 2001) * 1e-3f - 1.0f;
  Q8Activations xq;
  QuantizeQ8(x.data(), m, shape.k, shape.k, xq);
  const size_t np = Q8PaddedColumns(shape.n);

  size_t copy = 0;
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    if (mxfp4) {
      MatmulQ8Mxfp4(xq, &w.bytes[copy * w.bytes_per_copy], &w.scales[copy * w.scale_bytes_per_copy], shape.n,
                    bias.data(), y.data(), shape.n);
    } else {
      MatmulQ8Int8(xq, &w.bytes[copy * w.bytes_per_copy], &w.row_scales[copy * np], shape.n, bias.data(), y.data(),
                   shape.n);
    }
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
    copy = copy + 1 == w.copies ? 0 : copy + 1;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double bytes = static_cast<double>(w.BytesPerCopy());
  const double ops = 2.0 * m * shape.n * shape.k;
  bench::SetMatmulCounters(state, seconds, bytes, ops, "GOP", threads, g_best_ops[threads]);
  const KernelTable& t = ActiveKernels();
  state.SetLabel(mxfp4 ? t.matmul_q8_mxfp4_isa : t.matmul_q8_int8_isa);
}

// q8: int8 activations against the int4 codes (int4-q8); exact: float32 activations (int4).
void BM_MatmulInt4(benchmark::State& state, bool q8, Shape shape, size_t m, int threads) {
  SetGlobalThreadCount(threads);
  const Int4Set& w = Int4WeightsFor(shape);
  const std::vector<float> x = RandomActivations(m, shape.k);
  std::vector<float> y(m * shape.n);
  Q8Activations xq;
  QuantizeQ8(x.data(), m, shape.k, shape.k, xq);
  const Q8Rows rows = xq.rows();
  const KernelTable& t = ActiveKernels();
  size_t copy = 0;
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    const Int4Weights wc = w.Copy(copy);
    ParallelColumns(shape.n, [&](size_t begin, size_t end) {
      if (q8) {
        t.matmul_q8_int4(rows, m, shape.k, wc, begin, end, nullptr, y.data(), shape.n);
      } else {
        t.matmul_int4(x.data(), m, shape.k, wc, begin, end, nullptr, y.data(), shape.n);
      }
    });
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
    copy = copy + 1 == w.copies ? 0 : copy + 1;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  bench::SetMatmulCounters(state, seconds, static_cast<double>(w.BytesPerCopy()), 2.0 * m * shape.n * shape.k, "GOP",
                           threads, q8 ? g_best_ops[threads] : 0.0);
  state.SetLabel(q8 ? t.matmul_q8_int4_isa : t.matmul_int4_isa);
}

int RegisterAll() {
  for (int t = 1; t <= kMaxThreads; ++t) {
    benchmark::RegisterBenchmark(("read_bandwidth/threads:" + std::to_string(t)).c_str(), BM_ReadBandwidth, t)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  }
  for (int t = 1; t <= kMaxThreads; ++t) {
    benchmark::RegisterBenchmark(("vnni_peak/threads:" + std::to_string(t)).c_str(), BM_VnniPeak, t)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  }
  for (size_t m : {1, 512}) {
    for (int t = 1; t <= kMaxThreads; ++t) {
      const std::string name = "quantize/m:" + std::to_string(m) + "/threads:" + std::to_string(t);
      benchmark::RegisterBenchmark(name.c_str(), BM_Quantize, m, t)->UseRealTime()->Unit(benchmark::kMicrosecond);
    }
  }
  const auto runs = [](const Shape& shape, size_t m) { return m <= shape.max_m; };
  for (bool mxfp4 : {true, false}) {
    bench::RegisterMatmulSweep<Shape>(mxfp4 ? "q8_mxfp4/" : "q8_int8/",
                                      mxfp4 ? std::span<const Shape>(kMxfp4Shapes) : std::span<const Shape>(kInt8Shapes),
                                      runs, [mxfp4](benchmark::State& state, const Shape& shape, size_t m, int t) {
                                        BM_MatmulQ8(state, mxfp4, shape, m, t);
                                      });
  }
  for (bool q8 : {true, false}) {
    bench::RegisterMatmulSweep<Shape>(
        q8 ? "q8_int4/" : "int4_exact/", std::span<const Shape>(kInt4Shapes),
        [q8](const Shape& shape, size_t m) { return m <= (q8 ? shape.max_m : 9); },
        [q8](benchmark::State& state, const Shape& shape, size_t m, int t) { BM_MatmulInt4(state, q8, shape, m, t); });
  }
  return 0;
}

[[maybe_unused]] const int kRegistered = RegisterAll();

}  // namespace
}  // namespace tessera
