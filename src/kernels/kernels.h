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

// A batch of q8-quantized activation rows (kernels/q8.h), row-major: row i's k int8 values at
// q + i k, its k/32 block scales at d + i k/32 and block sums at sum + i k/32.
struct Q8Rows {
  const int8_t* q;
  const float* d;
  const int32_t* sum;
};

// A packed group-quantized 4-bit matrix (kernels/int4.h): codes, zero points and f32 scales of
// the whole matrix (group 0 of 16 rows first), `group` input columns per scale.
struct Int4Weights {
  const uint8_t* codes;
  const uint8_t* zeros;
  const float* scales;
  size_t group;
};

// A GGUF block-quantized matrix repacked for the q8 path (kernels/ggml_q8.h): its ggml type,
// codes, binary16 scales (per block; per 256-value super-block for the k-quants), and for the
// k-quants the high code bits and the sub-block scales / mins (group 0 of 16 rows first).
struct GgmlQ8Weights {
  uint32_t type;
  const uint8_t* codes;
  const uint16_t* scales;
  const uint8_t* highs = nullptr;
  const uint8_t* sub = nullptr;
};

// An N:M sparse matrix (kernels/nm_linear.h): row group g (rows 16 g ..) at data + 16 g row_bytes;
// scales [n] f32 for int8 (else null).
struct NmWeights {
  const uint8_t* data;
  size_t row_bytes;
  const float* scales;
};

struct KernelTable {
  Isa isa;
  // Per-entry name of the implementation actually used ("avx512", "scalar", ...).
  const char* convert_bf16_f32_isa;
  const char* dot_bf16_f32_isa;
  const char* matmul_bf16_isa;
  const char* matmul_mxfp4_isa;
  const char* matmul_f16_isa;
  const char* matmul_f32_isa;
  const char* rope_apply_isa;
  const char* gather_reduce_isa;
  const char* quantize_q8_isa;
  const char* matmul_q8_mxfp4_isa;
  const char* matmul_q8_int8_isa;
  const char* matmul_int4_isa;
  const char* matmul_q8_int4_isa;
  const char* matmul_q8_ggml_isa;
  const char* matmul_nm_bf16_isa;
  const char* matmul_q8_nm_int8_isa;
  const char* attend_isa;

  // dst[i] = float(src[i]) for i < n. Exact.
  void (*convert_bf16_f32)(const uint16_t* src, float* dst, size_t n);
  // One row of a block-scaled FP8 matrix (DeepSeek-V3's checkpoints, deepseek.md §7):
  // dst[c] = e4m3fn(codes[c]) * scales[c / block_cols] for c < k, the product rounded once in
  // f32 (what dequantizing to float32 gives), so every ISA gives the same bits. Codes 0x7f and
  // 0xff (NaN) are the caller's to refuse.
  void (*decode_fp8_row)(const uint8_t* codes, const float* scales, size_t block_cols, size_t k, float* dst);
  const char* decode_fp8_row_isa;
  // y[i, j] (i < m <= 4, j in [n_begin, n_end)) = x_i . W_j + bias[j] for FP8 rows W_j as
  // decode_fp8_row decodes them (codes row j at codes + j k, its scales at scales + j
  // scale_stride), with the same bits as matmul_f32 of this table over the decoded rows: decode
  // (m <= 4) without writing the decoded rows. Null where the table has none (then the caller
  // decodes rows and calls matmul_f32).
  void (*matmul_fp8_dot)(const float* x, size_t m, size_t k, const uint8_t* codes, const float* scales,
                         size_t scale_stride, size_t block_cols, size_t n_begin, size_t n_end, const float* bias,
                         float* y, size_t ldy);
  const char* matmul_fp8_dot_isa;
  // The fast path's FP8 product (the fp8-bf16 linear format): for i < m (any m), j in
  // [n_begin, n_end),
  //   y[i, j] = bias[j] + sum_b scales_j[b] * sum_{c in block b} bf16(x[i, c]) * e4m3fn(codes_j[c])
  // with the activations rounded to bfloat16 (nearest even), each product exact in f32 (e4m3fn
  // values are bfloat16 values), the block sums in f32 in an order of the ISA's choosing, then
  // scaled and summed in f32. A row's results depend only on that row of x and on W (batch
  // invariance), not on m or the column range; ISAs agree to rounding, not to the bit.
  void (*matmul_fp8_bf16)(const float* x, size_t m, size_t k, const uint8_t* codes, const float* scales,
                          size_t scale_stride, size_t block_cols, size_t n_begin, size_t n_end, const float* bias,
                          float* y, size_t ldy);
  const char* matmul_fp8_bf16_isa;
  // sum_i float(w[i]) * x[i]; fp32 accumulation, order unspecified.
  float (*dot_bf16_f32)(const uint16_t* w, const float* x, size_t n);

  // Matmuls against a weight matrix W[n, k] stored row-major in the checkpoint's layout
  // (y = x W^T, as torch.nn.Linear), computing only the output columns [n_begin, n_end) so that
  // callers can split the columns across threads:
  //   x: [m, k] f32, row stride k;  y: [m, ldy] f32, y[i, j] for j in [n_begin, n_end);
  //   bias: [n] f32 or nullptr.
  // Products and sums in f32. The summation order may differ between ISAs but, within one
  // table, is fixed per output element: y[i, j] has the same bits for every m, every row i's
  // position in the batch and every [n_begin, n_end) split (batch invariance, which makes
  // multi-token verification give the logits of token-by-token decoding). Every weight byte is
  // read once per call however large m is, so decode (m = 1) streams the matrix once.
  //
  // W in BF16: w[j * k + c].
  void (*matmul_bf16)(const float* x, size_t m, size_t k, const uint16_t* w, size_t n_begin,
                      size_t n_end, const float* bias, float* y, size_t ldy);
  // W in F16 (IEEE binary16, subnormals included): w[j * k + c], decoded exactly to f32 (as
  // vcvtph2ps does). Summation order: that of matmul_bf16 in the same table.
  void (*matmul_f16)(const float* x, size_t m, size_t k, const uint16_t* w, size_t n_begin,
                     size_t n_end, const float* bias, float* y, size_t ldy);
  // W in F32: w[j * k + c], used as is. Summation order: that of matmul_bf16 in the same table.
  void (*matmul_f32)(const float* x, size_t m, size_t k, const float* w, size_t n_begin,
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

  // Gather-reduce, the MoE combine (../shared/reference/moe-gather-reduce.md §2):
  //   out[g, c] = sum_{j < r} w[g r + j] * op[idx[g r + j], c]   for g < groups, c < k.
  // op row i at op + i * ldop, out row g at out + g * ldo (only its first k floats are written;
  // out must not overlap op); idx [groups * r], every entry a valid row of op (moe_ops.h checks;
  // the kernel does not); w [groups * r] f32, or nullptr for weight 1.
  // A term whose weight is zero (+0 or -0) is skipped, so it contributes exactly 0 even when its
  // row holds NaN or Inf; a group with no remaining term is +0. The sum is f32, starts at +0 and
  // adds the products in order j = 0..r-1, each product rounded to f32 before the add (never
  // fused): every ISA gives the same bits (NaN payloads aside), and out[g, c] depends only on
  // group g's terms and column c, not on `groups`, on g's position or on a split of the columns.
  void (*gather_reduce)(const float* op, size_t ldop, const int32_t* idx, const float* w, size_t groups,
                        size_t r, size_t k, float* out, size_t ldo);

  // Softmax attention of one query q[d] over n positions with a sink logit (gpt-oss.md §3.4.6):
  //   s_j = scale * <q, k_j>;  p = softmax over {sink, s_0 .. s_{n-1}};  out[d] = sum_j p_j v_j
  // (the sink has no value row). Row j of keys/values starts at k_rows[j] + offset /
  // v_rows[j] + offset (elements: BF16 or f32 KV cache; int8 below). scratch holds n floats. Summation
  // order and the exp implementation vary by ISA (vector exp within 2 ulp); the result depends
  // only on q and the n rows, never on other queries computed alongside (batch invariance).
  void (*attend_bf16)(const float* q, size_t d, const uint16_t* const* k_rows, const uint16_t* const* v_rows,
                      size_t offset, size_t n, float scale, float sink, float* scratch, float* out);
  void (*attend_f32)(const float* q, size_t d, const float* const* k_rows, const float* const* v_rows,
                     size_t offset, size_t n, float scale, float sink, float* scratch, float* out);
  // int8 cache (kernels/kv_int8.h): the head at k_rows[j] + offset bytes is d codes then the
  // block scales; its values are KvInt8Value's (code times scale, one f32 multiply).
  void (*attend_int8)(const float* q, size_t d, const int8_t* const* k_rows, const int8_t* const* v_rows,
                      size_t offset, size_t n, float scale, float sink, float* scratch, float* out);
  // The same for `heads` queries that share the key/value rows (a GQA group): query h at
  // q + h q_stride with sink sinks[h], result at out + h out_stride; scratch holds heads n floats.
  // Head h's result has exactly the bits the single-query entry of the same table gives for it,
  // whatever `heads` is (a kernel may only share loads across heads, never reorder a head's sums).
  void (*attend_group_bf16)(const float* q, size_t q_stride, size_t heads, size_t d, const uint16_t* const* k_rows,
                            const uint16_t* const* v_rows, size_t offset, size_t n, float scale, const float* sinks,
                            float* scratch, float* out, size_t out_stride);
  void (*attend_group_f32)(const float* q, size_t q_stride, size_t heads, size_t d, const float* const* k_rows,
                           const float* const* v_rows, size_t offset, size_t n, float scale, const float* sinks,
                           float* scratch, float* out, size_t out_stride);
  void (*attend_group_int8)(const float* q, size_t q_stride, size_t heads, size_t d, const int8_t* const* k_rows,
                            const int8_t* const* v_rows, size_t offset, size_t n, float scale, const float* sinks,
                            float* scratch, float* out, size_t out_stride);
  // One block of a longer attention, for the blocked form below (AttendBlocked): for each of
  // `heads` queries sharing the n >= 1 rows, without the sink and without normalising,
  //   s_j = scale <q, k_j>,  m = max_j s_j,  l = sum_j exp(s_j - m),  acc[c] = sum_j exp(s_j - m) v_j[c],
  // written at partial + h partial_stride as acc[0 .. d), m, l (d + 2 floats). scratch holds
  // heads n floats. As with attend_group_*, head h's partial has the same bits whatever `heads` is.
  void (*attend_partial_bf16)(const float* q, size_t q_stride, size_t heads, size_t d, const uint16_t* const* k_rows,
                              const uint16_t* const* v_rows, size_t offset, size_t n, float scale, float* scratch,
                              float* partial, size_t partial_stride);
  void (*attend_partial_f32)(const float* q, size_t q_stride, size_t heads, size_t d, const float* const* k_rows,
                             const float* const* v_rows, size_t offset, size_t n, float scale, float* scratch,
                             float* partial, size_t partial_stride);
  void (*attend_partial_int8)(const float* q, size_t q_stride, size_t heads, size_t d, const int8_t* const* k_rows,
                              const int8_t* const* v_rows, size_t offset, size_t n, float scale, float* scratch,
                              float* partial, size_t partial_stride);

  // The q8 path (kernels/q8.h defines the quantizer, the packed weight layouts and the exact
  // result every ISA reproduces bit for bit).
  // Quantizes one row of k floats (k % 32 == 0): q [k], d [k/32], sum [k/32].
  void (*quantize_q8)(const float* x, size_t k, int8_t* q, float* d, int32_t* sum);
  // y[i, j] for i < m, j in [n_begin, n_end): n_begin % 16 == 0, n_end % 16 == 0 or n_end == n
  // (columns past n_end are not written); codes/scales and values/scales point at the start of
  // the whole packed matrix (group 0). bias [n] f32 or nullptr.
  void (*matmul_q8_mxfp4)(Q8Rows x, size_t m, size_t k, const uint8_t* codes, const uint8_t* scales,
                          size_t n_begin, size_t n_end, const float* bias, float* y, size_t ldy);
  void (*matmul_q8_int8)(Q8Rows x, size_t m, size_t k, const uint8_t* values, const float* scales,
                         size_t n_begin, size_t n_end, const float* bias, float* y, size_t ldy);

  // Group-quantized 4-bit weights (kernels/int4.h defines the layout and both results, which
  // every ISA reproduces bit for bit). Column ranges as for the q8 entries (n_begin % 16 == 0).
  // Exact: float32 activations x [m, k], row stride k.
  void (*matmul_int4)(const float* x, size_t m, size_t k, Int4Weights w, size_t n_begin, size_t n_end,
                      const float* bias, float* y, size_t ldy);
  // Fast: q8 activations; w.group % 32 == 0.
  void (*matmul_q8_int4)(Q8Rows x, size_t m, size_t k, Int4Weights w, size_t n_begin, size_t n_end,
                         const float* bias, float* y, size_t ldy);

  // GGUF block types against q8 activations (kernels/ggml_q8.h defines the layouts and the
  // result, kernels/q8.h's with the type's integer weights and block scales; every ISA reproduces
  // it bit for bit). Column ranges as for the q8 entries.
  void (*matmul_q8_ggml)(Q8Rows x, size_t m, size_t k, const GgmlQ8Weights& w, size_t n_begin, size_t n_end,
                         const float* bias, float* y, size_t ldy);

  // N:M sparse weights (kernels/nm_linear.h defines the layout and both results, which every ISA
  // reproduces bit for bit). Column ranges: n_begin % 16 == 0, n_end % 16 == 0 or n_end == n.
  // Exact: bf16 kept values, float32 activations x [m, k], row stride k.
  void (*matmul_nm_bf16)(const float* x, size_t m, size_t k, NmWeights w, size_t n_begin, size_t n_end,
                         const float* bias, float* y, size_t ldy);
  // Fast: int8 kept values, q8 activations (k % 32 == 0).
  void (*matmul_q8_nm_int8)(Q8Rows x, size_t m, size_t k, NmWeights w, size_t n_begin, size_t n_end,
                            const float* bias, float* y, size_t ldy);
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
// gather_reduce entries (gather_reduce_avx2.cpp / gather_reduce_avx512.cpp), likewise.
void FillAvx2GatherReduce(KernelTable& table);
void FillAvx512GatherReduce(KernelTable& table);
// attend_* entries (attention_avx2.cpp / attention_avx512.cpp).
void FillAvx2Attention(KernelTable& table);
void FillAvx512Attention(KernelTable& table);
// q8 entries (q8_avx2.cpp; q8_avx512vnni.cpp, used only when the CPU has AVX512-VNNI).
void FillAvx2Q8(KernelTable& table);
void FillAvx512VnniQ8(KernelTable& table);
// matmul_q8_ggml (ggml_q8_avx512vnni.cpp, with AVX512-VNNI).
void FillAvx512VnniGgmlQ8(KernelTable& table);
// decode_fp8_row (fp8_avx2.cpp / fp8_avx512.cpp).
void FillAvx2Fp8(KernelTable& table);
void FillAvx512Fp8(KernelTable& table);
// matmul_fp8_bf16 with vdpbf16ps (fp8_avx512bf16.cpp; needs AVX512_BF16 and AVX512_VBMI).
void FillAvx512Bf16Fp8(KernelTable& table);
// matmul_int4 (int4_avx2.cpp / int4_avx512.cpp).
void FillAvx2Int4(KernelTable& table);
void FillAvx512Int4(KernelTable& table);
// N:M sparse entries (nm_linear.cpp: reference; nm_linear_avx2.cpp; nm_linear_avx512.cpp;
// nm_linear_avx512vbmi2.cpp with VBMI2; nm_linear_avx512vnni.cpp with AVX512-VNNI and VBMI2).
void FillReferenceNm(KernelTable& table);
void FillAvx2Nm(KernelTable& table);
void FillAvx512Nm(KernelTable& table);
void FillAvx512Vbmi2Nm(KernelTable& table);
void FillAvx512VnniNm(KernelTable& table);

}  // namespace tessera
