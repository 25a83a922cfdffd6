// The linear-weight formats' factories (one file each in this folder), for linear.cpp's format
// table only; everything else goes through model/linear.h.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "model/linear.h"

namespace tessera {

// bf16 / f16 / f32 matrices as stored (float.cpp).
std::unique_ptr<LinearWeights> MakeFloatLinear(const LinearSource& source, LinearFormat format, bool borrow);
// Per-row int8 in the q8 layout, quantized from any float source (int8.cpp).
std::unique_ptr<LinearWeights> MakeInt8Linear(const LinearSource& source, const std::string& where);
// MXFP4 in the checkpoint layout (exact) or repacked for q8 (mxfp4.cpp).
std::unique_ptr<LinearWeights> MakeMxfp4Linear(const LinearSource& source, bool q8, const std::string& where,
                                               bool borrow);

// Group-quantized 4-bit weights repacked into kernels/int4.h's layout, multiplied exactly or
// against q8 activations (int4.cpp).
std::unique_ptr<LinearWeights> MakeInt4Linear(const LinearSource& source, bool q8, const std::string& where);

// N:M sparse rows (kept values + mask, kernels/nm_linear.h), bf16 exact or int8 fast (nm.cpp).
std::unique_ptr<LinearWeights> MakeNmLinear(const LinearSource& source, bool int8, const std::string& where);

// DeepSeek-V3's block-scaled e4m3fn rows, multiplied exactly or against bfloat16 activations
// (fp8.cpp).
std::unique_ptr<LinearWeights> MakeFp8Linear(const LinearSource& source, bool bf16, const std::string& where);

// A GGUF file's block-quantized rows as stored, decoded exactly as they are multiplied (ggml.cpp).
std::unique_ptr<LinearWeights> MakeGgmlLinear(const LinearSource& source, const std::string& where);
// The same rows repacked for q8 activations (q8_0, q4_0; ggml_q8.cpp).
std::unique_ptr<LinearWeights> MakeGgmlQ8Linear(const LinearSource& source, const std::string& where);

// y[:, col_begin:col_end) = x W^T + bias for a format that stores rows in a compact form: rows
// [col_begin, col_end) are decoded to float32 by decode(row, out[k]) a chunk at a time into a
// per-thread buffer that stays in cache and multiplied with matmul_f32 (exact: the result of a
// float32 matmul over the decoded matrix, batch-invariant). fp8 and ggml use it.
void MultiplyDecodedRows(const float* x, size_t m, size_t k, size_t col_begin, size_t col_end, const float* bias,
                         float* y, size_t ldy, const std::function<void(size_t row, float* out)>& decode);

// Copies the stored rows of every matrix of `source`, in order, to dst (count x rows x row bytes
// of `row_bytes`, from row_data when `scales` is false, else row_scales); on GlobalPool().
void GatherRows(const LinearSource& source, bool scales, size_t row_bytes, uint8_t* dst);
// Releases the mapped ranges of a source whose rows were copied (unless it is shared).
void ReleaseSource(const LinearSource& source);

}  // namespace tessera
