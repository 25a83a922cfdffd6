// Compute ceilings of this machine, measured: independent f32 FMA chains at the widest vector
// width the active kernels use, and independent int8 dot-product chains (vpdpbusd zmm with
// AVX512-VNNI; 0 without it). `tessera bench` divides prefill throughput by them, as the kernel
// benchmarks (bench/matmul_bench.cpp fma_peak, bench/q8_bench.cpp vnni_peak) do.
#pragma once

namespace tessera {

struct ComputePeak {
  double f32_flops = 0.0;  // FMA = 2 flops, per second, summed over the threads
  double int8_ops = 0.0;   // u8 x s8 multiply + add = 2 ops, per second; 0 when not measured
};

// Taken per CPU-second of each of `threads` pool threads and summed (what the cores do while they
// run our threads, so other load on a shared machine does not lower it); best of `repetitions`.
ComputePeak MeasureComputePeak(int threads, int repetitions = 3);

// The ISA loops (peak_*.cpp): `iterations` steps of `kPeakChains` independent accumulators.
inline constexpr int kPeakChains = 16;
float FmaPeakLoopAvx2(long iterations);
float FmaPeakLoopAvx512(long iterations);
int DpbusdPeakLoopAvx512Vnni(long iterations);

}  // namespace tessera
