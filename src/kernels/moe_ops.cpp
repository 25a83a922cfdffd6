#include "kernels/moe_ops.h"

#include <algorithm>

#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/parallel_matmul.h"

namespace tessera {
namespace {

// Below this many gathered floats (128 KiB: a decode step's combine is 4 x 2880) the pool's
// hand-off costs more than the work, so the caller runs the kernel alone.
constexpr size_t kSerialFloats = size_t{1} << 15;

}  // namespace

void GatherReduce(const KernelTable& kernels, const float* op, size_t rows, size_t ldop, const int32_t* idx,
                  const float* w, size_t groups, size_t r, size_t k, float* out, size_t ldo) {
  TESSERA_CHECK(ldop >= k && ldo >= k);
  const size_t terms = groups * r;
  for (size_t i = 0; i < terms; ++i) {
    if (idx[i] < 0 || static_cast<size_t>(idx[i]) >= rows) {
      Fail("gather_reduce: index ", idx[i], " at position ", i, " (group ", i / r, ", term ", i % r,
           ") is outside the ", rows, " rows of the gathered operand");
    }
  }
  if (groups == 0 || k == 0) return;
  const auto kernel = kernels.gather_reduce;
  ThreadPool& pool = GlobalPool();
  const size_t threads = static_cast<size_t>(pool.num_threads());
  if (threads == 1 || std::max<size_t>(r, 1) * groups * k < kSerialFloats) {
    return kernel(op, ldop, idx, w, groups, r, k, out, ldo);
  }
  // About 4 tasks per thread (the machine is shared, so progress is uneven): whole-row chunks of
  // groups when there are enough groups, otherwise one group per task split into column chunks.
  const size_t target = threads * 4;
  size_t group_chunk = groups, column_chunk = k;
  if (groups >= target) {
    group_chunk = (groups + target - 1) / target;
  } else {
    group_chunk = 1;
    const size_t tiles = (k + kGatherReduceColumnTile - 1) / kGatherReduceColumnTile;
    const size_t splits = std::min(tiles, (target + groups - 1) / groups);
    column_chunk = (tiles + splits - 1) / splits * kGatherReduceColumnTile;
  }
  const size_t num_group_chunks = (groups + group_chunk - 1) / group_chunk;
  const size_t num_column_chunks = (k + column_chunk - 1) / column_chunk;
  pool.Run(num_group_chunks * num_column_chunks, [&](size_t task, int) {
    const size_t g0 = task / num_column_chunks * group_chunk, c0 = task % num_column_chunks * column_chunk;
    const size_t g1 = std::min(groups, g0 + group_chunk), c1 = std::min(k, c0 + column_chunk);
    kernel(op + c0, ldop, idx + g0 * r, w ? w + g0 * r : nullptr, g1 - g0, r, c1 - c0, out + g0 * ldo + c0, ldo);
  });
}

void GatherReduce(const float* op, size_t rows, size_t ldop, const int32_t* idx, const float* w, size_t groups,
                  size_t r, size_t k, float* out, size_t ldo) {
  GatherReduce(ActiveKernels(), op, rows, ldop, idx, w, groups, r, k, out, ldo);
}

std::vector<ExpertChunk> ExpertChunks(const std::vector<int64_t>& offsets, size_t n) {
  std::vector<int64_t> active;
  for (size_t e = 0; e + 1 < offsets.size(); ++e) {
    if (offsets[e + 1] > offsets[e]) active.push_back(static_cast<int64_t>(e));
  }
  const size_t tiles = (n + kMatmulColumnTile - 1) / kMatmulColumnTile;
  const size_t target = static_cast<size_t>(GlobalPool().num_threads()) * 4;
  const size_t total = tiles * active.size();
  const size_t tiles_per_chunk = std::max<size_t>(1, std::min(tiles, (total + target - 1) / target));
  const size_t chunk = tiles_per_chunk * kMatmulColumnTile;
  std::vector<ExpertChunk> chunks;
  for (int64_t e : active) {
    for (size_t b = 0; b < n; b += chunk) chunks.push_back({e, b, std::min(n, b + chunk)});
  }
  return chunks;
}

}  // namespace tessera
