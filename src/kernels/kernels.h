// One interface for every compute kernel.
//
// Each kernel has a plain scalar reference (reference.cpp) and optional versions per
// instruction set (one file each: *_avx2.cpp, *_avx512.cpp, *_amx.cpp, compiled with that file's
// flags only). A KernelTable holds one function pointer per kernel; the table for the active
// level is built once (ActiveKernels()) and callers never branch on the ISA per call. An entry a
// level does not override is inherited from the level below it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/cpu_features.h"

namespace tessera {

// Which channels of a head form the pairs that RoPE rotates (../shared/reference/rope.md §1):
// split-half / NeoX (x[i], x[i + r/2]) or interleaved / GPT-J (x[2i], x[2i + 1]), r = rotated width.
enum class RopePairing : uint8_t { kSplitHalf, kInterleaved };

struct KernelTable {
  Isa isa;
  // Per-entry name of the implementation actually used ("avx512", "scalar", ...).
  const char* convert_bf16_f32_isa;
  const char* dot_bf16_f32_isa;
  const char* matmul_bf16_isa;
  const char* matmul_mxfp4_isa;
  const char* rope_apply_isa;

  // dst[i] = float(src[i]) for i < n. Exact.
  void (*convert_bf16_f32)(const uint16_t* src, float* dst, size_t n);
  // sum_i float(w[i]) * x[i]; fp32 accumulation, order unspecified.
  float (*dot_bf16_f32)(const uint16_t* w, const float* x, size_t n);

  // Matmuls against a weight matrix W[n, k] stored row-major in the checkpoint's layout
  // (y = x W^T, as torch.nn.Linear), computing only the output columns [n_begin, n_end) so that
  // callers can split the columns across threads:
  //   x: [m, k] f32, row stride k;  y: [m, ldy] f32, y[i, j] for j in [n_begin, n_end);
  //   bias: [n] f32 or nullptr.
  // Products and sums in f32 (summation order unspecified). Every weight byte is read once per
  // call however large m is, so decode (m = 1) streams the matrix once.
  //
  // W in BF16: w[j * k + c].
  void (*matmul_bf16)(const float* x, size_t m, size_t k, const uint16_t* w, size_t n_begin,
                      size_t n_end, const float* bias, float* y, size_t ldy);
  // W in MXFP4 (gpt-oss checkpoint layout, kernels/mxfp4.h): codes [n, k/32, 16] u8 (low nibble =
  // even element), scales [n, k/32] u8 E8M0. k % 32 == 0. Decoding is exact, so the result
  // equals matmul over the decoded f32 weights up to summation order.
  void (*matmul_mxfp4)(const float* x, size_t m, size_t k, const uint8_t* codes,
                       const uint8_t* scales, size_t n_begin, size_t n_end, const float* bias,
                       float* y, size_t ldy);

  // Rotary embedding in place on `tokens` x `heads` vectors: head h of token t starts at
  // x + t * token_stride + h * head_stride; only its first 2 * half channels are rotated (partial
  // rotary leaves the rest untouched). cs row t holds cos at cs + t * cs_stride and sin at
  // cs + t * cs_stride + half ([tokens, >= 2 * half]), shared by all heads of the token. Each
  // pair (a, b) becomes (a cos - b sin, b cos + a sin). The reference rounds each product
  // separately (as torch does); vector versions may fuse one product into the add (FMA), so
  // they differ by at most an ulp of |a cos| + |b sin|.
  void (*rope_apply)(float* x, size_t tokens, size_t heads, size_t token_stride, size_t head_stride,
                     const float* cs, size_t cs_stride, size_t half, RopePairing pairing);
};

// The table for `isa` (which must satisfy IsaSupported(isa)).
const KernelTable& KernelsFor(Isa isa);
// The table for ActiveIsa(), built on first use.
const KernelTable& ActiveKernels();

// Per-level fillers: each overrides the entries it implements. Defined in the per-ISA files.
void FillReferenceKernels(KernelTable& table);
void FillAvx2Kernels(KernelTable& table);
void FillAvx512Kernels(KernelTable& table);
// RoPE entries (rope_avx2.cpp / rope_avx512.cpp), called by the two fillers above.
void FillAvx2Rope(KernelTable& table);
void FillAvx512Rope(KernelTable& table);

}  // namespace tessera
