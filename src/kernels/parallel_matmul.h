// Thread-parallel matmuls: the KernelTable matmul entries of ActiveKernels(), with the output
// columns split across GlobalPool().
//
// Every chunk is a contiguous range of output columns (= contiguous weight rows, so each thread
// streams its own part of the matrix once) whose boundaries are multiples of
// kMatmulColumnTile; the kernels compute each column independently of the split, so the result is
// bit-identical for any thread count.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

namespace tessera {

// Chunk boundaries are multiples of this: a multiple of every kernel's column tile (AVX-512 GEMM
// 64, AVX2 GEMM 16, dot form 4), so no chunk splits a register tile.
inline constexpr size_t kMatmulColumnTile = 64;

// Splits [0, n) into chunks [begin, end) with begin % kMatmulColumnTile == 0 and end a multiple
// of it or n, about 4 per pool thread (fewer when n is small), and calls fn(begin, end) once per
// chunk on GlobalPool(). Every column is in exactly one chunk; one chunk runs on the caller.
void ParallelColumns(size_t n, const std::function<void(size_t begin, size_t end)>& fn);

// y[m, ldy] (columns [0, n)) = x[m, k] . W^T + bias, W[n, k] in BF16 (kernels.h matmul_bf16).
void MatmulBf16(const float* x, size_t m, size_t k, const uint16_t* w, size_t n,
                const float* bias, float* y, size_t ldy);
// The same with ldy = n.
void MatmulBf16(const float* x, size_t m, size_t k, const uint16_t* w, size_t n,
                const float* bias, float* y);

// The same with W[n, k] in F16 (kernels.h matmul_f16) and in F32 (matmul_f32).
void MatmulF16(const float* x, size_t m, size_t k, const uint16_t* w, size_t n,
               const float* bias, float* y, size_t ldy);
void MatmulF16(const float* x, size_t m, size_t k, const uint16_t* w, size_t n,
               const float* bias, float* y);
void MatmulF32(const float* x, size_t m, size_t k, const float* w, size_t n,
               const float* bias, float* y, size_t ldy);
void MatmulF32(const float* x, size_t m, size_t k, const float* w, size_t n,
               const float* bias, float* y);

// y[m, ldy] = x[m, k] . W^T + bias, W[n, k] in MXFP4 (kernels.h matmul_mxfp4: codes
// [n, k/32, 16], scales [n, k/32]). Throws tessera::Error when k is not a multiple of 32.
void MatmulMxfp4(const float* x, size_t m, size_t k, const uint8_t* codes, const uint8_t* scales,
                 size_t n, const float* bias, float* y, size_t ldy);
// The same with ldy = n.
void MatmulMxfp4(const float* x, size_t m, size_t k, const uint8_t* codes, const uint8_t* scales,
                 size_t n, const float* bias, float* y);

}  // namespace tessera
