// The process's one pool of worker threads.
//
// Every kernel parallelises through GlobalPool(); nothing else in tessera starts compute threads,
// so `-t N` bounds the whole process. The calling thread takes part in the work, so a pool of N
// threads owns N-1 workers. A Run() issued from inside a worker runs serially on that worker
// rather than deadlocking or oversubscribing.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/profile.h"

namespace tessera {

class ThreadPool {
 public:
  // num_threads >= 1, counting the caller.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(task, thread) for every task in [0, num_tasks), tasks handed out dynamically;
  // `thread` is in [0, num_threads()) and unique among concurrently running calls (nested calls
  // included: a nested Run passes its thread's own index), so it can index per-thread scratch.
  // Calls from outside the pool take turns. Returns when all tasks are done.
  //
  // Exceptions: if fn throws, no further tasks are started, Run waits for the tasks already
  // running on other threads to return, leaves the pool ready for the next call and rethrows the
  // first exception in the caller (tasks on other threads that throw later are dropped).
  void Run(size_t num_tasks, const std::function<void(size_t task, int thread)>& fn);

  // Splits [0, n) into contiguous chunks of at least `grain` items (about 4 per thread for
  // balance) and calls fn(begin, end) for each.
  void ParallelFor(size_t n, size_t grain, const std::function<void(size_t begin, size_t end)>& fn);

  // Counters for the decode profile (core/profile.h): zeroed and turned on by StartProfile,
  // read by Profile. Off, they cost one relaxed load per Run and per Drain.
  void StartProfile();
  void StopProfile();
  PoolProfile Profile() const;

 private:
  void WorkerLoop(int thread_index);
  // Runs tasks of the current job until none is left; an exception is kept in error_ and stops
  // the handing out of tasks.
  void Drain(int thread_index);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  // Bumped per Run() under mutex_; workers spin on it briefly before sleeping on wake_, because a
  // decode step issues hundreds of short Run() calls and a futex wake-up costs tens of
  // microseconds each.
  std::atomic<uint64_t> generation_{0};
  bool stop_ = false;  // guarded by mutex_
  std::atomic<int> active_workers_{0};  // workers still inside the current Run()
  std::mutex run_mutex_;                // one Run() at a time from outside the pool

  const std::function<void(size_t, int)>* job_ = nullptr;
  size_t num_tasks_ = 0;
  std::atomic<size_t> next_task_{0};
  std::mutex error_mutex_;
  std::exception_ptr error_;  // the current job's first exception, guarded by error_mutex_

  struct alignas(64) ThreadCounters {  // one cache line per thread
    std::atomic<int64_t> busy_ns{0}, wake_ns{0}, tasks{0};
  };
  std::atomic<bool> profiling_{false};
  std::unique_ptr<ThreadCounters[]> counters_;  // num_threads() of them
  std::atomic<int64_t> runs_{0}, run_ns_{0};
  std::atomic<int64_t> posted_ns_{0};  // steady-clock time the current Run was posted
};

// Number of CPUs this process may run on (sched_getaffinity), at least 1.
int DefaultThreadCount();

// The process-wide pool, created on first use with SetGlobalThreadCount's value or
// DefaultThreadCount(). SetGlobalThreadCount must be called before the first GlobalPool() use
// (the CLI does it while parsing -t); a later call with a different count replaces the pool and is
// only safe while no kernel is running.
ThreadPool& GlobalPool();
void SetGlobalThreadCount(int num_threads);

}  // namespace tessera
