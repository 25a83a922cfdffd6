// ggml-q8: the fast path of a GGUF file's q8_0 and q4_0 rows: repacked once into kernels/ggml_q8.h's
// interleaved layout (the file's bytes per weight) and multiplied against q8 activations
// (matmul_q8_ggml). The weights stay exactly ggml's dequantized values; the activations' int8
// rounding is the only difference from the exact ggml format.
#include <algorithm>
#include <cstring>

#include "core/buffer.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/ggml_q8.h"
#include "kernels/kernels.h"
#include "model/formats/formats.h"

namespace tessera {
namespace {

class GgmlQ8Linear final : public LinearWeights {
 public:
  explicit GgmlQ8Linear(const LinearSource& source)
      : LinearWeights(LinearFormat::kGgmlQ8, source.count, source.rows, source.cols),
        type_(static_cast<uint32_t>(source.ggml_type)) {
    const size_t n = static_cast<size_t>(rows()), k = static_cast<size_t>(cols());
    code_stride_ = GgmlQ8CodeBytes(type_, n, k);
    scale_stride_ = GgmlQ8ScaleEntries(n, k);
    codes_ = ByteBuffer(code_stride_ * static_cast<size_t>(count()));
    scales_ = ByteBuffer(scale_stride_ * sizeof(uint16_t) * static_cast<size_t>(count()));
    std::memset(codes_.data(), 0, codes_.size());
    std::memset(scales_.data(), 0, scales_.size());
    const size_t groups = Q8PaddedColumns(n) / kQ8Group;
    GlobalPool().ParallelFor(groups * static_cast<size_t>(count()), 16, [&](size_t begin, size_t end) {
      for (size_t task = begin; task < end; ++task) {
        const size_t e = task / groups, g = task % groups;
        for (size_t j = g * kQ8Group; j < std::min(n, (g + 1) * kQ8Group); ++j) {
          PackGgmlQ8Row(type_, j, k, source.row_data[e * n + j], codes_.data() + e * code_stride_,
                        scales_.as<uint16_t>() + e * scale_stride_);
        }
      }
    });
    ReleaseSource(source);
  }

  bool needs_q8() const override { return true; }
  size_t column_grain() const override { return kQ8Group; }

  void Multiply(int64_t matrix, const float*, const Q8Rows* xq, size_t m, size_t col_begin, size_t col_end,
                const float* bias, float* y, size_t ldy) const override {
    const size_t e = static_cast<size_t>(matrix);
    const GgmlQ8Weights w{type_, codes_.data() + e * code_stride_, scales_.as<uint16_t>() + e * scale_stride_};
    ActiveKernels().matmul_q8_ggml(*xq, m, static_cast<size_t>(cols()), w, col_begin, col_end, bias, y, ldy);
  }

  double BytesPerMatrix() const override {
    return static_cast<double>(code_stride_ + scale_stride_ * sizeof(uint16_t));
  }

 private:
  uint32_t type_;
  size_t code_stride_ = 0, scale_stride_ = 0;
  ByteBuffer codes_, scales_;
};

}  // namespace

std::unique_ptr<LinearWeights> MakeGgmlQ8Linear(const LinearSource& source, const std::string& where) {
  TESSERA_CHECK(source.ggml_type >= 0);
  if (!GgmlQ8Supported(static_cast<uint32_t>(source.ggml_type)) || source.cols % static_cast<int64_t>(kQ8Block) != 0) {
    Fail(where, ": tensor '", source.name, "' has no ggml-q8 form (q8_0 and q4_0 rows of whole 32-value blocks)");
  }
  return std::make_unique<GgmlQ8Linear>(source);
}

}  // namespace tessera
