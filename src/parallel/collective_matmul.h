// Collective matmuls for tensor parallelism with sequence-parallel activations
// (../shared/reference/collective-matmul.md): AllGather+MatMul for column-parallel linears and
// MatMul+ReduceScatter for row-parallel ones, with the communication hidden behind the GEMMs.
//
// AllGatherMatmul (§4 "AG+GEMM"): rank r holds X_r = rows [r m_l, (r+1) m_l) of X [P m_l, k] and
// its column shard W_r [n_r, k]; it returns Y_r = X W_r^T [P m_l, n_r], all rows, in all-gather
// order (row block j holds rank j's rows whichever step computed it, §2.3 "output placement").
// Ring schedule (§3, §4, §6): bidirectional for P > 2 — each shard is split into a lower half
// that travels to rank r+1 and an upper half that travels to rank r-1, so that at step t rank r
// holds the lower half of rank r-t and the upper half of rank r+t — and unidirectional for P = 2,
// where both neighbours are the same rank and one ring in order pipelines better (the reference's
// degenerate case, §7.5). Each half is sent in pieces of about `piece_rows` rows (the last ones
// smaller, so that little work remains once the last piece lands); a piece is forwarded as soon as
// it arrives. The GEMM thread multiplies the rank's own rows while the first pieces travel, then
// whatever has arrived, adjacent pieces merged into one call. Rows never interact, so with a
// batch-invariant local GEMM (every tessera kernel) the result is bit-identical to one GEMM over
// the gathered X.
//
// MatmulReduceScatter (§3 "GEMM + reduce-scatter", §4 "GEMM+RS"): rank r holds X_r [m, k_r] (all
// rows, its slice of the reduction dimension) and W_r [n, k_r]; it returns rows
// [r m/P, (r+1) m/P) of sum_r X_r W_r^T. The partial sum of row block b travels around the ring
// and ends on rank b; each rank adds its partial (received + own, in f32) before passing it on.
// Bidirectional for P > 2 (lower halves of the blocks travel up, upper halves down), unidirectional
// (down) for P = 2. The summation order differs from a single reduction: compare with a tolerance
// that scales with P (§4, §7.3). A bias belongs to exactly one rank's LocalMatmul.
//
// Overlap (§6 "progress caveat"): MPI need not move data unless the process is inside an MPI call.
// With options.overlap the GEMMs run on a separate thread (the caller of GlobalPool().Run, so the
// pool's size still bounds the compute threads) while the calling thread stays in MPI: it polls
// the ring's requests (every poll_us .. max_poll_us microseconds), forwards pieces as they arrive
// and adds the reduce-scatter partials. At most two sends per direction are in flight, so a link
// delivers pieces in order instead of all at the end. Without overlap (the benchmark's naive
// baseline) messages progress only while the caller waits for the next piece it needs.
//
// MPI errors in the middle of a ring are thrown on the rank that sees them; the job cannot
// continue its ring after that (MPI errors are not recoverable), so treat them as fatal.
//
// Validation (before any message moves; every rank throws the same one-line tessera::Error):
// the ranks exchange their call's shape tuple with one small all-gather, then check in this order:
// the same operation on every rank; local arguments (null x or y, empty gemm function);
// the same weight format on every rank (a mixed-dtype ring is an error, §2.2.2); x's columns
// against the shard's reduction length (§2.2.3); the same k (AllGatherMatmul) or m and n
// (MatmulReduceScatter) on every rank; m divisible by P (MatmulReduceScatter; AllGatherMatmul's
// m = P m_l is even by construction, but row shards of different sizes are an error, §2.2.7);
// ldy >= n; the format's own constraint (k a multiple of LinearFormatColumnBlock: 32 for MXFP4 and
// q8); the same options.
// The TPU kernel's block constraints (k, n multiples of 128, m_l / 2 a multiple of 8: §2.2.4-6)
// come from its MXU tiles and have no counterpart here: odd m_l, odd halves and n of any width work.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string_view>

#include "parallel/communicator.h"
#include "model/linear.h"

namespace tessera {

// This rank's shard of a weight matrix and the GEMM that applies it.
struct LocalMatmul {
  // The shard's storage (model/linear.h); all ranks of one collective matmul must use the same.
  LinearFormat format = LinearFormat::kF32;
  size_t n = 0;  // output columns
  size_t k = 0;  // reduction length (x's columns)
  // y[i, j] (i < m, j < n, row stride ldy) = row i of x[m, k] times the shard. The collective
  // matmuls call it on row blocks of varying size, so each row's result must not depend on m or
  // on the row's position (tessera's kernels guarantee it). Runs on a thread that never calls MPI
  // and may use GlobalPool().
  std::function<void(const float* x, size_t m, float* y, size_t ldy)> gemm;
};

// Matrix `matrix` of a LinearWeights (any format of the one linear-weight path, already sliced to
// this rank by its LinearSource) as a shard: y = x W^T + bias (bias [rows] or null). q8 formats
// quantize the activations per call, per row, so row results still do not depend on m. `weights`
// and `bias` must outlive the LocalMatmul.
LocalMatmul LinearShard(const LinearWeights& weights, const float* bias = nullptr, int64_t matrix = 0);

enum class RingSchedule : uint8_t {
  kAuto,            // unidirectional for P = 2, bidirectional for P > 2
  kUnidirectional,  // whole shards (AG) or blocks (RS) around one ring
  kBidirectional,   // half shards in both directions
};

struct CollectiveMatmulOptions {
  // Rows per message: the pipeline's grain (the GEMM thread merges adjacent pieces into larger
  // calls where it can). Smaller pieces start the link sooner and shorten the work left after
  // the last one lands; more of them cost more messages and, for MatmulReduceScatter, smaller
  // GEMM calls early in each call.
  size_t piece_rows = 128;
  RingSchedule schedule = RingSchedule::kAuto;
  bool overlap = true;  // GEMMs on a separate thread while the caller drives MPI
  // The caller's polling period while messages are in flight: poll_us after progress, doubling
  // up to max_poll_us while nothing changes (each wake-up takes the core from a GEMM thread
  // that shares it; TCP's socket buffers keep a link busy for milliseconds between polls).
  unsigned poll_us = 50;
  unsigned max_poll_us = 1000;
};

// y [P m_local, ldy] = AllGather_rows(x [m_local, k]) . W_r^T (see above).
void AllGatherMatmul(const Communicator& comm, const float* x, size_t m_local, size_t k, const LocalMatmul& w,
                     float* y, size_t ldy, const CollectiveMatmulOptions& options = {});

// y [m / P, ldy] = rows [r m/P, (r+1) m/P) of sum over ranks of x_r [m, k_r] . W_r^T (see above).
void MatmulReduceScatter(const Communicator& comm, const float* x, size_t m, size_t k, const LocalMatmul& w,
                         float* y, size_t ldy, const CollectiveMatmulOptions& options = {});

// The unfused forms, same contracts and validation: MPI_Allgather of X, then one GEMM; one GEMM,
// then MPI_Reduce_scatter_block. References for tests and baselines for the benchmark.
void AllGatherThenMatmul(const Communicator& comm, const float* x, size_t m_local, size_t k, const LocalMatmul& w,
                         float* y, size_t ldy);
void MatmulThenReduceScatter(const Communicator& comm, const float* x, size_t m, size_t k, const LocalMatmul& w,
                             float* y, size_t ldy);

// total / ranks, or a tessera::Error naming `what` when ranks does not divide total (a TP degree
// that does not divide the heads, kv heads, experts or a weight's columns).
size_t EvenShard(std::string_view what, size_t total, int ranks);

}  // namespace tessera
