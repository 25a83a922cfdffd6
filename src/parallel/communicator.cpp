#include "parallel/communicator.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>

#include "core/error.h"

namespace tessera {
namespace parallel_internal {

// A self-message of a one-rank world without MPI: posted, then matched by the first opposite
// operation with the same tag (MPI's order rule), which copies the bytes and completes both.
struct LocalMessage {
  bool is_send = false;
  int tag = 0;
  const void* send_data = nullptr;
  void* recv_data = nullptr;
  size_t bytes = 0;
  bool done = false;
  std::weak_ptr<CommState> owner;
};

struct CommState {
  MPI_Comm comm = MPI_COMM_NULL;         // MPI_COMM_NULL: a one-rank world without MPI
  MPI_Comm kernel_comm = MPI_COMM_NULL;  // a duplicate of comm, owned
  bool owns_comm = false;                // false for MPI_COMM_WORLD
  int tag_ub = INT_MAX;
  // Local mode: unmatched self-messages in posting order.
  std::deque<std::shared_ptr<LocalMessage>> sends, recvs;

  ~CommState() {
    int finalized = 1;
    MPI_Finalized(&finalized);
    if (finalized) return;  // MPI freed everything already
    if (kernel_comm != MPI_COMM_NULL) MPI_Comm_free(&kernel_comm);
    if (owns_comm && comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
  }
};

}  // namespace parallel_internal

using parallel_internal::CommState;
using parallel_internal::LocalMessage;

namespace {

// MPI error strings are one line, but nothing promises it.
std::string MpiErrorString(int rc) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) return StrCat("MPI error code ", rc);  // MPI_Error_string needs MPI
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(rc, text, &length) != MPI_SUCCESS) return StrCat("MPI error code ", rc);
  std::string s(text, static_cast<size_t>(std::max(length, 0)));
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s;
}

template <typename... Args>
void CheckMpiCall(int rc, Args&&... what) {
  if (rc != MPI_SUCCESS) CheckMpi(rc, StrCat(std::forward<Args>(what)...));
}

int CheckedCount(const char* op, size_t bytes) {
  if (bytes > static_cast<size_t>(INT_MAX)) {
    Fail(op, ": message of ", bytes, " bytes exceeds the ", INT_MAX, " bytes of one MPI message");
  }
  return static_cast<int>(bytes);
}

void FinalizeAtExit() {
  int finalized = 1;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

// Sets MPI_ERRORS_RETURN on comm and makes the kernels' duplicate (errors are inherited by dups).
void PrepareMpiState(CommState& state) {
  CheckMpiCall(MPI_Comm_set_errhandler(state.comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  CheckMpiCall(MPI_Comm_dup(state.comm, &state.kernel_comm), "MPI_Comm_dup");
  int* tag_ub = nullptr;
  int found = 0;
  CheckMpiCall(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &found), "MPI_Comm_get_attr(MPI_TAG_UB)");
  state.tag_ub = found && tag_ub != nullptr ? *tag_ub : 32767;
}

std::shared_ptr<CommState> MakeWorldState() {
  auto state = std::make_shared<CommState>();
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized && !StartedByMpiLauncher()) return state;  // one rank, no MPI
  if (!initialized) {
    int provided = MPI_THREAD_SINGLE;
    const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    if (rc != MPI_SUCCESS) Fail("MPI_Init_thread failed (error code ", rc, ")");
    std::atexit(FinalizeAtExit);
    if (provided < MPI_THREAD_FUNNELED) {
      Fail("the MPI library provides thread level ", provided,
           ", below MPI_THREAD_FUNNELED, which the collective matmuls need");
    }
  } else {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) Fail("MPI was already finalized before tessera's first use of it");
  }
  state->comm = MPI_COMM_WORLD;
  state->owns_comm = false;
  PrepareMpiState(*state);
  return state;
}

// Matches a newly posted self-message against the opposite queue (local mode).
void PostLocal(CommState& state, const std::shared_ptr<LocalMessage>& message) {
  auto& opposite = message->is_send ? state.recvs : state.sends;
  for (auto it = opposite.begin(); it != opposite.end(); ++it) {
    if ((*it)->tag != message->tag) continue;
    LocalMessage& send = message->is_send ? *message : **it;
    LocalMessage& recv = message->is_send ? **it : *message;
    if (send.bytes > recv.bytes) {
      Fail("message of ", send.bytes, " bytes to self (tag ", send.tag, ") is longer than the ", recv.bytes,
           "-byte receive buffer");
    }
    if (send.bytes > 0) std::memcpy(recv.recv_data, send.send_data, send.bytes);
    send.done = recv.done = true;
    opposite.erase(it);
    return;
  }
  (message->is_send ? state.sends : state.recvs).push_back(message);
}

void CancelLocal(const std::shared_ptr<LocalMessage>& message) {
  const auto state = message->owner.lock();
  if (!state) return;
  auto& queue = message->is_send ? state->sends : state->recvs;
  queue.erase(std::remove(queue.begin(), queue.end(), message), queue.end());
}

}  // namespace

void CheckMpi(int rc, std::string_view what) {
  if (rc != MPI_SUCCESS) Fail(what, ": ", MpiErrorString(rc));
}

bool MpiAllowsOtherThreads() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) return true;
  int level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&level);
  return level >= MPI_THREAD_SERIALIZED;
}

bool StartedByMpiLauncher() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE", "MPI_LOCALNRANKS"}) {
    if (std::getenv(name) != nullptr) return true;
  }
  return false;
}

// ---- CommRequest --------------------------------------------------------------------------------

CommRequest::CommRequest(CommRequest&& other) noexcept
    : mpi_(other.mpi_), local_(std::move(other.local_)) {
  other.mpi_ = MPI_REQUEST_NULL;
}

CommRequest& CommRequest::operator=(CommRequest&& other) noexcept {
  if (this != &other) {
    Release();
    mpi_ = other.mpi_;
    local_ = std::move(other.local_);
    other.mpi_ = MPI_REQUEST_NULL;
  }
  return *this;
}

CommRequest::~CommRequest() { Release(); }

void CommRequest::Release() {
  if (mpi_ != MPI_REQUEST_NULL) {
    int finalized = 1;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Wait(&mpi_, MPI_STATUS_IGNORE);  // errors cannot be thrown from here
    mpi_ = MPI_REQUEST_NULL;
  }
  if (local_ && !local_->done) CancelLocal(local_);  // nothing else refers to its buffer
  local_.reset();
}

bool CommRequest::active() const { return mpi_ != MPI_REQUEST_NULL || (local_ && !local_->done); }

bool CommRequest::Test() {
  if (local_) {
    if (!local_->done) return false;
    local_.reset();
    return true;
  }
  if (mpi_ == MPI_REQUEST_NULL) return true;
  int flag = 0;
  CheckMpiCall(MPI_Test(&mpi_, &flag, MPI_STATUS_IGNORE), "MPI_Test on a point-to-point request");
  return flag != 0;
}

void CommRequest::Wait() {
  if (local_) {
    if (!local_->done) {
      const auto message = local_;
      Fail(message->is_send ? "send to self" : "receive from self", " (tag ", message->tag,
           ") has no matching ", message->is_send ? "receive" : "send",
           " and can never complete in a one-rank world without MPI");
    }
    local_.reset();
    return;
  }
  if (mpi_ == MPI_REQUEST_NULL) return;
  CheckMpiCall(MPI_Wait(&mpi_, MPI_STATUS_IGNORE), "MPI_Wait on a point-to-point request");
}

// ---- Communicator -------------------------------------------------------------------------------

Communicator::Communicator(std::shared_ptr<CommState> state) : state_(std::move(state)) {
  if (state_->comm != MPI_COMM_NULL) {
    CheckMpiCall(MPI_Comm_rank(state_->comm, &rank_), "MPI_Comm_rank");
    CheckMpiCall(MPI_Comm_size(state_->comm, &size_), "MPI_Comm_size");
  }
}

bool Communicator::uses_mpi() const { return state_->comm != MPI_COMM_NULL; }
MPI_Comm Communicator::handle() const { return state_->comm; }
MPI_Comm Communicator::kernel_handle() const { return state_->kernel_comm; }
int Communicator::max_tag() const { return state_->tag_ub; }

void Communicator::CheckPeer(const char* op, int peer) const {
  if (peer < 0 || peer >= size_) Fail(op, ": rank ", peer, " is not in a communicator of ", size_, " ranks");
}

Communicator Communicator::Split(int color, int key) const {
  if (color < 0) Fail("Communicator::Split: color ", color, " is negative");
  auto state = std::make_shared<CommState>();
  if (uses_mpi()) {
    CheckMpiCall(MPI_Comm_split(state_->comm, color, key, &state->comm), "MPI_Comm_split(color ", color, ")");
    state->owns_comm = true;
    PrepareMpiState(*state);
  }
  return Communicator(std::move(state));
}

CommRequest Communicator::Isend(const void* data, size_t bytes, int peer, int tag) const {
  CheckPeer("Isend", peer);
  if (tag < 0 || tag > state_->tag_ub) {
    Fail("Isend to rank ", peer, ": tag ", tag, " outside [0, ", state_->tag_ub, "]");
  }
  const int count = CheckedCount("Isend", bytes);
  CommRequest request;
  if (!uses_mpi()) {
    auto message = std::make_shared<LocalMessage>();
    message->is_send = true;
    message->tag = tag;
    message->send_data = data;
    message->bytes = bytes;
    message->owner = state_;
    PostLocal(*state_, message);
    request.local_ = std::move(message);
    return request;
  }
  CheckMpiCall(MPI_Isend(data, count, MPI_BYTE, peer, tag, state_->comm, &request.mpi_), "MPI_Isend of ", bytes,
               " bytes to rank ", peer);
  return request;
}

CommRequest Communicator::Irecv(void* data, size_t bytes, int peer, int tag) const {
  CheckPeer("Irecv", peer);
  if (tag < 0 || tag > state_->tag_ub) {
    Fail("Irecv from rank ", peer, ": tag ", tag, " outside [0, ", state_->tag_ub, "]");
  }
  const int count = CheckedCount("Irecv", bytes);
  CommRequest request;
  if (!uses_mpi()) {
    auto message = std::make_shared<LocalMessage>();
    message->is_send = false;
    message->tag = tag;
    message->recv_data = data;
    message->bytes = bytes;
    message->owner = state_;
    PostLocal(*state_, message);
    request.local_ = std::move(message);
    return request;
  }
  CheckMpiCall(MPI_Irecv(data, count, MPI_BYTE, peer, tag, state_->comm, &request.mpi_), "MPI_Irecv of ", bytes,
               " bytes from rank ", peer);
  return request;
}

namespace {
// In-place all-reduce in slices below MPI's int count limit.
template <typename T>
void AllReduceInPlace(MPI_Comm comm, T* data, size_t count, MPI_Datatype type, MPI_Op op, const char* what) {
  constexpr size_t kSlice = size_t{1} << 30;
  for (size_t begin = 0; begin < count; begin += kSlice) {
    const int n = static_cast<int>(std::min(kSlice, count - begin));
    CheckMpiCall(MPI_Allreduce(MPI_IN_PLACE, data + begin, n, type, op, comm), what, " of ", count, " elements");
  }
}
}  // namespace

void Communicator::AllReduceSum(float* data, size_t count) const {
  if (uses_mpi()) AllReduceInPlace(state_->comm, data, count, MPI_FLOAT, MPI_SUM, "MPI_Allreduce(sum, f32)");
}

void Communicator::AllReduceSum(int64_t* data, size_t count) const {
  if (uses_mpi()) AllReduceInPlace(state_->comm, data, count, MPI_INT64_T, MPI_SUM, "MPI_Allreduce(sum, i64)");
}

void Communicator::AllReduceMax(int64_t* data, size_t count) const {
  if (uses_mpi()) AllReduceInPlace(state_->comm, data, count, MPI_INT64_T, MPI_MAX, "MPI_Allreduce(max, i64)");
}

void Communicator::AllGather(const void* send, size_t bytes, void* recv) const {
  if (!uses_mpi()) {
    if (bytes > 0 && send != recv) std::memmove(recv, send, bytes);
    return;
  }
  const int count = CheckedCount("AllGather", bytes);
  CheckMpiCall(MPI_Allgather(send, count, MPI_BYTE, recv, count, MPI_BYTE, state_->comm), "MPI_Allgather of ", bytes,
               " bytes per rank");
}

void Communicator::ReduceScatterSum(const float* send, float* recv, size_t count) const {
  if (!uses_mpi()) {
    if (count > 0 && send != recv) std::memmove(recv, send, count * sizeof(float));
    return;
  }
  const int n = CheckedCount("ReduceScatterSum", count * sizeof(float)) / static_cast<int>(sizeof(float));
  CheckMpiCall(MPI_Reduce_scatter_block(send, recv, n, MPI_FLOAT, MPI_SUM, state_->comm),
               "MPI_Reduce_scatter_block of ", count, " floats per rank");
}

void Communicator::Broadcast(void* data, size_t bytes, int root) const {
  CheckPeer("Broadcast", root);
  if (!uses_mpi()) return;
  constexpr size_t kSlice = size_t{1} << 30;
  auto* bytes_ptr = static_cast<char*>(data);
  for (size_t begin = 0; begin < bytes; begin += kSlice) {
    const int n = static_cast<int>(std::min(kSlice, bytes - begin));
    CheckMpiCall(MPI_Bcast(bytes_ptr + begin, n, MPI_BYTE, root, state_->comm), "MPI_Bcast of ", bytes,
                 " bytes from rank ", root);
  }
}

void Communicator::Barrier() const {
  if (uses_mpi()) CheckMpiCall(MPI_Barrier(state_->comm), "MPI_Barrier");
}

const Communicator& World() {
  // MakeWorldState registers MPI_Finalize with atexit before this object exists, so the world's
  // communicators are released first (static destructors and atexit run in reverse order).
  static const Communicator world(MakeWorldState());
  return world;
}

}  // namespace tessera
