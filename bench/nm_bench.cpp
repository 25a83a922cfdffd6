// N:M sparse matmuls (kernels/nm_linear.h) against the dense kernel of the same dtype, same run
// (issue 18 point 3; ../shared/reference/sparsity.md §13: on memory-bound decode the speedup is
// capped by the byte ratio):
//   read_bandwidth/threads:2          the read ceiling (bench/ceilings.h)
//   bf16/<N:M>/<shape>/m:M            matmul_bf16 on the dense-with-zeros matrix, then
//                                     matmul_nm_bf16 on the same weights held sparse, alternating
//   int8/<N:M>/<shape>/m:M            the same for the int8 formats against q8 activations
// Columns split across the pool as the model does (ParallelColumns). Counters: dense_ms and
// sparse_ms per call, speedup (dense time / sparse time, the calls interleaved so that the shared
// host's drift hits both alike), byte_ratio (dense bytes / sparse bytes: the decode speedup's
// ceiling), dense_GBps / sparse_GBps and their fractions of this run's read ceiling. Every run
// cycles through copies of its weights totalling >= 1 GiB (dense) so that the weights stream
// from DRAM, not from the 32 MiB L3 of the development machines.
//
//   build/nm_bench --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
// TESSERA_ISA=avx2 selects the AVX2 kernels.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench/ceilings.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/kernels.h"
#include "kernels/nm_linear.h"
#include "kernels/parallel_matmul.h"
#include "kernels/q8.h"

namespace tessera {
namespace {

using bench::BM_ReadBandwidth;
using bench::g_best_bandwidth;

constexpr int kThreads = 2;

struct Shape {
  const char* name;
  size_t n, k;
};
// Llama-3.1-8B: q / o projections (32 MB in bf16) and down (117 MB).
const Shape kShapes[] = {{"llama8b_q", 4096, 4096}, {"llama8b_down", 4096, 14336}};
struct Pattern {
  int kept, group;
};
const Pattern kPatterns[] = {{2, 4}, {4, 8}};

uint64_t NextRandom(uint64_t& state) {
  state ^= state >> 12;
  state ^= state << 25;
  state ^= state >> 27;
  return state * 0x2545F4914F6CDD1Dull;
}

// One shape and pattern's weights in all four forms, `copies` of each.
struct WeightSet {
  std::string key;
  size_t n = 0, k = 0, copies = 0, kept_per_row = 0;
  std::vector<uint16_t> dense_bf16;  // copies x [n, k]
  std::vector<uint8_t> dense_int8;   // copies x q8 layout
  std::vector<float> int8_scales;    // [padded n], shared by the copies (same values)
  std::vector<uint8_t> nm_bf16;      // copies x nm_linear.h layout (+ slack)
  std::vector<uint8_t> nm_int8;
  std::vector<float> nm_scales;      // [n]
  size_t row_bytes(bool int8) const { return NmRowBytes(k, kept_per_row, int8 ? 1 : 2); }
  double dense_bytes(bool int8) const { return static_cast<double>(n * k) * (int8 ? 1 : 2) + (int8 ? 4.0 * n : 0.0); }
  double sparse_bytes(bool int8) const {
    return static_cast<double>(n) * (static_cast<double>(row_bytes(int8)) + (int8 ? 4.0 : 0.0));
  }
};

const WeightSet& Weights(const Shape& shape, const Pattern& pattern) {
  static std::unique_ptr<WeightSet> cache;
  const std::string key = StrCat(shape.name, "/", pattern.kept, ":", pattern.group);
  if (cache && cache->key == key) return *cache;
  cache.reset();
  auto set = std::make_unique<WeightSet>();
  WeightSet& w = *set;
  w.key = key;
  w.n = shape.n, w.k = shape.k;
  const size_t n = shape.n, k = shape.k, words = NmMaskWords(k);
  w.copies = std::max<size_t>(1, (bench::kStreamBytes + n * k * 2 - 1) / (n * k * 2));
  w.kept_per_row = NmKeptPerRow(k, pattern.kept, pattern.group);
  // One random N:M matrix (values ~ N(0, 1/k) in bf16).
  std::vector<uint16_t> one(n * k, 0);
  uint64_t state = 0x9E3779B97F4A7C15ull;
  for (size_t j = 0; j < n; ++j) {
    for (size_t g0 = 0; g0 + pattern.group <= k; g0 += pattern.group) {
      int placed = 0;
      while (placed < pattern.kept) {
        const size_t c = g0 + NextRandom(state) % pattern.group;
        if (one[j * k + c] != 0) continue;
        const float v = (static_cast<float>(NextRandom(state) % 2001) - 1000.0f) / (1000.0f * 64.0f);
        one[j * k + c] = F32ToBf16(v == 0.0f ? 1e-3f : v);
        ++placed;
      }
    }
  }
  std::vector<uint64_t> mask(n * words);
  std::vector<uint16_t> kept(n * w.kept_per_row);
  std::vector<int8_t> kept8(n * w.kept_per_row), q(k);
  std::vector<float> row(k);
  w.nm_scales.resize(n);
  for (size_t j = 0; j < n; ++j) {
    const uint16_t* d = &one[j * k];
    NmMaskOfRow(k, pattern.kept, pattern.group, [&](size_t c) { return (d[c] & 0x7fff) == 0; }, &mask[j * words], nullptr);
    NmGatherKept(&mask[j * words], d, k, &kept[j * w.kept_per_row]);
    for (size_t c = 0; c < k; ++c) row[c] = Bf16ToF32(d[c]);
    QuantizeRowToInt8(row.data(), k, q.data(), &w.nm_scales[j]);
    NmGatherKept(&mask[j * words], q.data(), k, &kept8[j * w.kept_per_row]);
  }
  std::vector<uint8_t> int8_one(Q8Int8Bytes(n, k));
  w.int8_scales.resize(Q8PaddedColumns(n));
  QuantizeBf16ToQ8Int8(one.data(), n, k, int8_one.data(), w.int8_scales.data(), nullptr);
  std::vector<uint8_t> packed_bf16(NmPackedBytes(n, w.row_bytes(false))), packed_int8(NmPackedBytes(n, w.row_bytes(true)));
  for (size_t g = 0; g * kNmRowGroup < n; ++g) {
    NmPackGroup(g, n, k, w.kept_per_row, 2, mask.data(), reinterpret_cast<const uint8_t*>(kept.data()), packed_bf16.data());
    NmPackGroup(g, n, k, w.kept_per_row, 1, mask.data(), reinterpret_cast<const uint8_t*>(kept8.data()), packed_int8.data());
  }
  const size_t bf16_bytes = n * w.row_bytes(false), int8_bytes = n * w.row_bytes(true);
  w.dense_bf16.resize(w.copies * n * k);
  w.dense_int8.resize(w.copies * int8_one.size());
  w.nm_bf16.resize(w.copies * bf16_bytes + kNmValuePadBytes);
  w.nm_int8.resize(w.copies * int8_bytes + kNmValuePadBytes);
  for (size_t c = 0; c < w.copies; ++c) {
    std::memcpy(&w.dense_bf16[c * one.size()], one.data(), one.size() * 2);
    std::memcpy(&w.dense_int8[c * int8_one.size()], int8_one.data(), int8_one.size());
    std::memcpy(&w.nm_bf16[c * bf16_bytes], packed_bf16.data(), bf16_bytes);
    std::memcpy(&w.nm_int8[c * int8_bytes], packed_int8.data(), int8_bytes);
  }
  cache = std::move(set);
  return *cache;
}

// One call of the dense (sparse = false) or sparse kernel on copy c, columns split as the model does.
void RunOnce(const WeightSet& w, bool int8, bool sparse, size_t c, const float* x, const Q8Rows& rows, size_t m,
             float* y) {
  const KernelTable& kt = ActiveKernels();
  const size_t n = w.n, k = w.k;
  const NmWeights nm{int8 ? &w.nm_int8[c * n * w.row_bytes(true)] : &w.nm_bf16[c * n * w.row_bytes(false)],
                     w.row_bytes(int8), int8 ? w.nm_scales.data() : nullptr};
  ParallelColumns(n, [&](size_t b, size_t e) {
    if (sparse && int8) {
      kt.matmul_q8_nm_int8(rows, m, k, nm, b, e, nullptr, y, n);
    } else if (sparse) {
      kt.matmul_nm_bf16(x, m, k, nm, b, e, nullptr, y, n);
    } else if (int8) {
      kt.matmul_q8_int8(rows, m, k, &w.dense_int8[c * Q8Int8Bytes(n, k)], w.int8_scales.data(), b, e, nullptr, y, n);
    } else {
      kt.matmul_bf16(x, m, k, &w.dense_bf16[c * n * k], b, e, nullptr, y, n);
    }
  });
}

// Dense and sparse calls alternate within each iteration (the host's drift hits both alike); the
// reported time is the pair's.
void BM_DenseVsSparse(benchmark::State& state, Shape shape, Pattern pattern, bool int8, size_t m) {
  SetGlobalThreadCount(kThreads);
  const WeightSet& w = Weights(shape, pattern);
  const size_t n = w.n, k = w.k;
  std::vector<float> x(m * k), y(m * n);
  uint64_t seed = 7;
  for (auto& v : x) v = (static_cast<float>(NextRandom(seed) % 2001) - 1000.0f) / 1000.0f;
  Q8Activations xq;
  if (int8) QuantizeQ8(x.data(), m, k, k, xq);
  const Q8Rows rows = int8 ? xq.rows() : Q8Rows{};
  double dense_s = 0.0, sparse_s = 0.0;
  size_t copy = 0;
  for (auto _ : state) {
    const size_t c = copy++ % w.copies;
    auto t0 = std::chrono::steady_clock::now();
    RunOnce(w, int8, false, c, x.data(), rows, m, y.data());
    auto t1 = std::chrono::steady_clock::now();
    RunOnce(w, int8, true, (c + w.copies / 2) % w.copies, x.data(), rows, m, y.data());
    auto t2 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(y.data());
    dense_s += std::chrono::duration<double>(t1 - t0).count();
    sparse_s += std::chrono::duration<double>(t2 - t1).count();
  }
  const double calls = static_cast<double>(state.iterations());
  state.counters["dense_ms"] = 1e3 * dense_s / calls;
  state.counters["sparse_ms"] = 1e3 * sparse_s / calls;
  state.counters["speedup"] = dense_s / sparse_s;
  state.counters["byte_ratio"] = w.dense_bytes(int8) / w.sparse_bytes(int8);
  state.counters["dense_GBps"] = w.dense_bytes(int8) * calls / dense_s * 1e-9;
  state.counters["sparse_GBps"] = w.sparse_bytes(int8) * calls / sparse_s * 1e-9;
  if (g_best_bandwidth[kThreads] > 0) {
    state.counters["dense_bw_frac"] = w.dense_bytes(int8) * calls / dense_s / g_best_bandwidth[kThreads];
    state.counters["sparse_bw_frac"] = w.sparse_bytes(int8) * calls / sparse_s / g_best_bandwidth[kThreads];
  }
}

int Register() {
  benchmark::RegisterBenchmark(StrCat("read_bandwidth/threads:", kThreads).c_str(), BM_ReadBandwidth, kThreads)
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
  // Patterns in the outer loop, so that each pattern's weights are made once per shape.
  for (const Shape& shape : kShapes) {
    for (const Pattern& p : kPatterns) {
      for (size_t m : {size_t{1}, size_t{512}}) {
        if (m == 512 && shape.k > 4096) continue;  // prefill figures on the smaller shape only
        for (bool int8 : {false, true}) {
          benchmark::RegisterBenchmark(
              StrCat(int8 ? "int8" : "bf16", "/", p.kept, ":", p.group, "/", shape.name, "/m:", m).c_str(),
              BM_DenseVsSparse, shape, p, int8, m)
              ->Unit(benchmark::kMillisecond)
              ->UseRealTime()
              ->MinTime(m == 1 ? 1.0 : 3.0);
        }
      }
    }
  }
  return 0;
}
const int kRegistered = Register();

}  // namespace
}  // namespace tessera
