// bf16, f16 and f32 matrices as stored, multiplied by the exact kernels (kernels.h matmul_bf16,
// matmul_f16, matmul_f32: weights decoded exactly to float32, float32 activations). The rows are
// copied out of the mapped checkpoint into one huge-page buffer (the page cache holds file pages
// as 4 KiB pages, and streaming the dense weights through them cost ~15 % of decode speed in TLB
// misses, docs/BENCHMARKS.md), except when borrowed (a tied lm_head reads the embedding table).
#include <cstring>

#include "core/buffer.h"
#include "core/dtype.h"
#include "core/error.h"
#include "kernels/kernels.h"
#include "model/formats/formats.h"

namespace tessera {
namespace {

class FloatLinear final : public LinearWeights {
 public:
  FloatLinear(const LinearSource& source, LinearFormat format, bool borrow)
      : LinearWeights(format, source.count, source.rows, source.cols), element_bytes_(DTypeSize(source.dtype)) {
    const size_t bytes = static_cast<size_t>(source.count * source.rows) * source.RowBytes();
    if (borrow && source.Contiguous() && !source.row_data.empty()) {
      data_ = source.row_data.front();
      return;
    }
    owned_ = ByteBuffer(bytes);
    GatherRows(source, false, source.RowBytes(), owned_.data());
    ReleaseSource(source);
    data_ = owned_.data();
  }

  void Multiply(int64_t matrix, const float* x, const Q8Rows*, size_t m, size_t col_begin, size_t col_end,
                const float* bias, float* y, size_t ldy) const override {
    const KernelTable& kt = ActiveKernels();
    const size_t k = static_cast<size_t>(cols());
    const uint8_t* w = data_ + static_cast<size_t>(matrix * rows()) * k * element_bytes_;
    switch (format()) {
      case LinearFormat::kBf16:
        kt.matmul_bf16(x, m, k, reinterpret_cast<const uint16_t*>(w), col_begin, col_end, bias, y, ldy);
        break;
      case LinearFormat::kF16:
        kt.matmul_f16(x, m, k, reinterpret_cast<const uint16_t*>(w), col_begin, col_end, bias, y, ldy);
        break;
      default:
        kt.matmul_f32(x, m, k, reinterpret_cast<const float*>(w), col_begin, col_end, bias, y, ldy);
        break;
    }
  }

  double BytesPerMatrix() const override { return static_cast<double>(rows() * cols()) * element_bytes_; }

 private:
  size_t element_bytes_;
  const uint8_t* data_ = nullptr;
  ByteBuffer owned_;
};

}  // namespace

std::unique_ptr<LinearWeights> MakeFloatLinear(const LinearSource& source, LinearFormat format, bool borrow) {
  const DType want = format == LinearFormat::kBf16 ? DType::kBF16 : format == LinearFormat::kF16 ? DType::kF16 : DType::kF32;
  TESSERA_CHECK(!source.mxfp4 && source.dtype == want);
  // The kernels read 2- or 4-byte elements; safetensors does not promise their alignment
  // (ecosystem.md §4), and a borrowed matrix is read in place.
  for (const uint8_t* row : source.row_data) {
    if (reinterpret_cast<uintptr_t>(row) % DTypeSize(want) != 0) {
      Fail("tensor '", source.name, "' is not ", DTypeSize(want), "-byte aligned in its file");
    }
  }
  return std::make_unique<FloatLinear>(source, format, borrow);
}

}  // namespace tessera
