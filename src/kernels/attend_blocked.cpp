#include "kernels/attend_blocked.h"

#include <algorithm>
#include <cmath>

namespace tessera {

void MergeAttendPartials(const float* partials, size_t block_stride, size_t blocks, size_t d, float sink, float* out) {
  float top = sink;
  for (size_t b = 0; b < blocks; ++b) top = std::max(top, partials[b * block_stride + d]);
  float den = std::exp(sink - top);
  std::fill(out, out + d, 0.0f);
  for (size_t b = 0; b < blocks; ++b) {
    const float* partial = partials + b * block_stride;
    const float weight = std::exp(partial[d] - top);
    den += weight * partial[d + 1];
    for (size_t c = 0; c < d; ++c) out[c] += weight * partial[c];
  }
  const float inv = 1.0f / den;
  for (size_t c = 0; c < d; ++c) out[c] *= inv;
}

}  // namespace tessera
