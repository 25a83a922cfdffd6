// fp8: DeepSeek-V3's block-quantized weights (../shared/reference/deepseek.md §7): e4m3fn codes
// [rows, cols] with a float32 scale per block of columns (and of rows, repeated here per row), the
// weight float(code) * scale. The codes are copied once into a huge-page buffer (1 byte per
// weight is what a decode step streams); Multiply decodes a chunk of rows at a time exactly to
// float32 (kernels.h decode_fp8_row: the dequantized weights' bits on every ISA) in a per-thread
// buffer that stays in cache and multiplies it with matmul_f32, so results equal a float32 matmul
// over the dequantized matrix and stay batch-invariant. The fast path's fp8-bf16 form keeps the
// same codes and multiplies them with bfloat16-rounded activations, each block's sum scaled once
// (kernels.h matmul_fp8_bf16): a few operations per 64 weights instead of per 16, for any m.
#include <cmath>
#include <cstring>
#include <vector>

#include "core/buffer.h"
#include "core/error.h"
#include "kernels/kernels.h"
#include "model/formats/formats.h"

namespace tessera {
namespace {

class Fp8Linear final : public LinearWeights {
 public:
  Fp8Linear(const LinearSource& source, bool bf16, const std::string& where)
      : LinearWeights(bf16 ? LinearFormat::kFp8Bf16 : LinearFormat::kFp8, source.count, source.rows, source.cols),
        block_cols_(static_cast<size_t>(source.fp8_block_cols)),
        scale_cols_((static_cast<size_t>(source.cols) + block_cols_ - 1) / block_cols_) {
    const size_t k = static_cast<size_t>(cols()), stored_rows = source.num_rows();
    codes_ = ByteBuffer(stored_rows * k);
    GatherRows(source, false, k, codes_.data());
    scales_.resize(stored_rows * scale_cols_);
    for (size_t r = 0; r < stored_rows && scale_cols_ > 0; ++r) {  // a shard may hold no columns
      std::memcpy(scales_.data() + r * scale_cols_, source.row_scales[r], scale_cols_ * sizeof(float));
    }
    ReleaseSource(source);
    // e4m3fn has no infinities; 0x7f and 0xff are NaN, which no quantizer writes.
    for (size_t r = 0; r < stored_rows; ++r) {
      const uint8_t* row = codes_.data() + r * k;
      for (size_t c = 0; c < k; ++c) {
        if ((row[c] & 0x7f) == 0x7f) {
          Fail(where, ": tensor '", source.name, "' holds a NaN code (e4m3fn 0x", (row[c] == 0xff ? "ff" : "7f"),
               ") at row ", r % static_cast<size_t>(rows()), ", column ", c);
        }
      }
      for (size_t b = 0; b < scale_cols_; ++b) {
        const float s = scales_[r * scale_cols_ + b];
        if (!std::isfinite(s) || s < 0.0f) {
          Fail(where, ": tensor '", source.name, "': weight_scale_inv holds ", s, " (scales must be finite and >= 0)");
        }
      }
    }
  }

  void Multiply(int64_t matrix, const float* x, const Q8Rows*, size_t m, size_t col_begin, size_t col_end,
                const float* bias, float* y, size_t ldy) const override {
    const KernelTable& kt = ActiveKernels();
    const size_t k = static_cast<size_t>(cols());
    const size_t first = static_cast<size_t>(matrix * rows());
    if (format() == LinearFormat::kFp8Bf16) {
      kt.matmul_fp8_bf16(x, m, k, codes_.data() + first * k, &scales_[first * scale_cols_], scale_cols_, block_cols_,
                         col_begin, col_end, bias, y, ldy);
      return;
    }
    if (kt.matmul_fp8_dot != nullptr && m <= 4) {  // decode: the fused kernel, the same bits
      kt.matmul_fp8_dot(x, m, k, codes_.data() + first * k, &scales_[first * scale_cols_], scale_cols_, block_cols_,
                        col_begin, col_end, bias, y, ldy);
      return;
    }
    MultiplyDecodedRows(x, m, k, col_begin, col_end, bias, y, ldy, [&](size_t j, float* out) {
      const size_t row = first + j;
      kt.decode_fp8_row(codes_.data() + row * k, &scales_[row * scale_cols_], block_cols_, k, out);
    });
  }

  double BytesPerMatrix() const override {
    return static_cast<double>(rows()) * (static_cast<double>(cols()) + 4.0 * static_cast<double>(scale_cols_));
  }

 private:
  size_t block_cols_, scale_cols_;
  ByteBuffer codes_;
  std::vector<float> scales_;  // [stored rows, scale_cols_]
};

}  // namespace

std::unique_ptr<LinearWeights> MakeFp8Linear(const LinearSource& source, bool bf16, const std::string& where) {
  TESSERA_CHECK(source.dtype == DType::kF8E4M3 && source.fp8_block_cols > 0 &&
                source.row_scales.size() == source.num_rows());
  return std::make_unique<Fp8Linear>(source, bf16, where);
}

}  // namespace tessera
