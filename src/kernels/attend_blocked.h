// Attention over many positions in fixed blocks (flash-decoding's split): the definition the
// model uses for every query, so that the result never depends on how the work is spread.
//
// A query over n <= kAttendBlock positions is attend_group_*'s result. Over more, its positions
// are cut into blocks of kAttendBlock from the first one it sees (the last block shorter); each
// block's partial (attend_partial_*: unnormalised weighted values, the block's max score m and
// exp-sum l) is computed on its own, and MergeAttendPartials combines them with the sink in block
// order. Which thread computes which block, and whether one thread computes them all, changes no
// bit: every ISA's partial kernel gives a head the same bits whatever else it computes alongside,
// and the merge is one scalar function shared by every ISA.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/kernels.h"

namespace tessera {

inline constexpr size_t kAttendBlock = 512;

// Blocks a query over n positions is attended in (1: the single attend_group_* call).
inline size_t AttendBlockCount(size_t n) { return n <= kAttendBlock ? 1 : (n + kAttendBlock - 1) / kAttendBlock; }
// Floats of one head's partial: acc[d], m, l.
inline size_t AttendPartialFloats(size_t d) { return d + 2; }

// One head's partials of `blocks` blocks, block b's at partials + b block_stride, merged with the
// sink logit into out[d]:
//   M = max(sink, m_b),  den = exp(sink - M) + sum_b exp(m_b - M) l_b,
//   out[c] = (sum_b exp(m_b - M) acc_b[c]) * (1 / den),
// in f32, the sums in block order, exp from <cmath>.
void MergeAttendPartials(const float* partials, size_t block_stride, size_t blocks, size_t d, float sink, float* out);

// Block `block` of `heads` queries (q + h q_stride) over rows [first, first + n) of the query's
// row lists (k_rows/v_rows index 0 = its first position): partial of head h at
// partial + h (d + 2). scratch holds heads kAttendBlock floats.
template <typename Elem>
void AttendOneBlock(const KernelTable& kt, const float* q, size_t q_stride, size_t heads, size_t d,
                    const Elem* const* k_rows, const Elem* const* v_rows, size_t offset, size_t n, size_t block,
                    float scale, float* scratch, float* partial) {
  const size_t begin = block * kAttendBlock;
  const size_t count = n - begin < kAttendBlock ? n - begin : kAttendBlock;
  if constexpr (std::is_same_v<Elem, uint16_t>) {
    kt.attend_partial_bf16(q, q_stride, heads, d, k_rows + begin, v_rows + begin, offset, count, scale, scratch, partial,
                           AttendPartialFloats(d));
  } else if constexpr (std::is_same_v<Elem, int8_t>) {
    kt.attend_partial_int8(q, q_stride, heads, d, k_rows + begin, v_rows + begin, offset, count, scale, scratch, partial,
                           AttendPartialFloats(d));
  } else {
    kt.attend_partial_f32(q, q_stride, heads, d, k_rows + begin, v_rows + begin, offset, count, scale, scratch, partial,
                          AttendPartialFloats(d));
  }
}

// Merges the partials of `heads` heads laid out [block][head][d + 2] (as AttendOneBlock writes
// them at partials + b heads (d + 2)) into out + h out_stride.
inline void MergeHeadPartials(const float* partials, size_t heads, size_t blocks, size_t d, const float* sinks,
                              float* out, size_t out_stride) {
  const size_t stride = AttendPartialFloats(d);
  for (size_t h = 0; h < heads; ++h) {
    MergeAttendPartials(partials + h * stride, heads * stride, blocks, d, sinks[h], out + h * out_stride);
  }
}

// The whole definition on one thread: attend_group_* for n <= kAttendBlock, else every block
// and the merge. scratch holds heads min(n, kAttendBlock) floats; partials holds
// AttendBlockCount(n) heads (d + 2) floats (unused when there is one block).
template <typename Elem>
void AttendBlocked(const KernelTable& kt, const float* q, size_t q_stride, size_t heads, size_t d,
                   const Elem* const* k_rows, const Elem* const* v_rows, size_t offset, size_t n, float scale,
                   const float* sinks, float* scratch, float* partials, float* out, size_t out_stride) {
  const size_t blocks = AttendBlockCount(n);
  if (blocks == 1) {
    if constexpr (std::is_same_v<Elem, uint16_t>) {
      kt.attend_group_bf16(q, q_stride, heads, d, k_rows, v_rows, offset, n, scale, sinks, scratch, out, out_stride);
    } else if constexpr (std::is_same_v<Elem, int8_t>) {
      kt.attend_group_int8(q, q_stride, heads, d, k_rows, v_rows, offset, n, scale, sinks, scratch, out, out_stride);
    } else {
      kt.attend_group_f32(q, q_stride, heads, d, k_rows, v_rows, offset, n, scale, sinks, scratch, out, out_stride);
    }
    return;
  }
  for (size_t b = 0; b < blocks; ++b) {
    AttendOneBlock(kt, q, q_stride, heads, d, k_rows, v_rows, offset, n, b, scale, scratch,
                   partials + b * heads * AttendPartialFloats(d));
  }
  MergeHeadPartials(partials, heads, blocks, d, sinks, out, out_stride);
}

}  // namespace tessera
