// The one linear-weight path: every matmul of every layer (attention, MLP, experts, router,
// lm_head) multiplies through a LinearWeights, which owns a stack of `count` matrices
// W_e [rows, cols] (y = x W_e^T + bias; count 1 for a plain projection, E for a layer's experts)
// in one format. The formats, one file each under src/model/formats/:
//   bf16, f16, f32   as stored (float32 activations, the exact kernels), copied once into
//                    huge-page buffers (or borrowed from the mapping: a tied lm_head)
//   int8             per-row int8 in the q8 layout (kernels/q8.h), quantized at load (fast path)
//   mxfp4            the checkpoint's E2M1 blocks + E8M0 scales, in place (exact path)
//   mxfp4-q8         the same weights repacked into the q8 layout (fast path, int8 activations)
//   int4             group-quantized 4-bit weights (AutoAWQ GEMM, compressed-tensors
//                    pack-quantized) repacked into kernels/int4.h's layout, float32 activations
//   int4-q8          the same layout against int8 activations (fast path, group size % 32 == 0)
//   nm-bf16          N:M sparse rows: kept bf16 values + a bit per column (kernels/nm_linear.h),
//                    from dense-with-zeros rows or compressed-tensors sparse-24-bitmask (exact)
//   nm-int8          the same rows quantized as the int8 format, int8 activations (fast path)
//   ggml             a GGUF file's block-quantized rows (q8_0, q4_K, ...) as stored, decoded
//                    exactly to float32 as they are multiplied (io/ggml_quants.h)
//   ggml-q8          q8_0, q4_0, q4_K, q5_K, q6_K rows repacked at about the file's size for
//                    int8 activations
//                    (kernels/ggml_q8.h; fast path)
//   fp8              DeepSeek-V3's e4m3fn codes with float32 scales per block of columns (and
//                    rows), rows decoded exactly to float32 as they are multiplied (both paths)
// ChooseLinearFormat is the one place that picks a format for a matrix, from its stored dtype and
// the precision options; LoadLinear builds it from a LinearSource (the stored rows, already
// sliced for tensor parallelism), releasing the mapped pages it copied, so one copy of every
// weight stays resident. Adding a format (AWQ int4, N:M sparse) is one new file with its factory
// plus one row in linear.cpp's format table; the layers only see this interface.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "io/safetensors.h"
#include "kernels/q8.h"

namespace tessera {

enum class LinearFormat : uint8_t {
  kBf16, kF16, kF32, kInt8, kMxfp4, kMxfp4Q8, kInt4, kInt4Q8, kNmBf16, kNmInt8, kFp8, kFp8Bf16, kGgml, kGgmlQ8,
};
std::string_view LinearFormatName(LinearFormat format);
// Every format, in the enum's order.
const std::vector<LinearFormat>& LinearFormats();
// A format's matrices have a multiple of this many columns (32 for the q8 and MXFP4 blocks, 1 for
// the float formats).
int64_t LinearFormatColumnBlock(LinearFormat format);

class LinearWeights {
 public:
  virtual ~LinearWeights() = default;
  LinearFormat format() const { return format_; }
  int64_t count() const { return count_; }
  int64_t rows() const { return rows_; }  // n: outputs per matrix
  int64_t cols() const { return cols_; }  // k: inputs
  // Whether Multiply reads the q8 form of the input (QuantizeQ8 of x) rather than x itself.
  virtual bool needs_q8() const { return false; }
  // Column ranges passed to Multiply must start at multiples of this (q8 groups of 16 columns).
  virtual size_t column_grain() const { return 1; }
  // y[i, j] (i < m, j in [col_begin, col_end), row stride ldy) = x_i . W_matrix[j] + bias[j]
  // (bias [rows] or null). x: m rows of cols() floats (row stride cols()); xq: the same rows
  // quantized, read only when needs_q8() (then non-null). Row results do not depend on m or on
  // the column split (batch invariance).
  virtual void Multiply(int64_t matrix, const float* x, const Q8Rows* xq, size_t m, size_t col_begin, size_t col_end,
                        const float* bias, float* y, size_t ldy) const = 0;
  // Bytes one multiply of one matrix reads: its resident size (decode is bound by them).
  virtual double BytesPerMatrix() const = 0;

 protected:
  LinearWeights(LinearFormat format, int64_t count, int64_t rows, int64_t cols)
      : format_(format), count_(count), rows_(rows), cols_(cols) {}

 private:
  LinearFormat format_;
  int64_t count_, rows_, cols_;
};

// How a checkpoint stores a group-quantized 4-bit module (../shared/reference/quantization.md B.2,
// dense-decoders.md §10), for W [out, in] with groups of `group` inputs:
//   kAutoAwqGemm    qweight I32 [in, out/8] (nibble i of word c = column 8c + (0,2,4,6,1,3,5,7)[i]),
//                   qzeros I32 [in/G, out/8] (same packing, zeros as is), scales F16 [in/G, out]
//   kPackQuantized  weight_packed I32 [out, in/8] (natural nibble order, q + 8), weight_scale
//                   [out, in/G] (F16 / BF16 / F32), weight_zero_point I32 [out/8, in/G] packed along
//                   out (z + 8; absent when symmetric: z = 8)
enum class Int4Layout : uint8_t { kAutoAwqGemm, kPackQuantized };
struct Int4Stored {
  Int4Layout layout;
  const uint8_t* codes = nullptr;
  const uint8_t* zeros = nullptr;  // null: symmetric (every zero 8)
  const uint8_t* scales = nullptr;
  DType scale_dtype = DType::kF16;
  int64_t out = 0, in = 0, group = 0;
};

// Stored matrices to build a LinearWeights from: `count` matrices of `rows` x `cols`, matrix e's
// row r starting at row_data[e * rows + r] (any order of the stored rows: a tensor-parallel
// slice, gate and up rows interleaved from two tensors). Float dtypes: `cols` elements of `dtype`
// per row. MXFP4 (dtype U8): cols / 2 code bytes per row at row_data, cols / 32 scale bytes at
// row_scales; cols is then a multiple of 32. int4 (int4_tensors non-empty): matrix e's row r is
// stored row int4_rows[e * rows + r].second of module int4_tensors[.first], columns
// [col0, col0 + cols) of it (whole groups).
struct LinearSource {
  std::string name;  // the tensor (or tensors) in errors
  DType dtype = DType::kBF16;
  bool mxfp4 = false;
  int64_t count = 1, rows = 0, cols = 0;
  std::vector<const uint8_t*> row_data;
  std::vector<const uint8_t*> row_scales;  // MXFP4 only
  std::vector<Int4Stored> int4_tensors;
  std::vector<std::pair<uint32_t, int64_t>> int4_rows;
  int64_t col0 = 0;  // int4 and nm_bitmask only
  // FP8 (dtype F8_E4M3): row_scales[i] points at stored row i's float32 scales, one per
  // fp8_block_cols columns from the row's first column (deepseek.md §7: scale rows repeat over a
  // block of rows).
  int64_t fp8_block_cols = 0;
  bool int4() const { return !int4_tensors.empty(); }
  // N:M sparse rows (model/sparse_scheme.h): every whole group of nm_group columns holds at most
  // nm_kept non-zeros (nm_group 0: no pattern). Float rows are then dense with zeros; with
  // nm_bitmask (compressed-tensors sparse-24-bitmask) row_data points at a stored row's kept
  // values (dtype, in column order, from the row's column 0), row_scales at its bitmask bytes,
  // and the matrix is its dense columns [col0, col0 + cols).
  int nm_kept = 0, nm_group = 0;
  bool nm_bitmask = false;
  // A ggml block type (GGUF q8_0, q4_K, ...; io/ggml_quants.h): each row is cols / block
  // whole blocks at row_data (dtype U8); -1 otherwise.
  int32_t ggml_type = -1;
  bool SameSparsity(const LinearSource& other) const {
    return nm_kept == other.nm_kept && nm_group == other.nm_group && nm_bitmask == other.nm_bitmask;
  }
  // Mapped ranges the matrices were read from; released once copied unless `shared` (another
  // user, e.g. the embedding table behind a tied lm_head, still reads them).
  std::vector<std::pair<const uint8_t*, size_t>> mapped;
  bool shared = false;

  // Rows of one contiguous stored tensor [count, rows, cols] (or [rows, cols]) starting at
  // `data`, optionally sliced to rows [row0, row0 + nrows) and columns [col0, col0 + ncols) of
  // each matrix (col0, ncols multiples of 32 for MXFP4).
  static LinearSource Tensor(std::string name, DType dtype, const uint8_t* data, int64_t count, int64_t rows,
                             int64_t cols, int64_t row0 = 0, int64_t nrows = -1, int64_t col0 = 0, int64_t ncols = -1);
  // The same for a stored 2-D tensor of any dtype or ggml block type, its rows in its row_order
  // (GGUF q/k rows); col0 and ncols whole blocks for block types.
  static LinearSource View(const TensorView& tensor, int64_t row0 = 0, int64_t nrows = -1, int64_t col0 = 0,
                           int64_t ncols = -1);
  static LinearSource Mxfp4Tensor(std::string name, const uint8_t* codes, const uint8_t* scales, int64_t count,
                                  int64_t rows, int64_t cols, int64_t row0 = 0, int64_t nrows = -1, int64_t col0 = 0,
                                  int64_t ncols = -1);
  // Rows [row0, row0 + nrows) and columns [col0, col0 + ncols) (multiples of the group size) of
  // one stored int4 module; `mapped` lists its tensors' bytes.
  static LinearSource Int4Module(std::string name, const Int4Stored& stored, std::vector<std::pair<const uint8_t*, size_t>> mapped,
                                 int64_t row0 = 0, int64_t nrows = -1, int64_t col0 = 0, int64_t ncols = -1);
  // Rows [row0, row0 + nrows) and dense columns [col0, col0 + ncols) of a compressed-tensors
  // sparse-24-bitmask module W [out, in]: kept values [out, in/2] of `dtype`, bitmask bytes
  // [out, ceil(in/8)]; `mapped` lists both tensors' bytes.
  static LinearSource Bitmask24Module(std::string name, DType dtype, const uint8_t* values, const uint8_t* bitmask,
                                      int64_t out, int64_t in, std::vector<std::pair<const uint8_t*, size_t>> mapped,
                                      int64_t row0 = 0, int64_t nrows = -1, int64_t col0 = 0, int64_t ncols = -1);
  // Rows a_0, b_0, a_1, b_1, ...: gate and up interleaved (same count, rows, cols and kind).
  static LinearSource Interleave(LinearSource a, const LinearSource& b);
  // Appends `next`'s matrices after this source's (stacked experts; same rows, cols and kind).
  void Append(const LinearSource& next);
  // Whether the rows of every matrix follow each other in memory (a format may then borrow them).
  bool Contiguous() const;
  size_t RowBytes() const;  // bytes of one stored row (MXFP4: the codes)
  size_t num_rows() const { return int4() ? int4_rows.size() : row_data.size(); }
};

// How matrices are held, from the model options (model.h Precision / DenseWeights).
struct LinearPolicy {
  bool fast = false;        // int8 activations where a format has them (mxfp4 -> mxfp4-q8)
  bool dense_int8 = false;  // float matrices -> int8 (fast only)
  bool sparse = true;       // N:M rows -> the sparse formats (nm-bf16 / nm-int8); false: dense
};

// The one place that picks a format: MXFP4 sources stay MXFP4 (q8-repacked when fast), int4
// sources int4 (int4-q8 when fast and their groups are whole q8 blocks), float sources keep their
// dtype (bf16 / f16 / f32) unless policy.dense_int8 and their rows are whole 32-value blocks (tiny
// test models' odd widths stay as stored); N:M sources (bf16, or bitmask-compressed) take the
// sparse formats, nm-int8 where the dense ones would be int8.
LinearFormat ChooseLinearFormat(const LinearSource& source, const LinearPolicy& policy);

// Builds `format` from `source` (on GlobalPool()); throws tessera::Error naming source.name and
// `where` (the checkpoint) when the weights cannot be held so (NaN scales for mxfp4-q8, rows
// with NaN or inf for int8, k not a multiple of 32 for the q8 formats). `borrow`: a format that
// can (bf16, f16, f32, mxfp4 on contiguous rows) keeps pointing into the mapping instead of
// copying.
std::unique_ptr<LinearWeights> LoadLinear(const LinearSource& source, LinearFormat format, const std::string& where,
                                          bool borrow = false);

// One output of a grouped multiply: matrix `matrix` of `weights` into y, row stride ldy (0: its
// rows()).
struct LinearOutput {
  const LinearWeights* weights;
  int64_t matrix;
  const float* bias;
  float* y;
  size_t ldy = 0;
};

// Several matrices that read the same x [m, k] as one column-parallel dispatch on GlobalPool()
// (the small k/v projections alone would not keep the threads busy). xq: x quantized, made here
// on first need (empty on entry) and reusable by the caller afterwards.
void MultiplyGroup(std::span<const LinearOutput> outputs, const float* x, size_t m, Q8Activations& xq);
// Every matrix e of `w` on its own input: y_e [m, rows] = x_e W_e^T with x_e = x + e m cols()
// (row-major [count, m, cols]) and y_e at y + e y_stride (row stride ldy), as one dispatch on
// GlobalPool() (DeepSeek MLA's per-head matrices).
void MultiplyEach(const LinearWeights& w, const float* x, size_t m, float* y, size_t y_stride, size_t ldy);
// One matrix: y [m, rows] = x W^T + bias.
void Multiply(const LinearWeights& w, const float* x, size_t m, Q8Activations& xq, const float* bias, float* y,
              int64_t matrix = 0, size_t ldy = 0);

}  // namespace tessera
