#include "core/thread_pool.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <utility>

#include "core/error.h"

namespace tessera {
namespace {
// The pool whose tasks this thread is running (its worker, or a caller inside Run), and this
// thread's index in it.
thread_local const ThreadPool* tls_pool = nullptr;
thread_local int tls_thread_index = 0;

// Marks the calling thread as running `pool`'s tasks as `index` for its lifetime.
class InsidePool {
 public:
  InsidePool(const ThreadPool* pool, int index) : saved_pool_(tls_pool), saved_index_(tls_thread_index) {
    tls_pool = pool;
    tls_thread_index = index;
  }
  ~InsidePool() {
    tls_pool = saved_pool_;
    tls_thread_index = saved_index_;
  }
  InsidePool(const InsidePool&) = delete;
  InsidePool& operator=(const InsidePool&) = delete;

 private:
  const ThreadPool* saved_pool_;
  int saved_index_;
};

// Spin iterations (each a pause instruction, ~30-140 cycles) before blocking: about 20-50 us,
// longer than the gap between the matmuls of one decode step, much shorter than a token.
constexpr int kSpinIterations = 2000;

inline void CpuRelax() { __builtin_ia32_pause(); }

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

ThreadPool::ThreadPool(int num_threads) {
  TESSERA_CHECK(num_threads >= 1);
  counters_ = std::make_unique<ThreadCounters[]>(static_cast<size_t>(num_threads));
  workers_.reserve(num_threads - 1);
  for (int i = 1; i < num_threads; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::Drain(int thread_index) {
  const auto& fn = *job_;
  const bool profiling = profiling_.load(std::memory_order_relaxed);
  const int64_t start = profiling ? NowNs() : 0;
  int64_t tasks = 0;
  for (;;) {
    const size_t task = next_task_.fetch_add(1, std::memory_order_relaxed);
    if (task >= num_tasks_) break;
    ++tasks;
    try {
      fn(task, thread_index);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex_);
      if (!error_) error_ = std::current_exception();
      // Later fetch_adds return >= num_tasks_: nobody starts another task of this job.
      next_task_.store(num_tasks_, std::memory_order_relaxed);
    }
  }
  if (profiling) {
    ThreadCounters& c = counters_[static_cast<size_t>(thread_index)];
    c.busy_ns.fetch_add(NowNs() - start, std::memory_order_relaxed);
    c.tasks.fetch_add(tasks, std::memory_order_relaxed);
    if (thread_index != 0) c.wake_ns.fetch_add(start - posted_ns_.load(std::memory_order_relaxed), std::memory_order_relaxed);
  }
}

void ThreadPool::StartProfile() {
  for (int i = 0; i < num_threads(); ++i) {
    ThreadCounters& c = counters_[static_cast<size_t>(i)];
    c.busy_ns.store(0);
    c.wake_ns.store(0);
    c.tasks.store(0);
  }
  runs_.store(0);
  run_ns_.store(0);
  profiling_.store(true);
}

void ThreadPool::StopProfile() { profiling_.store(false); }

PoolProfile ThreadPool::Profile() const {
  PoolProfile p;
  p.runs = runs_.load();
  p.run_seconds = static_cast<double>(run_ns_.load()) * 1e-9;
  for (int i = 0; i < num_threads(); ++i) {
    const ThreadCounters& c = counters_[static_cast<size_t>(i)];
    p.threads.push_back({static_cast<double>(c.busy_ns.load()) * 1e-9, static_cast<double>(c.wake_ns.load()) * 1e-9,
                         c.tasks.load()});
  }
  return p;
}

void ThreadPool::WorkerLoop(int thread_index) {
  const InsidePool inside(this, thread_index);
  uint64_t seen = 0;
  for (;;) {
    for (int i = 0; i < kSpinIterations && generation_.load(std::memory_order_acquire) == seen; ++i) CpuRelax();
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || generation_.load(std::memory_order_acquire) != seen; });
      if (stop_) return;
      seen = generation_.load(std::memory_order_acquire);
    }
    Drain(thread_index);
    if (active_workers_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      // Taking the mutex orders this notify after the caller's predicate check (no lost wake-up).
      std::lock_guard<std::mutex> lock(mutex_);
      done_.notify_one();
    }
  }
}

void ThreadPool::Run(size_t num_tasks, const std::function<void(size_t, int)>& fn) {
  if (num_tasks == 0) return;
  if (tls_pool == this) {
    // Nested inside one of this pool's tasks: serial, as the thread that is already running.
    const int self = tls_thread_index;
    for (size_t t = 0; t < num_tasks; ++t) fn(t, self);
    return;
  }
  // Callers from outside take turns, serial calls too: each of them is thread 0.
  std::lock_guard<std::mutex> run_lock(run_mutex_);
  const InsidePool inside(this, 0);
  if (workers_.empty() || num_tasks == 1) {
    for (size_t t = 0; t < num_tasks; ++t) fn(t, 0);  // an exception leaves nothing behind
    return;
  }
  const bool profiling = profiling_.load(std::memory_order_relaxed);
  const int64_t posted = profiling ? NowNs() : 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    posted_ns_.store(posted, std::memory_order_relaxed);
    job_ = &fn;
    num_tasks_ = num_tasks;
    next_task_.store(0, std::memory_order_relaxed);
    error_ = nullptr;
    active_workers_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  Drain(0);
  for (int i = 0; i < kSpinIterations && active_workers_.load(std::memory_order_acquire) != 0; ++i) CpuRelax();
  std::exception_ptr error;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return active_workers_.load(std::memory_order_acquire) == 0; });
    job_ = nullptr;
    std::lock_guard<std::mutex> error_lock(error_mutex_);
    error = std::exchange(error_, nullptr);
  }
  if (profiling) {
    runs_.fetch_add(1, std::memory_order_relaxed);
    run_ns_.fetch_add(NowNs() - posted, std::memory_order_relaxed);
  }
  if (error) std::rethrow_exception(error);
}

void ThreadPool::ParallelFor(size_t n, size_t grain, const std::function<void(size_t, size_t)>& fn) {
  if (n == 0) return;
  grain = std::max<size_t>(grain, 1);
  const size_t target_chunks = static_cast<size_t>(num_threads()) * 4;
  const size_t chunk = std::max(grain, (n + target_chunks - 1) / target_chunks);
  const size_t num_chunks = (n + chunk - 1) / chunk;
  Run(num_chunks, [&](size_t c, int) { fn(c * chunk, std::min(n, (c + 1) * chunk)); });
}

int DefaultThreadCount() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

namespace {
std::mutex g_pool_mutex;
std::unique_ptr<ThreadPool> g_pool;
int g_requested_threads = 0;
}  // namespace

ThreadPool& GlobalPool() {
  std::lock_guard<std::mutex> lock(g_pool_mutex);
  if (!g_pool) {
    g_pool = std::make_unique<ThreadPool>(g_requested_threads > 0 ? g_requested_threads
                                                                 : DefaultThreadCount());
  }
  return *g_pool;
}

void SetGlobalThreadCount(int num_threads) {
  if (num_threads < 1) Fail("thread count must be at least 1 (got ", num_threads, ")");
  std::lock_guard<std::mutex> lock(g_pool_mutex);
  g_requested_threads = num_threads;
  if (g_pool && g_pool->num_threads() != num_threads) g_pool.reset();
}

}  // namespace tessera
