// Per-thread scratch memory for the kernels (packed panels, rearranged activations, accumulator
// start values): one 64-byte aligned buffer per thread, grown on demand and never shrunk. The
// pointer is valid until the same thread asks again, so a kernel must not call another kernel
// while it uses its scratch. Defined in a baseline-compiled file, so every ISA file shares it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tessera {

uint8_t* ThreadScratchBytes(size_t bytes);

inline float* ThreadScratchFloats(size_t floats) {
  return reinterpret_cast<float*>(ThreadScratchBytes(floats * sizeof(float)));
}

}  // namespace tessera
