#include "parallel/collective_matmul.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "kernels/q8.h"

namespace tessera {

// ---- local shards -------------------------------------------------------------------------------

LocalMatmul LinearShard(const LinearWeights& weights, const float* bias, int64_t matrix) {
  return {weights.format(), static_cast<size_t>(weights.rows()), static_cast<size_t>(weights.cols()),
          [&weights, bias, matrix](const float* x, size_t m, float* y, size_t ldy) {
            Q8Activations xq;
            Multiply(weights, x, m, xq, bias, y, matrix, ldy);
          }};
}

size_t EvenShard(std::string_view what, size_t total, int ranks) {
  if (ranks < 1) Fail(what, ": tensor-parallel degree ", ranks, " is not positive");
  if (total % static_cast<size_t>(ranks) != 0) {
    Fail(what, ": ", total, " do not split evenly over ", ranks, " tensor-parallel ranks");
  }
  return total / static_cast<size_t>(ranks);
}

namespace {

inline int Mod(int a, int p) { return ((a % p) + p) % p; }

// ---- validation ---------------------------------------------------------------------------------

enum class Op : int64_t {
  kAllGatherMatmul = 1,
  kAllGatherThenMatmul = 2,
  kMatmulReduceScatter = 3,
  kMatmulThenReduceScatter = 4,
};

const char* OpName(int64_t op) {
  switch (static_cast<Op>(op)) {
    case Op::kAllGatherMatmul: return "AllGatherMatmul";
    case Op::kAllGatherThenMatmul: return "AllGatherThenMatmul";
    case Op::kMatmulReduceScatter: return "MatmulReduceScatter";
    case Op::kMatmulThenReduceScatter: return "MatmulThenReduceScatter";
  }
  return "unknown operation";
}

std::string FormatName(int64_t format) {
  return format >= 0 && format < static_cast<int64_t>(LinearFormats().size())
             ? std::string(LinearFormatName(static_cast<LinearFormat>(format)))
             : "unknown";
}

const char* ScheduleName(int64_t schedule) {
  switch (static_cast<RingSchedule>(schedule)) {
    case RingSchedule::kAuto: return "auto";
    case RingSchedule::kUnidirectional: return "unidirectional";
    case RingSchedule::kBidirectional: return "bidirectional";
  }
  return "unknown";
}

// One rank's view of the call, all-gathered before any work so that every rank applies the same
// checks to the same numbers and throws the same error.
struct CallTuple {
  int64_t op, m, k, format, n, wk, ldy, flags, piece_rows, schedule;
};
constexpr int64_t kNullX = 1, kNullY = 2, kNoGemm = 4;  // CallTuple::flags

void Validate(const Communicator& comm, Op op, const float* x, size_t m, size_t k, const LocalMatmul& w,
              const float* y, size_t ldy, const CollectiveMatmulOptions& options) {
  const bool gather = op == Op::kAllGatherMatmul || op == Op::kAllGatherThenMatmul;
  const bool fused = op == Op::kAllGatherMatmul || op == Op::kMatmulReduceScatter;
  const size_t p = static_cast<size_t>(comm.size());
  const size_t y_rows = gather ? m * p : m / p;
  CallTuple mine{};
  mine.op = static_cast<int64_t>(op);
  mine.m = static_cast<int64_t>(m);
  mine.k = static_cast<int64_t>(k);
  mine.format = static_cast<int64_t>(w.format);
  mine.n = static_cast<int64_t>(w.n);
  mine.wk = static_cast<int64_t>(w.k);
  mine.ldy = static_cast<int64_t>(ldy);
  mine.flags = (x == nullptr && m * k > 0 ? kNullX : 0) | (y == nullptr && y_rows * w.n > 0 ? kNullY : 0) |
               (!w.gemm ? kNoGemm : 0);
  mine.piece_rows = fused ? static_cast<int64_t>(options.piece_rows) : 0;
  mine.schedule = fused ? static_cast<int64_t>(options.schedule) : 0;
  std::vector<CallTuple> all(p);
  comm.AllGather(&mine, sizeof(mine), all.data());

  const char* name = OpName(mine.op);
  const CallTuple& first = all[0];
  for (size_t r = 1; r < p; ++r) {
    if (all[r].op != first.op) {
      Fail(name, ": ranks called different operations (rank 0: ", OpName(first.op), ", rank ", r, ": ",
           OpName(all[r].op), ")");
    }
  }
  for (size_t r = 0; r < p; ++r) {
    if (all[r].flags & kNoGemm) Fail(name, ": rank ", r, ": the local matmul has no gemm function");
    if (all[r].flags & kNullX) Fail(name, ": rank ", r, ": x is null for ", all[r].m, " x ", all[r].k, " elements");
    if (all[r].flags & kNullY) Fail(name, ": rank ", r, ": y is null");
  }
  for (size_t r = 1; r < p; ++r) {
    if (all[r].format != first.format) {
      Fail(name, ": weight shard formats differ across ranks (rank 0: ", FormatName(first.format), ", rank ", r, ": ",
           FormatName(all[r].format), ")");
    }
  }
  for (size_t r = 0; r < p; ++r) {
    if (all[r].k != all[r].wk) {
      Fail(name, ": rank ", r, ": x has ", all[r].k, " columns but its weight shard contracts over ", all[r].wk,
           " (shard ", all[r].n, " x ", all[r].wk, ")");
    }
  }
  for (size_t r = 1; r < p; ++r) {
    if (gather && all[r].k != first.k) {
      Fail(name, ": x has ", first.k, " columns on rank 0 but ", all[r].k, " on rank ", r,
           " (the gathered rows must have one width)");
    }
    if (all[r].m != first.m) {
      if (gather) {
        Fail(name, ": row shards differ across ranks (rank 0: ", first.m, " rows, rank ", r, ": ", all[r].m,
             "): the rows of x must split evenly over the ", p, " ranks");
      }
      Fail(name, ": x has ", first.m, " rows on rank 0 but ", all[r].m, " on rank ", r);
    }
    if (!gather && all[r].n != first.n) {
      Fail(name, ": output widths differ across ranks (rank 0: ", first.n, " columns, rank ", r, ": ", all[r].n,
           "): the partial products must have one shape");
    }
  }
  if (!gather && first.m % static_cast<int64_t>(p) != 0) {
    Fail(name, ": m = ", first.m, " rows do not split evenly over ", p, " ranks");
  }
  for (size_t r = 0; r < p; ++r) {
    if (all[r].ldy < all[r].n) {
      Fail(name, ": rank ", r, ": ldy = ", all[r].ldy, " is smaller than the shard's ", all[r].n, " output columns");
    }
    const int64_t block = LinearFormatColumnBlock(static_cast<LinearFormat>(all[r].format));
    if (all[r].wk % block != 0) {
      Fail(name, ": rank ", r, ": ", FormatName(all[r].format), " weight shards need k divisible by ", block,
           " (k = ", all[r].wk, ")");
    }
  }
  if (fused) {
    for (size_t r = 0; r < p; ++r) {
      if (all[r].piece_rows < 1) Fail(name, ": rank ", r, ": options.piece_rows must be at least 1");
      if (all[r].piece_rows != first.piece_rows || all[r].schedule != first.schedule) {
        Fail(name, ": options differ across ranks (rank 0: piece_rows ", first.piece_rows, ", schedule ",
             ScheduleName(first.schedule), "; rank ", r, ": piece_rows ", all[r].piece_rows, ", schedule ",
             ScheduleName(all[r].schedule), ")");
      }
    }
  }
}

// ---- the ring's geometry -------------------------------------------------------------------------

struct Span {
  size_t begin = 0, rows = 0;
};

// [begin, begin + length) as pieces for the ring, in sending order: pieces of about `grain` rows,
// except that the last `grain` rows go as grain/2, grain/4, grain/8, grain/8. Whatever arrives
// last is multiplied (AllGatherMatmul) or reduced (MatmulReduceScatter) after the transfer has
// ended, so a small last piece keeps that tail short (at 128-row pieces it was 15 ms of a 250 ms
// call on the development VM); the GEMM thread merges pieces that arrive together again.
std::vector<Span> SplitRows(size_t begin, size_t length, size_t grain) {
  std::vector<Span> spans;
  if (length == 0) return spans;
  std::vector<size_t> tail;  // sizes of the shrinking last pieces, last first
  size_t body = length;
  if (length > grain && grain >= 8) {
    tail = {grain / 8, grain / 8, grain / 4, grain - grain / 4 - 2 * (grain / 8)};
    body = length - grain;
  }
  const size_t count = (body + grain - 1) / grain;
  const size_t base = body / count, extra = body % count;
  size_t row = begin;
  for (size_t j = 0; j < count; ++j) {
    const size_t rows = base + (j < extra ? 1 : 0);
    spans.push_back({row, rows});
    row += rows;
  }
  for (size_t j = tail.size(); j-- > 0;) {
    spans.push_back({row, tail[j]});
    row += tail[j];
  }
  return spans;
}

// How one shard (AG) or row block (RS) of `rows` rows is cut: 1 or 2 halves, each travelling in
// its direction (+1: to rank r+1, -1: to rank r-1), each cut into pieces. A piece is identified
// across ranks by (half h, owner: the source shard or destination block, index j).
struct RingPlan {
  int p = 1, r = 0;
  int halves = 1;
  int dir[2] = {1, -1};
  std::vector<Span> pieces[2];  // rows within the shard/block
  size_t max_pieces = 0;

  int To(int h) const { return Mod(r + dir[h], p); }
  int From(int h) const { return Mod(r - dir[h], p); }
  int Tag(int h, int owner, size_t j) const {
    return static_cast<int>((static_cast<size_t>(h) * p + owner) * max_pieces + j);
  }
};

RingPlan MakePlan(const Communicator& comm, size_t rows, size_t row_bytes, const CollectiveMatmulOptions& options,
                  bool reduce_scatter, const char* name) {
  RingPlan plan;
  plan.p = comm.size();
  plan.r = comm.rank();
  const RingSchedule schedule = options.schedule == RingSchedule::kAuto
                                    ? (plan.p == 2 ? RingSchedule::kUnidirectional : RingSchedule::kBidirectional)
                                    : options.schedule;
  size_t half_begin[2] = {0, 0}, half_rows[2] = {rows, 0};
  if (schedule == RingSchedule::kBidirectional) {
    plan.halves = 2;
    half_rows[0] = rows / 2;
    half_begin[1] = rows / 2;
    half_rows[1] = rows - rows / 2;
  } else {
    // §3: the unidirectional reduce-scatter receives from r+1 (partial sums travel down); the
    // all-gather receives from r-1.
    plan.dir[0] = reduce_scatter ? -1 : 1;
  }
  // Every message below 2^31 bytes, every tag within MPI_TAG_UB (the same numbers on every rank).
  size_t grain = std::max<size_t>(1, options.piece_rows);
  if (row_bytes > 0) grain = std::min(grain, std::max<size_t>(1, static_cast<size_t>(INT_MAX) / row_bytes));
  const size_t tag_slots = static_cast<size_t>(comm.max_tag()) + 1;
  const size_t max_count = tag_slots / (static_cast<size_t>(plan.halves) * plan.p);
  const size_t longest = std::max(half_rows[0], half_rows[1]);
  if (max_count <= 4) Fail(name, ": MPI_TAG_UB = ", comm.max_tag(), " is too small for ", plan.p, " ranks");
  grain = std::max(grain, (longest + max_count - 5) / (max_count - 4));  // SplitRows adds <= 3 pieces
  if (row_bytes > 0 && grain * row_bytes > static_cast<size_t>(INT_MAX)) {
    Fail(name, ": ", rows, " rows of ", row_bytes, " bytes need more messages than MPI_TAG_UB = ", comm.max_tag(),
         " allows");
  }
  for (int h = 0; h < plan.halves; ++h) {
    plan.pieces[h] = SplitRows(half_begin[h], half_rows[h], grain);
    plan.max_pieces = std::max(plan.max_pieces, plan.pieces[h].size());
  }
  return plan;
}

// ---- per-thread scratch -------------------------------------------------------------------------

// Reused across calls so that steady-state calls do not page-fault fresh buffers.
float* Scratch(int slot, size_t floats) {
  thread_local std::vector<float> buffers[2];
  std::vector<float>& buffer = buffers[slot];
  if (buffer.size() < floats) buffer.resize(floats);
  return buffer.data();
}

// ---- the ring's messages ------------------------------------------------------------------------

// All MPI requests of one call, polled together. Receives are posted at once (they carry an id
// chosen by the caller); sends are queued per lane (ring direction) and at most `max_in_flight` per
// lane are active, so that a link carries its pieces in order instead of sharing its bandwidth
// among all of them (which would make every piece arrive at the end).
class RingMessages {
 public:
  RingMessages(MPI_Comm comm, const char* name, int max_in_flight)
      : comm_(comm), name_(name), max_in_flight_(max_in_flight) {}
  RingMessages(const RingMessages&) = delete;
  RingMessages& operator=(const RingMessages&) = delete;

  // Only on error paths: requests still active when the call gives up (the job cannot continue
  // its ring anyway; MPI errors are not recoverable).
  ~RingMessages() {
    for (MPI_Request& request : requests_) {
      if (request == MPI_REQUEST_NULL) continue;
      MPI_Cancel(&request);
      MPI_Request_free(&request);
    }
  }

  void PostRecv(void* data, size_t bytes, int peer, int tag, int id) {
    requests_.push_back(MPI_REQUEST_NULL);
    owners_.push_back(id);
    Check(MPI_Irecv(data, static_cast<int>(bytes), MPI_BYTE, peer, tag, comm_, &requests_.back()),
          "MPI_Irecv from rank ", peer);
    ++active_;
    recv_slot_.resize(std::max<size_t>(recv_slot_.size(), id + 1), -1);
    recv_slot_[id] = static_cast<int>(requests_.size()) - 1;
  }

  void QueueSend(int lane, const void* data, size_t bytes, int peer, int tag) {
    queued_[lane].push_back({data, bytes, peer, tag});
    Pump(lane);
  }

  // One MPI progress round over every request; on_recv(id) for each completed receive.
  template <typename OnRecv>
  bool Poll(OnRecv&& on_recv) {
    if (active_ == 0) return false;
    int count = 0;
    completed_.resize(requests_.size());
    Check(MPI_Testsome(static_cast<int>(requests_.size()), requests_.data(), &count, completed_.data(),
                       MPI_STATUSES_IGNORE),
          "MPI_Testsome");
    if (count == MPI_UNDEFINED || count == 0) return false;
    for (int c = 0; c < count; ++c) Complete(completed_[c], on_recv);
    return true;
  }

  // Blocks until receive `id` has completed (the naive schedule), then like Poll's on_recv.
  void WaitRecv(int id) {
    MPI_Request& request = requests_[recv_slot_[id]];
    if (request == MPI_REQUEST_NULL) return;
    Check(MPI_Wait(&request, MPI_STATUS_IGNORE), "MPI_Wait");
    --active_;
  }

  void WaitAll() {
    while (active_ > 0 || queued_[0].size() + queued_[1].size() > 0) {
      for (size_t i = 0; i < requests_.size(); ++i) {
        if (requests_[i] == MPI_REQUEST_NULL) continue;
        Check(MPI_Wait(&requests_[i], MPI_STATUS_IGNORE), "MPI_Wait");
        Complete(static_cast<int>(i), [](int) {});
      }
    }
  }

  bool Idle() const { return active_ == 0 && queued_[0].empty() && queued_[1].empty(); }

 private:
  struct Send {
    const void* data;
    size_t bytes;
    int peer, tag;
  };

  template <typename... Args>
  void Check(int rc, Args&&... what) {
    if (rc != MPI_SUCCESS) CheckMpi(rc, StrCat(name_, ": ", std::forward<Args>(what)...));
  }

  template <typename OnRecv>
  void Complete(int slot, OnRecv&& on_recv) {
    --active_;
    const int owner = owners_[slot];
    if (owner >= 0) {
      on_recv(owner);
    } else {
      const int lane = -1 - owner;
      --in_flight_[lane];
      Pump(lane);
    }
    requests_[slot] = MPI_REQUEST_NULL;
  }

  void Pump(int lane) {
    while (in_flight_[lane] < max_in_flight_ && !queued_[lane].empty()) {
      const Send send = queued_[lane].front();
      queued_[lane].pop_front();
      requests_.push_back(MPI_REQUEST_NULL);
      owners_.push_back(-1 - lane);
      Check(MPI_Isend(send.data, static_cast<int>(send.bytes), MPI_BYTE, send.peer, send.tag, comm_, &requests_.back()),
            "MPI_Isend to rank ", send.peer);
      ++active_;
      ++in_flight_[lane];
    }
  }

  MPI_Comm comm_;
  const char* name_;
  int max_in_flight_;
  std::vector<MPI_Request> requests_;
  std::vector<int> owners_;  // receive id >= 0, or -1 - lane for a send
  std::vector<int> recv_slot_;
  std::vector<int> completed_;
  std::deque<Send> queued_[2];
  int in_flight_[2] = {0, 0};
  int active_ = 0;
};

// Two sends per direction keep a link busy across the polling gap while still delivering pieces
// nearly in order.
constexpr int kSendsInFlight = 2;

// ---- the GEMM thread ----------------------------------------------------------------------------

// Shared between the calling thread (MPI) and the GEMM thread. `inbox`: work the caller released
// (AllGatherMatmul: arrived pieces); `outbox`: work the GEMM thread finished
// (MatmulReduceScatter: partial products ready to be reduced and sent).
struct Mailbox {
  std::mutex mutex;
  std::condition_variable to_gemm, to_caller;
  std::deque<int> inbox, outbox;
  bool gemm_finished = false;
  bool stop = false;  // the caller gives up (error path)
  std::exception_ptr error;
};

// Runs body on a new thread; joins it on destruction, telling it to stop first if it is still
// running (an error on the calling thread).
class GemmThread {
 public:
  GemmThread(Mailbox& mailbox, std::function<void()> body) : mailbox_(mailbox) {
    thread_ = std::thread([this, body = std::move(body)] {
      try {
        body();
      } catch (...) {
        std::lock_guard<std::mutex> lock(mailbox_.mutex);
        mailbox_.error = std::current_exception();
      }
      {
        std::lock_guard<std::mutex> lock(mailbox_.mutex);
        mailbox_.gemm_finished = true;
      }
      mailbox_.to_caller.notify_one();
    });
  }
  ~GemmThread() {
    {
      std::lock_guard<std::mutex> lock(mailbox_.mutex);
      mailbox_.stop = true;
    }
    mailbox_.to_gemm.notify_one();
    thread_.join();
  }

 private:
  Mailbox& mailbox_;
  std::thread thread_;
};

// The calling thread's wait between polls. While messages are in flight it sleeps poll_us,
// doubling up to max_poll_us while polls find nothing new, back to poll_us after progress: every
// wake-up preempts the GEMM thread when the two share a core (with a fixed 50 us period that cost
// about 40% of the GEMM on the 2-vCPU development VM), while TCP's socket buffers (MiBs) keep a
// link busy for milliseconds between refills. With nothing in flight it sleeps until the GEMM
// thread posts something. Returns early whenever the GEMM thread posts.
class CallerWait {
 public:
  CallerWait(Mailbox& mailbox, const CollectiveMatmulOptions& options)
      : mailbox_(mailbox),
        min_us_(std::max(1u, options.poll_us)),
        max_us_(std::max(min_us_, options.max_poll_us)),
        interval_us_(min_us_) {}

  bool seen_finished() const { return seen_finished_; }
  void Progressed() { interval_us_ = min_us_; }

  void Wait(bool messages_in_flight) {
    std::unique_lock<std::mutex> lock(mailbox_.mutex);
    const auto event = [&] { return !mailbox_.outbox.empty() || (mailbox_.gemm_finished && !seen_finished_); };
    if (messages_in_flight || seen_finished_) {
      mailbox_.to_caller.wait_for(lock, std::chrono::microseconds(interval_us_), event);
      interval_us_ = std::min(2 * interval_us_, max_us_);
    } else {
      mailbox_.to_caller.wait(lock, event);
    }
    if (mailbox_.gemm_finished) seen_finished_ = true;
  }

 private:
  Mailbox& mailbox_;
  unsigned min_us_, max_us_, interval_us_;
  bool seen_finished_ = false;
};

}  // namespace

// ---- AllGather + MatMul -------------------------------------------------------------------------

void AllGatherMatmul(const Communicator& comm, const float* x, size_t m_local, size_t k, const LocalMatmul& w,
                     float* y, size_t ldy, const CollectiveMatmulOptions& options) {
  const char* name = "AllGatherMatmul";
  Validate(comm, Op::kAllGatherMatmul, x, m_local, k, w, y, ldy, options);
  const int p = comm.size(), r = comm.rank();
  if (m_local == 0 || w.n == 0) return;
  if (p == 1) return w.gemm(x, m_local, y, ldy);

  const RingPlan plan = MakePlan(comm, m_local, k * sizeof(float), options, /*reduce_scatter=*/false, name);
  // Received rows land at their place in the gathered X [p m_local, k] (the own block stays unused:
  // own rows are sent and multiplied straight from x).
  float* gathered = Scratch(0, static_cast<size_t>(p) * m_local * k);

  // Remote pieces in the order they arrive: step t = 1 .. p-1 brings piece j of the lower half of
  // rank r - t and of the upper half of rank r + t (bidirectional; unidirectional: all of r - t).
  struct Remote {
    int half, src;
    size_t j, row, rows;  // row: in the gathered X
    bool forward;         // more ranks downstream still need it
  };
  std::vector<Remote> remote;
  for (int t = 1; t < p; ++t) {
    for (size_t j = 0; j < plan.max_pieces; ++j) {
      for (int h = 0; h < plan.halves; ++h) {
        if (j >= plan.pieces[h].size()) continue;
        const int src = Mod(r - plan.dir[h] * t, p);
        const Span& span = plan.pieces[h][j];
        remote.push_back({h, src, j, static_cast<size_t>(src) * m_local + span.begin, span.rows, t < p - 1});
      }
    }
  }

  RingMessages messages(comm.kernel_handle(), name, options.overlap ? kSendsInFlight : INT_MAX);
  const size_t row_bytes = k * sizeof(float);
  for (size_t i = 0; i < remote.size(); ++i) {
    const Remote& piece = remote[i];
    messages.PostRecv(gathered + piece.row * k, piece.rows * row_bytes, plan.From(piece.half),
                      plan.Tag(piece.half, piece.src, piece.j), static_cast<int>(i));
  }
  for (size_t j = 0; j < plan.max_pieces; ++j) {
    for (int h = 0; h < plan.halves; ++h) {
      if (j >= plan.pieces[h].size()) continue;
      const Span& span = plan.pieces[h][j];
      messages.QueueSend(h, x + span.begin * k, span.rows * row_bytes, plan.To(h), plan.Tag(h, r, j));
    }
  }
  const auto forward = [&](int i) {
    const Remote& piece = remote[i];
    if (piece.forward) {
      messages.QueueSend(piece.half, gathered + piece.row * k, piece.rows * row_bytes, plan.To(piece.half),
                         plan.Tag(piece.half, piece.src, piece.j));
    }
  };
  float* own_y = y + static_cast<size_t>(r) * m_local * ldy;

  if (!options.overlap) {
    w.gemm(x, m_local, own_y, ldy);
    for (size_t i = 0; i < remote.size(); ++i) {
      messages.WaitRecv(static_cast<int>(i));
      forward(static_cast<int>(i));
      w.gemm(gathered + remote[i].row * k, remote[i].rows, y + remote[i].row * ldy, ldy);
    }
    messages.WaitAll();
    return;
  }

  // The GEMM thread multiplies the own rows first, in one call, while the first pieces travel;
  // then whatever has arrived, merging pieces that are adjacent in the gathered X into one call
  // (the GEMM runs about 8% slower on 128-row calls than on 512-row ones, measured for the BF16
  // kernel at k = 2880): pieces are small for the network's sake, calls large for the GEMM's.
  // While the network keeps up, everything but the own shard arrives during its GEMM and runs as
  // one call; when it does not, each piece is multiplied as it lands, and only the last one's
  // GEMM remains after the transfer. Row placement is by source: the order changes no bits.
  Mailbox mailbox;
  {
    GemmThread gemm_thread(mailbox, [&] {
      w.gemm(x, m_local, own_y, ldy);
      std::vector<int> batch;
      for (size_t remote_done = 0; remote_done < remote.size();) {
        {
          std::unique_lock<std::mutex> lock(mailbox.mutex);
          mailbox.to_gemm.wait(lock, [&] { return mailbox.stop || !mailbox.inbox.empty(); });
          if (mailbox.stop) return;
          batch.assign(mailbox.inbox.begin(), mailbox.inbox.end());
          mailbox.inbox.clear();
        }
        std::sort(batch.begin(), batch.end(), [&](int a, int b) { return remote[a].row < remote[b].row; });
        for (size_t i = 0; i < batch.size();) {
          const size_t row = remote[batch[i]].row;
          size_t rows = 0, j = i;
          for (; j < batch.size() && remote[batch[j]].row == row + rows; ++j) rows += remote[batch[j]].rows;
          w.gemm(gathered + row * k, rows, y + row * ldy, ldy);
          i = j;
        }
        remote_done += batch.size();
      }
    });
    CallerWait wait(mailbox, options);
    while (!(messages.Idle() && wait.seen_finished())) {
      const bool progressed = messages.Poll([&](int i) {
        forward(i);
        {
          std::lock_guard<std::mutex> lock(mailbox.mutex);
          mailbox.inbox.push_back(i);
        }
        mailbox.to_gemm.notify_one();
      });
      if (progressed) {
        wait.Progressed();
      } else {
        wait.Wait(!messages.Idle());
      }
    }
  }
  if (mailbox.error) std::rethrow_exception(mailbox.error);
}

// ---- MatMul + ReduceScatter ---------------------------------------------------------------------

void MatmulReduceScatter(const Communicator& comm, const float* x, size_t m, size_t k, const LocalMatmul& w,
                         float* y, size_t ldy, const CollectiveMatmulOptions& options) {
  const char* name = "MatmulReduceScatter";
  Validate(comm, Op::kMatmulReduceScatter, x, m, k, w, y, ldy, options);
  const int p = comm.size(), r = comm.rank();
  const size_t n = w.n;
  if (m == 0 || n == 0) return;
  if (p == 1) return w.gemm(x, m, y, ldy);

  const size_t block = m / static_cast<size_t>(p);
  const RingPlan plan = MakePlan(comm, block, n * sizeof(float), options, /*reduce_scatter=*/true, name);
  float* partial = Scratch(0, m * n);   // this rank's partial products [m, n] (own block: in y)
  float* received = Scratch(1, m * n);  // incoming partial sums, at their rows

  // Work items in ring order: at step t, piece j of half h covers block b = r - dir (t + 1), whose
  // running sum arrives from rank r - dir (t >= 1) and leaves for r + dir (t < p - 1); at
  // t = p - 1, b = r and the sum is final (§3: lower halves visit r-1, r-2, ..., r).
  struct Item {
    int half, step, block;
    size_t j, row, rows;  // row: global row of x
  };
  std::vector<Item> items;
  for (int t = 0; t < p; ++t) {
    for (size_t j = 0; j < plan.max_pieces; ++j) {
      for (int h = 0; h < plan.halves; ++h) {
        if (j >= plan.pieces[h].size()) continue;
        const int b = Mod(r - plan.dir[h] * (t + 1), p);
        const Span& span = plan.pieces[h][j];
        items.push_back({h, t, b, j, static_cast<size_t>(b) * block + span.begin, span.rows});
      }
    }
  }
  const auto out = [&](const Item& item) {
    return item.step == p - 1 ? y + (item.row - static_cast<size_t>(r) * block) * ldy : partial + item.row * n;
  };
  const auto out_stride = [&](const Item& item) { return item.step == p - 1 ? ldy : n; };
  const auto multiply = [&](const Item& item) { w.gemm(x + item.row * k, item.rows, out(item), out_stride(item)); };

  RingMessages messages(comm.kernel_handle(), name, options.overlap ? kSendsInFlight : INT_MAX);
  const size_t row_bytes = n * sizeof(float);
  for (size_t i = 0; i < items.size(); ++i) {
    const Item& item = items[i];
    if (item.step == 0) continue;
    messages.PostRecv(received + item.row * n, item.rows * row_bytes, plan.From(item.half),
                      plan.Tag(item.half, item.block, item.j), static_cast<int>(i));
  }
  // Adds the incoming running sum (own + received, f32) and passes the result on.
  const auto reduce_and_pass = [&](const Item& item) {
    float* dst = out(item);
    const size_t stride = out_stride(item);
    if (item.step > 0) {
      for (size_t i = 0; i < item.rows; ++i) {
        const float* src = received + (item.row + i) * n;
        float* row = dst + i * stride;
        for (size_t c = 0; c < n; ++c) row[c] += src[c];
      }
    }
    if (item.step < p - 1) {
      messages.QueueSend(item.half, dst, item.rows * row_bytes, plan.To(item.half),
                         plan.Tag(item.half, item.block, item.j));
    }
  };

  if (!options.overlap) {
    for (size_t i = 0; i < items.size(); ++i) {
      multiply(items[i]);
      if (items[i].step > 0) messages.WaitRecv(static_cast<int>(i));
      reduce_and_pass(items[i]);
    }
    messages.WaitAll();
    return;
  }

  // The GEMM thread computes the partial products in ring order (nothing waits for the network);
  // the caller reduces and sends each piece once its product and its incoming sum are both there.
  // The GEMM is faster on more rows per call (8% between 128- and 512-row calls at k = 2880), the
  // link wants its first piece early: the pieces of steps 0 .. p-2 are computed in batches of 1,
  // 1, 2, 4, 8 ... pieces (adjacent rows in one call), released together; the last step's pieces
  // (this rank's own block, nothing to send) are one call, their incoming sums added as they come.
  std::vector<char> arrived(items.size(), 0), multiplied(items.size(), 0);
  for (size_t i = 0; i < items.size(); ++i) arrived[i] = items[i].step == 0;
  size_t next_to_pass = 0;  // pieces are passed on in ring order, like the GEMM thread's order
  size_t first_final = 0;
  while (first_final < items.size() && items[first_final].step < p - 1) ++first_final;
  Mailbox mailbox;
  {
    GemmThread gemm_thread(mailbox, [&] {
      size_t i = 0;
      const auto post = [&](size_t end) {
        {
          std::lock_guard<std::mutex> lock(mailbox.mutex);
          for (; i < end; ++i) mailbox.outbox.push_back(static_cast<int>(i));
        }
        mailbox.to_caller.notify_one();
      };
      try {
        std::vector<size_t> order;
        // Batches of 1, 1, 2, 4 ... pieces per half (the halves' items interleave).
        size_t batch = static_cast<size_t>(plan.halves);
        for (size_t round = 0; i < first_final; batch *= round++ > 0 ? 2 : 1) {
          {
            std::lock_guard<std::mutex> lock(mailbox.mutex);
            if (mailbox.stop) return;
          }
          const size_t end = std::min(first_final, i + batch);
          // Runs of adjacent rows of one half and step, one call each (the halves interleave).
          order.clear();
          for (size_t j = i; j < end; ++j) order.push_back(j);
          std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
            return std::tie(items[a].step, items[a].half, items[a].row) <
                   std::tie(items[b].step, items[b].half, items[b].row);
          });
          for (size_t a = 0; a < order.size();) {
            const Item& first = items[order[a]];
            size_t rows = first.rows, b = a + 1;
            for (; b < order.size(); ++b) {
              const Item& next = items[order[b]];
              if (next.step != first.step || next.half != first.half || next.row != first.row + rows) break;
              rows += next.rows;
            }
            w.gemm(x + first.row * k, rows, partial + first.row * n, n);
            a = b;
          }
          post(end);
        }
        w.gemm(x + static_cast<size_t>(r) * block * k, block, y, ldy);  // the own block, all pieces
        post(items.size());
      } catch (...) {
        // Keep the ring going so that no rank waits forever; the error is rethrown afterwards.
        post(items.size());
        throw;
      }
    });
    CallerWait wait(mailbox, options);
    std::vector<int> ready;
    while (!(messages.Idle() && wait.seen_finished() && next_to_pass == items.size())) {
      bool progressed = messages.Poll([&](int i) { arrived[i] = 1; });
      {
        std::lock_guard<std::mutex> lock(mailbox.mutex);
        ready.assign(mailbox.outbox.begin(), mailbox.outbox.end());
        mailbox.outbox.clear();
      }
      for (int i : ready) multiplied[i] = 1;
      progressed |= !ready.empty();
      while (next_to_pass < items.size() && arrived[next_to_pass] && multiplied[next_to_pass]) {
        reduce_and_pass(items[next_to_pass++]);
        progressed = true;
      }
      if (progressed) {
        wait.Progressed();
      } else {
        wait.Wait(!messages.Idle());
      }
    }
  }
  if (mailbox.error) std::rethrow_exception(mailbox.error);
}

// ---- unfused references -------------------------------------------------------------------------

void AllGatherThenMatmul(const Communicator& comm, const float* x, size_t m_local, size_t k, const LocalMatmul& w,
                         float* y, size_t ldy) {
  Validate(comm, Op::kAllGatherThenMatmul, x, m_local, k, w, y, ldy, {});
  const size_t p = static_cast<size_t>(comm.size());
  if (m_local == 0 || w.n == 0) return;
  if (p == 1) return w.gemm(x, m_local, y, ldy);
  float* gathered = Scratch(0, p * m_local * k);
  comm.AllGather(x, m_local * k * sizeof(float), gathered);
  w.gemm(gathered, p * m_local, y, ldy);
}

void MatmulThenReduceScatter(const Communicator& comm, const float* x, size_t m, size_t k, const LocalMatmul& w,
                             float* y, size_t ldy) {
  Validate(comm, Op::kMatmulThenReduceScatter, x, m, k, w, y, ldy, {});
  const size_t p = static_cast<size_t>(comm.size()), n = w.n;
  if (m == 0 || n == 0) return;
  if (p == 1) return w.gemm(x, m, y, ldy);
  const size_t block = m / p;
  float* partial = Scratch(0, m * n);
  float* mine = Scratch(1, block * n);
  w.gemm(x, m, partial, n);
  comm.ReduceScatterSum(partial, mine, block * n);
  for (size_t i = 0; i < block; ++i) std::copy(mine + i * n, mine + (i + 1) * n, y + i * ldy);
}

}  // namespace tessera
