// A thin layer over MPI: the ranks of a job, sub-communicators, nonblocking point-to-point and the
// collectives tensor parallelism needs (all-reduce, all-gather, broadcast, barrier).
//
// MPI is initialised lazily, on the first World() call, with MPI_THREAD_SERIALIZED requested
// (tessera calls MPI from one thread at a time; the collective matmuls run their GEMMs on other
// threads that never call MPI, which MPI_THREAD_FUNNELED, the least accepted, also allows). It is
// finalised at exit when tessera initialised it. A process that was not started by an MPI launcher
// (no mpirun/srun/hydra environment) never initialises MPI: its world is one rank whose
// collectives are local copies and whose point-to-point messages go to itself in memory, so a
// single-process run needs no mpirun and pays nothing for MPI.
//
// Every MPI failure becomes a tessera::Error with one line naming the operation, the peer and
// MPI's error string (the communicators use MPI_ERRORS_RETURN). Arguments are checked before MPI is
// called (peer ranks, tags, sizes), so a bad call is an Error on the calling rank rather than an
// abort of the job.
//
// Thread use: one thread at a time may call into a Communicator or CommRequest; with
// MPI_THREAD_FUNNELED (if that is all the MPI library provides) it must be the thread that made the
// first World() call.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

namespace tessera {

namespace parallel_internal {
struct CommState;
struct LocalMessage;
}  // namespace parallel_internal

// A pending Isend/Irecv. Default-constructed and completed requests are inactive. Destroying an
// active request waits for it (MPI still owns the buffer until then).
class CommRequest {
 public:
  CommRequest() = default;
  CommRequest(CommRequest&& other) noexcept;
  CommRequest& operator=(CommRequest&& other) noexcept;
  CommRequest(const CommRequest&) = delete;
  CommRequest& operator=(const CommRequest&) = delete;
  ~CommRequest();

  bool active() const;
  // True once the operation has completed (then the request is inactive); drives MPI progress.
  bool Test();
  // Blocks until the operation completes. A message to or from itself in a one-rank world without
  // MPI that has no matching partner yet can never complete: that is an Error, not a hang.
  void Wait();

 private:
  friend class Communicator;
  void Release();  // waits for an active MPI request, cancels an unmatched self-message
  MPI_Request mpi_ = MPI_REQUEST_NULL;
  std::shared_ptr<parallel_internal::LocalMessage> local_;
};

class Communicator {
 public:
  // Copies share the same underlying MPI communicator (freed with the last copy).
  Communicator(const Communicator&) = default;
  Communicator& operator=(const Communicator&) = default;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // False for the one-rank world of a process started without an MPI launcher (and its splits).
  bool uses_mpi() const;

  // The MPI communicator for direct MPI use; MPI_COMM_NULL when !uses_mpi().
  MPI_Comm handle() const;
  // A duplicate of handle() reserved for tessera's own point-to-point protocols (parallel/
  // collective_matmul.h), so their tags never match the caller's messages.
  MPI_Comm kernel_handle() const;

  // The largest tag point-to-point messages may carry (MPI_TAG_UB, at least 32767).
  int max_tag() const;

  // Collective over this communicator: ranks with the same color form a new communicator, ordered
  // by key (ties by rank). color must be >= 0 (every rank ends up in some communicator).
  Communicator Split(int color, int key) const;

  // Nonblocking point-to-point of `bytes` raw bytes (< 2^31) with rank `peer` of this communicator,
  // 0 <= tag <= max_tag(). The buffer must stay valid until the request completes.
  CommRequest Isend(const void* data, size_t bytes, int peer, int tag) const;
  CommRequest Irecv(void* data, size_t bytes, int peer, int tag) const;

  // In place: data[i] = sum over ranks (float32 arithmetic in MPI's reduction order, which MPI
  // does not promise to be the same on every rank: broadcast decisions taken from the result).
  void AllReduceSum(float* data, size_t count) const;
  // In place, exact.
  void AllReduceSum(int64_t* data, size_t count) const;
  void AllReduceMax(int64_t* data, size_t count) const;
  // recv[size() * bytes] = the ranks' `bytes`-byte blocks in rank order; recv must not overlap
  // send.
  void AllGather(const void* send, size_t bytes, void* recv) const;
  // recv[count] = block rank() of the element-wise sum over ranks of send[size() * count]
  // (MPI_Reduce_scatter_block; float32 in MPI's order).
  void ReduceScatterSum(const float* send, float* recv, size_t count) const;
  // data[bytes] from rank `root` to every rank.
  void Broadcast(void* data, size_t bytes, int root) const;
  void Barrier() const;

 private:
  friend const Communicator& World();
  explicit Communicator(std::shared_ptr<parallel_internal::CommState> state);
  void CheckPeer(const char* op, int peer) const;

  std::shared_ptr<parallel_internal::CommState> state_;
  int rank_ = 0;
  int size_ = 1;
};

// The job's world (MPI_COMM_WORLD), initialising MPI on first use; a one-rank world without MPI
// when the process was not started by an MPI launcher. Throws tessera::Error if MPI cannot be
// initialised.
const Communicator& World();

// For code that calls MPI directly on Communicator::handle(): nothing when rc is MPI_SUCCESS,
// otherwise a tessera::Error "<what>: <MPI's error string>" on one line.
void CheckMpi(int rc, std::string_view what);

// Whether a thread other than the one that initialised MPI may call it (the MPI library granted
// MPI_THREAD_SERIALIZED or more; true without MPI). `serve --tp` runs its forward passes on the
// engine thread and needs it.
bool MpiAllowsOtherThreads();

// True when the environment shows an MPI launcher (Open MPI's mpirun, PMIx, PMI/hydra, Slurm PMI).
bool StartedByMpiLauncher();

}  // namespace tessera
