#include "kernels/parallel_matmul.h"

#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/kernels.h"
#include "kernels/mxfp4.h"

namespace tessera {

void ParallelColumns(size_t n, const std::function<void(size_t, size_t)>& fn) {
  if (n == 0) return;
  ThreadPool& pool = GlobalPool();
  const size_t tiles = (n + kMatmulColumnTile - 1) / kMatmulColumnTile;
  // About 4 chunks per thread balance uneven progress (the machine is shared) without making
  // the chunks so small that per-call overhead shows.
  const size_t target = static_cast<size_t>(pool.num_threads()) * 4;
  const size_t tiles_per_chunk = (tiles + target - 1) / target;
  const size_t chunk = tiles_per_chunk * kMatmulColumnTile;
  const size_t num_chunks = (n + chunk - 1) / chunk;
  if (num_chunks == 1) return fn(0, n);
  pool.Run(num_chunks, [&](size_t c, int) {
    const size_t begin = c * chunk;
    fn(begin, begin + chunk < n ? begin + chunk : n);
  });
}

namespace {

// The dense formats: `kernel` is the KernelTable entry for W's element type.
template <typename Elem, typename Kernel>
void MatmulDense(Kernel kernel, const float* x, size_t m, size_t k, const Elem* w, size_t n,
                 const float* bias, float* y, size_t ldy) {
  TESSERA_CHECK(ldy >= n);
  if (m == 0 || n == 0) return;
  ParallelColumns(n, [&](size_t begin, size_t end) { kernel(x, m, k, w, begin, end, bias, y, ldy); });
}

}  // namespace

void MatmulBf16(const float* x, size_t m, size_t k, const uint16_t* w, size_t n,
                const float* bias, float* y, size_t ldy) {
  MatmulDense(ActiveKernels().matmul_bf16, x, m, k, w, n, bias, y, ldy);
}

void MatmulBf16(const float* x, size_t m, size_t k, const uint16_t* w, size_t n,
                const float* bias, float* y) {
  MatmulBf16(x, m, k, w, n, bias, y, n);
}

void MatmulF16(const float* x, size_t m, size_t k, const uint16_t* w, size_t n,
               const float* bias, float* y, size_t ldy) {
  MatmulDense(ActiveKernels().matmul_f16, x, m, k, w, n, bias, y, ldy);
}

void MatmulF16(const float* x, size_t m, size_t k, const uint16_t* w, size_t n,
               const float* bias, float* y) {
  MatmulF16(x, m, k, w, n, bias, y, n);
}

void MatmulF32(const float* x, size_t m, size_t k, const float* w, size_t n,
               const float* bias, float* y, size_t ldy) {
  MatmulDense(ActiveKernels().matmul_f32, x, m, k, w, n, bias, y, ldy);
}

void MatmulF32(const float* x, size_t m, size_t k, const float* w, size_t n,
               const float* bias, float* y) {
  MatmulF32(x, m, k, w, n, bias, y, n);
}

void MatmulMxfp4(const float* x, size_t m, size_t k, const uint8_t* codes, const uint8_t* scales,
                 size_t n, const float* bias, float* y, size_t ldy) {
  if (k % kMxfp4BlockSize != 0) {
    Fail("matmul_mxfp4: reduction length ", k, " is not a multiple of the MXFP4 block size ",
         kMxfp4BlockSize);
  }
  TESSERA_CHECK(ldy >= n);
  if (m == 0 || n == 0) return;
  const auto kernel = ActiveKernels().matmul_mxfp4;
  ParallelColumns(n, [&](size_t begin, size_t end) {
    kernel(x, m, k, codes, scales, begin, end, bias, y, ldy);
  });
}

void MatmulMxfp4(const float* x, size_t m, size_t k, const uint8_t* codes, const uint8_t* scales,
                 size_t n, const float* bias, float* y) {
  MatmulMxfp4(x, m, k, codes, scales, n, bias, y, n);
}

}  // namespace tessera
