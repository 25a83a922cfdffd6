#include "parallel/tp_group.h"

#include <cstring>
#include <vector>

#include "core/error.h"

namespace tessera {

MpiTensorParallelGroup::MpiTensorParallelGroup(Communicator comm, CollectiveMatmulOptions options)
    : comm_(std::move(comm)), options_(options) {}

int64_t MpiTensorParallelGroup::BroadcastFromFirst(int64_t value) {
  comm_.Broadcast(&value, sizeof(value), 0);
  return value;
}

void MpiTensorParallelGroup::BroadcastFromFirst(std::vector<int64_t>& values) {
  int64_t n = static_cast<int64_t>(values.size());
  comm_.Broadcast(&n, sizeof(n), 0);
  values.resize(static_cast<size_t>(n));
  if (n > 0) comm_.Broadcast(values.data(), values.size() * sizeof(int64_t), 0);
}

void MpiTensorParallelGroup::AllReduceSum(float* data, size_t count) {
  const int P = comm_.size();
  if (P == 1) return;
  std::vector<float> all(static_cast<size_t>(P) * count);
  comm_.AllGather(data, count * sizeof(float), all.data());
  std::memcpy(data, all.data(), count * sizeof(float));
  for (int p = 1; p < P; ++p) {
    const float* block = &all[static_cast<size_t>(p) * count];
    for (size_t i = 0; i < count; ++i) data[i] += block[i];
  }
}

void MpiTensorParallelGroup::AllGather(const float* data, size_t count, float* out) {
  comm_.AllGather(data, count * sizeof(float), out);
}

void MpiTensorParallelGroup::ReduceScatterSum(const float* data, size_t count, float* out) {
  const int P = comm_.size(), r = comm_.rank();
  TESSERA_CHECK(count % static_cast<size_t>(P) == 0);
  const size_t block = count / P;
  // Every rank's block of rank r, gathered, added in rank order (deterministic for a given P).
  std::vector<float> all(static_cast<size_t>(P) * count);
  comm_.AllGather(data, count * sizeof(float), all.data());
  std::memcpy(out, &all[r * block], block * sizeof(float));
  for (int p = 1; p < P; ++p) {
    const float* src = &all[static_cast<size_t>(p) * count + r * block];
    for (size_t i = 0; i < block; ++i) out[i] += src[i];
  }
}

void MpiTensorParallelGroup::AllGatherMatmul(const float* x_local, size_t m_local, size_t k, size_t n_local,
                                             const LocalGemm& gemm, float* y) {
  LocalMatmul w;
  w.format = LinearFormat::kF32;  // the model's mix of formats lives inside gemm
  w.n = n_local;
  w.k = k;
  w.gemm = gemm;
  tessera::AllGatherMatmul(comm_, x_local, m_local, k, w, y, n_local, options_);
}

void MpiTensorParallelGroup::MatmulReduceScatter(const float* x, size_t m, size_t k_local, size_t n,
                                                 const LocalGemm& gemm, float* y_local) {
  LocalMatmul w;
  w.format = LinearFormat::kF32;
  w.n = n;
  w.k = k_local;
  w.gemm = gemm;
  tessera::MatmulReduceScatter(comm_, x, m, k_local, w, y_local, n, options_);
}

std::shared_ptr<TensorParallelGroup> MakeTensorParallelGroup(int tp) {
  if (tp < 1) Fail("--tp must be at least 1, got ", tp);
  if (tp == 1) return nullptr;
  const Communicator& world = World();
  if (world.size() != tp) {
    Fail("--tp ", tp, " needs ", tp, " MPI ranks but this job has ", world.size(),
         " (launch with: mpirun -np ", tp, " tessera ... --tp ", tp, ")");
  }
  return std::make_shared<MpiTensorParallelGroup>(world);
}

}  // namespace tessera
