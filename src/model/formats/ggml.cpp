// ggml: a GGUF file's block-quantized rows (q8_0, q4_0, q4_K, q6_K, mxfp4, ...; kernels/
// ggml_quants.h) kept as stored, one copy in a huge-page buffer (the file's bytes are what a decode
// step streams). Multiply decodes a chunk of rows at a time exactly as ggml's dequantize_row_*
// defines them into a per-thread float32 buffer that stays in cache and multiplies it with
// matmul_f32, so results equal a float32 matmul over the dequantized matrix (the exact path's
// contract) and stay batch-invariant.
#include "core/buffer.h"
#include "core/error.h"
#include "io/gguf.h"
#include "io/ggml_quants.h"
#include "model/formats/formats.h"

namespace tessera {
namespace {

class GgmlLinear final : public LinearWeights {
 public:
  GgmlLinear(const LinearSource& source, const GgmlTypeInfo& type)
      : LinearWeights(LinearFormat::kGgml, source.count, source.rows, source.cols),
        type_id_(type.id),
        row_bytes_(source.RowBytes()) {
    rows_ = ByteBuffer(source.num_rows() * row_bytes_);
    GatherRows(source, false, row_bytes_, rows_.data());
    ReleaseSource(source);
  }

  void Multiply(int64_t matrix, const float* x, const Q8Rows*, size_t m, size_t col_begin, size_t col_end,
                const float* bias, float* y, size_t ldy) const override {
    const size_t k = static_cast<size_t>(cols()), first = static_cast<size_t>(matrix * rows());
    MultiplyDecodedRows(x, m, k, col_begin, col_end, bias, y, ldy, [&](size_t j, float* out) {
      DequantizeGgmlRow(type_id_, rows_.data() + (first + j) * row_bytes_, out, k);
    });
  }

  double BytesPerMatrix() const override { return static_cast<double>(rows()) * static_cast<double>(row_bytes_); }

 private:
  uint32_t type_id_;
  size_t row_bytes_;
  ByteBuffer rows_;
};

}  // namespace

std::unique_ptr<LinearWeights> MakeGgmlLinear(const LinearSource& source, const std::string& where) {
  TESSERA_CHECK(source.ggml_type >= 0);
  const GgmlTypeInfo* type = FindGgmlType(static_cast<uint32_t>(source.ggml_type));
  // Whether the decoder defines the type: one zero block decoded.
  float probe[256];
  const uint8_t zero_block[512] = {};
  if (type == nullptr || type->block_size > 256 || type->block_bytes > sizeof(zero_block) ||
      !DequantizeGgmlRow(type->id, zero_block, probe, type->block_size)) {
    Fail(where, ": tensor '", source.name, "' is ggml type ", type ? type->name : std::string_view("unknown"),
         ", which tessera does not read (f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, mxfp4, q2_K-q6_K)");
  }
  return std::make_unique<GgmlLinear>(source, *type);
}

}  // namespace tessera
