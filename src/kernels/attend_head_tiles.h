// KernelTable::attend_group_* and attend_partial_* for kernels that attend a tile of a GQA
// group's queries against the same rows at once (the rows loaded and widened once per tile).
// `Tiles` is a file's own struct: kMaxHeads, and
//   template <bool kPartial, typename Elem, size_t kHeads> static void Run(
//       q, q_stride, d, k_rows, v_rows, offset, n, scale, sinks, scratch, out, out_stride)
// with the tile's head count as a template argument, so that its accumulators stay in registers.
// Tiles start at heads 0, kMaxHeads, 2 kMaxHeads, ...; the last one takes what is left.
#pragma once

#include <cstddef>
#include <type_traits>
#include <utility>

namespace tessera {

template <typename Tiles, bool kPartial, typename Elem>
void AttendInHeadTiles(const float* q, size_t q_stride, size_t heads, size_t d, const Elem* const* k_rows,
                       const Elem* const* v_rows, size_t offset, size_t n, float scale, const float* sinks,
                       float* scratch, float* out, size_t out_stride) {
  constexpr size_t kMax = Tiles::kMaxHeads;
  for (size_t h0 = 0; h0 < heads; h0 += kMax) {
    const size_t tile = heads - h0 < kMax ? heads - h0 : kMax;
    // Calls Run<..., tile> for the one index I with I + 1 == tile.
    [&]<size_t... I>(std::index_sequence<I...>) {
      (void)((tile == I + 1 &&
        (Tiles::template Run<kPartial, Elem, I + 1>(q + h0 * q_stride, q_stride, d, k_rows, v_rows, offset, n,
                                                    scale, kPartial ? nullptr : sinks + h0, scratch + h0 * n,
                                                    out + h0 * out_stride, out_stride),
         true)) ||
       ...);
    }(std::make_index_sequence<kMax>{});
  }
}

template <typename Tiles, typename Elem>
void AttendGroupInTiles(const float* q, size_t q_stride, size_t heads, size_t d, const Elem* const* k_rows,
                        const Elem* const* v_rows, size_t offset, size_t n, float scale, const float* sinks,
                        float* scratch, float* out, size_t out_stride) {
  AttendInHeadTiles<Tiles, false>(q, q_stride, heads, d, k_rows, v_rows, offset, n, scale, sinks, scratch, out,
                                  out_stride);
}

template <typename Tiles, typename Elem>
void PartialGroupInTiles(const float* q, size_t q_stride, size_t heads, size_t d, const Elem* const* k_rows,
                         const Elem* const* v_rows, size_t offset, size_t n, float scale, float* scratch,
                         float* partial, size_t partial_stride) {
  AttendInHeadTiles<Tiles, true>(q, q_stride, heads, d, k_rows, v_rows, offset, n, scale, nullptr, scratch,
                                 partial, partial_stride);
}

}  // namespace tessera
