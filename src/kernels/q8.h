// The integer ("q8") matmul path: activations quantized to int8 once per row, weights held in a
// column-interleaved layout made at load, integer dot products per 32-element block
// (AVX-512 VNNI vpdpbusd / AVX2 vpmaddubsw), f32 accumulation across blocks.
//
// This is the fast path of ../shared/reference/quantization.md's MXFP4 experts and of the int8
// dense-weight option; the exact path (kernels.h matmul_bf16 / matmul_mxfp4 on f32 activations)
// stays the reference. The only rounding the q8 path adds is the activation quantization below
// plus one f32 rounding per block; everything else is exact integer arithmetic.
//
// Activations (one row of k values, k % 32 == 0), per block b of 32 (Q8_0-style, symmetric):
//   amax = max |x|;  d[b] = amax / 127 (f32 division);  q = clamp(rne(x * (127 / amax)), +-127)
//   sum[b] = sum of the block's q (kernels that use unsigned operands need it for the offset).
//   amax == 0 -> d = 0 and q = 0. A block with a NaN or +-inf gets d = NaN and q = 0, so every
//   output that reads it is NaN (as the exact path would give NaN or inf).
//
// Result, for each output element (i, j), blocks in increasing order b = 0 .. k/32 - 1:
//   acc = +0;  acc = fmaf(float(dot_b), d[i, b] * s[j, b], acc);  y[i, j] = acc + bias[j]
// where dot_b = sum over the block of q[i, c] * w[j, c] in exact integer arithmetic (|dot_b| <=
// 32 * 127 * 127 < 2^24, so float(dot_b) is exact) and s[j, b] is the weight scale of that block.
// Every ISA computes exactly this, so all paths give the same bits, and y[i, j] does not depend
// on m, on row i's position in the batch or on the column split (batch invariance, as the exact
// kernels).
//
// Weight layouts (n columns = weight rows, padded to a multiple of kQ8Group with zero columns;
// group g holds columns 16 g .. 16 g + 15):
//   MXFP4:  codes  [n/16][k/8][16][4] u8: byte (g, k8, c, kk) low nibble = E2M1 code of
//                   W[16 g + c, 8 k8 + kk], high nibble = code of W[16 g + c, 8 k8 + 4 + kk];
//           scales [n/16][k/32][16] u8 E8M0: the block scale of W[16 g + c, 32 b ...].
//           w = 2 * E2M1 value (an integer in [-12, 12]) and s = 2^(e - 128), exact in f32 for
//           every byte e < 255 (0 and 1 give subnormals). Byte 255 (inf/NaN in the checkpoint
//           decoders) has no q8 form: packing rejects it.
//   int8:   values [n/16][k/4][16][4] u8: byte (g, k4, c, kk) = W8[16 g + c, 4 k4 + kk] + 128,
//           W8 in [-127, 127] (offset binary, the unsigned operand vpdpbusd wants);
//           scales [n] f32 (per row, padded to n/16*16 with 0): s[j, b] = scale[j] for every b.
//           Quantized from BF16 per row: scale = amax / 127, W8 = clamp(rne(w * 127 / amax)).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/kernels.h"

namespace tessera {

inline constexpr size_t kQ8Block = 32;  // activation block (= MXFP4 block)
inline constexpr size_t kQ8Group = 16;  // output columns per interleaved weight group

inline size_t Q8PaddedColumns(size_t n) { return (n + kQ8Group - 1) / kQ8Group * kQ8Group; }

// Byte sizes of the packed layouts above for W[n, k].
inline size_t Q8Mxfp4CodeBytes(size_t n, size_t k) { return Q8PaddedColumns(n) * k / 2; }
inline size_t Q8Mxfp4ScaleBytes(size_t n, size_t k) { return Q8PaddedColumns(n) * (k / kQ8Block); }
inline size_t Q8Int8Bytes(size_t n, size_t k) { return Q8PaddedColumns(n) * k; }

// Repacks a checkpoint MXFP4 matrix (kernels/mxfp4.h: blocks [n, k/32, 16], scales [n, k/32])
// into the q8 layout (codes: Q8Mxfp4CodeBytes, scales: Q8Mxfp4ScaleBytes). Returns false, having
// written nothing useful, when a scale byte is 255; `bad_row` then names its row.
bool PackMxfp4ForQ8(const uint8_t* blocks, const uint8_t* scales, size_t n, size_t k, uint8_t* codes_out,
                    uint8_t* scales_out, size_t* bad_row);

// One row of k floats to int8 with the per-row rule above: scale = amax / 127 (0 for an all-zero
// row), out = clamp(rne(w * 127 / amax), +-127). False when the row holds NaN or +-inf.
bool QuantizeRowToInt8(const float* row, size_t k, int8_t* out, float* scale);

// Quantizes a BF16 matrix W[n, k] row by row to int8 (layout above): values Q8Int8Bytes(n, k),
// scales Q8PaddedColumns(n). Returns false when a row holds NaN or +-inf (`bad_row` names it).
bool QuantizeBf16ToQ8Int8(const uint16_t* w, size_t n, size_t k, uint8_t* values_out, float* scales_out,
                          size_t* bad_row);

// The same for a float32 matrix (F16 and F32 checkpoints, widened exactly first).
bool QuantizeF32ToQ8Int8(const float* w, size_t n, size_t k, uint8_t* values_out, float* scales_out,
                         size_t* bad_row);

// The scalar definition of the result above for one output column j: y[i, j] for i < m, given the
// column's integer weights w[k] and block scales s[k/32] (reference.cpp; every q8 reference
// kernel, and nm_linear.h's int8 one, computes through it).
void Q8ReferenceColumn(Q8Rows x, size_t m, size_t k, const int8_t* w, const float* s, size_t j, const float* bias,
                       float* y, size_t ldy);

// Decodes row j of a packed int8 matrix back to floats (scale * W8), for tests and tools.
void DequantizeQ8Int8Row(const uint8_t* values, const float* scales, size_t k, size_t j, float* out);

// Quantized activation rows, owned. Row i: q[i * k ...], d/sum[i * k/32 ...].
struct Q8Activations {
  size_t m = 0, k = 0;
  std::vector<int8_t> q;
  std::vector<float> d;
  std::vector<int32_t> sum;
  Q8Rows rows() const { return Q8Rows{q.data(), d.data(), sum.data()}; }
};

// Quantizes x[m, k] (row stride ldx >= k; k % 32 == 0, else tessera::Error) with the active
// kernels, rows split across GlobalPool().
void QuantizeQ8(const float* x, size_t m, size_t k, size_t ldx, Q8Activations& out);

// Thread-parallel q8 matmuls (columns split across GlobalPool() in multiples of
// kMatmulColumnTile, like parallel_matmul.h): y[m, ldy] (columns [0, n)) = x . W^T + bias.
void MatmulQ8Mxfp4(const Q8Activations& x, const uint8_t* codes, const uint8_t* scales, size_t n,
                   const float* bias, float* y, size_t ldy);
void MatmulQ8Int8(const Q8Activations& x, const uint8_t* values, const float* scales, size_t n,
                  const float* bias, float* y, size_t ldy);

}  // namespace tessera
