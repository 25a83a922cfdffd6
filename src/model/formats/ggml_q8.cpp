// ggml-q8: the fast path of a GGUF file's q8_0, q4_0 and k-quant (q4_K, q5_K, q6_K) rows: repacked
// once into kernels/ggml_q8.h's interleaved layout (about the file's bytes per weight) and multiplied against q8 activations
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
        type_(static_cast<uint32_t>(source.ggml_type)),
        sizes_(GgmlQ8SizesOf(type_, static_cast<size_t>(source.rows), static_cast<size_t>(source.cols))) {
    const size_t n = static_cast<size_t>(rows()), k = static_cast<size_t>(cols()), count = static_cast<size_t>(this->count());
    for (auto [buffer, bytes] : {std::pair{&codes_, sizes_.codes}, std::pair{&scales_, sizes_.scales * sizeof(uint16_t)},
                                 std::pair{&highs_, sizes_.highs}, std::pair{&sub_, sizes_.sub}}) {
      *buffer = ByteBuffer(std::max<size_t>(bytes * count, 1));
      std::memset(buffer->data(), 0, buffer->size());
    }
    const size_t groups = Q8PaddedColumns(n) / kQ8Group;
    GlobalPool().ParallelFor(groups * count, 4, [&](size_t begin, size_t end) {
      for (size_t task = begin; task < end; ++task) {
        const size_t e = task / groups, g = task % groups;
        const GgmlQ8Weights w = Matrix(e);
        for (size_t j = g * kQ8Group; j < std::min(n, (g + 1) * kQ8Group); ++j) {
          PackGgmlQ8Row(type_, j, k, source.row_data[e * n + j], w);
        }
      }
    });
    ReleaseSource(source);
  }

  bool needs_q8() const override { return true; }
  size_t column_grain() const override { return kQ8Group; }

  void Multiply(int64_t matrix, const float*, const Q8Rows* xq, size_t m, size_t col_begin, size_t col_end,
                const float* bias, float* y, size_t ldy) const override {
    ActiveKernels().matmul_q8_ggml(*xq, m, static_cast<size_t>(cols()), Matrix(static_cast<size_t>(matrix)), col_begin,
                                   col_end, bias, y, ldy);
  }

  double BytesPerMatrix() const override {
    return static_cast<double>(sizes_.codes + sizes_.scales * sizeof(uint16_t) + sizes_.highs + sizes_.sub);
  }

 private:
  GgmlQ8Weights Matrix(size_t e) const {
    return GgmlQ8Weights{type_, codes_.data() + e * sizes_.codes, scales_.as<uint16_t>() + e * sizes_.scales,
                         highs_.data() + e * sizes_.highs, sub_.data() + e * sizes_.sub};
  }

  uint32_t type_;
  GgmlQ8Sizes sizes_;
  ByteBuffer codes_, scales_, highs_, sub_;
};

}  // namespace

std::unique_ptr<LinearWeights> MakeGgmlQ8Linear(const LinearSource& source, const std::string& where) {
  TESSERA_CHECK(source.ggml_type >= 0);
  const auto type = static_cast<uint32_t>(source.ggml_type);
  if (!GgmlQ8Supported(type) || source.cols % static_cast<int64_t>(GgmlQ8RowBlock(type)) != 0) {
    Fail(where, ": tensor '", source.name, "' has no ggml-q8 form (q8_0, q4_0, q4_K, q5_K, q6_K rows of whole blocks)");
  }
  return std::make_unique<GgmlQ8Linear>(source);
}

}  // namespace tessera
