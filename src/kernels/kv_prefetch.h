// Software prefetch of key/value heads for the attention kernels of every x86 ISA file.
//
// Rows are reached through pointers (the model's cache stores each head's positions as one
// stream, but a ring wraps and a batch's rows may lie elsewhere), and at a few thousand positions
// the score loop waits on each row's lines: the kernels ask for the key and value lines of the
// row kRowsAhead positions on (keys to L1, values to L2 for the value pass that follows over the
// same block). Over the head-major cache this still gains beside the hardware
// prefetchers (docs/BENCHMARKS.md). Prefetches never change a result.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/kv_int8.h"

namespace tessera {

// Bytes of one key/value head of d channels.
template <typename Elem>
constexpr size_t HeadBytes(size_t d) {
  if constexpr (std::is_same_v<Elem, int8_t>) {
    return KvInt8HeadBytes(d);
  } else {
    return d * sizeof(Elem);
  }
}

inline constexpr size_t kRowsAhead = 16;

// GCC declares the hints as enum _mm_hint, clang as int macros: take whichever type they have.
template <decltype(_MM_HINT_T0) kHint>
inline void PrefetchHead(const void* head, size_t bytes) {
  const char* p = static_cast<const char*>(head);
  for (size_t b = 0; b < bytes; b += 64) _mm_prefetch(p + b, kHint);
  _mm_prefetch(p + bytes - 1, kHint);  // a head may straddle one more line
}

// Called at position j of n: asks for the key and value heads of position j + kRowsAhead.
template <typename Elem>
inline void PrefetchRowsAhead(const Elem* const* k_rows, const Elem* const* v_rows, size_t offset, size_t j,
                              size_t n, size_t head_bytes) {
  if (j + kRowsAhead < n) {
    PrefetchHead<_MM_HINT_T0>(k_rows[j + kRowsAhead] + offset, head_bytes);
    PrefetchHead<_MM_HINT_T1>(v_rows[j + kRowsAhead] + offset, head_bytes);
  }
}

}  // namespace tessera
