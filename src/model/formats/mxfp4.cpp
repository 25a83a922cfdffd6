// MXFP4 matrices (E2M1 codes, one E8M0 scale per 32 weights; gpt-oss.md §2.3). Exact: the
// checkpoint layout (codes [n, k/32, 16], scales [n, k/32]) in place from the mapping, or copied
// when sliced for tensor parallelism, multiplied by matmul_mxfp4 (float32 activations). q8: the
// same weights repacked at load into the q8 layout (kernels/q8.h) and multiplied against int8
// activations (matmul_q8_mxfp4); a scale byte 255 (NaN) cannot be repacked.
#include <vector>

#include "core/buffer.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/kernels.h"
#include "kernels/mxfp4.h"
#include "model/formats/formats.h"

namespace tessera {
namespace {

class Mxfp4Linear final : public LinearWeights {
 public:
  Mxfp4Linear(const LinearSource& source, bool q8, const std::string& where, bool borrow)
      : LinearWeights(q8 ? LinearFormat::kMxfp4Q8 : LinearFormat::kMxfp4, source.count, source.rows, source.cols) {
    const size_t n = static_cast<size_t>(rows()), k = static_cast<size_t>(cols());
    const size_t E = static_cast<size_t>(count());
    const size_t code_row = k / 2, scale_row = k / kMxfp4BlockSize;
    const bool in_place = source.Contiguous() && !source.row_data.empty();
    if (!q8 && in_place && borrow) {
      // The checkpoint layout, read where it is mapped.
      code_stride_ = n * code_row;
      scale_stride_ = n * scale_row;
      codes_ = source.row_data.front();
      scales_ = source.row_scales.front();
      return;
    }
    // The checkpoint layout in our own buffers (kept for the exact path, or read once to repack)
    // unless the rows can be read in place.
    const uint8_t* codes = in_place ? source.row_data.front() : nullptr;
    const uint8_t* scales = in_place ? source.row_scales.front() : nullptr;
    ByteBuffer gathered_codes, gathered_scales;
    if ((!in_place || !q8) && E * n * k != 0) {
      gathered_codes = ByteBuffer(E * n * code_row);
      gathered_scales = ByteBuffer(E * n * scale_row);
      GatherRows(source, false, code_row, gathered_codes.data());
      GatherRows(source, true, scale_row, gathered_scales.data());
      codes = gathered_codes.data();
      scales = gathered_scales.data();
    }
    if (!q8) {
      code_stride_ = n * code_row;
      scale_stride_ = n * scale_row;
      own_codes_ = std::move(gathered_codes);
      own_scales_ = std::move(gathered_scales);
      ReleaseSource(source);
      codes_ = own_codes_.data();
      scales_ = own_scales_.data();
      return;
    }
    // q8 layout, one matrix per task.
    code_stride_ = Q8Mxfp4CodeBytes(n, k);
    scale_stride_ = Q8Mxfp4ScaleBytes(n, k);
    own_codes_ = ByteBuffer(E * code_stride_);
    own_scales_ = ByteBuffer(E * scale_stride_);
    std::vector<int64_t> bad(E, -1);
    if (n * k != 0) GlobalPool().Run(E, [&](size_t e, int) {
      size_t row = 0;
      if (!PackMxfp4ForQ8(codes + e * n * code_row, scales + e * n * scale_row, n, k,
                          own_codes_.data() + e * code_stride_, own_scales_.data() + e * scale_stride_, &row)) {
        bad[e] = static_cast<int64_t>(row);
      }
    });
    for (size_t e = 0; e < E; ++e) {
      if (bad[e] >= 0) {
        Fail(where, ": tensor '", source.name, "' has scale byte 255 (NaN) in ", E > 1 ? StrCat("expert ", e, " ") : "",
             "row ", bad[e], "; the fast path cannot represent it (use --precision exact)");
      }
    }
    ReleaseSource(source);
    codes_ = own_codes_.data();
    scales_ = own_scales_.data();
  }

  bool needs_q8() const override { return format() == LinearFormat::kMxfp4Q8; }
  size_t column_grain() const override { return needs_q8() ? kQ8Group : 1; }

  void Multiply(int64_t matrix, const float* x, const Q8Rows* xq, size_t m, size_t col_begin, size_t col_end,
                const float* bias, float* y, size_t ldy) const override {
    const KernelTable& kt = ActiveKernels();
    const uint8_t* codes = codes_ + matrix * code_stride_;
    const uint8_t* scales = scales_ + matrix * scale_stride_;
    if (needs_q8()) {
      kt.matmul_q8_mxfp4(*xq, m, static_cast<size_t>(cols()), codes, scales, col_begin, col_end, bias, y, ldy);
    } else {
      kt.matmul_mxfp4(x, m, static_cast<size_t>(cols()), codes, scales, col_begin, col_end, bias, y, ldy);
    }
  }

  // k/2 code bytes and k/32 scale bytes per row, in both layouts.
  double BytesPerMatrix() const override {
    return static_cast<double>(rows()) * static_cast<double>(cols() / 2 + cols() / 32);
  }

 private:
  const uint8_t* codes_ = nullptr;
  const uint8_t* scales_ = nullptr;
  size_t code_stride_ = 0, scale_stride_ = 0;
  ByteBuffer own_codes_, own_scales_;
};

}  // namespace

std::unique_ptr<LinearWeights> MakeMxfp4Linear(const LinearSource& source, bool q8, const std::string& where,
                                               bool borrow) {
  TESSERA_CHECK(source.mxfp4 && source.cols % kMxfp4BlockSize == 0);
  return std::make_unique<Mxfp4Linear>(source, q8, where, borrow);
}

}  // namespace tessera
