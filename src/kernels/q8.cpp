#include "kernels/q8.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/dtype.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/mxfp4.h"
#include "kernels/parallel_matmul.h"

namespace tessera {

bool PackMxfp4ForQ8(const uint8_t* blocks, const uint8_t* scales, size_t n, size_t k, uint8_t* codes_out,
                    uint8_t* scales_out, size_t* bad_row) {
  TESSERA_CHECK(k % kQ8Block == 0);
  const size_t nb = k / kQ8Block;
  // Padding columns: codes 0 (+0) and any finite scale.
  std::memset(codes_out + (n / kQ8Group) * (k * 8), 0, Q8Mxfp4CodeBytes(n, k) - (n / kQ8Group) * (k * 8));
  std::memset(scales_out, 127, Q8Mxfp4ScaleBytes(n, k));
  for (size_t j = 0; j < n; ++j) {
    const uint8_t* row_blocks = blocks + j * (k / 2);
    const uint8_t* row_scales = scales + j * nb;
    for (size_t b = 0; b < nb; ++b) {
      if (row_scales[b] == 255) {
        if (bad_row) *bad_row = j;
        return false;
      }
    }
    const size_t g = j / kQ8Group, c = j % kQ8Group;
    uint8_t* group = codes_out + g * (k * 8) + c * 4;
    // The 4 checkpoint bytes of one 8-value step hold codes (c0 c1) (c2 c3) (c4 c5) (c6 c7),
    // even index in the low nibble; the q8 layout wants bytes (c0 c4) (c1 c5) (c2 c6) (c3 c7).
    // As a little-endian word the 4 bytes are the nibbles c0 .. c7 from the lowest up, so the
    // result is the low half's nibbles spread one per byte, or'ed with the high half's shifted.
    auto spread = [](uint32_t x) {
      return (x & 0xFu) | ((x & 0xF0u) << 4) | ((x & 0xF00u) << 8) | ((x & 0xF000u) << 12);
    };
    for (size_t k8 = 0; k8 < k / 8; ++k8) {
      uint32_t src;
      std::memcpy(&src, row_blocks + k8 * 4, 4);
      const uint32_t out = spread(src & 0xFFFFu) | (spread(src >> 16) << 4);
      std::memcpy(group + k8 * 64, &out, 4);
    }
    for (size_t b = 0; b < nb; ++b) scales_out[(g * nb + b) * kQ8Group + c] = row_scales[b];
  }
  return true;
}

bool QuantizeRowToInt8(const float* row, size_t k, int8_t* out, float* scale) {
  float amax = 0.0f;
  for (size_t c = 0; c < k; ++c) {
    if (!std::isfinite(row[c])) return false;
    amax = std::max(amax, std::fabs(row[c]));
  }
  *scale = amax == 0.0f ? 0.0f : amax / 127.0f;
  if (amax == 0.0f) {
    std::fill(out, out + k, int8_t{0});
    return true;
  }
  const float inv = 127.0f / amax;
  for (size_t c = 0; c < k; ++c) out[c] = static_cast<int8_t>(std::clamp(std::nearbyint(row[c] * inv), -127.0f, 127.0f));
  return true;
}

namespace {

// Rows j of W[n, k] as float32 through `row_of(j, out)`; the quantizer of both entry points.
template <typename RowOf>
bool QuantizeRowsToQ8Int8(const RowOf& row_of, size_t n, size_t k, uint8_t* values_out, float* scales_out,
                          size_t* bad_row) {
  // An empty tensor-parallel slice (no rows, or no columns) has no value bytes, and may have no buffer.
  if (Q8Int8Bytes(n, k) > 0) std::memset(values_out, 128, Q8Int8Bytes(n, k));  // zero columns
  std::fill(scales_out, scales_out + Q8PaddedColumns(n), 0.0f);
  std::vector<float> row(k);
  std::vector<int8_t> q(k);
  for (size_t j = 0; j < n; ++j) {
    row_of(j, row.data());
    if (!QuantizeRowToInt8(row.data(), k, q.data(), &scales_out[j])) {
      if (bad_row) *bad_row = j;
      return false;
    }
    const size_t g = j / kQ8Group, c = j % kQ8Group;
    uint8_t* group = values_out + g * (k * kQ8Group);
    for (size_t kk = 0; kk < k; ++kk) group[(kk / 4) * 64 + c * 4 + kk % 4] = static_cast<uint8_t>(int{q[kk]} + 128);
  }
  return true;
}

}  // namespace

bool QuantizeBf16ToQ8Int8(const uint16_t* w, size_t n, size_t k, uint8_t* values_out, float* scales_out,
                          size_t* bad_row) {
  const auto row_of = [&](size_t j, float* out) {
    for (size_t c = 0; c < k; ++c) out[c] = Bf16ToF32(w[j * k + c]);
  };
  return QuantizeRowsToQ8Int8(row_of, n, k, values_out, scales_out, bad_row);
}

bool QuantizeF32ToQ8Int8(const float* w, size_t n, size_t k, uint8_t* values_out, float* scales_out,
                         size_t* bad_row) {
  const auto row_of = [&](size_t j, float* out) { std::copy_n(w + j * k, k, out); };
  return QuantizeRowsToQ8Int8(row_of, n, k, values_out, scales_out, bad_row);
}

void DequantizeQ8Int8Row(const uint8_t* values, const float* scales, size_t k, size_t j, float* out) {
  const size_t g = j / kQ8Group, c = j % kQ8Group;
  const uint8_t* group = values + g * (k * kQ8Group);
  for (size_t kk = 0; kk < k; ++kk) {
    out[kk] = scales[j] * static_cast<float>(int{group[(kk / 4) * 64 + c * 4 + kk % 4]} - 128);
  }
}

void QuantizeQ8(const float* x, size_t m, size_t k, size_t ldx, Q8Activations& out) {
  if (k % kQ8Block != 0) {
    Fail("q8 quantization: row length ", k, " is not a multiple of the block size ", kQ8Block);
  }
  TESSERA_CHECK(ldx >= k);
  out.m = m;
  out.k = k;
  out.q.resize(m * k);
  out.d.resize(m * (k / kQ8Block));
  out.sum.resize(m * (k / kQ8Block));
  if (m == 0) return;
  const auto kernel = ActiveKernels().quantize_q8;
  const size_t nb = k / kQ8Block;
  auto rows = [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) kernel(x + i * ldx, k, &out.q[i * k], &out.d[i * nb], &out.sum[i * nb]);
  };
  // A row is a few microseconds of work: only large batches are worth the pool.
  if (m < 16) return rows(0, m);
  GlobalPool().ParallelFor(m, 4, [&](size_t begin, size_t end) { rows(begin, end); });
}

void MatmulQ8Mxfp4(const Q8Activations& x, const uint8_t* codes, const uint8_t* scales, size_t n,
                   const float* bias, float* y, size_t ldy) {
  TESSERA_CHECK(ldy >= n);
  if (x.m == 0 || n == 0) return;
  const auto kernel = ActiveKernels().matmul_q8_mxfp4;
  const Q8Rows rows = x.rows();
  ParallelColumns(n, [&](size_t begin, size_t end) {
    kernel(rows, x.m, x.k, codes, scales, begin, end, bias, y, ldy);
  });
}

void MatmulQ8Int8(const Q8Activations& x, const uint8_t* values, const float* scales, size_t n,
                  const float* bias, float* y, size_t ldy) {
  TESSERA_CHECK(ldy >= n);
  if (x.m == 0 || n == 0) return;
  const auto kernel = ActiveKernels().matmul_q8_int8;
  const Q8Rows rows = x.rows();
  ParallelColumns(n, [&](size_t begin, size_t end) {
    kernel(rows, x.m, x.k, values, scales, begin, end, bias, y, ldy);
  });
}

}  // namespace tessera
