// N:M sparse linear weights (issue 18 point 2, ../shared/reference/sparsity.md §10, §11, §14):
// the kept values of each row plus a one-bit-per-column mask, held so that a decode GEMV reads
// only those bytes, in one sequential stream, and expands them into dense registers (sparsity.md
// §14 idea 2: the compute stays dense, the bytes shrink, which is what memory-bound decode needs).
//
// Every row keeps the same number `kept_per_row` of columns: an N:M matrix keeps exactly N of every
// M, under-filled groups completed with their lowest unused columns holding explicit zeros
// (canonical, sparsity.md §11), and the columns past the last whole group are all kept.
//
// Layout of W[n, k] (any k >= 1), value bytes vb = 2 (bf16) or 1 (int8), words = ceil(k / 64),
// row_bytes = 8 words + vb kept_per_row: rows in groups of 16 (kNmRowGroup; the last group may
// be shorter), group g one contiguous run of 16 g row_bytes .. bytes; inside a group of R rows,
// for each 64-column chunk t = 0 .. words - 1 in order:
//   R masks, u64 each: bit b set iff column 64 t + b of that row is kept (LSB first, as
//     compressed-tensors' bitmask); bits at columns >= k are 0;
//   then row 0's kept values of the chunk (popcount of its mask, in column order), row 1's, ...
// so a group's 16 rows are read front to back as one stream (16 separate row streams would
// defeat the hardware prefetchers), whatever the pattern. kNmValuePadBytes of slack follow the
// last group (kernels load whole vectors). Masks are not aligned; kernels load them unaligned.
//   bf16: the stored bits (the exact path: float32 activations).
//   int8: q8.h's per-row int8 (scale amax / 127 of the dense row, so a kept value has the bits
//         the dense int8 format gives it and a pruned one is 0); scales [n] f32 beside.
// Bits per dense element: 1 + kept/k * value bits (2:4 and 4:8 bf16: 9 of 16; int8: 5 of 8).
// The mask costs as much as 2-bit indices at 2:4 and less than indices at 4:8 and 8:16
// (sparsity.md §10), and it maps onto AVX-512's expand instructions.
//
// Results (kernels.h matmul_nm_bf16 / matmul_q8_nm_int8); every ISA gives these bits:
//   bf16: with w the dense row (zeros at the pruned columns), 16 accumulators from +0, column c
//         going to lane (c % 32) / 2 (pairs of neighbouring columns share a lane, so that one
//         32-word expand feeds the lanes directly):
//           a[l] = fmaf(w[c], x[i, c], a[l]),  l = (c % 32) / 2,   for c = 0, 1, .., k - 1 in order
//         then b[l] = a[l] + a[l + 8] (l < 8), b[l] += b[l + 4] (l < 4), b[l] += b[l + 2]
//         (l < 2), y = b[0] + b[1], + bias[j] when there is a bias. Pruned columns take part as
//         zeros (a NaN or inf activation there gives NaN, as the dense product would).
//   int8: exactly q8.h's result for the dense int8 row (zeros at the pruned columns):
//           acc = fmaf(float(dot_b), d[i, b] * scale[j], acc) over the 32-column blocks b; so
//         a sparse int8 matrix multiplies bit for bit as the dense int8 format of the same
//         dense-with-zeros weights does (k % 32 == 0).
// Column ranges: n_begin % 16 == 0, n_end % 16 == 0 or n_end == n (a short last group is never
// split, so its row count is n_end - n_begin's remainder).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "kernels/kernels.h"

namespace tessera {

inline constexpr size_t kNmRowGroup = 16;
inline constexpr size_t kNmValuePadBytes = 64;

inline size_t NmMaskWords(size_t k) { return (k + 63) / 64; }
// Kept values of a row per its pattern: N of every whole group of M, all of the tail.
inline size_t NmKeptPerRow(size_t k, int kept, int group) {
  return k / static_cast<size_t>(group) * static_cast<size_t>(kept) + k % static_cast<size_t>(group);
}
inline size_t NmRowBytes(size_t k, size_t kept_per_row, size_t value_bytes) {
  return NmMaskWords(k) * 8 + kept_per_row * value_bytes;
}
// Bytes of a packed matrix, slack included.
inline size_t NmPackedBytes(size_t n, size_t row_bytes) { return n * row_bytes + kNmValuePadBytes; }

// Whether row `mask` (NmMaskWords(k) words) keeps at most `kept` of every `group` columns
// (columns past the last whole group free); on failure `bad_group` names the first bad group.
bool NmMaskFollowsPattern(const uint64_t* mask, size_t k, int kept, int group, size_t* bad_group);

// The mask of one dense row: for each whole group of `group` columns, its non-zero columns,
// completed to exactly `kept` with the group's lowest zero columns; the tail past the last whole
// group all kept. `is_zero(c)` tells whether column c is zero. Returns false when a group holds
// more than `kept` non-zeros (`bad_group` names it); the mask is then incomplete.
template <typename IsZero>
bool NmMaskOfRow(size_t k, int kept, int group, const IsZero& is_zero, uint64_t* mask, size_t* bad_group) {
  const size_t words = NmMaskWords(k), whole = k / static_cast<size_t>(group) * static_cast<size_t>(group);
  for (size_t t = 0; t < words; ++t) mask[t] = 0;
  auto set = [&](size_t c) { mask[c / 64] |= uint64_t{1} << (c % 64); };
  for (size_t g0 = 0; g0 < whole; g0 += static_cast<size_t>(group)) {
    int nonzero = 0;
    for (size_t c = g0; c < g0 + static_cast<size_t>(group); ++c) {
      if (!is_zero(c)) set(c), ++nonzero;
    }
    if (nonzero > kept) {
      if (bad_group) *bad_group = g0 / static_cast<size_t>(group);
      return false;
    }
    for (size_t c = g0; nonzero < kept; ++c) {
      if (is_zero(c)) set(c), ++nonzero;
    }
  }
  for (size_t c = whole; c < k; ++c) set(c);
  return true;
}

// Row r's mask in a group's chunk header (unaligned u64; kernels read them one at a time, since a
// copy loop of a runtime count compiles to rep movs, which is slow on short runs).
inline uint64_t NmLoadMask(const uint8_t* masks, size_t r) {
  uint64_t v;
  std::memcpy(&v, masks + 8 * r, 8);
  return v;
}

// Kept columns of a row mask.
size_t NmKeptCount(const uint64_t* mask, size_t k);

// Copies the entries of dense[0, k) that `mask` keeps, in column order, to out.
template <typename T>
void NmGatherKept(const uint64_t* mask, const T* dense, size_t k, T* out) {
  size_t next = 0;
  for (size_t t = 0; t < NmMaskWords(k); ++t) {
    for (uint64_t bits = mask[t]; bits != 0; bits &= bits - 1) out[next++] = dense[t * 64 + static_cast<size_t>(__builtin_ctzll(bits))];
  }
}

// Writes row group g of the layout (rows [16 g, 16 g + R) of n) to `packed` (NmPackedBytes), from
// the rows' masks (row j at masks + j words) and kept values (row j's kept_per_row values of
// value_bytes each at values + j kept_per_row value_bytes). Groups are independent, so callers
// may write them in parallel.
void NmPackGroup(size_t g, size_t n, size_t k, size_t kept_per_row, size_t value_bytes, const uint64_t* masks,
                 const uint8_t* values, uint8_t* packed);

// Row j of a packed matrix of n rows back to k dense floats (int8: times its scale), for the
// reference kernels, tests and tools.
void NmRowToDense(const NmWeights& w, size_t n, size_t k, size_t value_bytes, size_t j, float* out);

// "2:4" style label.
std::string NmPatternName(int kept, int group);

}  // namespace tessera
