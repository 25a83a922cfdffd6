// structured_spmm: a dense matrix times an N:M structured sparse one given as kept values and
// packed index metadata (kernels/nm_sparsity.h), in every configuration of tpu-inference's op
// (../shared/reference/sparsity.md §6): the sparse operand is the LHS [m, k] or the RHS ([k, n],
// or [n, k] with rhs_transpose), sparse along the contracting or the non-contracting dimension.
//
// Semantics: result = lhs · rhs (or lhs · rhs^T), the sparse operand rebuilt with default_value
// (converted to its dtype) at every unkept position; where two planes name the same slot the later
// plane wins. Output dtype (unless given): the operands' dtype when equal, f32 for f32 with bf16,
// f32 for an integer with a float; accumulation in int32 for integer outputs (exact), else f32 in
// increasing k. Integer outputs wrap to int8 as a cast from int32 does; bf16 outputs round to
// nearest even.
//
// Validation is upstream's `_verify`, in its order and with its messages, as one-line
// tessera::Errors: the sparsity, the ranks, the stride rule (sparse along the last dim: a multiple
// of 128; along the first: of 8 x the values packed in 32 bits, i.e. 8 / 16 / 32 for f32 / bf16 /
// int8), the nonzeros / metadata shapes, the contracting sizes, and the block sizes (the block
// along the sparse dim a multiple of stride x M, along the sparse operand's first dim a multiple
// of the metadata packing, every dim divisible by its block). The blocks only constrain the
// shapes here: this is the plain reference, which computes the same result for any blocking.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "kernels/nm_sparsity.h"

namespace tessera {

enum class SpmmDType { kF32, kBF16, kInt8 };
const char* SpmmDTypeName(SpmmDType dtype);  // "float32" | "bfloat16" | "int8"

// A row-major tensor of one of the three dtypes (bf16 as its 16-bit pattern).
struct SpmmTensor {
  SpmmDType dtype = SpmmDType::kF32;
  std::vector<int64_t> shape;
  std::vector<float> f32;
  std::vector<uint16_t> bf16;
  std::vector<int8_t> i8;

  static SpmmTensor F32(std::vector<int64_t> shape, std::vector<float> values);
  static SpmmTensor BF16(std::vector<int64_t> shape, std::vector<uint16_t> values);
  static SpmmTensor Int8(std::vector<int64_t> shape, std::vector<int8_t> values);
  size_t size() const;
  float AsFloat(size_t i) const;   // the element widened to f32
  int32_t AsInt(size_t i) const;   // int8 elements only
};

struct SpmmOptions {
  int kept = 2, group = 4;  // the N:M sparsity
  bool rhs_sparse = false;
  bool contract_sparse = true;
  bool rhs_transpose = false;
  int64_t stride = 128;
  int64_t block_m = 128, block_k = 128, block_n = 128;
  double default_value = 0.0;
  std::optional<SpmmDType> out_dtype;
};

// The sparse_dim of the nonzeros for a configuration (sparsity.md §6 table): RHS sparse on the
// contracting dim: 1 if transposed else 0; on the other dim: 0 if transposed else 1; LHS: 1 when
// contracting, else 0.
int SpmmSparseDim(bool rhs_sparse, bool contract_sparse, bool rhs_transpose);

// `nonzeros` [N, ., .] in the sparse operand's dtype, `metadata` [N, ., .] int32 values of
// `metadata_shape`, `matrix` the dense operand. The result is [m, n].
SpmmTensor StructuredSpmm(const SpmmOptions& options, const SpmmTensor& nonzeros,
                          const std::vector<int64_t>& metadata_shape, std::span<const int32_t> metadata,
                          const SpmmTensor& matrix);

// The output dtype rule above.
SpmmDType SpmmOutDType(SpmmDType a, SpmmDType b);

}  // namespace tessera
