// N:M sparse weights: mask helpers and the scalar reference kernels (the definitions of
// nm_linear.h that the vector versions reproduce bit for bit).
#include "kernels/nm_linear.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/dtype.h"
#include "kernels/q8.h"

namespace tessera {

bool NmMaskFollowsPattern(const uint64_t* mask, size_t k, int kept, int group, size_t* bad_group) {
  const size_t m = static_cast<size_t>(group), whole = k / m * m;
  for (size_t g0 = 0; g0 < whole; g0 += m) {
    int count = 0;
    for (size_t c = g0; c < g0 + m; ++c) count += static_cast<int>((mask[c / 64] >> (c % 64)) & 1);
    if (count > kept) {
      if (bad_group) *bad_group = g0 / m;
      return false;
    }
  }
  return true;
}

size_t NmKeptCount(const uint64_t* mask, size_t k) {
  size_t count = 0;
  for (size_t t = 0; t < NmMaskWords(k); ++t) count += static_cast<size_t>(std::popcount(mask[t]));
  return count;
}

std::string NmPatternName(int kept, int group) { return std::to_string(kept) + ":" + std::to_string(group); }

void NmPackGroup(size_t g, size_t n, size_t k, size_t kept_per_row, size_t value_bytes, const uint64_t* masks,
                 const uint8_t* values, uint8_t* packed) {
  const size_t words = NmMaskWords(k), row_bytes = NmRowBytes(k, kept_per_row, value_bytes);
  const size_t first = g * kNmRowGroup, rows = std::min(kNmRowGroup, n - first);
  uint8_t* out = packed + first * row_bytes;
  size_t taken[kNmRowGroup] = {};  // values of each row written so far
  for (size_t t = 0; t < words; ++t) {
    for (size_t r = 0; r < rows; ++r, out += 8) std::memcpy(out, &masks[(first + r) * words + t], 8);
    for (size_t r = 0; r < rows; ++r) {
      const size_t count = static_cast<size_t>(std::popcount(masks[(first + r) * words + t]));
      std::memcpy(out, values + ((first + r) * kept_per_row + taken[r]) * value_bytes, count * value_bytes);
      out += count * value_bytes;
      taken[r] += count;
    }
  }
}

namespace {

// Row j's dense weights (zeros at pruned columns) from a packed matrix of n rows: bf16 values
// widened, or int8 values as they are.
template <typename T, typename Out>
void DenseRow(const NmWeights& w, size_t n, size_t k, size_t j, Out* out) {
  const size_t g = j / kNmRowGroup, first = g * kNmRowGroup, rows = std::min(kNmRowGroup, n - first);
  const size_t row = j - first;
  const uint8_t* p = w.data + first * w.row_bytes;
  for (size_t t = 0; t < NmMaskWords(k); ++t) {
    uint64_t masks[kNmRowGroup];
    std::memcpy(masks, p, rows * 8);
    p += rows * 8;
    for (size_t r = 0; r < row; ++r) p += static_cast<size_t>(std::popcount(masks[r])) * sizeof(T);
    for (size_t b = 0; b < 64 && t * 64 + b < k; ++b) {
      const size_t c = t * 64 + b;
      if ((masks[row] >> b) & 1) {
        T v;
        std::memcpy(&v, p, sizeof(T));
        p += sizeof(T);
        if constexpr (sizeof(T) == 2) {
          out[c] = Bf16ToF32(v);
        } else {
          out[c] = static_cast<Out>(v);
        }
      } else {
        out[c] = Out{0};
      }
    }
    for (size_t r = row + 1; r < rows; ++r) p += static_cast<size_t>(std::popcount(masks[r])) * sizeof(T);
  }
}

void MatmulNmBf16(const float* x, size_t m, size_t k, NmWeights w, size_t n_begin, size_t n_end, const float* bias,
                  float* y, size_t ldy) {
  std::vector<float> row(k);
  for (size_t j = n_begin; j < n_end; ++j) {
    DenseRow<uint16_t>(w, n_end, k, j, row.data());
    for (size_t i = 0; i < m; ++i) {
      const float* xi = x + i * k;
      float lane[16] = {};
      for (size_t c = 0; c < k; ++c) lane[c % 32 / 2] = std::fma(row[c], xi[c], lane[c % 32 / 2]);
      for (size_t l = 0; l < 8; ++l) lane[l] += lane[l + 8];
      for (size_t l = 0; l < 4; ++l) lane[l] += lane[l + 4];
      for (size_t l = 0; l < 2; ++l) lane[l] += lane[l + 2];
      const float acc = lane[0] + lane[1];
      y[i * ldy + j] = bias ? acc + bias[j] : acc;
    }
  }
}

// q8.h's result for the dense int8 row: its definition, with the row's scale for every block.
void MatmulQ8NmInt8(Q8Rows x, size_t m, size_t k, NmWeights w, size_t n_begin, size_t n_end, const float* bias,
                    float* y, size_t ldy) {
  std::vector<int8_t> row(k);
  std::vector<float> scales(k / 32);
  for (size_t j = n_begin; j < n_end; ++j) {
    DenseRow<int8_t>(w, n_end, k, j, row.data());
    std::fill(scales.begin(), scales.end(), w.scales[j]);
    Q8ReferenceColumn(x, m, k, row.data(), scales.data(), j, bias, y, ldy);
  }
}

}  // namespace

void NmRowToDense(const NmWeights& w, size_t n, size_t k, size_t value_bytes, size_t j, float* out) {
  if (value_bytes == 1) {
    std::vector<int32_t> row(k);
    DenseRow<int8_t>(w, n, k, j, row.data());
    for (size_t c = 0; c < k; ++c) out[c] = static_cast<float>(row[c]) * w.scales[j];
  } else {
    DenseRow<uint16_t>(w, n, k, j, out);
  }
}

void FillReferenceNm(KernelTable& t) {
  t.matmul_nm_bf16 = MatmulNmBf16;
  t.matmul_nm_bf16_isa = "scalar";
  t.matmul_q8_nm_int8 = MatmulQ8NmInt8;
  t.matmul_q8_nm_int8_isa = "scalar";
}

}  // namespace tessera
