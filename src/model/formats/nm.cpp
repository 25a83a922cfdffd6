// N:M sparse matrices (kernels/nm_linear.h): each row's kept values plus a one-bit-per-column
// mask, made at load from
//   - dense rows with zeros that follow the checkpoint's pattern (tessera sparsify's output,
//     published 2:4 models whose config records the pattern): the mask keeps each group's
//     non-zeros, completed with its lowest zero columns (canonical, sparsity.md §11);
//   - compressed-tensors sparse-24-bitmask rows: the stored bitmask and kept values as they are.
// nm-bf16 keeps the values' bf16 bits (exact path: float32 activations); nm-int8 quantizes each
// dense row as the int8 format does (q8.h's per-row scale) and keeps the kept columns' codes (fast
// path: q8 activations, the dense int8 result bit for bit). A row with more non-zeros in a group
// than the pattern keeps is a one-line error naming the tensor, the row and the group: the
// weights are never silently truncated. The mapped checkpoint pages are released once copied.
#include <algorithm>
#include <bit>
#include <cstring>
#include <vector>

#include "core/buffer.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/kernels.h"
#include "kernels/nm_linear.h"
#include "kernels/q8.h"
#include "model/formats/formats.h"

namespace tessera {
namespace {

// Mask of one bitmask24 source row: bits [col0, col0 + k) of its bitmask bytes; returns the
// number of kept values before col0 (where the slice's values start).
size_t BitmaskRow(const uint8_t* bits, size_t col0, size_t k, uint64_t* mask) {
  for (size_t t = 0; t < NmMaskWords(k); ++t) mask[t] = 0;
  size_t before = 0;
  for (size_t c = 0; c < col0; ++c) before += (bits[c / 8] >> (c % 8)) & 1;
  for (size_t c = 0; c < k; ++c) {
    const size_t s = col0 + c;
    if ((bits[s / 8] >> (s % 8)) & 1) mask[c / 64] |= uint64_t{1} << (c % 64);
  }
  return before;
}

class NmLinear final : public LinearWeights {
 public:
  NmLinear(const LinearSource& source, bool int8, const std::string& where)
      : LinearWeights(int8 ? LinearFormat::kNmInt8 : LinearFormat::kNmBf16, source.count, source.rows, source.cols),
        kept_(source.nm_kept), group_(source.nm_group) {
    const size_t n = static_cast<size_t>(count() * rows()), k = static_cast<size_t>(cols());
    if (!int8 && source.dtype != DType::kBF16) {
      Fail(where, ": tensor '", source.name, "' is ", DTypeName(source.dtype),
           "; N:M sparse weights are held as bf16 (use --sparse off to run them dense)");
    }
    if (int8 && k % kQ8Block != 0) {
      Fail(where, ": tensor '", source.name, "' has rows of ", k, " values, not a multiple of ", kQ8Block,
           "; int8 weights need that (use --dense bf16)");
    }
    mask_words_ = NmMaskWords(k);
    kept_per_row_ = NmKeptPerRow(k, kept_, group_);
    const size_t value_bytes = int8 ? 1 : 2;
    row_bytes_ = NmRowBytes(k, kept_per_row_, value_bytes);
    // Row-major masks and kept values first (rows are checked independently), then each matrix's
    // 16-row groups interleaved into the kernels' layout.
    std::vector<uint64_t> masks(n * mask_words_);
    std::vector<uint8_t> values(n * kept_per_row_ * value_bytes);
    if (int8) scales_.resize(n);

    // One task per row block; the first bad row of each block is reported.
    struct Bad {
      int64_t row = -1;
      size_t group = 0;
      bool nonfinite = false;
      size_t kept = 0;
    };
    constexpr size_t kBlock = 64;
    const size_t blocks = (n + kBlock - 1) / kBlock;
    std::vector<Bad> bad(blocks);
    const size_t elem = DTypeSize(source.dtype);
    GlobalPool().ParallelFor(blocks, 1, [&](size_t begin, size_t end) {
      std::vector<float> row(k);
      std::vector<int8_t> q(k);
      std::vector<uint16_t> bf16(k);
      for (size_t block = begin; block < end; ++block) {
        for (size_t j = block * kBlock; j < std::min(n, (block + 1) * kBlock); ++j) {
          uint64_t* mask = masks.data() + j * mask_words_;
          const uint8_t* src = source.row_data[j];
          Bad& b = bad[block];
          if (source.nm_bitmask) {
            // Kept values in column order from the stored row, then the dense row they make.
            const size_t before = BitmaskRow(source.row_scales[j], static_cast<size_t>(source.col0), k, mask);
            const size_t count = NmKeptCount(mask, k);
            if (count != kept_per_row_ || !NmMaskFollowsPattern(mask, k, kept_, group_, &b.group)) {
              b.row = static_cast<int64_t>(j), b.kept = count;
              break;
            }
            std::fill(row.begin(), row.end(), 0.0f);
            size_t next = 0;
            for (size_t t = 0; t < mask_words_; ++t) {
              for (uint64_t bits = mask[t]; bits != 0; bits &= bits - 1, ++next) {
                const size_t c = t * 64 + static_cast<size_t>(std::countr_zero(bits));
                std::memcpy(&bf16[c], src + (before + next) * elem, std::min<size_t>(elem, 2));
                row[c] = ElementToF32(source.dtype, src + (before + next) * elem);
              }
            }
          } else {
            for (size_t c = 0; c < k; ++c) row[c] = ElementToF32(source.dtype, src + c * elem);
            if (source.dtype == DType::kBF16) std::memcpy(bf16.data(), src, k * 2);
            if (!NmMaskOfRow(k, kept_, group_, [&](size_t c) { return row[c] == 0.0f; }, mask, &b.group)) {
              b.row = static_cast<int64_t>(j);
              break;
            }
          }
          if (int8) {
            if (!QuantizeRowToInt8(row.data(), k, q.data(), &scales_[j])) {
              b.row = static_cast<int64_t>(j), b.nonfinite = true;
              break;
            }
            NmGatherKept(mask, q.data(), k, reinterpret_cast<int8_t*>(values.data()) + j * kept_per_row_);
          } else {
            NmGatherKept(mask, bf16.data(), k, reinterpret_cast<uint16_t*>(values.data()) + j * kept_per_row_);
          }
        }
      }
    });
    for (const Bad& b : bad) {
      if (b.row < 0) continue;
      const std::string row = StrCat(count() > 1 ? StrCat(" matrix ", b.row / rows(), ",") : std::string(), " row ",
                                     b.row % rows());
      if (b.nonfinite) Fail(where, ": tensor '", source.name, "'", row, " holds NaN or inf; it cannot be quantized to int8");
      if (source.nm_bitmask && b.kept != kept_per_row_) {
        Fail(where, ": tensor '", source.name, "'", row, ": its bitmask flags ", b.kept, " of ", k, " columns, but ",
             NmPatternName(kept_, group_), " keeps ", kept_per_row_);
      }
      Fail(where, ": tensor '", source.name, "'", row, ": group ", b.group, " (columns ", b.group * static_cast<size_t>(group_),
           "..", (b.group + 1) * static_cast<size_t>(group_) - 1, ") has more than ", kept_, " non-zeros, so the weights do not follow the ",
           NmPatternName(kept_, group_), " pattern the config records");
    }
    ReleaseSource(source);
    const size_t matrix_bytes = static_cast<size_t>(rows()) * row_bytes_;
    data_ = ByteBuffer(static_cast<size_t>(count()) * matrix_bytes + kNmValuePadBytes);
    std::memset(data_.data() + static_cast<size_t>(count()) * matrix_bytes, 0, kNmValuePadBytes);
    const size_t groups = (static_cast<size_t>(rows()) + kNmRowGroup - 1) / kNmRowGroup;
    GlobalPool().ParallelFor(groups * static_cast<size_t>(count()), 16, [&](size_t begin, size_t end) {
      for (size_t task = begin; task < end; ++task) {
        const size_t e = task / groups, first = e * static_cast<size_t>(rows());
        NmPackGroup(task % groups, static_cast<size_t>(rows()), k, kept_per_row_, value_bytes, masks.data() + first * mask_words_,
                    values.data() + first * kept_per_row_ * value_bytes, data_.data() + e * matrix_bytes);
      }
    });
  }

  bool needs_q8() const override { return format() == LinearFormat::kNmInt8; }
  size_t column_grain() const override { return kNmRowGroup; }

  void Multiply(int64_t matrix, const float* x, const Q8Rows* xq, size_t m, size_t col_begin, size_t col_end,
                const float* bias, float* y, size_t ldy) const override {
    const KernelTable& kt = ActiveKernels();
    const size_t first = static_cast<size_t>(matrix * rows());
    const bool int8 = format() == LinearFormat::kNmInt8;
    const NmWeights w{data_.data() + first * row_bytes_, row_bytes_, int8 ? scales_.data() + first : nullptr};
    if (int8) {
      kt.matmul_q8_nm_int8(*xq, m, static_cast<size_t>(cols()), w, col_begin, col_end, bias, y, ldy);
    } else {
      kt.matmul_nm_bf16(x, m, static_cast<size_t>(cols()), w, col_begin, col_end, bias, y, ldy);
    }
  }

  double BytesPerMatrix() const override {
    const bool int8 = format() == LinearFormat::kNmInt8;
    return static_cast<double>(rows()) * (static_cast<double>(row_bytes_) + (int8 ? sizeof(float) : 0.0));
  }

 private:
  int kept_, group_;
  size_t mask_words_ = 0, kept_per_row_ = 0, row_bytes_ = 0;
  ByteBuffer data_;
  std::vector<float> scales_;
};

}  // namespace

std::unique_ptr<LinearWeights> MakeNmLinear(const LinearSource& source, bool int8, const std::string& where) {
  TESSERA_CHECK(!source.mxfp4 && !source.int4() && source.nm_group > 0);
  return std::make_unique<NmLinear>(source, int8, where);
}

}  // namespace tessera
