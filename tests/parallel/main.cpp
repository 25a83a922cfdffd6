// The multi-process test binary: GoogleTest on every rank of the MPI job (or on the one rank of a
// process started without mpirun, which never initialises MPI).
//
// Rank 0 prints GoogleTest's usual report; the other ranks print only their failed assertions,
// prefixed with the rank. Each test's TearDown (parallel_test_util.h) makes a failure on any rank a
// failure on all, and the exit status is agreed by an all-reduce at the end, so a failure anywhere
// gives a non-zero exit on every rank and mpiexec's status reflects it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "core/thread_pool.h"
#include "parallel/communicator.h"

namespace {

class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: %s\n", rank_, result.file_name() ? result.file_name() : "?",
                 result.line_number(), result.summary());
  }

 private:
  int rank_;
};

// Ranks on one machine share its CPUs: each gets an equal part of the pool (at least 1 thread), so
// 4 oversubscribed ranks on 2 cores do not run 8 spinning pool threads.
int ThreadsPerRank(const tessera::Communicator& world) {
  int local_ranks = world.size();
  if (const char* env = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE")) local_ranks = std::max(1, std::atoi(env));
  return std::max(1, tessera::DefaultThreadCount() / local_ranks);
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  try {
    const tessera::Communicator& world = tessera::World();
    tessera::SetGlobalThreadCount(ThreadsPerRank(world));
    if (world.rank() != 0) {
      auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
      delete listeners.Release(listeners.default_result_printer());
      listeners.Append(new RankFailurePrinter(world.rank()));
    }
    const int status = RUN_ALL_TESTS();
    int64_t failed = status != 0 ? 1 : 0;
    world.AllReduceMax(&failed, 1);
    return failed != 0 ? 1 : 0;
  } catch (const tessera::Error& e) {
    std::fprintf(stderr, "tessera_parallel_tests: error: %s\n", e.what());
    return 2;
  }
}
