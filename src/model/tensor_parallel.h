// What the tensor-parallel forward pass needs from its group of ranks. The model layer only
// states the contract; parallel/ implements it over MPI (parallel/tp_group.h), so the layers keep
// depending downward only.
//
// Sharding of gpt-oss over P ranks (rank r), chosen in Model::Load:
//   - attention heads: query heads [r Nq/P, (r+1) Nq/P); key/value heads the ones those queries
//     use (Nkv/P of them when P divides Nkv, else the one shared head, replicated);
//     q/k/v are column-parallel (rows of W), o_proj row-parallel (its columns, copied at load);
//   - experts (ModelOptions::tp_experts): tensor-parallel by default, intermediate units
//     [i0, i0 + ni) of every expert in whole MXFP4 blocks (gate_up rows [2 i0, 2 (i0 + ni)),
//     down's input blocks; the down bias on rank 0 only), or expert-parallel, experts
//     [r E/P, (r+1) E/P) whole on rank r. Either way each rank's MoE output is a partial sum.
//     Tensor slices give every rank the same weight traffic whatever the routing, expert-parallel
//     ranks wait for the busiest (measured, docs/BENCHMARKS.md "Experts over ranks");
//   - lm_head: vocabulary-parallel when P divides the vocabulary, else replicated;
//   - embeddings, norms, router, biases: replicated.
// Decode and any batch whose size P does not divide keep the activations replicated and reduce
// with AllReduceSum; prefill of T = P m tokens keeps them sequence-parallel (rank r owns tokens
// [r m, (r+1) m)) and uses the fused AllGatherMatmul / MatmulReduceScatter.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace tessera {

class TensorParallelGroup {
 public:
  virtual ~TensorParallelGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // y[m, ldy] (m rows, the GEMM's own columns) = x[m, k] . W_local^T for the caller's weight.
  using LocalGemm = std::function<void(const float* x, size_t m, float* y, size_t ldy)>;

  // Rank 0's `value`, on every rank: a decision one rank makes from its own measurements (the
  // speculative controller's number of drafts) that every rank must then follow.
  virtual int64_t BroadcastFromFirst(int64_t value) = 0;
  // Rank 0's `values` (any length) into every rank's `values`: the server's step plan.
  virtual void BroadcastFromFirst(std::vector<int64_t>& values) = 0;
  // In place: data[i] = sum over ranks, the same bits on every rank (ranks may not diverge).
  virtual void AllReduceSum(float* data, size_t count) = 0;
  // out[P count] = every rank's block of `count` floats, in rank order.
  virtual void AllGather(const float* data, size_t count, float* out) = 0;
  // out[count / P] = this rank's block of the element-wise sum of every rank's data[count].
  virtual void ReduceScatterSum(const float* data, size_t count, float* out) = 0;
  // y[P m_local, n_local] = (rows of every rank's x_local [m_local, k], in rank order) . W^T,
  // the gather overlapped with gemm (which writes n_local columns).
  virtual void AllGatherMatmul(const float* x_local, size_t m_local, size_t k, size_t n_local, const LocalGemm& gemm,
                               float* y) = 0;
  // y_local[m / P, n] = this rank's row block of sum over ranks of x[m, k_local] . W_local^T,
  // the partial products reduced around the ring while later blocks are computed.
  virtual void MatmulReduceScatter(const float* x, size_t m, size_t k_local, size_t n, const LocalGemm& gemm,
                                   float* y_local) = 0;
};

}  // namespace tessera
