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

// The same for KernelTable::attend_partial_*, through a file's single-query partial kernel.
template <typename Elem, auto kPartial>
void PartialEachHead(const float* q, size_t q_stride, size_t heads, size_t d, const Elem* const* k_rows,
                     const Elem* const* v_rows, size_t offset, size_t n, float scale, float* scratch, float* partial,
                     size_t partial_stride) {
  for (size_t h = 0; h < heads; ++h) {
    kPartial(q + h * q_stride, d, k_rows, v_rows, offset, n, scale, scratch + h * n, partial + h * partial_stride);
  }
}

}  // namespace tessera
