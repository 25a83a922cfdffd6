// AVX-512 matmul_fp8_bf16 (kernels.h): e4m3fn codes widened to bfloat16 words by two byte
// lookups (vpermi2b over 128-entry tables of the words' high and low bytes; the sign bit, which
// vpermi2b ignores, ORed back into the high byte) and multiplied with bfloat16 activations by
// vdpbf16ps, 32 products per instruction. Every e4m3fn value is a bfloat16 value, so the words
// are the weights exactly; each block's sum is then scaled once. A step handles 64 codes: the
// byte interleave (per 128-bit lane) leaves the words of codes 0-7, 16-23, 32-39, 48-55 in the
// first vector and the others in the second; the activations are stored in that order once per
// call, so the step needs no shuffles.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <vector>

#include "core/dtype.h"
#include "kernels/kernels.h"

namespace tessera {
namespace {

constexpr size_t kStep = 64;  // codes per step: two vectors of 32 bfloat16 words

struct Tables {
  __m512i high0, high1, low0, low1;  // bytes of bf16(e4m3fn(code)) for codes 0..63 / 64..127
};

Tables MakeTables() {
  alignas(64) std::array<uint8_t, 128> high{}, low{};
  for (size_t code = 0; code < 128; ++code) {
    // Exact: e4m3fn has 3 fraction bits and exponents within bfloat16's (0x7f, NaN, is refused
    // by the format before it gets here).
    const uint16_t word = static_cast<uint16_t>(F32ToBf16(F8E4M3ToF32(static_cast<uint8_t>(code))));
    high[code] = static_cast<uint8_t>(word >> 8);
    low[code] = static_cast<uint8_t>(word & 0xff);
  }
  return Tables{_mm512_load_si512(high.data()), _mm512_load_si512(high.data() + 64), _mm512_load_si512(low.data()),
                _mm512_load_si512(low.data() + 64)};
}

// Steps of a row: [begin, begin + count) of one block; a row's steps never straddle blocks.
struct Step {
  uint32_t begin, count, block;
};

std::vector<Step> StepsOf(size_t k, size_t block_cols) {
  std::vector<Step> steps;
  for (size_t start = 0; start < k; start += block_cols) {
    const size_t end = std::min(start + block_cols, k);
    for (size_t c = start; c < end; c += kStep) {
      steps.push_back(Step{static_cast<uint32_t>(c), static_cast<uint32_t>(std::min(kStep, end - c)),
                           static_cast<uint32_t>(start / block_cols)});
    }
  }
  return steps;
}

inline __mmask64 StepMask(uint32_t count) { return count == kStep ? ~__mmask64{0} : (__mmask64{1} << count) - 1; }

// The step's two vectors of weight words from its codes (masked-off codes read as 0 = +0.0).
inline void DecodeStep(const Tables& tables, const uint8_t* codes, __mmask64 mask, __m512i& first, __m512i& second) {
  const __m512i raw = _mm512_maskz_loadu_epi8(mask, codes);
  __m512i high = _mm512_permutex2var_epi8(tables.high0, raw, tables.high1);
  high = _mm512_ternarylogic_epi32(high, raw, _mm512_set1_epi8(static_cast<char>(0x80)), 0xf8);  // high | (raw & 0x80)
  const __m512i low = _mm512_permutex2var_epi8(tables.low0, raw, tables.low1);
  first = _mm512_unpacklo_epi8(low, high);
  second = _mm512_unpackhi_epi8(low, high);
}

// x rows [m, k] to bfloat16 words, step by step in the permuted order (64 words per step,
// zeros past the step's count): dst [m, steps * 64].
void PermuteActivations(const float* x, size_t m, size_t k, const std::vector<Step>& steps, uint16_t* dst) {
  for (size_t i = 0; i < m; ++i) {
    uint16_t* row = dst + i * steps.size() * kStep;
    for (size_t s = 0; s < steps.size(); ++s) {
      const float* src = x + i * k + steps[s].begin;
      const uint32_t count = steps[s].count;
      __m512 parts[4];
      for (uint32_t p = 0; p < 4; ++p) {
        const uint32_t have = count > 16 * p ? std::min<uint32_t>(16, count - 16 * p) : 0;
        parts[p] = _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << have) - 1), src + 16 * p);
      }
      // Words of codes 0..31 and 32..63, then 128-bit lanes regrouped: lanes 0, 2 of each
      // (codes 0-7, 16-23 / 32-39, 48-55) form the first vector, lanes 1, 3 the second.
      const __m512i low = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(parts[1], parts[0]));
      const __m512i high = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(parts[3], parts[2]));
      _mm512_storeu_si512(row + s * kStep, _mm512_shuffle_i32x4(low, high, _MM_SHUFFLE(2, 0, 2, 0)));
      _mm512_storeu_si512(row + s * kStep + 32, _mm512_shuffle_i32x4(low, high, _MM_SHUFFLE(3, 1, 3, 1)));
    }
  }
}

inline __m512 Dot(__m512 acc, __m512i x, __m512i w) {
  return _mm512_dpbf16_ps(acc, reinterpret_cast<__m512bh>(x), reinterpret_cast<__m512bh>(w));
}

// Rows [j, j + kRows) of W against kM activation rows: per block, two chains of vdpbf16ps per
// (activation, weight) pair (the step's two vectors), added and scaled into the pair's total.
// Weight words come from the codes (decoded == nullptr) or from rows already decoded into
// `decoded` (steps * 64 words per row); either way each pair runs the same operations, so a
// result does not depend on kM, kRows or the path.
template <int kM, int kRows>
void Tile(const Tables& tables, const uint16_t* xp, size_t x_stride, const std::vector<Step>& steps, const uint8_t* codes,
          size_t k, const uint16_t* decoded, const float* scales, size_t scale_stride, size_t j, const float* bias,
          float* y, size_t ldy) {
  __m512 total[kM][kRows], first_sum[kM][kRows], second_sum[kM][kRows];
  for (int i = 0; i < kM; ++i) {
    for (int r = 0; r < kRows; ++r) {
      total[i][r] = first_sum[i][r] = second_sum[i][r] = _mm512_setzero_ps();
    }
  }
  for (size_t s = 0; s < steps.size(); ++s) {
    __m512i first[kRows], second[kRows];
    for (int r = 0; r < kRows; ++r) {
      if (decoded == nullptr) {
        DecodeStep(tables, codes + (j + r) * k + steps[s].begin, StepMask(steps[s].count), first[r], second[r]);
      } else {
        const uint16_t* words = decoded + (static_cast<size_t>(r) * steps.size() + s) * kStep;
        first[r] = _mm512_loadu_si512(words);
        second[r] = _mm512_loadu_si512(words + 32);
      }
    }
    for (int i = 0; i < kM; ++i) {
      const __m512i x_first = _mm512_loadu_si512(xp + i * x_stride + s * kStep);
      const __m512i x_second = _mm512_loadu_si512(xp + i * x_stride + s * kStep + 32);
      for (int r = 0; r < kRows; ++r) {
        first_sum[i][r] = Dot(first_sum[i][r], x_first, first[r]);
        second_sum[i][r] = Dot(second_sum[i][r], x_second, second[r]);
      }
    }
    if (s + 1 == steps.size() || steps[s + 1].block != steps[s].block) {
      for (int r = 0; r < kRows; ++r) {
        const __m512 scale = _mm512_set1_ps(scales[(j + r) * scale_stride + steps[s].block]);
        for (int i = 0; i < kM; ++i) {
          total[i][r] = _mm512_fmadd_ps(_mm512_add_ps(first_sum[i][r], second_sum[i][r]), scale, total[i][r]);
          first_sum[i][r] = second_sum[i][r] = _mm512_setzero_ps();
        }
      }
    }
  }
  for (int i = 0; i < kM; ++i) {
    for (int r = 0; r < kRows; ++r) {
      y[i * ldy + j + r] = _mm512_reduce_add_ps(total[i][r]) + (bias != nullptr ? bias[j + r] : 0.0f);
    }
  }
}

// Rows [j_begin, j_end) against kM activation rows, kRows at a time, then one at a time.
template <int kM, int kRows>
void Rows(const Tables& tables, const uint16_t* xp, size_t x_stride, const std::vector<Step>& steps,
          const uint8_t* codes, size_t k, const uint16_t* decoded, const float* scales, size_t scale_stride,
          size_t j_begin, size_t j_end, const float* bias, float* y, size_t ldy) {
  size_t j = j_begin;
  const size_t rows_words = steps.size() * kStep;
  auto words = [&](size_t row) { return decoded == nullptr ? nullptr : decoded + (row - j_begin) * rows_words; };
  for (; j + kRows <= j_end; j += kRows) {
    Tile<kM, kRows>(tables, xp, x_stride, steps, codes, k, words(j), scales, scale_stride, j, bias, y, ldy);
  }
  for (; j < j_end; ++j) Tile<kM, 1>(tables, xp, x_stride, steps, codes, k, words(j), scales, scale_stride, j, bias, y, ldy);
}

// kM activation rows (1..4) over W rows [j_begin, j_end), as many W rows per tile as registers allow.
void RowsFor(size_t m, const Tables& tables, const uint16_t* xp, size_t x_stride, const std::vector<Step>& steps,
             const uint8_t* codes, size_t k, const uint16_t* decoded, const float* scales, size_t scale_stride,
             size_t j_begin, size_t j_end, const float* bias, float* y, size_t ldy) {
  switch (m) {
    case 1: return Rows<1, 4>(tables, xp, x_stride, steps, codes, k, decoded, scales, scale_stride, j_begin, j_end, bias, y, ldy);
    case 2: return Rows<2, 2>(tables, xp, x_stride, steps, codes, k, decoded, scales, scale_stride, j_begin, j_end, bias, y, ldy);
    case 3: return Rows<3, 1>(tables, xp, x_stride, steps, codes, k, decoded, scales, scale_stride, j_begin, j_end, bias, y, ldy);
    default: return Rows<4, 1>(tables, xp, x_stride, steps, codes, k, decoded, scales, scale_stride, j_begin, j_end, bias, y, ldy);
  }
}

void MatmulFp8Bf16(const float* x, size_t m, size_t k, const uint8_t* codes, const float* scales, size_t scale_stride,
                   size_t block_cols, size_t n_begin, size_t n_end, const float* bias, float* y, size_t ldy) {
  if (m == 0 || n_begin >= n_end) return;
  static const Tables tables = MakeTables();
  const std::vector<Step> steps = StepsOf(k, block_cols);
  const size_t x_stride = steps.size() * kStep;
  thread_local std::vector<uint16_t> xp;
  if (xp.size() < m * x_stride) xp.resize(m * x_stride);
  PermuteActivations(x, m, k, steps, xp.data());
  if (m <= 4) {  // decode: codes straight from memory into registers
    RowsFor(m, tables, xp.data(), x_stride, steps, codes, k, nullptr, scales, scale_stride, n_begin, n_end, bias, y, ldy);
    return;
  }
  // Prefill: a chunk of W rows decoded once into words that stay in L2 (about 512 KB), then every
  // group of four activation rows against the chunk.
  const size_t chunk_rows = std::clamp<size_t>((size_t{512} << 10) / (x_stride * 2), 4, 256);
  thread_local std::vector<uint16_t> decoded;
  if (decoded.size() < chunk_rows * x_stride) decoded.resize(chunk_rows * x_stride);
  for (size_t j0 = n_begin; j0 < n_end; j0 += chunk_rows) {
    const size_t j1 = std::min(j0 + chunk_rows, n_end);
    for (size_t j = j0; j < j1; ++j) {
      for (size_t s = 0; s < steps.size(); ++s) {
        __m512i first, second;
        DecodeStep(tables, codes + j * k + steps[s].begin, StepMask(steps[s].count), first, second);
        uint16_t* words = decoded.data() + (j - j0) * x_stride + s * kStep;
        _mm512_storeu_si512(words, first);
        _mm512_storeu_si512(words + 32, second);
      }
    }
    for (size_t i = 0; i < m; i += 4) {
      RowsFor(std::min<size_t>(4, m - i), tables, xp.data() + i * x_stride, x_stride, steps, codes, k, decoded.data(),
              scales, scale_stride, j0, j1, bias, y + i * ldy, ldy);
    }
  }
}

}  // namespace

void FillAvx512Bf16Fp8(KernelTable& t) {
  t.matmul_fp8_bf16 = MatmulFp8Bf16;
  t.matmul_fp8_bf16_isa = "avx512bf16";
}

}  // namespace tessera
