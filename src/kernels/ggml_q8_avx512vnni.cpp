// AVX-512 VNNI kernels of kernels/ggml_q8.h (GGUF q8_0 and q4_0 against q8 activations), on the
// building blocks of q8_avx512vnni_tiles.h; the result is the scalar reference's bit for bit.
//  - q8_0: the int8 tile as is (u8 operand q + 128), its binary16 block scales widened by
//    vcvtph2ps per block (Panel::s_half).
//  - q4_0: decode streams the nibbles (u8 operand u, offset 8) through DirectTile; GEMMs decode
//    each panel once into u8 weights and f32 scales for the int8 tile, as the int4 kernel does.
#include <immintrin.h>

#include <cstdint>

#include "core/error.h"
#include "kernels/ggml_q8.h"
#include "kernels/kernels.h"
#include "kernels/q8.h"
#include "kernels/q8_avx512vnni_tiles.h"
#include "kernels/scratch.h"

namespace tessera {
namespace {

using namespace q8_vnni;

constexpr uint32_t kQ4_0 = 2, kQ8_0 = 8;
constexpr int32_t kQ4Offset = 8;  // q4_0 weights u - 8 enter as u

inline __m512 HalfScales(const uint16_t* s) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s)));
}

// q4_0 codes for DirectTile: the nibbles as they are, one binary16 scale per block.
struct Q4_0Codes {
  static constexpr size_t kPrefetch = kPrefetchBytes;
  const uint16_t* scales;  // group 0's [k/32][16]
  size_t scale_stride;
  __m512i nibble = _mm512_set1_epi8(0x0F);

  template <int G>
  void Block(size_t b, __m512 (&s)[G]) {
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) {
      const uint16_t* e = scales + g * scale_stride + b * kQ8Group;
      if (b % 2 == 0) _mm_prefetch(reinterpret_cast<const char*>(e) + kPrefetchBytes, _MM_HINT_T0);
      s[g] = HalfScales(e);
    }
  }
  __m512i Low(__m512i v, int) const { return _mm512_and_si512(v, nibble); }
  __m512i High(__m512i v, int) const { return _mm512_and_si512(_mm512_srli_epi16(v, 4), nibble); }
};

void MatmulQ8_0(Q8Rows x, size_t m, size_t k, const GgmlQ8Weights& wt, size_t n_begin, size_t n_end,
                const float* bias, float* y, size_t ldy) {
  const size_t nb = k / kQ8Block;
  const Rows rows{x.q, x.d, StartValues(x, m, nb, kInt8Offset, ThreadScratchBytes(m * nb * sizeof(int32_t))), k, nb};
  const Out out{y, ldy, bias, n_end};
  const size_t g_begin = n_begin / kQ8Group, g_end = (n_end + kQ8Group - 1) / kQ8Group;
  auto panel_at = [&](size_t g) {
    Panel p{wt.codes + g * (k * kQ8Group), k * kQ8Group, nullptr, nb * kQ8Group, kQ8Group};
    p.s_half = wt.scales + g * nb * kQ8Group;
    return p;
  };
  if (m <= kStreamMaxRows) {
    for (size_t g = g_begin; g < g_end; ++g) {
      const Panel panel = panel_at(g);
      for (size_t i0 = 0; i0 < m; i0 += kDirectMaxRows) {
        GemvTileFor(Min(kDirectMaxRows, m - i0))(rows, i0, panel, g * kQ8Group, out);
      }
    }
    return;
  }
  for (size_t g = g_begin; g < g_end; g += kGemmGroups) {
    const size_t groups = Min(kGemmGroups, g_end - g);
    const size_t next_groups = g + groups < g_end ? Min(kGemmGroups, g_end - g - groups) : 0;
    const Panel panel = panel_at(g);
    const bool first = g == g_begin;
    ForRowBlocks(m, [&](size_t i, size_t r) {
      const Panel p = WithNextShare(panel, wt.codes + (g + groups) * (k * kQ8Group), next_groups * k * kQ8Group, i, r, m);
      TileFor(r, groups, first && i == 0)(rows, i, p, g * kQ8Group, out);
    });
  }
}

// Decodes `groups` q4_0 groups into u8 weights (the nibbles, int8 layout) and f32 block scales.
void DecodeQ4_0Panel(const uint8_t* codes, const uint16_t* scales, size_t k, size_t groups, uint8_t* w, float* s) {
  const __m512i nibble = _mm512_set1_epi8(0x0F);
  const size_t nb = k / kQ8Block;
  for (size_t g = 0; g < groups; ++g) {
    const uint8_t* cg = codes + g * (k * kQ8Group / 2);
    uint8_t* wg = w + g * (k * kQ8Group);
    for (size_t h = 0; h < k / 8; ++h) {
      _mm_prefetch(reinterpret_cast<const char*>(cg + h * kStepBytes) + kPrefetchBytes, _MM_HINT_T0);
      const __m512i v = _mm512_loadu_si512(cg + h * kStepBytes);
      _mm512_store_si512(wg + 2 * h * kStepBytes, _mm512_and_si512(v, nibble));
      _mm512_store_si512(wg + (2 * h + 1) * kStepBytes, _mm512_and_si512(_mm512_srli_epi16(v, 4), nibble));
    }
    for (size_t b = 0; b < nb; ++b) _mm512_store_ps(s + (g * nb + b) * kQ8Group, HalfScales(scales + (g * nb + b) * kQ8Group));
  }
}

void MatmulQ4_0(Q8Rows x, size_t m, size_t k, const GgmlQ8Weights& wt, size_t n_begin, size_t n_end,
                const float* bias, float* y, size_t ldy) {
  const size_t nb = k / kQ8Block;
  const size_t g_begin = n_begin / kQ8Group, g_end = (n_end + kQ8Group - 1) / kQ8Group;
  const size_t code_stride = k * kQ8Group / 2, scale_stride = nb * kQ8Group;
  const Out out{y, ldy, bias, n_end};
  if (m <= kStreamMaxRows) {
    const Rows rows{x.q, x.d, StartValues(x, m, nb, kQ4Offset, ThreadScratchBytes(m * nb * sizeof(int32_t))), k, nb};
    DirectMatmul<Q4_0Codes>(rows, m, wt.codes, code_stride, g_begin, g_end, [&](size_t g) {
      return Q4_0Codes{wt.scales + g * scale_stride, scale_stride};
    }, out);
    return;
  }
  const size_t init_bytes = Align64(m * nb * sizeof(int32_t));
  const size_t w_bytes = kGemmGroups * k * kQ8Group;
  uint8_t* scratch = ThreadScratchBytes(init_bytes + w_bytes + kGemmGroups * scale_stride * sizeof(float));
  const Rows rows{x.q, x.d, StartValues(x, m, nb, kQ4Offset, scratch), k, nb};
  uint8_t* w = scratch + init_bytes;
  float* s = reinterpret_cast<float*>(w + w_bytes);
  for (size_t g = g_begin; g < g_end; g += kGemmGroups) {
    const size_t groups = Min(kGemmGroups, g_end - g);
    DecodeQ4_0Panel(wt.codes + g * code_stride, wt.scales + g * scale_stride, k, groups, w, s);
    const size_t next_groups = g + groups < g_end ? Min(kGemmGroups, g_end - g - groups) : 0;
    const Panel panel{w, k * kQ8Group, s, scale_stride, kQ8Group};
    ForRowBlocks(m, [&](size_t i, size_t r) {
      const Panel p = WithNextShare(panel, wt.codes + (g + groups) * code_stride, next_groups * code_stride, i, r, m);
      TileFor(r, groups, false)(rows, i, p, g * kQ8Group, out);
    });
  }
}

void MatmulQ8Ggml(Q8Rows x, size_t m, size_t k, const GgmlQ8Weights& w, size_t n_begin, size_t n_end,
                  const float* bias, float* y, size_t ldy) {
  if (m == 0 || n_begin >= n_end) return;
  if (w.type == kQ8_0) return MatmulQ8_0(x, m, k, w, n_begin, n_end, bias, y, ldy);
  if (w.type == kQ4_0) return MatmulQ4_0(x, m, k, w, n_begin, n_end, bias, y, ldy);
  TESSERA_CHECK(false);
}

}  // namespace

void FillAvx512VnniGgmlQ8(KernelTable& t) {
  t.matmul_q8_ggml = MatmulQ8Ggml;
  t.matmul_q8_ggml_isa = "avx512vnni";
}

}  // namespace tessera
