// model/tensor_parallel.h's TensorParallelGroup over an MPI communicator (parallel/communicator.h),
// with the fused collective matmuls of parallel/collective_matmul.h.
#pragma once

#include <memory>

#include "parallel/collective_matmul.h"
#include "parallel/communicator.h"
#include "model/tensor_parallel.h"

namespace tessera {

class MpiTensorParallelGroup final : public TensorParallelGroup {
 public:
  explicit MpiTensorParallelGroup(Communicator comm, CollectiveMatmulOptions options = {});
  int rank() const override { return comm_.rank(); }
  int size() const override { return comm_.size(); }
  int64_t BroadcastFromFirst(int64_t value) override;
  void BroadcastFromFirst(std::vector<int64_t>& values) override;
  // All-gather, then every rank adds the P blocks in rank order: the same bits everywhere,
  // which MPI_Allreduce does not promise.
  void AllReduceSum(float* data, size_t count) override;
  void AllGather(const float* data, size_t count, float* out) override;
  void ReduceScatterSum(const float* data, size_t count, float* out) override;
  void AllGatherMatmul(const float* x_local, size_t m_local, size_t k, size_t n_local, const LocalGemm& gemm,
                       float* y) override;
  void MatmulReduceScatter(const float* x, size_t m, size_t k_local, size_t n, const LocalGemm& gemm,
                           float* y_local) override;

 private:
  Communicator comm_;
  CollectiveMatmulOptions options_;
};

// The group for `--tp P`: the world's communicator, which must have exactly P ranks (a one-line
// tessera::Error telling how to launch otherwise). P = 1 returns nullptr (no parallelism).
std::shared_ptr<TensorParallelGroup> MakeTensorParallelGroup(int tp);

}  // namespace tessera
