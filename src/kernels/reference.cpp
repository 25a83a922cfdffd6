// Scalar reference kernels: the definition of every kernel's result, and the fallback on any
// x86-64 CPU.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/dtype.h"
#include "kernels/attend_each_head.h"
#include "kernels/ggml_q8.h"
#include "kernels/kernels.h"
#include "kernels/kv_int8.h"
#include "kernels/mxfp4.h"
#include "kernels/q8.h"

namespace tessera {
namespace {

void DecodeFp8Row(const uint8_t* codes, const float* scales, size_t block_cols, size_t k, float* dst) {
  for (size_t c = 0; c < k; ++c) dst[c] = F8E4M3ToF32(codes[c]) * scales[c / block_cols];
}

void MatmulFp8Bf16(const float* x, size_t m, size_t k, const uint8_t* codes, const float* scales, size_t scale_stride,
                   size_t block_cols, size_t n_begin, size_t n_end, const float* bias, float* y, size_t ldy) {
  std::vector<float> rounded(k);
  for (size_t i = 0; i < m; ++i) {
    for (size_t c = 0; c < k; ++c) rounded[c] = Bf16ToF32(F32ToBf16(x[i * k + c]));
    for (size_t j = n_begin; j < n_end; ++j) {
      const uint8_t* row = codes + j * k;
      float total = 0.0f;
      for (size_t start = 0; start < k; start += block_cols) {
        const size_t end = start + block_cols < k ? start + block_cols : k;
        float block_sum = 0.0f;
        for (size_t c = start; c < end; ++c) block_sum += rounded[c] * F8E4M3ToF32(row[c]);
        total += block_sum * scales[j * scale_stride + start / block_cols];
      }
      y[i * ldy + j] = total + (bias != nullptr ? bias[j] : 0.0f);
    }
  }
}

void ConvertBf16F32(const uint16_t* src, float* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = Bf16ToF32(src[i]);
}

float DotBf16F32(const uint16_t* w, const float* x, size_t n) {
  float sum = 0.0f;
  for (size_t i = 0; i < n; ++i) sum += Bf16ToF32(w[i]) * x[i];
  return sum;
}

void MatmulBf16(const float* x, size_t m, size_t k, const uint16_t* w, size_t n_begin, size_t n_end,
                const float* bias, float* y, size_t ldy) {
  for (size_t j = n_begin; j < n_end; ++j) {
    const uint16_t* row = w + j * k;
    for (size_t i = 0; i < m; ++i) {
      const float* xi = x + i * k;
      float sum = 0.0f;
      for (size_t c = 0; c < k; ++c) sum += Bf16ToF32(row[c]) * xi[c];
      y[i * ldy + j] = sum + (bias ? bias[j] : 0.0f);
    }
  }
}

// y[i, j] for rows of W already in f32 (row(j) returns W[j, 0:k]): the loop of MatmulBf16.
template <typename Row>
void MatmulF32Rows(const float* x, size_t m, size_t k, size_t n_begin, size_t n_end, const float* bias,
                   float* y, size_t ldy, const Row& row) {
  for (size_t j = n_begin; j < n_end; ++j) {
    const float* wj = row(j);
    for (size_t i = 0; i < m; ++i) {
      const float* xi = x + i * k;
      float sum = 0.0f;
      for (size_t c = 0; c < k; ++c) sum += wj[c] * xi[c];
      y[i * ldy + j] = sum + (bias ? bias[j] : 0.0f);
    }
  }
}

// Each F16 row is decoded once (exactly) and then used for every row of x.
void MatmulF16(const float* x, size_t m, size_t k, const uint16_t* w, size_t n_begin, size_t n_end,
               const float* bias, float* y, size_t ldy) {
  std::vector<float> decoded(k);
  MatmulF32Rows(x, m, k, n_begin, n_end, bias, y, ldy, [&](size_t j) {
    for (size_t c = 0; c < k; ++c) decoded[c] = F16ToF32(w[j * k + c]);
    return decoded.data();
  });
}

void MatmulF32(const float* x, size_t m, size_t k, const float* w, size_t n_begin, size_t n_end,
               const float* bias, float* y, size_t ldy) {
  MatmulF32Rows(x, m, k, n_begin, n_end, bias, y, ldy, [&](size_t j) { return w + j * k; });
}

void MatmulMxfp4(const float* x, size_t m, size_t k, const uint8_t* codes, const uint8_t* scales,
                 size_t n_begin, size_t n_end, const float* bias, float* y, size_t ldy) {
  const size_t groups = k / 32;
  std::vector<float> row(k);
  for (size_t j = n_begin; j < n_end; ++j) {
    for (size_t g = 0; g < groups; ++g) {
      const uint8_t* b = codes + (j * groups + g) * 16;
      DecodeMxfp4Block(b, scales[j * groups + g], row.data() + g * 32);
    }
    for (size_t i = 0; i < m; ++i) {
      const float* xi = x + i * k;
      float sum = 0.0f;
      for (size_t c = 0; c < k; ++c) sum += row[c] * xi[c];
      y[i * ldy + j] = sum + (bias ? bias[j] : 0.0f);
    }
  }
}

void RopeApply(float* x, size_t tokens, size_t heads, size_t token_stride, size_t head_stride,
               const float* cs, size_t cs_stride, size_t half, RopePairing pairing) {
  // Interleaved: pair i is (2i, 2i + 1); split-half: (i, i + half).
  const size_t step = pairing == RopePairing::kInterleaved ? 2 : 1;
  const size_t partner = pairing == RopePairing::kInterleaved ? 1 : half;
  for (size_t t = 0; t < tokens; ++t) {
    const float* cos = cs + t * cs_stride;
    const float* sin = cos + half;
    for (size_t h = 0; h < heads; ++h) {
      float* v = x + t * token_stride + h * head_stride;
      for (size_t i = 0; i < half; ++i) {
        float& a = v[i * step];
        float& b = v[i * step + partner];
        const float a0 = a, b0 = b;
        a = a0 * cos[i] - b0 * sin[i];
        b = b0 * cos[i] + a0 * sin[i];
      }
    }
  }
}

// Baseline x86-64 has no FMA, so each product is rounded before the add, as kernels.h specifies.
void GatherReduce(const float* op, size_t ldop, const int32_t* idx, const float* w, size_t groups, size_t r,
                  size_t k, float* out, size_t ldo) {
  for (size_t g = 0; g < groups; ++g) {
    float* o = out + g * ldo;
    for (size_t c = 0; c < k; ++c) o[c] = 0.0f;
    for (size_t j = 0; j < r; ++j) {
      const float wj = w ? w[g * r + j] : 1.0f;
      if (wj == 0.0f) continue;  // zero-weight masking: 0 * NaN must not reach the sum
      const float* row = op + static_cast<size_t>(idx[g * r + j]) * ldop;
      for (size_t c = 0; c < k; ++c) o[c] += wj * row[c];
    }
  }
}

// Channel i of the head at p (d channels) as f32.
template <typename Elem>
float LoadElem(const Elem* p, size_t d, size_t i) {
  if constexpr (std::is_same_v<Elem, int8_t>) {
    return KvInt8Value(p, d, i);
  } else if constexpr (sizeof(Elem) == 2) {
    return Bf16ToF32(p[i]);
  } else {
    return p[i];
  }
}

// scores[j] = scale * (q . k_j) over the n rows; returns the largest of them and floor.
template <typename Elem>
float ScoreRows(const float* q, size_t d, const Elem* const* k_rows, size_t offset, size_t n, float scale,
                float floor, float* scores) {
  float max_score = floor;
  for (size_t j = 0; j < n; ++j) {
    const Elem* k = k_rows[j] + offset;
    float dot = 0.0f;
    for (size_t c = 0; c < d; ++c) dot += q[c] * LoadElem(k, d, c);
    scores[j] = dot * scale;
    max_score = std::max(max_score, scores[j]);
  }
  return max_score;
}

template <typename Elem>
void Attend(const float* q, size_t d, const Elem* const* k_rows, const Elem* const* v_rows, size_t offset, size_t n,
            float scale, float sink, float* scores, float* out) {
  const float max_score = ScoreRows(q, d, k_rows, offset, n, scale, sink, scores);
  float denom = std::exp(sink - max_score);
  for (size_t j = 0; j < n; ++j) {
    scores[j] = std::exp(scores[j] - max_score);
    denom += scores[j];
  }
  std::fill(out, out + d, 0.0f);
  for (size_t j = 0; j < n; ++j) {
    const float p = scores[j] / denom;
    const Elem* v = v_rows[j] + offset;
    for (size_t c = 0; c < d; ++c) out[c] += p * LoadElem(v, d, c);
  }
}

// kernels.h attend_partial_*: one block without the sink, left unnormalised: acc, m, l.
template <typename Elem>
void AttendPartial(const float* q, size_t d, const Elem* const* k_rows, const Elem* const* v_rows, size_t offset,
                   size_t n, float scale, float* scores, float* partial) {
  const float max_score =
      ScoreRows(q, d, k_rows, offset, n, scale, -std::numeric_limits<float>::infinity(), scores);
  float sum = 0.0f;
  for (size_t j = 0; j < n; ++j) {
    scores[j] = std::exp(scores[j] - max_score);
    sum += scores[j];
  }
  std::fill(partial, partial + d, 0.0f);
  for (size_t j = 0; j < n; ++j) {
    const Elem* v = v_rows[j] + offset;
    for (size_t c = 0; c < d; ++c) partial[c] += scores[j] * LoadElem(v, d, c);
  }
  partial[d] = max_score;
  partial[d + 1] = sum;
}

void AttendBf16(const float* q, size_t d, const uint16_t* const* k_rows, const uint16_t* const* v_rows, size_t offset,
                size_t n, float scale, float sink, float* scratch, float* out) {
  Attend(q, d, k_rows, v_rows, offset, n, scale, sink, scratch, out);
}

void AttendF32(const float* q, size_t d, const float* const* k_rows, const float* const* v_rows, size_t offset,
               size_t n, float scale, float sink, float* scratch, float* out) {
  Attend(q, d, k_rows, v_rows, offset, n, scale, sink, scratch, out);
}

void AttendInt8(const float* q, size_t d, const int8_t* const* k_rows, const int8_t* const* v_rows, size_t offset,
                size_t n, float scale, float sink, float* scratch, float* out) {
  Attend(q, d, k_rows, v_rows, offset, n, scale, sink, scratch, out);
}

// kernels/q8.h: blocks whose largest magnitude is below this are quantized as zeros (127 / amax
// must stay finite; such values cannot matter next to any normal activation).
constexpr float kQ8TinyAmax = 1e-30f;

void QuantizeQ8(const float* x, size_t k, int8_t* q, float* d, int32_t* sum) {
  for (size_t b = 0; b < k / 32; ++b) {
    const float* xb = x + b * 32;
    int8_t* qb = q + b * 32;
    float amax = 0.0f;
    bool finite = true;
    for (size_t c = 0; c < 32; ++c) {
      const float a = std::fabs(xb[c]);
      finite = finite && a <= std::numeric_limits<float>::max();
      amax = std::max(amax, a);
    }
    std::fill(qb, qb + 32, int8_t{0});
    sum[b] = 0;
    if (!finite) {
      d[b] = std::numeric_limits<float>::quiet_NaN();
      continue;
    }
    if (amax < kQ8TinyAmax) {
      d[b] = 0.0f;
      continue;
    }
    d[b] = amax / 127.0f;
    const float inv = 127.0f / amax;
    int32_t s = 0;
    for (size_t c = 0; c < 32; ++c) {
      const float v = std::clamp(std::nearbyint(xb[c] * inv), -127.0f, 127.0f);
      qb[c] = static_cast<int8_t>(v);
      s += qb[c];
    }
    sum[b] = s;
  }
}

}  // namespace

// The definition in kernels/q8.h: y[i, j] = sum over blocks b (in order) of
// fmaf(dot_b, d[i, b] * s[b], acc) (+ bias), from column j's integer weights w[k] and scales s[k/32].
void Q8ReferenceColumn(Q8Rows x, size_t m, size_t k, const int8_t* w, const float* s, size_t j, const float* bias,
                       float* y, size_t ldy) {
  const size_t nb = k / 32;
  for (size_t i = 0; i < m; ++i) {
    const int8_t* qi = x.q + i * k;
    const float* di = x.d + i * nb;
    float acc = 0.0f;
    for (size_t b = 0; b < nb; ++b) {
      int32_t dot = 0;
      for (size_t c = b * 32; c < b * 32 + 32; ++c) dot += int32_t{qi[c]} * int32_t{w[c]};
      acc = std::fma(static_cast<float>(dot), di[b] * s[b], acc);
    }
    y[i * ldy + j] = bias ? acc + bias[j] : acc;
  }
}

namespace {

void MatmulQ8Mxfp4(Q8Rows x, size_t m, size_t k, const uint8_t* codes, const uint8_t* scales, size_t n_begin,
                   size_t n_end, const float* bias, float* y, size_t ldy) {
  const size_t nb = k / 32;
  std::vector<int8_t> w(k);
  std::vector<float> s(nb);
  for (size_t j = n_begin; j < n_end; ++j) {
    const size_t g = j / 16, c = j % 16;
    const uint8_t* group = codes + g * (k * 8);
    for (size_t kk = 0; kk < k; ++kk) {
      const uint8_t byte = group[(kk / 8) * 64 + c * 4 + kk % 4];
      const uint8_t code = (kk % 8) < 4 ? byte & 0x0F : byte >> 4;
      w[kk] = static_cast<int8_t>(2.0f * kE2M1Values[code]);
    }
    for (size_t b = 0; b < nb; ++b) s[b] = std::ldexp(1.0f, int{scales[(g * nb + b) * 16 + c]} - 128);
    Q8ReferenceColumn(x, m, k, w.data(), s.data(), j, bias, y, ldy);
  }
}

void MatmulQ8Int8(Q8Rows x, size_t m, size_t k, const uint8_t* values, const float* scales, size_t n_begin,
                  size_t n_end, const float* bias, float* y, size_t ldy) {
  const size_t nb = k / 32;
  std::vector<int8_t> w(k);
  std::vector<float> s(nb);
  for (size_t j = n_begin; j < n_end; ++j) {
    const size_t g = j / 16, c = j % 16;
    const uint8_t* group = values + g * (k * 16);
    for (size_t kk = 0; kk < k; ++kk) w[kk] = static_cast<int8_t>(int{group[(kk / 4) * 64 + c * 4 + kk % 4]} - 128);
    std::fill(s.begin(), s.end(), scales[j]);
    Q8ReferenceColumn(x, m, k, w.data(), s.data(), j, bias, y, ldy);
  }
}

// The int4 definitions of kernels/int4.h: row j's codes, zeros and scales.
struct Int4Row {
  const uint8_t* block;  // the row's first 4-byte slot in its group's codes
  const uint8_t* zeros;  // the row's zero of group t at zeros[t * 16]
  const float* scales;   // likewise
  int Code(size_t c) const {
    const uint8_t byte = block[(c / 8) * 64 + c % 4];
    return (c % 8) < 4 ? byte & 0x0F : byte >> 4;
  }
};

Int4Row Int4RowOf(const Int4Weights& w, size_t k, size_t j) {
  const size_t g = j / 16, r = j % 16, groups = k / w.group;
  return Int4Row{w.codes + g * (k * 8) + r * 4, w.zeros + g * groups * 16 + r, w.scales + g * groups * 16 + r};
}

void MatmulInt4(const float* x, size_t m, size_t k, Int4Weights w, size_t n_begin, size_t n_end, const float* bias,
                float* y, size_t ldy) {
  std::vector<float> row(k);
  for (size_t j = n_begin; j < n_end; ++j) {
    const Int4Row r = Int4RowOf(w, k, j);
    for (size_t c = 0; c < k; ++c) {
      const size_t t = c / w.group;
      row[c] = static_cast<float>(r.Code(c) - int{r.zeros[t * 16]}) * r.scales[t * 16];
    }
    for (size_t i = 0; i < m; ++i) {
      const float* xi = x + i * k;
      float acc = 0.0f;
      for (size_t c = 0; c < k; ++c) acc = std::fma(row[c], xi[c], acc);
      y[i * ldy + j] = bias ? acc + bias[j] : acc;
    }
  }
}

void MatmulQ8Int4(Q8Rows x, size_t m, size_t k, Int4Weights w, size_t n_begin, size_t n_end, const float* bias,
                  float* y, size_t ldy) {
  const size_t nb = k / 32;
  std::vector<int8_t> q(k);
  std::vector<float> s(nb);
  for (size_t j = n_begin; j < n_end; ++j) {
    const Int4Row r = Int4RowOf(w, k, j);
    for (size_t c = 0; c < k; ++c) q[c] = static_cast<int8_t>(r.Code(c) - int{r.zeros[(c / w.group) * 16]});
    for (size_t b = 0; b < nb; ++b) s[b] = r.scales[(b * 32 / w.group) * 16];
    Q8ReferenceColumn(x, m, k, q.data(), s.data(), j, bias, y, ldy);
  }
}

void MatmulQ8Ggml(Q8Rows x, size_t m, size_t k, const GgmlQ8Weights& w, size_t n_begin, size_t n_end,
                  const float* bias, float* y, size_t ldy) {
  const size_t nb = k / 32, sub = GgmlQ8SubBlock(w.type);
  const bool has_mins = GgmlQ8HasMins(w.type);
  std::vector<int8_t> weights(k);
  std::vector<float> scales(k / sub), mins(nb);
  for (size_t j = n_begin; j < n_end; ++j) {
    GgmlQ8Column(w, k, j, weights.data(), scales.data(), mins.data());
    for (size_t i = 0; i < m; ++i) {
      const int8_t* qi = x.q + i * k;
      float acc = 0.0f;
      for (size_t b = 0; b < nb; ++b) {
        const float d = x.d[i * nb + b];
        for (size_t t = b * 32 / sub; t < (b + 1) * 32 / sub; ++t) {
          int32_t dot = 0;
          for (size_t c = t * sub; c < (t + 1) * sub; ++c) dot += int32_t{qi[c]} * int32_t{weights[c]};
          acc = std::fma(static_cast<float>(dot), d * scales[t], acc);
        }
        if (has_mins) acc = std::fma(-static_cast<float>(x.sum[i * nb + b]), d * mins[b], acc);
      }
      y[i * ldy + j] = bias ? acc + bias[j] : acc;
    }
  }
}

}  // namespace

void FillReferenceKernels(KernelTable& t) {
  t.convert_bf16_f32 = ConvertBf16F32;
  t.convert_bf16_f32_isa = "scalar";
  t.decode_fp8_row = DecodeFp8Row;
  t.decode_fp8_row_isa = "scalar";
  t.dot_bf16_f32 = DotBf16F32;
  t.dot_bf16_f32_isa = "scalar";
  t.matmul_bf16 = MatmulBf16;
  t.matmul_bf16_isa = "scalar";
  t.matmul_f16 = MatmulF16;
  t.matmul_f16_isa = "scalar";
  t.matmul_f32 = MatmulF32;
  t.matmul_f32_isa = "scalar";
  t.matmul_mxfp4 = MatmulMxfp4;
  t.matmul_mxfp4_isa = "scalar";
  t.matmul_fp8_dot = nullptr;  // fp8 rows: decode_fp8_row, then matmul_f32
  t.matmul_fp8_dot_isa = "decode + matmul_f32";
  t.matmul_fp8_bf16 = MatmulFp8Bf16;
  t.matmul_fp8_bf16_isa = "scalar";
  t.rope_apply = RopeApply;
  t.rope_apply_isa = "scalar";
  t.gather_reduce = GatherReduce;
  t.gather_reduce_isa = "scalar";
  t.attend_bf16 = AttendBf16;
  t.attend_f32 = AttendF32;
  t.attend_group_bf16 = AttendEachHead<uint16_t, Attend<uint16_t>>;
  t.attend_group_f32 = AttendEachHead<float, Attend<float>>;
  t.attend_partial_bf16 = PartialEachHead<uint16_t, AttendPartial<uint16_t>>;
  t.attend_partial_f32 = PartialEachHead<float, AttendPartial<float>>;
  t.attend_int8 = AttendInt8;
  t.attend_group_int8 = AttendEachHead<int8_t, Attend<int8_t>>;
  t.attend_partial_int8 = PartialEachHead<int8_t, AttendPartial<int8_t>>;
  t.attend_isa = "scalar";
  t.quantize_q8 = QuantizeQ8;
  t.quantize_q8_isa = "scalar";
  t.matmul_q8_mxfp4 = MatmulQ8Mxfp4;
  t.matmul_q8_mxfp4_isa = "scalar";
  t.matmul_q8_int8 = MatmulQ8Int8;
  t.matmul_q8_int8_isa = "scalar";
  t.matmul_int4 = MatmulInt4;
  t.matmul_int4_isa = "scalar";
  t.matmul_q8_int4 = MatmulQ8Int4;
  t.matmul_q8_int4_isa = "scalar";
  t.matmul_q8_ggml = MatmulQ8Ggml;
  t.matmul_q8_ggml_isa = "scalar";
  FillReferenceNm(t);  // nm_linear.cpp
}

}  // namespace tessera
