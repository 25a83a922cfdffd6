// Gather-reduce (the MoE combine, moe_ops.h GatherReduce over KernelsFor(isa)) with the machine's
// read bandwidth measured in the same run:
//   read_bandwidth/threads:T          streaming sum over a 1 GiB buffer (the roofline)
//   gather_reduce/<isa>/<case>/threads:T
// Cases (K = 2880, the gpt-oss hidden size; indices a random permutation of the B = G R rows, as
// the inverse of the expert sort makes them; N(0, 1) weights):
//   prefill  G 512 tokens, R 4: cycles through copies of op and out totalling >= 1 GiB, so that
//            every byte comes from DRAM rather than the (260 MiB) L3
//   hot      the same problem, one copy (L3-resident)
//   decode   G 1, R 4 (per-call latency; a decode step's combine)
// Counters: GB = (bytes of op rows gathered + bytes of out written) / s, in GB, and bw_frac = GB
// over the best read_bandwidth of the same thread count measured earlier in this run (prefill
// only: the other cases are not DRAM-bound). Writes cost a read for ownership as well, so a
// perfect kernel reaches about (read + write) / (read + 2 write) = 0.83 of the read ceiling here.
//
//   build-gr/gather_reduce_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>
#include <immintrin.h>

// gcc 12's AVX-512 headers trip -Wuninitialized inside _mm512_reduce_add_ps (as CMakeLists.txt
// notes for the *_avx512.cpp files).
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "bench/ceilings.h"
#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "kernels/kernels.h"
#include "kernels/moe_ops.h"

namespace tessera {
namespace {

using bench::BM_ReadBandwidth;
using bench::g_best_bandwidth;
using bench::kMaxThreads;
using bench::kStreamBytes;

// ---- gather-reduce ----------------------------------------------------------------------------

constexpr size_t kHidden = 2880;

// `copies` independent (op, out) pairs sharing idx and w; op [groups * r, kHidden], out
// [groups, kHidden], both 64-byte aligned.
struct Combine {
  size_t groups, r, copies;
  std::vector<int32_t> idx;
  std::vector<float> w;
  std::vector<float*> op, out;

  Combine(size_t groups_, size_t r_, size_t min_bytes) : groups(groups_), r(r_) {
    const size_t rows = groups * r;
    const size_t bytes = (rows + groups) * kHidden * sizeof(float);
    copies = std::max<size_t>(1, (min_bytes + bytes - 1) / bytes);
    std::mt19937 rng(42);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    idx.resize(rows);
    std::iota(idx.begin(), idx.end(), 0);
    std::shuffle(idx.begin(), idx.end(), rng);
    w.resize(rows);
    for (float& v : w) v = normal(rng);
    for (size_t c = 0; c < copies; ++c) {
      op.push_back(static_cast<float*>(std::aligned_alloc(64, rows * kHidden * sizeof(float))));
      out.push_back(static_cast<float*>(std::aligned_alloc(64, groups * kHidden * sizeof(float))));
      if (c == 0) {
        for (size_t i = 0; i < rows * kHidden; ++i) op[0][i] = normal(rng);
      } else {
        std::copy_n(op[0], rows * kHidden, op[c]);  // the values do not matter for speed
      }
      std::fill_n(out[c], groups * kHidden, 0.0f);
    }
  }
  ~Combine() {
    for (float* p : op) std::free(p);
    for (float* p : out) std::free(p);
  }
  size_t MovedBytes() const { return (groups * r + groups) * kHidden * sizeof(float); }
};

enum class Case { kPrefill, kHot, kDecode };

void BM_GatherReduce(benchmark::State& state, Isa isa, Case which, int threads) {
  SetGlobalThreadCount(threads);
  const KernelTable& kt = KernelsFor(isa);
  static Combine prefill(512, 4, kStreamBytes);  // shared by the prefill and hot cases
  static Combine decode(1, 4, 0);
  Combine& c = which == Case::kDecode ? decode : prefill;
  const size_t copies = which == Case::kPrefill ? c.copies : 1;
  size_t copy = 0;
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    GatherReduce(kt, c.op[copy], c.groups * c.r, kHidden, c.idx.data(), c.w.data(), c.groups, c.r, kHidden,
                 c.out[copy], kHidden);
    benchmark::ClobberMemory();
    copy = copy + 1 == copies ? 0 : copy + 1;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double rate = static_cast<double>(c.MovedBytes()) * state.iterations() / seconds;
  state.counters["GB"] = benchmark::Counter(c.MovedBytes() * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  if (which == Case::kPrefill && g_best_bandwidth[threads] > 0) {
    state.counters["bw_frac"] = rate / g_best_bandwidth[threads];
  }
}

void RegisterAll() {
  for (int threads = 1; threads <= kMaxThreads; ++threads) {
    benchmark::RegisterBenchmark(("read_bandwidth/threads:" + std::to_string(threads)).c_str(), BM_ReadBandwidth,
                                 threads)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  }
  const std::pair<Case, const char*> cases[] = {
      {Case::kPrefill, "prefill_G512_R4"}, {Case::kHot, "hot_G512_R4"}, {Case::kDecode, "decode_G1_R4"}};
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    if (!IsaSupported(isa)) continue;
    for (const auto& [which, name] : cases) {
      for (int threads = 1; threads <= kMaxThreads; ++threads) {
        benchmark::RegisterBenchmark(
            (std::string("gather_reduce/") + IsaName(isa) + "/" + name + "/threads:" + std::to_string(threads)).c_str(),
            BM_GatherReduce, isa, which, threads)
            ->UseRealTime()
            ->Unit(which == Case::kDecode ? benchmark::kMicrosecond : benchmark::kMillisecond);
      }
    }
  }
}

const bool registered = (RegisterAll(), true);

}  // namespace
}  // namespace tessera
