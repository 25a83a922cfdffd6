// AVX-512 attention of one query, or of a GQA group of queries sharing the rows
// (KernelTable::attend_bf16 / attend_f32 / attend_int8 / attend_group_*), against n key/value rows:
// the dot products run 16 channels per FMA, the softmax exponentials 16 scores at a time with a
// polynomial exp (|relative error| < 2 ulp), the weighted value sum 16 channels per FMA. The
// summation orders differ from the scalar reference (kernels.h allows it); each query's result
// depends only on its own inputs, so batch invariance holds.
#include <immintrin.h>

#include <cmath>
#include <type_traits>

#include "kernels/attend_head_tiles.h"
#include "kernels/kernels.h"
#include "kernels/kv_int8.h"
#include "kernels/kv_prefetch.h"

namespace tessera {
namespace {

inline __mmask16 TailMask(size_t remaining) {
  return remaining >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << remaining) - 1);
}

inline __m512 Load16(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
inline __m512 Load16(const uint16_t* p, __mmask16 m) {
  const __m256i h = _mm256_maskz_loadu_epi16(m, p);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
// Channels [c, c + 16) in m of a key/value head of d channels at `head`.
template <typename Elem>
inline __m512 LoadKv16(const Elem* head, size_t /*d*/, size_t c, __mmask16 m) { return Load16(head + c, m); }
inline __m512 LoadKv16(const int8_t* head, size_t d, size_t c, __mmask16 m) {
  const __m512 codes = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(m, head + c)));
  return _mm512_maskz_mul_ps(m, codes, _mm512_set1_ps(KvInt8Scale(head, d, c)));
}

// exp(x) for x <= 0 (scores minus their maximum); inputs below -87 give about 1e-38 instead of
// smaller values, which cannot matter next to the maximum's 1.
inline __m512 Exp(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.0f / 720.0f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

// The sum of a vector's 16 lanes in GCC's _mm512_reduce_add_ps order, spelled out so that the
// batched form below reproduces it whatever the compiler: halves (lanes i + 8 and i), quarters
// (i + 4 and i), then (0 + 2) + (1 + 3).
inline float ReduceAdd(__m512 a) {
  const __m256 t3 = _mm256_add_ps(_mm512_extractf32x8_ps(a, 1), _mm512_castps512_ps256(a));
  const __m128 t6 = _mm_add_ps(_mm256_extractf128_ps(t3, 1), _mm256_castps256_ps128(t3));
  const __m128 t8 = _mm_add_ps(t6, _mm_shuffle_ps(t6, t6, _MM_SHUFFLE(1, 0, 3, 2)));
  return _mm_cvtss_f32(_mm_add_ss(t8, _mm_movehdup_ps(t8)));
}

// ReduceAdd of 16 vectors at once: lane 4 i + j of the result is ReduceAdd(a[4 j + i]), bit for
// bit (every addition pairs the same two values, in the same operand order, as ReduceAdd's).
// 30 shuffles and 15 additions instead of 16 x 7 operations.
inline __m512 ReduceAdd16(const __m512 (&a)[16]) {
  __m512 halves[8], quarters[4], pairs[2];
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) {  // lanes 0-7: a[2k]'s i + 8 and i sums, lanes 8-15: a[2k + 1]'s
    halves[k] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * k], a[2 * k + 1], _MM_SHUFFLE(3, 2, 3, 2)),
                              _mm512_shuffle_f32x4(a[2 * k], a[2 * k + 1], _MM_SHUFFLE(1, 0, 1, 0)));
  }
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {  // 128-bit block b: a[4k + b]'s i + 4 and i sums
    quarters[k] = _mm512_add_ps(_mm512_shuffle_f32x4(halves[2 * k], halves[2 * k + 1], _MM_SHUFFLE(3, 1, 3, 1)),
                                _mm512_shuffle_f32x4(halves[2 * k], halves[2 * k + 1], _MM_SHUFFLE(2, 0, 2, 0)));
  }
#pragma GCC unroll 2
  for (int k = 0; k < 2; ++k) {  // block b: (0 + 2, 1 + 3) of a[8k + b], then of a[8k + 4 + b]
    pairs[k] = _mm512_add_ps(_mm512_shuffle_ps(quarters[2 * k], quarters[2 * k + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_ps(quarters[2 * k], quarters[2 * k + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  }
  return _mm512_add_ps(_mm512_shuffle_ps(pairs[0], pairs[1], _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_ps(pairs[0], pairs[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

// The input of ReduceAdd16 whose sum lands in lane `lane`.
constexpr size_t ReduceAdd16Input(size_t lane) { return 4 * (lane % 4) + lane / 4; }

// Up to kHeadTile queries of a GQA group against the same rows, each with exactly the operations
// it gets alone (kHeads = 1: the same FMA chains, reductions, exp and normalisation), the key and
// value vectors loaded and widened once for all of them: the loads and BF16 widening are most of
// a query's work per row at head size 64, and a group has 8 queries.
// kPartial (attend_partial_*): no sinks (`sinks` unused), the weighted sums left unnormalised,
// then m and l after each head's d channels.
constexpr size_t kHeadTile = 8;

// kHeads is a template argument so that the accumulators stay in registers (a run-time count
// kept them on the stack, each FMA a store-forwarding round trip: about 2x slower).
template <bool kPartial, typename Elem, size_t kHeads>
void AttendTile(const float* q, size_t q_stride, size_t d, const Elem* const* k_rows,
                const Elem* const* v_rows, size_t offset, size_t n, float scale, const float* sinks, float* scratch,
                float* out, size_t out_stride) {
  constexpr size_t heads = kHeads;
  float max_score[kHeadTile];
  for (size_t h = 0; h < heads; ++h) max_score[h] = kPartial ? -INFINITY : sinks[h];
  const size_t head_bytes = HeadBytes<Elem>(d);
  // Scores of kRows rows at a time: their kRows x kHeads dot products (each the same FMA chain
  // over the channels as alone) reduced together by ReduceAdd16, which gives each ReduceAdd's
  // bits; lane L = kRows h + r of the reduction holds row r of head h (its input
  // a[ReduceAdd16Input(L)]). The rows past the last full set go one at a time.
  constexpr size_t kRows = 16 / kHeads;
  size_t j = 0;
  for (; j + kRows <= n; j += kRows) {
    __m512 acc[16];
#pragma GCC unroll 16
    for (size_t a = 0; a < 16; ++a) acc[a] = _mm512_setzero_ps();
#pragma GCC unroll 16
    for (size_t r = 0; r < kRows; ++r) PrefetchRowsAhead(k_rows, v_rows, offset, j + r, n, head_bytes);
    for (size_t c = 0; c < d; c += 16) {
      const __mmask16 m = TailMask(d - c);
#pragma GCC unroll 16
      for (size_t r = 0; r < kRows; ++r) {
        const __m512 kv = LoadKv16(k_rows[j + r] + offset, d, c, m);
#pragma GCC unroll 8
        for (size_t h = 0; h < kHeads; ++h) {
          __m512& sum = acc[ReduceAdd16Input(kRows * h + r)];
          sum = _mm512_fmadd_ps(Load16(q + h * q_stride + c, m), kv, sum);
        }
      }
    }
    alignas(64) float dots[16];
    _mm512_store_ps(dots, _mm512_mul_ps(ReduceAdd16(acc), _mm512_set1_ps(scale)));
    for (size_t h = 0; h < heads; ++h) {
      float* scores = scratch + h * n + j;
      for (size_t r = 0; r < kRows; ++r) {
        scores[r] = dots[kRows * h + r];
        max_score[h] = scores[r] > max_score[h] ? scores[r] : max_score[h];
      }
    }
  }
  for (; j < n; ++j) {
    PrefetchRowsAhead(k_rows, v_rows, offset, j, n, head_bytes);
    const Elem* k = k_rows[j] + offset;
    __m512 acc[kHeads];
#pragma GCC unroll 8
    for (size_t h = 0; h < kHeads; ++h) acc[h] = _mm512_setzero_ps();
    for (size_t c = 0; c < d; c += 16) {
      const __mmask16 m = TailMask(d - c);
      const __m512 kv = LoadKv16(k, d, c, m);
#pragma GCC unroll 8
      for (size_t h = 0; h < kHeads; ++h) {
        acc[h] = _mm512_fmadd_ps(Load16(q + h * q_stride + c, m), kv, acc[h]);
      }
    }
    for (size_t h = 0; h < heads; ++h) {
      float* scores = scratch + h * n;
      scores[j] = ReduceAdd(acc[h]) * scale;
      max_score[h] = scores[j] > max_score[h] ? scores[j] : max_score[h];
    }
  }
  float inv[kHeadTile], total[kHeadTile];
  for (size_t h = 0; h < heads; ++h) {
    float* scores = scratch + h * n;
    const __m512 vmax = _mm512_set1_ps(max_score[h]);
    __m512 sum = kPartial ? _mm512_setzero_ps() : _mm512_maskz_mov_ps(1, Exp(_mm512_sub_ps(_mm512_set1_ps(sinks[h]), vmax)));
    for (size_t j = 0; j < n; j += 16) {
      const __mmask16 m = TailMask(n - j);
      const __m512 e = _mm512_maskz_mov_ps(m, Exp(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, scores + j), vmax)));
      _mm512_mask_storeu_ps(scores + j, m, e);
      sum = _mm512_add_ps(sum, e);
    }
    total[h] = ReduceAdd(sum);
    inv[h] = 1.0f / total[h];
  }
  // The weighted sums: each pass over the rows takes kChunks 16-channel chunks of every head
  // (kChunks x kHeads accumulators, at most 16), so a value row is read d / (16 kChunks) times
  // instead of once per chunk. Each (head, chunk) accumulator is the same FMA chain over the rows
  // in order as with one chunk per pass, so the bits do not depend on kChunks.
  constexpr size_t kChunks = kHeads >= 16 ? 1 : 16 / kHeads;
  for (size_t c0 = 0; c0 < d; c0 += 16 * kChunks) {
    __m512 acc[kChunks][kHeads];
#pragma GCC unroll 16
    for (size_t ch = 0; ch < kChunks; ++ch) {
#pragma GCC unroll 8
      for (size_t h = 0; h < kHeads; ++h) acc[ch][h] = _mm512_setzero_ps();
    }
    // The rows come through pointers (kv_prefetch.h): this
    // pass's channels of the row kRowsAhead on (int8: the whole head, codes and scales).
    constexpr bool kInt8 = std::is_same_v<Elem, int8_t>;
    const size_t pass_first = kInt8 ? 0 : c0;
    const size_t pass_bytes = kInt8 ? head_bytes : (d - c0 < 16 * kChunks ? d - c0 : 16 * kChunks) * sizeof(Elem);
    for (size_t j = 0; j < n; ++j) {
      if (j + kRowsAhead < n) PrefetchHead<_MM_HINT_T0>(v_rows[j + kRowsAhead] + offset + pass_first, pass_bytes);
      const Elem* v = v_rows[j] + offset;
#pragma GCC unroll 16
      for (size_t ch = 0; ch < kChunks; ++ch) {
        const size_t c = c0 + 16 * ch;
        if (c >= d) break;
        const __m512 vv = LoadKv16(v, d, c, TailMask(d - c));
#pragma GCC unroll 8
        for (size_t h = 0; h < kHeads; ++h) {
          acc[ch][h] = _mm512_fmadd_ps(_mm512_set1_ps(scratch[h * n + j]), vv, acc[ch][h]);
        }
      }
    }
#pragma GCC unroll 16
    for (size_t ch = 0; ch < kChunks; ++ch) {
      const size_t c = c0 + 16 * ch;
      if (c >= d) break;
      const __mmask16 m = TailMask(d - c);
      for (size_t h = 0; h < heads; ++h) {
        _mm512_mask_storeu_ps(out + h * out_stride + c, m,
                              kPartial ? acc[ch][h] : _mm512_mul_ps(acc[ch][h], _mm512_set1_ps(inv[h])));
      }
    }
  }
  if constexpr (kPartial) {
    for (size_t h = 0; h < heads; ++h) {
      out[h * out_stride + d] = max_score[h];
      out[h * out_stride + d + 1] = total[h];
    }
  }
}

struct Avx512Tiles {
  static constexpr size_t kMaxHeads = kHeadTile;
  template <bool kPartial, typename Elem, size_t kHeads, typename... Args>
  static void Run(Args... args) { AttendTile<kPartial, Elem, kHeads>(args...); }
};

// One query (attend_*): the tile of one head.
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

void FillAvx512Attention(KernelTable& t) {
  t.attend_bf16 = AttendBf16;
  t.attend_f32 = AttendF32;
  t.attend_group_bf16 = AttendGroupInTiles<Avx512Tiles, uint16_t>;
  t.attend_group_f32 = AttendGroupInTiles<Avx512Tiles, float>;
  t.attend_partial_bf16 = PartialGroupInTiles<Avx512Tiles, uint16_t>;
  t.attend_partial_f32 = PartialGroupInTiles<Avx512Tiles, float>;
  t.attend_int8 = AttendInt8;
  t.attend_group_int8 = AttendGroupInTiles<Avx512Tiles, int8_t>;
  t.attend_partial_int8 = PartialGroupInTiles<Avx512Tiles, int8_t>;
  t.attend_isa = "avx512";
}

}  // namespace tessera
