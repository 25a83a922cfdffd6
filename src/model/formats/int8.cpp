// int8 rows: each weight row quantized symmetrically to int8 with one float scale (kernels/q8.h
// layout, 16-row interleaved groups), multiplied against q8 activations (matmul_q8_int8). Made at
// load from a bf16 / f16 / f32 source, a GGUF block-quantized one, or an fp8 one (DeepSeek-V3's block-scaled e4m3fn rows,
// dequantized exactly first), which is then released; fast path only (its accuracy cost is in
// docs/ACCURACY.md).
#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "core/buffer.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "io/ggml_quants.h"
#include "kernels/kernels.h"
#include "model/formats/formats.h"

namespace tessera {
namespace {

class Int8Linear final : public LinearWeights {
 public:
  Int8Linear(const LinearSource& source, const std::string& where)
      : LinearWeights(LinearFormat::kInt8, source.count, source.rows, source.cols) {
    const size_t n = static_cast<size_t>(rows()), k = static_cast<size_t>(cols());
    if (k % kQ8Block != 0) {
      Fail(where, ": tensor '", source.name, "' has rows of ", k, " values, not a multiple of ", kQ8Block,
           "; int8 weights need that (use --dense bf16)");
    }
    value_stride_ = Q8Int8Bytes(n, k);
    scale_stride_ = Q8PaddedColumns(n);
    values_ = ByteBuffer(value_stride_ * count());
    scales_.resize(scale_stride_ * count());
    // One task per 16-row group of one matrix: rows widened exactly to float32, then quantized
    // into the group's own bytes.
    const size_t groups = scale_stride_ / kQ8Group, tasks = groups * static_cast<size_t>(count());
    std::vector<int64_t> bad(tasks, -1);
    const size_t elem = DTypeSize(source.dtype);
    const bool fp8 = source.dtype == DType::kF8E4M3;
    const size_t block_cols = static_cast<size_t>(source.fp8_block_cols);
    const size_t scale_cols = fp8 ? (k + block_cols - 1) / block_cols : 0;
    GlobalPool().ParallelFor(tasks, 16, [&](size_t begin, size_t end) {
      std::vector<float> rows_f32(kQ8Group * k), scales(scale_cols);
      for (size_t task = begin; task < end; ++task) {
        const size_t e = task / groups, r0 = task % groups * kQ8Group, nr = std::min(kQ8Group, n - r0);
        for (size_t r = 0; r < nr; ++r) {
          const uint8_t* row = source.row_data[e * n + r0 + r];
          if (source.ggml_type >= 0) {  // a GGUF block row, dequantized exactly
            DequantizeGgmlRow(static_cast<uint32_t>(source.ggml_type), row, &rows_f32[r * k], k);
            continue;
          }
          if (fp8) {
            // The exact dequantized row; a NaN code (which the vector decoders do not flag) or
            // scale makes the row NaN, refused below.
            std::memcpy(scales.data(), source.row_scales[e * n + r0 + r], scale_cols * sizeof(float));
            ActiveKernels().decode_fp8_row(row, scales.data(), block_cols, k, &rows_f32[r * k]);
            for (size_t c = 0; c < k; ++c) {
              if ((row[c] & 0x7f) == 0x7f) rows_f32[r * k + c] = std::numeric_limits<float>::quiet_NaN();
            }
            continue;
          }
          for (size_t c = 0; c < k; ++c) rows_f32[r * k + c] = ElementToF32(source.dtype, row + c * elem);
        }
        size_t bad_row = 0;
        if (!QuantizeF32ToQ8Int8(rows_f32.data(), nr, k, values_.data() + e * value_stride_ + r0 * k,
                                 &scales_[e * scale_stride_ + r0], &bad_row)) {
          bad[task] = static_cast<int64_t>(r0 + bad_row);
        }
      }
    });
    for (size_t task = 0; task < tasks; ++task) {
      if (bad[task] >= 0) {
        Fail(where, ": tensor '", source.name, "'", count() > 1 ? StrCat(" matrix ", task / groups) : std::string(),
             " row ", bad[task], " holds NaN or inf; it cannot be quantized to int8");
      }
    }
    ReleaseSource(source);
  }

  bool needs_q8() const override { return true; }
  size_t column_grain() const override { return kQ8Group; }

  void Multiply(int64_t matrix, const float*, const Q8Rows* xq, size_t m, size_t col_begin, size_t col_end,
                const float* bias, float* y, size_t ldy) const override {
    ActiveKernels().matmul_q8_int8(*xq, m, static_cast<size_t>(cols()), values_.data() + matrix * value_stride_,
                                   &scales_[matrix * scale_stride_], col_begin, col_end, bias, y, ldy);
  }

  double BytesPerMatrix() const override {
    return static_cast<double>(rows() * cols()) + static_cast<double>(rows()) * sizeof(float);
  }

 private:
  size_t value_stride_ = 0, scale_stride_ = 0;
  ByteBuffer values_;
  std::vector<float> scales_;
};

}  // namespace

std::unique_ptr<LinearWeights> MakeInt8Linear(const LinearSource& source, const std::string& where) {
  TESSERA_CHECK(!source.mxfp4);
  return std::make_unique<Int8Linear>(source, where);
}

}  // namespace tessera
