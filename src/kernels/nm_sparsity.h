// N:M structured sparsity in tpu-inference's strided form (../shared/reference/sparsity.md §2–5):
// mask generation, encoding into kept values plus packed index metadata, and decoding.
//
// Naming: `kept` is N (the values kept per group, as NVIDIA and PyTorch count; Wanda's code counts
// the pruned ones), `group` is M (1 <= kept < group <= 16 for the matmul; the encoder takes any
// group >= 2), `stride` is S >= 1.
//
// Groups. Along the sparse dimension (sparse_dim 1: within each row, along the columns;
// sparse_dim 0: within each column, along the rows) the data is cut into runs of M·S elements;
// inside a run starting at `base`, the M elements base + j·S + p (j = 0..M-1) for one phase
// p in [0, S) form a group. S = 1 is ordinary contiguous N:M.
//
// Encoding of a [rows, cols] matrix with sparse_dim 1 (sparse_dim 0 is the same on the transpose,
// the outputs transposed back on their last two axes):
//   nonzeros [N, rows, cols / M]: compressed column c = g·S + p (run g, phase p); plane i holds
//     the value at kept slot idx_i of that group;
//   the kept slots of a group are the stable top-N of its mask values: the slots whose mask is set,
//     in increasing order, then (for a group with fewer than N set) the lowest unset slots; a group
//     with more than N set keeps its first N. Decoding therefore reports the filled slots as kept.
//   metadata [N, R / P, C] int32, where [R, C] is the index planes' shape ([rows, cols / M], or
//     [rows / M, cols] for sparse_dim 0): b = next_pow2(ceil(log2 M)) bits per index (1, 2 or 4),
//     P = 32 / b indices per word, packed along the planes' first axis: word [i, q, c] holds rows
//     q·P .. q·P + P - 1, row q·P + t in bits [t·b, t·b + b). R must be a multiple of P.
// Decoding rebuilds the dense matrix with zeros at unkept positions and the int32 kept mask.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

namespace tessera {

struct NmSparsity {
  int kept = 2;    // N
  int group = 4;   // M
  int stride = 1;  // S
};

// b: the metadata bits per index (next_pow2(ceil(log2 group))), and P = 32 / b.
int NmIndexBits(int group);
int NmIndicesPerWord(int group);

// A [rows, cols] mask (1 = kept) with exactly `kept` ones per group, each group's slots drawn by
// a random permutation from `seed` (deterministic). One-line tessera::Errors as upstream's
// gen_sparse_mask: sparse_dim not 0/1, not (group > kept > 0, rows > 0, cols > 0, stride > 0),
// or the sparse dimension not a multiple of group * stride.
std::vector<uint8_t> GenerateNmMask(int64_t rows, int64_t cols, NmSparsity sparsity, int sparse_dim, uint64_t seed);

// T: float, uint16_t (bf16 bits) or int8_t.
template <typename T>
struct NmEncoded {
  NmSparsity sparsity;
  int sparse_dim = 1;
  int64_t rows = 0, cols = 0;          // the dense shape
  std::array<int64_t, 3> nonzeros_shape{};
  std::vector<T> nonzeros;             // row-major in nonzeros_shape
  std::array<int64_t, 3> metadata_shape{};
  std::vector<int32_t> metadata;       // row-major in metadata_shape
};

// Encodes data[rows, cols] (row-major) by mask[rows, cols] (non-zero = keep). One-line errors for
// sizes that do not match, sparse_dim not 0/1, kept/group/stride out of range, the sparse
// dimension not a multiple of group * stride, or index rows not a multiple of P.
template <typename T>
NmEncoded<T> EncodeNm(std::span<const T> data, std::span<const uint8_t> mask, int64_t rows, int64_t cols,
                      NmSparsity sparsity, int sparse_dim);

// The dense matrix (zeros at unkept positions) and the kept mask (0/1).
template <typename T>
void DecodeNm(const NmEncoded<T>& encoded, std::vector<T>& data, std::vector<int32_t>& mask);

// The position along the sparse dimension of slot j (0..M-1) of compressed position cpos = g·S + p
// (run g, phase p): g·M·S + j·S + p.
inline int64_t NmSlotPosition(const NmSparsity& s, int64_t cpos, int j) {
  return cpos / s.stride * s.group * s.stride + static_cast<int64_t>(j) * s.stride + cpos % s.stride;
}

// The kept slot (0..M-1) of plane `plane` at index position (r, c) of the metadata's planes.
int32_t NmIndexAt(std::span<const int32_t> metadata, const std::array<int64_t, 3>& metadata_shape, int group,
                  int64_t plane, int64_t r, int64_t c);

}  // namespace tessera
