// AVX2 + FMA attention of one query against n key/value rows (KernelTable::attend_bf16 /
// attend_f32 / attend_int8), 8 channels / scores per step with scalar tails; polynomial exp as in
// attention_avx512.cpp (|relative error| < 2 ulp). Summation orders differ from the scalar
// reference; each query's result depends only on its own inputs (batch invariance).
#include <immintrin.h>

#include <cmath>

#include "core/dtype.h"
#include "kernels/attend_head_tiles.h"
#include "kernels/kernels.h"
#include "kernels/kv_int8.h"
#include "kernels/kv_prefetch.h"

namespace tessera {
namespace {

inline __m256 Load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 Load8(const uint16_t* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
inline float Load1(const float* p) { return *p; }
inline float Load1(const uint16_t* p) { return Bf16ToF32(*p); }
// Channels [c, c + 8) (or channel c) of a key/value head of d channels at `head`.
template <typename Elem>
inline __m256 LoadKv8(const Elem* head, size_t /*d*/, size_t c) { return Load8(head + c); }
inline __m256 LoadKv8(const int8_t* head, size_t d, size_t c) {
  const __m128i codes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(head + c));
  return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(codes)), _mm256_set1_ps(KvInt8Scale(head, d, c)));
}
template <typename Elem>
inline float LoadKv1(const Elem* head, size_t /*d*/, size_t c) { return Load1(head + c); }
inline float LoadKv1(const int8_t* head, size_t d, size_t c) { return KvInt8Value(head, d, c); }

inline float HorizontalSum(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_shuffle_ps(t, t, 1)));
}

// exp(x) for x <= 0; inputs below -87 are clamped (about 1e-38, irrelevant next to the max's 1).
inline __m256 Exp(__m256 x) {
  x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.0f / 720.0f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  // n >= -126 here, so 2^n is a normal float built from its exponent bits.
  const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
}

// kHeads queries of a GQA group (query h at q + h q_stride, its scores at scores + h n, its
// result at out + h out_stride) against the same n rows, each key/value vector loaded and widened
// once for all of them. Each query gets exactly the operations it gets alone (kHeads = 1): the
// same FMA chains, reductions, exp and normalisation, so tiles never change a result.
// kPartial (attend_partial_*): no sinks (`sinks` unused), each weighted sum left unnormalised,
// then m and l after its d channels; otherwise attend_*'s normalised result with sinks[h].
template <bool kPartial, typename Elem, size_t kHeads>
void AttendTile(const float* q, size_t q_stride, size_t d, const Elem* const* k_rows, const Elem* const* v_rows,
                size_t offset, size_t n, float scale, const float* sinks, float* scores, float* out,
                size_t out_stride) {
  const size_t d8 = d / 8 * 8;
  float max_score[kHeads];
  for (size_t h = 0; h < kHeads; ++h) max_score[h] = kPartial ? -INFINITY : sinks[h];
  const size_t head_bytes = HeadBytes<Elem>(d);
  for (size_t j = 0; j < n; ++j) {
    PrefetchRowsAhead(k_rows, v_rows, offset, j, n, head_bytes);
    const Elem* k = k_rows[j] + offset;
    __m256 acc[kHeads];
#pragma GCC unroll 8
    for (size_t h = 0; h < kHeads; ++h) acc[h] = _mm256_setzero_ps();
    for (size_t c = 0; c < d8; c += 8) {
      const __m256 kv = LoadKv8(k, d, c);
#pragma GCC unroll 8
      for (size_t h = 0; h < kHeads; ++h) acc[h] = _mm256_fmadd_ps(Load8(q + h * q_stride + c), kv, acc[h]);
    }
    for (size_t h = 0; h < kHeads; ++h) {
      float dot = HorizontalSum(acc[h]);
      for (size_t c = d8; c < d; ++c) dot += q[h * q_stride + c] * LoadKv1(k, d, c);
      float& score = scores[h * n + j];
      score = dot * scale;
      max_score[h] = score > max_score[h] ? score : max_score[h];
    }
  }
  const size_t n8 = n / 8 * 8;
  float inv[kHeads];
  for (size_t h = 0; h < kHeads; ++h) {
    float* head_scores = scores + h * n;
    const __m256 vmax = _mm256_set1_ps(max_score[h]);
    __m256 sum = _mm256_setzero_ps();
    for (size_t j = 0; j < n8; j += 8) {
      const __m256 e = Exp(_mm256_sub_ps(_mm256_loadu_ps(head_scores + j), vmax));
      _mm256_storeu_ps(head_scores + j, e);
      sum = _mm256_add_ps(sum, e);
    }
    float total = HorizontalSum(sum) + (kPartial ? 0.0f : std::exp(sinks[h] - max_score[h]));
    for (size_t j = n8; j < n; ++j) {
      head_scores[j] = std::exp(head_scores[j] - max_score[h]);
      total += head_scores[j];
    }
    inv[h] = kPartial ? 1.0f : 1.0f / total;
    if constexpr (kPartial) {
      out[h * out_stride + d] = max_score[h];
      out[h * out_stride + d + 1] = total;
    }
  }
  for (size_t c = 0; c < d8; c += 8) {
    __m256 acc[kHeads];
#pragma GCC unroll 8
    for (size_t h = 0; h < kHeads; ++h) acc[h] = _mm256_setzero_ps();
    for (size_t j = 0; j < n; ++j) {
      const __m256 vv = LoadKv8(v_rows[j] + offset, d, c);
#pragma GCC unroll 8
      for (size_t h = 0; h < kHeads; ++h) acc[h] = _mm256_fmadd_ps(_mm256_set1_ps(scores[h * n + j]), vv, acc[h]);
    }
    for (size_t h = 0; h < kHeads; ++h) {
      _mm256_storeu_ps(out + h * out_stride + c, kPartial ? acc[h] : _mm256_mul_ps(acc[h], _mm256_set1_ps(inv[h])));
    }
  }
  for (size_t h = 0; h < kHeads; ++h) {
    for (size_t c = d8; c < d; ++c) {
      float acc = 0.0f;
      for (size_t j = 0; j < n; ++j) acc += scores[h * n + j] * LoadKv1(v_rows[j] + offset, d, c);
      out[h * out_stride + c] = kPartial ? acc : acc * inv[h];
    }
  }
}

// A tile of 8 heads keeps 8 accumulators, the widened row and a query load in 10 of the 16
// ymm registers.
struct Avx2Tiles {
  static constexpr size_t kMaxHeads = 8;
  template <bool kPartial, typename Elem, size_t kHeads, typename... Args>
  static void Run(Args... args) { AttendTile<kPartial, Elem, kHeads>(args...); }
};

template <typename Elem>
void Attend(const float* q, size_t d, const Elem* const* k_rows, const Elem* const* v_rows, size_t offset, size_t n,
            float scale, float sink, float* scores, float* out) {
  AttendTile<false, Elem, 1>(q, 0, d, k_rows, v_rows, offset, n, scale, &sink, scores, out, 0);
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

}  // namespace

void FillAvx2Attention(KernelTable& t) {
  t.attend_bf16 = AttendBf16;
  t.attend_f32 = AttendF32;
  t.attend_group_bf16 = AttendGroupInTiles<Avx2Tiles, uint16_t>;
  t.attend_group_f32 = AttendGroupInTiles<Avx2Tiles, float>;
  t.attend_partial_bf16 = PartialGroupInTiles<Avx2Tiles, uint16_t>;
  t.attend_partial_f32 = PartialGroupInTiles<Avx2Tiles, float>;
  t.attend_int8 = AttendInt8;
  t.attend_group_int8 = AttendGroupInTiles<Avx2Tiles, int8_t>;
  t.attend_partial_int8 = PartialGroupInTiles<Avx2Tiles, int8_t>;
  t.attend_isa = "avx2";
}

}  // namespace tessera
