// The plain form of KernelTable::attend_group_* for kernels that share nothing across heads:
// each query of the group through the single-query kernel `kAttend` (a file's own, so every ISA
// file instantiates its own copy).
#pragma once

#include <cstddef>

namespace tessera {

template <typename Elem, auto kAttend>
void AttendEachHead(const float* q, size_t q_stride, size_t heads, size_t d, const Elem* const* k_rows,
                    const Elem* const* v_rows, size_t offset, size_t n, float scale, const float* sinks,
                    float* scratch, float* out, size_t out_stride) {
  for (size_t h = 0; h < heads; ++h) {
    kAttend(q + h * q_stride, d, k_rows, v_rows, offset, n, scale, sinks[h], scratch + h * n, out + h * out_stride);
  }
}

}  // namespace tessera
