#include "kernels/nm_sparsity.h"

#include <algorithm>
#include <numeric>
#include <random>

#include "core/error.h"

namespace tessera {
namespace {

// Dense (line, pos) addressing: sparse_dim 1 walks a row along its columns, sparse_dim 0 a
// column along its rows.
struct Lines {
  int64_t rows, cols;
  int sparse_dim;
  int64_t count() const { return sparse_dim == 1 ? rows : cols; }
  int64_t length() const { return sparse_dim == 1 ? cols : rows; }
  int64_t Dense(int64_t line, int64_t pos) const { return sparse_dim == 1 ? line * cols + pos : pos * cols + line; }
};

void CheckShape(NmSparsity s, int sparse_dim, int64_t rows, int64_t cols, const char* what) {
  if (sparse_dim != 0 && sparse_dim != 1) Fail(what, ": sparse_dim must be 0 or 1, got ", sparse_dim);
  if (!(s.group > s.kept && s.kept > 0 && rows > 0 && cols > 0 && s.stride > 0)) {
    Fail(what, ": invalid inputs (need group > kept > 0, a non-empty shape and stride > 0; got ", s.kept, ":",
         s.group, ", stride ", s.stride, ", shape ", rows, "x", cols, ")");
  }
  const int64_t length = sparse_dim == 1 ? cols : rows;
  if (length % (static_cast<int64_t>(s.group) * s.stride) != 0) {
    Fail(what, ": expected ", sparse_dim == 1 ? "width " : "height ", length, " is a multiple of ",
         static_cast<int64_t>(s.group) * s.stride);
  }
}

}  // namespace

int NmIndexBits(int group) {
  int log2 = 0;
  while ((1 << log2) < group) ++log2;  // ceil(log2 group)
  int bits = 1;
  while (bits < log2) bits *= 2;       // next power of two
  return bits;
}

int NmIndicesPerWord(int group) { return 32 / NmIndexBits(group); }

std::vector<uint8_t> GenerateNmMask(int64_t rows, int64_t cols, NmSparsity s, int sparse_dim, uint64_t seed) {
  CheckShape(s, sparse_dim, rows, cols, "gen_sparse_mask");
  const Lines lines{rows, cols, sparse_dim};
  std::vector<uint8_t> mask(static_cast<size_t>(rows * cols), 0);
  std::mt19937_64 rng(seed);
  std::vector<int> slots(static_cast<size_t>(s.group));
  const int64_t compressed = lines.length() / s.group;
  for (int64_t line = 0; line < lines.count(); ++line) {
    for (int64_t c = 0; c < compressed; ++c) {
      std::iota(slots.begin(), slots.end(), 0);
      std::shuffle(slots.begin(), slots.end(), rng);
      for (int i = 0; i < s.kept; ++i) mask[static_cast<size_t>(lines.Dense(line, NmSlotPosition(s, c, slots[i])))] = 1;
    }
  }
  return mask;
}

int32_t NmIndexAt(std::span<const int32_t> metadata, const std::array<int64_t, 3>& shape, int group, int64_t plane,
                  int64_t r, int64_t c) {
  const int bits = NmIndexBits(group), per_word = 32 / bits;
  const uint32_t word = static_cast<uint32_t>(
      metadata[static_cast<size_t>((plane * shape[1] + r / per_word) * shape[2] + c)]);
  return static_cast<int32_t>((word >> ((r % per_word) * bits)) & ((1u << bits) - 1));
}

template <typename T>
NmEncoded<T> EncodeNm(std::span<const T> data, std::span<const uint8_t> mask, int64_t rows, int64_t cols,
                      NmSparsity s, int sparse_dim) {
  CheckShape(s, sparse_dim, rows, cols, "Sparsifier");
  if (data.size() != static_cast<size_t>(rows * cols) || mask.size() != data.size()) {
    Fail("Sparsifier: data has ", data.size(), " and mask ", mask.size(), " elements, expected ", rows * cols);
  }
  const Lines lines{rows, cols, sparse_dim};
  NmEncoded<T> out;
  out.sparsity = s;
  out.sparse_dim = sparse_dim;
  out.rows = rows;
  out.cols = cols;
  const int64_t N = s.kept;
  out.nonzeros_shape = sparse_dim == 1 ? std::array<int64_t, 3>{N, rows, cols / s.group}
                                       : std::array<int64_t, 3>{N, rows / s.group, cols};
  const int64_t R = out.nonzeros_shape[1], C = out.nonzeros_shape[2];
  const int bits = NmIndexBits(s.group), per_word = 32 / bits;
  if (R % per_word != 0) {
    Fail("Sparsifier: the index planes have ", R, " rows, not a multiple of the ", per_word,
         " indices one int32 metadata word packs for group ", s.group);
  }
  out.metadata_shape = {N, R / per_word, C};
  out.nonzeros.assign(static_cast<size_t>(N * R * C), T{});
  out.metadata.assign(static_cast<size_t>(N * (R / per_word) * C), 0);
  std::vector<int> kept;
  for (int64_t line = 0; line < lines.count(); ++line) {
    for (int64_t cpos = 0; cpos < lines.length() / s.group; ++cpos) {
      // Stable top-N of the mask: the set slots in order, then the lowest unset ones.
      kept.clear();
      for (int pass = 0; pass < 2 && static_cast<int>(kept.size()) < s.kept; ++pass) {
        for (int j = 0; j < s.group && static_cast<int>(kept.size()) < s.kept; ++j) {
          const bool set = mask[static_cast<size_t>(lines.Dense(line, NmSlotPosition(s, cpos, j)))] != 0;
          if (set == (pass == 0)) kept.push_back(j);
        }
      }
      // Index-plane position (r, c) of this group.
      const int64_t r = sparse_dim == 1 ? line : cpos, c = sparse_dim == 1 ? cpos : line;
      for (int64_t i = 0; i < N; ++i) {
        const int j = kept[static_cast<size_t>(i)];
        out.nonzeros[static_cast<size_t>((i * R + r) * C + c)] =
            data[static_cast<size_t>(lines.Dense(line, NmSlotPosition(s, cpos, j)))];
        uint32_t& word = reinterpret_cast<uint32_t&>(
            out.metadata[static_cast<size_t>((i * (R / per_word) + r / per_word) * C + c)]);
        word |= static_cast<uint32_t>(j) << ((r % per_word) * bits);
      }
    }
  }
  return out;
}

template <typename T>
void DecodeNm(const NmEncoded<T>& e, std::vector<T>& data, std::vector<int32_t>& mask) {
  const NmSparsity& s = e.sparsity;
  const Lines lines{e.rows, e.cols, e.sparse_dim};
  data.assign(static_cast<size_t>(e.rows * e.cols), T{});
  mask.assign(data.size(), 0);
  const int64_t R = e.nonzeros_shape[1], C = e.nonzeros_shape[2];
  for (int64_t line = 0; line < lines.count(); ++line) {
    for (int64_t cpos = 0; cpos < lines.length() / s.group; ++cpos) {
      const int64_t r = e.sparse_dim == 1 ? line : cpos, c = e.sparse_dim == 1 ? cpos : line;
      for (int64_t i = 0; i < s.kept; ++i) {
        const int j = NmIndexAt(e.metadata, e.metadata_shape, s.group, i, r, c);
        if (j >= s.group) Fail("Sparsifier: metadata index ", j, " is not below the group size ", s.group);
        const size_t at = static_cast<size_t>(lines.Dense(line, NmSlotPosition(s, cpos, j)));
        data[at] = e.nonzeros[static_cast<size_t>((i * R + r) * C + c)];
        mask[at] = 1;
      }
    }
  }
}

template NmEncoded<float> EncodeNm(std::span<const float>, std::span<const uint8_t>, int64_t, int64_t, NmSparsity, int);
template NmEncoded<uint16_t> EncodeNm(std::span<const uint16_t>, std::span<const uint8_t>, int64_t, int64_t, NmSparsity,
                                      int);
template NmEncoded<int8_t> EncodeNm(std::span<const int8_t>, std::span<const uint8_t>, int64_t, int64_t, NmSparsity,
                                    int);
template void DecodeNm(const NmEncoded<float>&, std::vector<float>&, std::vector<int32_t>&);
template void DecodeNm(const NmEncoded<uint16_t>&, std::vector<uint16_t>&, std::vector<int32_t>&);
template void DecodeNm(const NmEncoded<int8_t>&, std::vector<int8_t>&, std::vector<int32_t>&);

}  // namespace tessera
