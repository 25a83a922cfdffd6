// The machine's memory read bandwidth, measured the way the memory-bound kernels read weights:
// every pool thread streams its own contiguous part of a buffer far larger than the caches.
// Benchmarks divide by it to report how close a kernel or a decode step is to the roofline.
#pragma once

#include <cstddef>

namespace tessera {

// Sum of n floats (n % 128 == 0, p 64-byte aligned) with the widest vectors the CPU has; the
// value only keeps the reads from being optimized away.
float StreamSumF32(const float* p, size_t n);

// Best of `repetitions` passes over a fresh `bytes`-byte buffer (rounded down to a multiple of
// 512 * threads), read by `threads` pool threads at once (<= GlobalPool().num_threads()).
// Returns bytes per second.
double MeasureReadBandwidth(size_t bytes, int threads, int repetitions);

}  // namespace tessera
