#include "kernels/structured_spmm.h"

#include <array>
#include <cmath>
#include <utility>
#include <string>

#include "core/dtype.h"
#include "core/error.h"

namespace tessera {
namespace {

bool IsInt(SpmmDType t) { return t == SpmmDType::kInt8; }
int Bits(SpmmDType t) { return t == SpmmDType::kF32 ? 32 : t == SpmmDType::kBF16 ? 16 : 8; }

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

// (m, n, k) = (0, 1, 2): the dims of the sparse operand and of the dense one.
struct DimMapping {
  int sparse[2], dense[2];
};
DimMapping MapDims(bool rhs_sparse, bool rhs_transpose) {
  constexpr int m = 0, n = 1, k = 2;
  if (rhs_sparse) return rhs_transpose ? DimMapping{{n, k}, {m, k}} : DimMapping{{k, n}, {m, k}};
  return rhs_transpose ? DimMapping{{m, k}, {n, k}} : DimMapping{{m, k}, {k, n}};
}

// The value default_value takes in the sparse operand's dtype.
float FillValue(double value, SpmmDType dtype) {
  switch (dtype) {
    case SpmmDType::kF32: return static_cast<float>(value);
    case SpmmDType::kBF16: return Bf16ToF32(F32ToBf16(static_cast<float>(value)));
    case SpmmDType::kInt8: {
      const double t = std::trunc(value);
      return static_cast<float>(t < -128 ? -128 : t > 127 ? 127 : t);
    }
  }
  return 0.0f;
}

}  // namespace

const char* SpmmDTypeName(SpmmDType dtype) {
  switch (dtype) {
    case SpmmDType::kF32: return "float32";
    case SpmmDType::kBF16: return "bfloat16";
    case SpmmDType::kInt8: return "int8";
  }
  return "?";
}

SpmmTensor SpmmTensor::F32(std::vector<int64_t> shape, std::vector<float> values) {
  SpmmTensor t;
  t.dtype = SpmmDType::kF32;
  t.shape = std::move(shape);
  t.f32 = std::move(values);
  return t;
}
SpmmTensor SpmmTensor::BF16(std::vector<int64_t> shape, std::vector<uint16_t> values) {
  SpmmTensor t;
  t.dtype = SpmmDType::kBF16;
  t.shape = std::move(shape);
  t.bf16 = std::move(values);
  return t;
}
SpmmTensor SpmmTensor::Int8(std::vector<int64_t> shape, std::vector<int8_t> values) {
  SpmmTensor t;
  t.dtype = SpmmDType::kInt8;
  t.shape = std::move(shape);
  t.i8 = std::move(values);
  return t;
}
size_t SpmmTensor::size() const {
  return dtype == SpmmDType::kF32 ? f32.size() : dtype == SpmmDType::kBF16 ? bf16.size() : i8.size();
}
float SpmmTensor::AsFloat(size_t i) const {
  return dtype == SpmmDType::kF32 ? f32[i] : dtype == SpmmDType::kBF16 ? Bf16ToF32(bf16[i]) : static_cast<float>(i8[i]);
}
int32_t SpmmTensor::AsInt(size_t i) const { return i8[i]; }

SpmmDType SpmmOutDType(SpmmDType a, SpmmDType b) {
  if (a == b) return a;
  if (IsInt(a) == IsInt(b)) return Bits(a) > Bits(b) ? a : b;
  return SpmmDType::kF32;
}

int SpmmSparseDim(bool rhs_sparse, bool contract_sparse, bool rhs_transpose) {
  if (rhs_sparse) return contract_sparse ? (rhs_transpose ? 1 : 0) : (rhs_transpose ? 0 : 1);
  return contract_sparse ? 1 : 0;
}

SpmmTensor StructuredSpmm(const SpmmOptions& o, const SpmmTensor& nz, const std::vector<int64_t>& md_shape,
                          std::span<const int32_t> md, const SpmmTensor& mat) {
  const int x = o.kept, y = o.group;
  const int sparse_dim = SpmmSparseDim(o.rhs_sparse, o.contract_sparse, o.rhs_transpose);
  // Sparsity.
  if (!(y > x && x > 0)) Fail("Invalid sparsity: (", x, ", ", y, ")");
  if (y > 16) Fail("Not implemented: when sparsity base is > 16");
  // Ranks.
  if (nz.shape.size() != 3) Fail("Expected nonzeros' rank is 3, got ", nz.shape.size());
  if (md_shape.size() != 3) Fail("Expected metadata's rank is 3, got ", md_shape.size());
  if (mat.shape.size() != 2) Fail("Expected matrix's rank is 2, got ", mat.shape.size());
  // Stride.
  const int64_t stride_multiple = sparse_dim ? 128 : 8 * (32 / Bits(nz.dtype));
  if (o.stride <= 0 || o.stride % stride_multiple != 0) {
    Fail("Expected stride=", o.stride, " is a multiple of ", stride_multiple);
  }
  // Metadata packing.
  const char* name = o.rhs_sparse ? "rhs" : "lhs";
  const int64_t P = NmIndicesPerWord(y);
  if (nz.shape[0] != x) Fail("Expected ", name, " nonzeros shape[0] is ", x, ", got ", nz.shape[0]);
  if (md_shape[0] != x) Fail("Expected ", name, " metadata shape[0] is ", x, ", got ", md_shape[0]);
  if (nz.shape[2] != md_shape[2]) {
    Fail("Expected nonzeros and metadata of ", name, " have same shape[2], got ", nz.shape[2], " vs ", md_shape[2]);
  }
  if (nz.shape[1] % P != 0) Fail("Expected ", name, " rows is a multiple of md_packing=", P, ", got ", nz.shape[1]);
  if (nz.shape[1] / P != md_shape[1]) Fail("Expected ", name, " metadata rows can be perfectly packed by ", P);
  // Sizes.
  int64_t decompressed[2] = {nz.shape[1], nz.shape[2]};
  decompressed[sparse_dim] *= y;
  const DimMapping dims = MapDims(o.rhs_sparse, o.rhs_transpose);
  int64_t mnk[3] = {0, 0, 0};
  for (int i = 0; i < 2; ++i) mnk[dims.sparse[i]] = decompressed[i];
  for (int i = 0; i < 2; ++i) {
    if (mnk[dims.dense[i]] != 0 && mnk[dims.dense[i]] != mat.shape[i]) {
      int64_t lhs_k = mnk[dims.dense[i]], rhs_k = mat.shape[i];
      if (o.rhs_transpose) std::swap(lhs_k, rhs_k);
      Fail("Expected lhs contracting size ", lhs_k, " is equal to rhs contracting size ", rhs_k);
    }
    mnk[dims.dense[i]] = mat.shape[i];
  }
  // Blocks.
  const char* dim_names[3] = {"m", "n", "k"};
  const int64_t blocks[3] = {o.block_m, o.block_n, o.block_k};
  std::vector<int64_t> multiples[3];
  multiples[dims.sparse[sparse_dim]].push_back(o.stride * y);
  multiples[dims.sparse[0]].push_back(P);
  for (int d = 0; d < 3; ++d) {
    if (blocks[d] <= 0) Fail("Expected block_", dim_names[d], "=", blocks[d], " is positive");
    for (int64_t factor : multiples[d]) {
      if (blocks[d] % factor != 0) Fail("Expected block_", dim_names[d], "=", blocks[d], " is a multiple of ", factor);
    }
    if (mnk[d] % blocks[d] != 0) {
      Fail("Expected block_", dim_names[d], "=", blocks[d], " can fully divide output rows ", mnk[d]);
    }
  }
  if (nz.size() != static_cast<size_t>(nz.shape[0] * nz.shape[1] * nz.shape[2])) {
    Fail("structured_spmm: the nonzeros hold ", nz.size(), " values, not those of shape ", ShapeText(nz.shape));
  }
  if (md.size() != static_cast<size_t>(md_shape[0] * md_shape[1] * md_shape[2])) {
    Fail("structured_spmm: the metadata holds ", md.size(), " words, not those of shape ", ShapeText(md_shape));
  }
  if (mat.size() != static_cast<size_t>(mat.shape[0] * mat.shape[1])) {
    Fail("structured_spmm: the matrix holds ", mat.size(), " values, not those of shape ", ShapeText(mat.shape));
  }
  const int64_t m = mnk[0], n = mnk[1], k = mnk[2];
  const SpmmDType out_dtype = o.out_dtype ? *o.out_dtype : SpmmOutDType(mat.dtype, nz.dtype);
  const bool integer = IsInt(out_dtype);

  // The sparse operand, dense, [D0, D1] = decompressed (fill, then each plane's kept slot).
  const int64_t D0 = decompressed[0], D1 = decompressed[1], R = nz.shape[1], C = nz.shape[2];
  const std::array<int64_t, 3> md3 = {md_shape[0], md_shape[1], md_shape[2]};
  const float fill = FillValue(o.default_value, nz.dtype);
  std::vector<float> dense(static_cast<size_t>(D0 * D1), fill);
  const NmSparsity pattern{x, y, static_cast<int>(o.stride)};
  for (int64_t r = 0; r < R; ++r) {
    for (int64_t c = 0; c < C; ++c) {
      const int64_t cpos = sparse_dim == 1 ? c : r;
      for (int64_t plane = 0; plane < x; ++plane) {
        const int32_t j = NmIndexAt(md, md3, y, plane, r, c);
        if (j >= y) continue;  // names no slot of the group (matches none, as upstream's ==)
        const int64_t pos = NmSlotPosition(pattern, cpos, j);
        const int64_t row = sparse_dim == 1 ? r : pos, col = sparse_dim == 1 ? pos : c;
        dense[static_cast<size_t>(row * D1 + col)] = nz.AsFloat(static_cast<size_t>((plane * R + r) * C + c));
      }
    }
  }
  // Both operands as f32, the LHS [m, k] and the RHS transposed [n, k], so every dot walks k.
  std::vector<float> lhs(static_cast<size_t>(m * k)), rhs_t(static_cast<size_t>(n * k));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t kk = 0; kk < k; ++kk) {
      const size_t at = static_cast<size_t>(i * k + kk);
      lhs[at] = o.rhs_sparse ? mat.AsFloat(at) : dense[at];
    }
  }
  for (int64_t kk = 0; kk < k; ++kk) {
    for (int64_t jj = 0; jj < n; ++jj) {
      const size_t from = static_cast<size_t>(o.rhs_transpose ? jj * k + kk : kk * n + jj);
      rhs_t[static_cast<size_t>(jj * k + kk)] = o.rhs_sparse ? dense[from] : mat.AsFloat(from);
    }
  }
  SpmmTensor out;
  out.dtype = out_dtype;
  out.shape = {m, n};
  const size_t count = static_cast<size_t>(m * n);
  if (out_dtype == SpmmDType::kF32) out.f32.resize(count);
  if (out_dtype == SpmmDType::kBF16) out.bf16.resize(count);
  if (out_dtype == SpmmDType::kInt8) out.i8.resize(count);
  for (int64_t i = 0; i < m; ++i) {
    const float* a = &lhs[static_cast<size_t>(i * k)];
    for (int64_t jj = 0; jj < n; ++jj) {
      const float* b = &rhs_t[static_cast<size_t>(jj * k)];
      const size_t at = static_cast<size_t>(i * n + jj);
      if (integer) {
        uint32_t acc = 0;  // int8 values are exact in f32; products and sums in (wrapping) int32
        for (int64_t kk = 0; kk < k; ++kk) {
          acc += static_cast<uint32_t>(static_cast<int32_t>(a[kk]) * static_cast<int32_t>(b[kk]));
        }
        out.i8[at] = static_cast<int8_t>(static_cast<uint8_t>(acc & 0xFF));
      } else {
        float acc = 0.0f;
        for (int64_t kk = 0; kk < k; ++kk) acc += a[kk] * b[kk];
        if (out_dtype == SpmmDType::kF32) out.f32[at] = acc;
        else out.bf16[at] = F32ToBf16(acc);
      }
    }
  }
  return out;
}

}  // namespace tessera
