#include "model/linear.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "core/error.h"
#include "core/mapped_file.h"
#include "core/profile.h"
#include "core/thread_pool.h"
#include "io/gguf.h"
#include "kernels/ggml_q8.h"
#include "kernels/kernels.h"
#include "kernels/int4.h"
#include "kernels/mxfp4.h"
#include "kernels/parallel_matmul.h"
#include "model/formats/formats.h"

namespace tessera {
namespace {

// The format table: name and factory of every format (a new format is one row and its file).
struct FormatRow {
  LinearFormat format;
  std::string_view name;
  int64_t column_block;  // cols must be a multiple of it (the q8 and MXFP4 blocks: 32)
  std::unique_ptr<LinearWeights> (*make)(const LinearSource&, LinearFormat, const std::string& where, bool borrow);
};

constexpr std::array kFormats = {
    FormatRow{LinearFormat::kBf16, "bf16", 1,
              [](const LinearSource& s, LinearFormat f, const std::string&, bool b) { return MakeFloatLinear(s, f, b); }},
    FormatRow{LinearFormat::kF16, "f16", 1,
              [](const LinearSource& s, LinearFormat f, const std::string&, bool b) { return MakeFloatLinear(s, f, b); }},
    FormatRow{LinearFormat::kF32, "f32", 1,
              [](const LinearSource& s, LinearFormat f, const std::string&, bool b) { return MakeFloatLinear(s, f, b); }},
    FormatRow{LinearFormat::kInt8, "int8", 32,
              [](const LinearSource& s, LinearFormat, const std::string& w, bool) { return MakeInt8Linear(s, w); }},
    FormatRow{LinearFormat::kMxfp4, "mxfp4", 32,
              [](const LinearSource& s, LinearFormat, const std::string& w, bool b) {
                return MakeMxfp4Linear(s, false, w, b);
              }},
    FormatRow{LinearFormat::kMxfp4Q8, "mxfp4-q8", 32,
              [](const LinearSource& s, LinearFormat, const std::string& w, bool) {
                return MakeMxfp4Linear(s, true, w, false);
              }},
    // int4: columns come in whole quantization groups (checked per source); 8 is the least.
    FormatRow{LinearFormat::kInt4, "int4", 8,
              [](const LinearSource& s, LinearFormat, const std::string& w, bool) { return MakeInt4Linear(s, false, w); }},
    FormatRow{LinearFormat::kInt4Q8, "int4-q8", 32,
              [](const LinearSource& s, LinearFormat, const std::string& w, bool) { return MakeInt4Linear(s, true, w); }},
    FormatRow{LinearFormat::kNmBf16, "nm-bf16", 1,
              [](const LinearSource& s, LinearFormat, const std::string& w, bool) { return MakeNmLinear(s, false, w); }},
    FormatRow{LinearFormat::kNmInt8, "nm-int8", 32,
              [](const LinearSource& s, LinearFormat, const std::string& w, bool) { return MakeNmLinear(s, true, w); }},
    FormatRow{LinearFormat::kFp8, "fp8", 1,
              [](const LinearSource& s, LinearFormat, const std::string& w, bool) { return MakeFp8Linear(s, false, w); }},
    FormatRow{LinearFormat::kFp8Bf16, "fp8-bf16", 1,
              [](const LinearSource& s, LinearFormat, const std::string& w, bool) { return MakeFp8Linear(s, true, w); }},
    // ggml: columns come in whole blocks of the type (checked per source).
    FormatRow{LinearFormat::kGgml, "ggml", 1,
              [](const LinearSource& s, LinearFormat, const std::string& w, bool) { return MakeGgmlLinear(s, w); }},
    FormatRow{LinearFormat::kGgmlQ8, "ggml-q8", 32,
              [](const LinearSource& s, LinearFormat, const std::string& w, bool) { return MakeGgmlQ8Linear(s, w); }},
};

const FormatRow& RowOf(LinearFormat format) {
  for (const FormatRow& row : kFormats) {
    if (row.format == format) return row;
  }
  TESSERA_CHECK(false);
  return kFormats.front();
}

// Row pointers of matrices [count, rows, cols] at `data` (row_bytes per stored row, `unit`
// bytes per stored column), sliced to rows [row0, row0 + nrows) and columns from col0.
std::vector<const uint8_t*> RowPointers(const uint8_t* data, int64_t count, int64_t rows, size_t row_bytes,
                                        int64_t row0, int64_t nrows, size_t col_offset_bytes) {
  std::vector<const uint8_t*> out;
  out.reserve(static_cast<size_t>(count * nrows));
  for (int64_t e = 0; e < count; ++e) {
    for (int64_t r = 0; r < nrows; ++r) out.push_back(data + ((e * rows + row0 + r) * row_bytes) + col_offset_bytes);
  }
  return out;
}

}  // namespace

std::string_view LinearFormatName(LinearFormat format) { return RowOf(format).name; }

const std::vector<LinearFormat>& LinearFormats() {
  static const std::vector<LinearFormat> formats = [] {
    std::vector<LinearFormat> all;
    for (const FormatRow& row : kFormats) all.push_back(row.format);
    return all;
  }();
  return formats;
}
int64_t LinearFormatColumnBlock(LinearFormat format) { return RowOf(format).column_block; }

LinearSource LinearSource::Tensor(std::string name, DType dtype, const uint8_t* data, int64_t count, int64_t rows,
                                  int64_t cols, int64_t row0, int64_t nrows, int64_t col0, int64_t ncols) {
  LinearSource s;
  s.name = std::move(name);
  s.dtype = dtype;
  s.count = count;
  s.rows = nrows < 0 ? rows : nrows;
  s.cols = ncols < 0 ? cols : ncols;
  const size_t elem = DTypeSize(dtype);
  s.row_data = RowPointers(data, count, rows, cols * elem, row0, s.rows, col0 * elem);
  s.mapped.push_back({data, static_cast<size_t>(count * rows * cols) * elem});
  return s;
}

LinearSource LinearSource::View(const TensorView& tensor, int64_t row0, int64_t nrows, int64_t col0, int64_t ncols) {
  const std::vector<int64_t>& shape = tensor.shape();
  TESSERA_CHECK(shape.size() == 2);
  const int64_t rows = shape[0], cols = shape[1];
  LinearSource s;
  s.name = tensor.name();
  s.dtype = tensor.dtype();
  s.ggml_type = tensor.info->ggml_type;
  s.rows = nrows < 0 ? rows : nrows;
  s.cols = ncols < 0 ? cols - col0 : ncols;
  size_t row_bytes = static_cast<size_t>(cols) * DTypeSize(s.dtype), col_offset = static_cast<size_t>(col0) * DTypeSize(s.dtype);
  if (s.ggml_type >= 0) {
    const GgmlTypeInfo& type = *FindGgmlType(static_cast<uint32_t>(s.ggml_type));
    if (col0 % type.block_size != 0 || s.cols % type.block_size != 0) {
      Fail("tensor '", s.name, "': columns [", col0, ", ", col0 + s.cols, ") are not whole ", type.name, " blocks of ",
           type.block_size);
    }
    row_bytes = static_cast<size_t>(cols / type.block_size) * type.block_bytes;
    col_offset = static_cast<size_t>(col0 / type.block_size) * type.block_bytes;
  }
  TESSERA_CHECK(row0 >= 0 && row0 + s.rows <= rows && col0 >= 0 && col0 + s.cols <= cols);
  const std::vector<int64_t>& order = tensor.info->row_order;
  for (int64_t r = row0; r < row0 + s.rows; ++r) {
    const int64_t stored = order.empty() ? r : order[static_cast<size_t>(r)];
    s.row_data.push_back(tensor.data + static_cast<size_t>(stored) * row_bytes + col_offset);
  }
  s.mapped.push_back({tensor.data, tensor.nbytes()});
  return s;
}

LinearSource LinearSource::Mxfp4Tensor(std::string name, const uint8_t* codes, const uint8_t* scales, int64_t count,
                                       int64_t rows, int64_t cols, int64_t row0, int64_t nrows, int64_t col0,
                                       int64_t ncols) {
  TESSERA_CHECK(cols % kMxfp4BlockSize == 0 && col0 % kMxfp4BlockSize == 0);
  LinearSource s;
  s.name = std::move(name);
  s.dtype = DType::kU8;
  s.mxfp4 = true;
  s.count = count;
  s.rows = nrows < 0 ? rows : nrows;
  s.cols = ncols < 0 ? cols : ncols;
  TESSERA_CHECK(s.cols % kMxfp4BlockSize == 0);
  s.row_data = RowPointers(codes, count, rows, cols / 2, row0, s.rows, col0 / 2);
  s.row_scales = RowPointers(scales, count, rows, cols / kMxfp4BlockSize, row0, s.rows, col0 / kMxfp4BlockSize);
  s.mapped.push_back({codes, static_cast<size_t>(count * rows * cols / 2)});
  s.mapped.push_back({scales, static_cast<size_t>(count * rows * cols / kMxfp4BlockSize)});
  return s;
}

LinearSource LinearSource::Int4Module(std::string name, const Int4Stored& stored,
                                      std::vector<std::pair<const uint8_t*, size_t>> mapped, int64_t row0, int64_t nrows,
                                      int64_t col0, int64_t ncols) {
  LinearSource s;
  s.name = std::move(name);
  s.dtype = DType::kI32;
  s.rows = nrows < 0 ? stored.out : nrows;
  s.cols = ncols < 0 ? stored.in : ncols;
  s.col0 = col0;
  TESSERA_CHECK(row0 >= 0 && row0 + s.rows <= stored.out && col0 >= 0 && col0 + s.cols <= stored.in);
  s.int4_tensors.push_back(stored);
  for (int64_t r = 0; r < s.rows; ++r) s.int4_rows.emplace_back(0, row0 + r);
  s.mapped = std::move(mapped);
  return s;
}

LinearSource LinearSource::Bitmask24Module(std::string name, DType dtype, const uint8_t* values, const uint8_t* bitmask,
                                           int64_t out, int64_t in, std::vector<std::pair<const uint8_t*, size_t>> mapped,
                                           int64_t row0, int64_t nrows, int64_t col0, int64_t ncols) {
  LinearSource s;
  s.name = std::move(name);
  s.dtype = dtype;
  s.rows = nrows < 0 ? out : nrows;
  s.cols = ncols < 0 ? in - col0 : ncols;
  s.col0 = col0;
  s.nm_kept = 2, s.nm_group = 4, s.nm_bitmask = true;
  TESSERA_CHECK(row0 >= 0 && row0 + s.rows <= out && col0 >= 0 && col0 + s.cols <= in);
  const size_t value_row = static_cast<size_t>(in / 2) * DTypeSize(dtype), mask_row = static_cast<size_t>((in + 7) / 8);
  for (int64_t r = 0; r < s.rows; ++r) {
    s.row_data.push_back(values + static_cast<size_t>(row0 + r) * value_row);
    s.row_scales.push_back(bitmask + static_cast<size_t>(row0 + r) * mask_row);
  }
  s.mapped = std::move(mapped);
  return s;
}

LinearSource LinearSource::Interleave(LinearSource a, const LinearSource& b) {
  TESSERA_CHECK(a.count == b.count && a.rows == b.rows && a.cols == b.cols && a.int4() == b.int4() &&
                a.mxfp4 == b.mxfp4 && a.col0 == b.col0 && a.SameSparsity(b) && a.fp8_block_cols == b.fp8_block_cols &&
                a.ggml_type == b.ggml_type);
  LinearSource s = a;
  s.name = a.name + " / " + b.name;
  s.rows = 2 * a.rows;
  s.row_data.clear();
  s.row_scales.clear();
  s.int4_rows.clear();
  const uint32_t shift = static_cast<uint32_t>(a.int4_tensors.size());
  s.int4_tensors.insert(s.int4_tensors.end(), b.int4_tensors.begin(), b.int4_tensors.end());
  for (size_t r = 0; r < a.num_rows(); ++r) {
    if (a.int4()) {
      s.int4_rows.push_back(a.int4_rows[r]);
      s.int4_rows.emplace_back(b.int4_rows[r].first + shift, b.int4_rows[r].second);
    } else {
      s.row_data.push_back(a.row_data[r]);
      s.row_data.push_back(b.row_data[r]);
      if (a.nm_bitmask || a.fp8_block_cols > 0) {  // per-row bitmask bytes or FP8 scales
        s.row_scales.push_back(a.row_scales[r]);
        s.row_scales.push_back(b.row_scales[r]);
      }
    }
  }
  TESSERA_CHECK(!a.mxfp4);  // no interleaved MXFP4 sources (gpt-oss stores gate_up fused)
  s.mapped.insert(s.mapped.end(), b.mapped.begin(), b.mapped.end());
  return s;
}

void LinearSource::Append(const LinearSource& next) {
  TESSERA_CHECK(next.rows == rows && next.cols == cols && next.int4() == int4() && next.mxfp4 == mxfp4 &&
                next.col0 == col0 && SameSparsity(next) && next.fp8_block_cols == fp8_block_cols &&
                next.ggml_type == ggml_type);
  const uint32_t shift = static_cast<uint32_t>(int4_tensors.size());
  int4_tensors.insert(int4_tensors.end(), next.int4_tensors.begin(), next.int4_tensors.end());
  for (const auto& [t, r] : next.int4_rows) int4_rows.emplace_back(t + shift, r);
  row_data.insert(row_data.end(), next.row_data.begin(), next.row_data.end());
  row_scales.insert(row_scales.end(), next.row_scales.begin(), next.row_scales.end());
  mapped.insert(mapped.end(), next.mapped.begin(), next.mapped.end());
  count += next.count;
}

size_t LinearSource::RowBytes() const {
  if (ggml_type >= 0) {
    const GgmlTypeInfo& type = *FindGgmlType(static_cast<uint32_t>(ggml_type));
    return static_cast<size_t>(cols / type.block_size) * type.block_bytes;
  }
  return mxfp4 ? static_cast<size_t>(cols / 2) : static_cast<size_t>(cols) * DTypeSize(dtype);
}

bool LinearSource::Contiguous() const {
  const size_t row = RowBytes(), scale_row = static_cast<size_t>(cols / kMxfp4BlockSize);
  for (size_t i = 1; i < row_data.size(); ++i) {
    if (row_data[i] != row_data[i - 1] + row) return false;
    if (mxfp4 && row_scales[i] != row_scales[i - 1] + scale_row) return false;
  }
  return true;
}

LinearFormat ChooseLinearFormat(const LinearSource& source, const LinearPolicy& policy) {
  // N:M rows: held sparse (bf16 as stored, int8 under --dense int8) unless the policy turns the
  // sparse kernels off; bitmask-compressed rows have no dense form here, so they stay sparse.
  if (source.nm_group > 0 && (policy.sparse || source.nm_bitmask)) {
    if (policy.fast && policy.dense_int8 && source.cols % static_cast<int64_t>(kQ8Block) == 0) return LinearFormat::kNmInt8;
    if (source.dtype == DType::kBF16 || source.nm_bitmask) return LinearFormat::kNmBf16;
  }
  if (source.mxfp4) return policy.fast ? LinearFormat::kMxfp4Q8 : LinearFormat::kMxfp4;
  if (source.ggml_type >= 0) {  // GGUF blocks: as stored, or against q8 activations where a form exists
    const auto type = static_cast<uint32_t>(source.ggml_type);
    const bool whole = source.cols % static_cast<int64_t>(kQ8Block) == 0;
    if (policy.fast && GgmlQ8Supported(type) && source.cols % static_cast<int64_t>(GgmlQ8RowBlock(type)) == 0) {
      return LinearFormat::kGgmlQ8;
    }
    return policy.fast && policy.dense_int8 && whole ? LinearFormat::kInt8 : LinearFormat::kGgml;
  }
  if (source.dtype == DType::kF8E4M3) {  // codes as stored (exact or bf16 activations), or int8 rows
    if (!policy.fast) return LinearFormat::kFp8;
    return policy.dense_int8 && source.cols % static_cast<int64_t>(kQ8Block) == 0 ? LinearFormat::kInt8
                                                                                 : LinearFormat::kFp8Bf16;
  }
  if (source.int4()) {
    const Int4Stored& t = source.int4_tensors.front();
    return policy.fast && Int4Q8Ok(static_cast<size_t>(source.cols), static_cast<size_t>(t.group)) ? LinearFormat::kInt4Q8
                                                                                                  : LinearFormat::kInt4;
  }
  // int8 rows need whole 32-value activation blocks; other matrices stay as stored.
  if (policy.fast && policy.dense_int8 && source.cols % static_cast<int64_t>(kQ8Block) == 0) return LinearFormat::kInt8;
  switch (source.dtype) {
    case DType::kF16: return LinearFormat::kF16;
    case DType::kF32: return LinearFormat::kF32;
    default: return LinearFormat::kBf16;
  }
}

std::unique_ptr<LinearWeights> LoadLinear(const LinearSource& source, LinearFormat format, const std::string& where,
                                          bool borrow) {
  TESSERA_CHECK(source.num_rows() == static_cast<size_t>(source.count * source.rows));
  return RowOf(format).make(source, format, where, borrow);
}

void GatherRows(const LinearSource& source, bool scales, size_t row_bytes, uint8_t* dst) {
  const std::vector<const uint8_t*>& rows = scales ? source.row_scales : source.row_data;
  if (row_bytes == 0) return;  // an empty tensor-parallel slice (no columns): dst may be null
  GlobalPool().ParallelFor(rows.size(), 256, [&](size_t begin, size_t end) {
    for (size_t r = begin; r < end; ++r) std::memcpy(dst + r * row_bytes, rows[r], row_bytes);
  });
}

void MultiplyDecodedRows(const float* x, size_t m, size_t k, size_t col_begin, size_t col_end, const float* bias,
                         float* y, size_t ldy, const std::function<void(size_t row, float* out)>& decode) {
  // Rows decoded per matmul_f32 call: few for decode (their floats stay in L1/L2 between the
  // decode and the multiply), more for prefill (the GEMM path packs panels per call).
  const size_t chunk = m <= 9 ? 8 : 64;
  thread_local std::vector<float> decoded;  // not the kernels' scratch: matmul_f32 uses that
  if (decoded.size() < chunk * k) decoded.resize(chunk * k);
  for (size_t j0 = col_begin; j0 < col_end; j0 += chunk) {
    const size_t n = col_end - j0 < chunk ? col_end - j0 : chunk;
    for (size_t r = 0; r < n; ++r) decode(j0 + r, &decoded[r * k]);
    ActiveKernels().matmul_f32(x, m, k, decoded.data(), 0, n, bias ? bias + j0 : nullptr, y + j0, ldy);
  }
}

void ReleaseSource(const LinearSource& source) {
  if (source.shared) return;
  for (const auto& [data, bytes] : source.mapped) ReleaseMappedRange(data, bytes);
}

void MultiplyGroup(std::span<const LinearOutput> outputs, const float* x, size_t m, Q8Activations& xq) {
  if (outputs.empty() || m == 0) return;
  // Column offsets of each matrix in the concatenation; a format with a column grain (q8 groups)
  // needs its range to start on one, else the matrices run one by one.
  std::vector<size_t> offset(outputs.size() + 1, 0);
  bool aligned = true, q8 = false;
  const size_t k = static_cast<size_t>(outputs[0].weights->cols());
  for (size_t i = 0; i < outputs.size(); ++i) {
    const LinearWeights& w = *outputs[i].weights;
    TESSERA_CHECK(static_cast<size_t>(w.cols()) == k);
    offset[i + 1] = offset[i] + static_cast<size_t>(w.rows());
    aligned = aligned && offset[i] % w.column_grain() == 0;
    q8 = q8 || w.needs_q8();
  }
  if (!aligned && outputs.size() > 1) {
    for (const LinearOutput& o : outputs) MultiplyGroup(std::span<const LinearOutput>(&o, 1), x, m, xq);
    return;
  }
  double bytes = 0.0;
  for (const LinearOutput& o : outputs) bytes += o.weights->BytesPerMatrix();
  const double ops = 2.0 * static_cast<double>(m) * static_cast<double>(k) * static_cast<double>(offset.back());
  const ProfileScope scope(ProfileLinearCategory::Current(), LinearFormatName(outputs[0].weights->format()), bytes, ops,
                           q8 ? ProfileArithmetic::kInt8 : ProfileArithmetic::kF32);
  if (q8 && xq.k == 0) {
    const ProfileScope quantize("quantize", "q8");
    QuantizeQ8(x, m, k, k, xq);  // once for every matrix that reads x
  }
  TESSERA_CHECK(!q8 || (xq.m == m && xq.k == k));
  const Q8Rows rows = q8 ? xq.rows() : Q8Rows{};
  ParallelColumns(offset.back(), [&](size_t begin, size_t end) {
    for (size_t i = 0; i < outputs.size(); ++i) {
      const size_t b = std::max(begin, offset[i]), e = std::min(end, offset[i + 1]);
      if (b >= e) continue;
      const LinearOutput& o = outputs[i];
      o.weights->Multiply(o.matrix, x, &rows, m, b - offset[i], e - offset[i], o.bias, o.y,
                          o.ldy != 0 ? o.ldy : static_cast<size_t>(o.weights->rows()));
    }
  });
}

void MultiplyEach(const LinearWeights& w, const float* x, size_t m, float* y, size_t y_stride, size_t ldy) {
  const size_t count = static_cast<size_t>(w.count()), k = static_cast<size_t>(w.cols());
  if (count == 0 || m == 0) return;
  const ProfileScope scope(ProfileLinearCategory::Current(), LinearFormatName(w.format()),
                           static_cast<double>(count) * w.BytesPerMatrix(),
                           2.0 * static_cast<double>(count * m * k) * static_cast<double>(w.rows()),
                           w.needs_q8() ? ProfileArithmetic::kInt8 : ProfileArithmetic::kF32);
  Q8Activations xq;
  if (w.needs_q8()) {
    const ProfileScope quantize("quantize", "q8");
    QuantizeQ8(x, count * m, k, k, xq);  // row by row: the same rows as quantizing each matrix's input
  }
  const size_t blocks = k / kQ8Block;
  GlobalPool().Run(count, [&](size_t e, int) {
    Q8Rows rows{};
    if (w.needs_q8()) rows = Q8Rows{&xq.q[e * m * k], &xq.d[e * m * blocks], &xq.sum[e * m * blocks]};
    w.Multiply(static_cast<int64_t>(e), x + e * m * k, &rows, m, 0, static_cast<size_t>(w.rows()), nullptr,
               y + e * y_stride, ldy);
  });
}

void Multiply(const LinearWeights& w, const float* x, size_t m, Q8Activations& xq, const float* bias, float* y,
              int64_t matrix, size_t ldy) {
  const LinearOutput out{&w, matrix, bias, y, ldy};
  MultiplyGroup(std::span<const LinearOutput>(&out, 1), x, m, xq);
}

}  // namespace tessera
