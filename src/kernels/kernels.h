// One interface for every compute kernel.
//
// Each kernel has a plain scalar reference (reference.cpp) and optional versions per
// instruction set (one file each: *_avx2.cpp, *_avx512.cpp, *_amx.cpp, compiled with that file's
// flags only). A KernelTable holds one function pointer per kernel; the table for the active
// level is built once (ActiveKernels()) and callers never branch on the ISA per call. An entry a
// level does not override is inherited from the level below it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/cpu_features.h"

namespace tessera {

struct KernelTable {
  Isa isa;
  // Per-entry name of the implementation actually used ("avx512", "scalar", ...).
  const char* convert_bf16_f32_isa;
  const char* dot_bf16_f32_isa;

  // dst[i] = float(src[i]) for i < n. Exact.
  void (*convert_bf16_f32)(const uint16_t* src, float* dst, size_t n);
  // sum_i float(w[i]) * x[i]; fp32 accumulation, order unspecified.
  float (*dot_bf16_f32)(const uint16_t* w, const float* x, size_t n);
};

// The table for `isa` (which must satisfy IsaSupported(isa)).
const KernelTable& KernelsFor(Isa isa);
// The table for ActiveIsa(), built on first use.
const KernelTable& ActiveKernels();

// Per-level fillers: each overrides the entries it implements. Defined in the per-ISA files.
void FillReferenceKernels(KernelTable& table);
void FillAvx2Kernels(KernelTable& table);
void FillAvx512Kernels(KernelTable& table);

}  // namespace tessera
