// Thread-parallel MoE operators over the KernelTable entries.
//
// GatherReduce is the MoE combine (../shared/reference/moe-gather-reduce.md §2): out[g] =
// sum_{j < r} w[g r + j] * op[idx[g r + j]] in f32, zero weights masked (kernels.h
// gather_reduce). Work is split over GlobalPool() by groups and, when there are few groups, by
// 64-column chunks; each output element's operation sequence is fixed by its own group's terms,
// so the result is bit-identical for every thread count and every number of groups (batch
// invariance), and identical across ISAs (NaN payloads aside).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/kernels.h"

namespace tessera {

// Column chunks of the split are multiples of this (64 floats = 4 cache lines), so no two
// threads write the same cache line of an output row that starts on a line boundary.
inline constexpr size_t kGatherReduceColumnTile = 64;

// out[g, c] (row stride ldo >= k) = sum_{j < r} w[g r + j] * op[idx[g r + j], c] for g < groups,
// c < k, with op [rows, k] f32 of row stride ldop >= k, idx [groups * r], w [groups * r] or nullptr
// (weight 1). out must not overlap op. Throws tessera::Error (one line, naming the position and
// the value) when an index is outside [0, rows), before anything is written.
void GatherReduce(const KernelTable& kernels, const float* op, size_t rows, size_t ldop, const int32_t* idx,
                  const float* w, size_t groups, size_t r, size_t k, float* out, size_t ldo);
// The same with ActiveKernels().
void GatherReduce(const float* op, size_t rows, size_t ldop, const int32_t* idx, const float* w, size_t groups,
                  size_t r, size_t k, float* out, size_t ldo);

// One unit of a grouped expert matmul: expert `expert`'s rows against its output columns
// [begin, end).
struct ExpertChunk {
  int64_t expert;
  size_t begin, end;
};

// The pool split of a ragged grouped matmul: expert e owns rows [offsets[e], offsets[e + 1]);
// every expert with rows is cut into column chunks of n (multiples of kMatmulColumnTile) so that
// all experts together give about 4 chunks per pool thread: decode (a few experts, one row each)
// splits each expert's columns, prefill (most experts, many rows) keeps an expert whole.
std::vector<ExpertChunk> ExpertChunks(const std::vector<int64_t>& offsets, size_t n);

}  // namespace tessera
