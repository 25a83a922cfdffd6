// DeepSeek-V3's FP8 block-scaled weights (the fp8 linear format, model/formats/fp8.cpp) on the
// model's own shapes, through the format's Multiply over every column on GlobalPool(), against
// the read bandwidth measured in the same run:
//   read_bandwidth/threads:T            the streaming ceiling (bench/ceilings.h)
//   <format>/<shape>/m:M/threads:T      weight_GB (codes + block scales per second), bw_frac
// Formats: fp8 (the exact path: f32 activations times the dequantized weights) and fp8-bf16 (the
// fast path: bfloat16 activations, kernels.h matmul_fp8_bf16). Shapes: the dense MLP's gate/up (18432 x 7168) and down (7168 x 18432), blocks of 128 x 128.
// Decode-sized runs cycle through copies of the weights totalling >= 1 GiB, so they stream from
// DRAM.
//
//   build/fp8_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bench/ceilings.h"
#include "core/dtype.h"
#include "core/thread_pool.h"
#include "kernels/kernels.h"
#include "model/linear.h"

namespace tessera {
namespace {

struct Shape {
  const char* name;
  int64_t n, k;
};
constexpr Shape kShapes[] = {{"gate_up_18432x7168", 18432, 7168}, {"down_7168x18432", 7168, 18432}};
constexpr int64_t kBlock = 128;

// `copies` matrices of the shape, each a LinearWeights in `format`.
struct Fp8Set {
  std::string key;
  std::vector<std::unique_ptr<LinearWeights>> copies;
};

const Fp8Set& Weights(const Shape& shape, LinearFormat format) {
  static std::unique_ptr<Fp8Set> cache;
  const std::string key = std::string(shape.name) + "/" + std::string(LinearFormatName(format));
  if (cache && cache->key == key) return *cache;
  cache.reset();
  auto set = std::make_unique<Fp8Set>();
  set->key = key;
  const int64_t scale_rows = (shape.n + kBlock - 1) / kBlock, scale_cols = (shape.k + kBlock - 1) / kBlock;
  std::vector<uint8_t> codes(static_cast<size_t>(shape.n * shape.k));
  std::vector<float> scales(static_cast<size_t>(scale_rows * scale_cols));
  uint64_t state = 0x9E3779B97F4A7C15ull;
  for (auto& c : codes) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    c = F32ToF8E4M3(static_cast<float>(static_cast<int64_t>(state >> 40) % 97 - 48));  // |x| <= 48
  }
  for (size_t i = 0; i < scales.size(); ++i) scales[i] = 1e-3f * static_cast<float>(1 + i % 7);
  const size_t bytes = codes.size() + scales.size() * sizeof(float);
  const size_t copies = std::max<size_t>(1, (bench::kStreamBytes + bytes - 1) / bytes);
  for (size_t copy = 0; copy < copies; ++copy) {
    LinearSource source = LinearSource::Tensor(shape.name, DType::kF8E4M3, codes.data(), 1, shape.n, shape.k);
    source.fp8_block_cols = kBlock;
    for (int64_t r = 0; r < shape.n; ++r) {
      source.row_scales.push_back(reinterpret_cast<const uint8_t*>(&scales[static_cast<size_t>((r / kBlock) * scale_cols)]));
    }
    set->copies.push_back(LoadLinear(source, format, "fp8_bench"));
  }
  cache = std::move(set);
  return *cache;
}

void BM_Fp8(benchmark::State& state, const Shape& shape, LinearFormat format, size_t m, int threads) {
  SetGlobalThreadCount(threads);
  const Fp8Set& w = Weights(shape, format);
  std::vector<float> x(m * static_cast<size_t>(shape.k)), y(m * static_cast<size_t>(shape.n));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 2001) * 1e-3f - 1.0f;
  size_t copy = 0;
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    Q8Activations xq;
    Multiply(*w.copies[copy], x.data(), m, xq, nullptr, y.data());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
    copy = copy + 1 == w.copies.size() ? 0 : copy + 1;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(shape.n * shape.k);
  bench::SetMatmulCounters(state, seconds, w.copies.front()->BytesPerMatrix(), flops, "GFLOP", threads, 0.0);
  state.SetLabel(format == LinearFormat::kFp8 ? ActiveKernels().decode_fp8_row_isa : ActiveKernels().matmul_fp8_bf16_isa);
}

int RegisterAll() {
  for (int t = 1; t <= bench::kMaxThreads; ++t) {
    benchmark::RegisterBenchmark(("read_bandwidth/threads:" + std::to_string(t)).c_str(), bench::BM_ReadBandwidth, t)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  }
  for (LinearFormat format : {LinearFormat::kFp8, LinearFormat::kFp8Bf16}) {
    for (const Shape& shape : kShapes) {
      for (size_t m : {size_t{1}, size_t{4}}) {
        for (int t = 1; t <= bench::kMaxThreads; ++t) {
          const std::string name = std::string(LinearFormatName(format)) + "/" + shape.name + "/m:" + std::to_string(m) +
                                   "/threads:" + std::to_string(t);
          benchmark::RegisterBenchmark(name.c_str(),
                                       [&shape, format, m, t](benchmark::State& s) { BM_Fp8(s, shape, format, m, t); })
              ->UseRealTime()
              ->Unit(benchmark::kMillisecond);
        }
      }
    }
  }
  return 0;
}

[[maybe_unused]] const int kRegistered = RegisterAll();

}  // namespace
}  // namespace tessera
