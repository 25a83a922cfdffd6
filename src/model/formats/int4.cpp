// int4 matrices: group-quantized 4-bit weights as AutoAWQ GEMM and compressed-tensors
// pack-quantized checkpoints store them (linear.h Int4Layout), repacked at load into the one
// layout of kernels/int4.h (codes, zeros and float32 scales per 16-row group) and multiplied
// exactly against float32 activations (int4: the dequantized weights (q - z) s, exact in f32)
// or against q8 activations (int4-q8). The mapped checkpoint pages are released once copied.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/buffer.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/int4.h"
#include "kernels/kernels.h"
#include "model/formats/formats.h"

namespace tessera {
namespace {

// AutoAWQ's nibble of logical column 8c + j within word c (quantization.md B.2: the inverse of
// the pack order 0, 2, 4, 6, 1, 3, 5, 7).
constexpr int kAwqReverseOrder[8] = {0, 4, 1, 5, 2, 6, 3, 7};

uint32_t Word(const uint8_t* base, size_t index) {
  uint32_t w;
  std::memcpy(&w, base + 4 * index, 4);
  return w;
}

// Reads one stored module's codes, zeros and scales in logical (row j of W [out, in], column c)
// coordinates.
struct Int4Reader {
  const Int4Stored& t;
  // Codes of row j, columns [col0, col0 + n) into q, for the natural (row-major, eight columns per
  // word) layout; AutoAWQ's transposed one is read across many rows at once (ReadCodes).
  void NaturalCodes(int64_t j, int64_t col0, size_t n, uint8_t* q) const {
    const uint8_t* p = t.codes + static_cast<size_t>(j * (t.in / 8) + col0 / 8) * 4;
    for (size_t c = 0; c < n; c += 8, p += 4) {
      uint32_t w;
      std::memcpy(&w, p, 4);
      for (int i = 0; i < 8; ++i) q[c + i] = static_cast<uint8_t>((w >> (4 * i)) & 0xF);
    }
  }
  int Zero(int64_t j, int64_t g) const {
    const int64_t groups = t.in / t.group;
    if (t.layout == Int4Layout::kAutoAwqGemm) {
      return static_cast<int>(Word(t.zeros, static_cast<size_t>(g * (t.out / 8) + j / 8)) >> (4 * kAwqReverseOrder[j % 8])) & 0xF;
    }
    if (t.zeros == nullptr) return 8;  // symmetric: signed codes q + 8 around 0
    return static_cast<int>(Word(t.zeros, static_cast<size_t>((j / 8) * groups + g)) >> (4 * (j % 8))) & 0xF;
  }
  float Scale(int64_t j, int64_t g) const {
    const int64_t groups = t.in / t.group;
    const size_t index = static_cast<size_t>(t.layout == Int4Layout::kAutoAwqGemm ? g * t.out + j : j * groups + g);
    return ElementToF32(t.scale_dtype, t.scales + index * DTypeSize(t.scale_dtype));
  }
};

// Codes of the source's rows [row, row + count) into q [count][k]: AutoAWQ rows column by column
// across all of them (words shared by neighbouring rows are read while cached), the natural
// layout row by row (its rows are contiguous).
void ReadCodes(const LinearSource& source, size_t row, size_t count, size_t k, uint8_t* q) {
  struct Cursor {
    const uint8_t* p;
    size_t stride;
    int shift;
  };
  std::vector<Cursor> awq;
  for (size_t r = 0; r < count; ++r) {
    const auto [which, j] = source.int4_rows[row + r];
    const Int4Stored& t = source.int4_tensors[which];
    if (t.layout != Int4Layout::kAutoAwqGemm) {
      Int4Reader{t}.NaturalCodes(j, source.col0, k, q + r * k);
      continue;
    }
    const size_t stride = static_cast<size_t>(t.out / 8) * 4;
    awq.push_back({t.codes + static_cast<size_t>(source.col0) * stride + static_cast<size_t>(j / 8) * 4, stride,
                   4 * kAwqReverseOrder[j % 8]});
  }
  if (awq.empty()) return;
  TESSERA_CHECK(awq.size() == count);  // one module's rows are all stored alike
  for (size_t c = 0; c < k; ++c) {
    for (size_t r = 0; r < count; ++r) {
      uint32_t w;
      std::memcpy(&w, awq[r].p + c * awq[r].stride, 4);
      q[r * k + c] = static_cast<uint8_t>((w >> awq[r].shift) & 0xF);
    }
  }
}

class Int4Linear final : public LinearWeights {
 public:
  Int4Linear(const LinearSource& source, bool q8, const std::string& where)
      : LinearWeights(q8 ? LinearFormat::kInt4Q8 : LinearFormat::kInt4, source.count, source.rows, source.cols) {
    const size_t n = static_cast<size_t>(rows()), k = static_cast<size_t>(cols());
    group_ = static_cast<size_t>(source.int4_tensors.front().group);
    for (const Int4Stored& t : source.int4_tensors) {
      TESSERA_CHECK(static_cast<size_t>(t.group) == group_);
    }
    if (!Int4ShapeOk(k, group_) || source.col0 % static_cast<int64_t>(group_) != 0) {
      Fail(where, ": tensor '", source.name, "': columns [", source.col0, ", ", source.col0 + source.cols,
           ") are not whole quantization groups of ", group_, " (and a multiple of 8)");
    }
    TESSERA_CHECK(!q8 || Int4Q8Ok(k, group_));
    code_stride_ = Int4CodeBytes(n, k);
    meta_stride_ = Int4GroupEntries(n, k, group_);
    const size_t E = static_cast<size_t>(count());
    codes_ = ByteBuffer(std::max<size_t>(1, E * code_stride_));
    zeros_ = ByteBuffer(std::max<size_t>(1, E * meta_stride_));
    scales_ = ByteBuffer(std::max<size_t>(1, E * meta_stride_ * sizeof(float)));
    // One task per kBlockGroups packed groups of 16 rows of one matrix: the rows' codes read
    // column by column across the block (AutoAWQ stores them transposed, so neighbouring rows
    // share each word and cache line), then each row packed into its group's own bytes (padding
    // rows stay zero).
    constexpr size_t kBlockGroups = 8;
    const size_t groups = Q8PaddedColumns(n) / kQ8Group, blocks = (groups + kBlockGroups - 1) / kBlockGroups;
    const size_t tasks = blocks * E, per_row = k / group_;
    std::vector<int64_t> bad(tasks, -1);
    GlobalPool().ParallelFor(tasks, 1, [&](size_t begin, size_t end) {
      std::vector<uint8_t> q(kBlockGroups * kQ8Group * k), z(per_row);
      std::vector<float> s(per_row);
      for (size_t task = begin; task < end; ++task) {
        const size_t e = task / blocks, g0 = task % blocks * kBlockGroups;
        const size_t r0 = g0 * kQ8Group, r_pad = std::min(groups, g0 + kBlockGroups) * kQ8Group, r1 = std::min(n, r_pad);
        uint8_t* codes = codes_.data() + e * code_stride_;
        uint8_t* zeros = zeros_.data() + e * meta_stride_;
        float* scales = scales_.as<float>() + e * meta_stride_;
        std::memset(codes + r0 * k / 2, 0, (r_pad - r0) * k / 2);
        std::fill(zeros + r0 * per_row, zeros + r_pad * per_row, uint8_t{0});
        std::fill(scales + r0 * per_row, scales + r_pad * per_row, 0.0f);
        ReadCodes(source, e * n + r0, r1 - r0, k, q.data());
        const int64_t t0 = source.col0 / static_cast<int64_t>(group_);
        for (size_t r = r0; r < r1; ++r) {
          const auto [which, j] = source.int4_rows[e * n + r];
          const Int4Reader reader{source.int4_tensors[which]};
          for (size_t g = 0; g < per_row; ++g) {
            z[g] = static_cast<uint8_t>(reader.Zero(j, t0 + static_cast<int64_t>(g)));
            s[g] = reader.Scale(j, t0 + static_cast<int64_t>(g));
            if (!std::isfinite(s[g]) && bad[task] < 0) bad[task] = static_cast<int64_t>(r);
          }
          PackInt4Row(r, k, group_, q.data() + (r - r0) * k, z.data(), s.data(), codes, zeros, scales);
        }
      }
    });
    for (size_t task = 0; task < tasks; ++task) {
      if (bad[task] >= 0) {
        Fail(where, ": tensor '", source.name, "'", count() > 1 ? StrCat(" matrix ", task / blocks) : std::string(),
             " row ", bad[task], " has a NaN or infinite scale");
      }
    }
    ReleaseSource(source);
  }

  bool needs_q8() const override { return format() == LinearFormat::kInt4Q8; }
  size_t column_grain() const override { return kQ8Group; }

  void Multiply(int64_t matrix, const float* x, const Q8Rows* xq, size_t m, size_t col_begin, size_t col_end,
                const float* bias, float* y, size_t ldy) const override {
    const Int4Weights w{codes_.data() + matrix * code_stride_, zeros_.data() + matrix * meta_stride_,
                        scales_.as<float>() + matrix * meta_stride_, group_};
    if (needs_q8()) {
      ActiveKernels().matmul_q8_int4(*xq, m, static_cast<size_t>(cols()), w, col_begin, col_end, bias, y, ldy);
    } else {
      ActiveKernels().matmul_int4(x, m, static_cast<size_t>(cols()), w, col_begin, col_end, bias, y, ldy);
    }
  }

  // Codes, plus one zero byte and one f32 scale per group of each row.
  double BytesPerMatrix() const override {
    const double weights = static_cast<double>(rows()) * static_cast<double>(cols());
    return weights / 2 + weights / static_cast<double>(group_) * (1 + sizeof(float));
  }

 private:
  size_t group_ = 0, code_stride_ = 0, meta_stride_ = 0;
  ByteBuffer codes_, zeros_, scales_;
};

}  // namespace

std::unique_ptr<LinearWeights> MakeInt4Linear(const LinearSource& source, bool q8, const std::string& where) {
  TESSERA_CHECK(source.int4());
  return std::make_unique<Int4Linear>(source, q8, where);
}

}  // namespace tessera
