#include "kernels/peak.h"

#include <time.h>

#include <algorithm>
#include <vector>

#include "core/cpu_features.h"
#include "core/thread_pool.h"

namespace tessera {
namespace {

double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Sum over the threads of ops / CPU-second of each, for `loop` run once per thread.
template <typename Loop>
double PerCpuSecond(int threads, double ops_per_thread, const Loop& loop) {
  std::vector<double> seconds(threads, 0.0);
  std::vector<double> sinks(threads, 0.0);
  GlobalPool().Run(static_cast<size_t>(threads), [&](size_t t, int) {
    const double start = ThreadCpuSeconds();
    sinks[t] = static_cast<double>(loop());
    seconds[t] = ThreadCpuSeconds() - start;
  });
  double rate = 0.0;
  for (int t = 0; t < threads; ++t) rate += seconds[t] > 0 ? ops_per_thread / seconds[t] : 0.0;
  volatile double keep = sinks[0];
  (void)keep;
  return rate;
}

}  // namespace

ComputePeak MeasureComputePeak(int threads, int repetitions) {
  constexpr long kIterations = 1 << 21;
  const bool wide = ActiveIsa() >= Isa::kAvx512;
  const bool vnni = wide && GetCpuFeatures().avx512_vnni;
  ComputePeak peak;
  for (int r = 0; r < repetitions; ++r) {
    if (ActiveIsa() >= Isa::kAvx2) {
      const double lanes = wide ? 16.0 : 8.0;
      peak.f32_flops = std::max(peak.f32_flops, PerCpuSecond(threads, 2.0 * lanes * kPeakChains * kIterations, [&] {
        return wide ? FmaPeakLoopAvx512(kIterations) : FmaPeakLoopAvx2(kIterations);
      }));
    }
    if (vnni) {
      peak.int8_ops = std::max(peak.int8_ops, PerCpuSecond(threads, 2.0 * 64 * kPeakChains * kIterations,
                                                           [&] { return DpbusdPeakLoopAvx512Vnni(kIterations); }));
    }
  }
  return peak;
}

}  // namespace tessera
