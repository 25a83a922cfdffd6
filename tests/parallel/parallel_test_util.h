// Helpers for the multi-process tests (tests/parallel/, run under mpiexec with 1, 2 and 4 ranks).
//
// Every test runs on every rank in the same order. Tests throw only errors that every rank throws
// (the kernels' validation is symmetric by design), so all ranks reach TearDown together; there
// the ranks exchange their results, which keeps them in step and turns a failure on any rank into
// a failure on all of them (reported on rank 0 with the failing ranks named).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "parallel/communicator.h"

namespace tessera::parallel_test {

class ParallelTest : public ::testing::Test {
 protected:
  void TearDown() override {
    const Communicator& world = World();
    const int64_t mine = HasFailure() ? 1 : 0;
    std::vector<int64_t> all(world.size());
    world.AllGather(&mine, sizeof(mine), all.data());
    std::string failed;
    for (int r = 0; r < world.size(); ++r) {
      if (all[r] != 0 && r != world.rank()) failed += (failed.empty() ? "" : ", ") + std::to_string(r);
    }
    if (!failed.empty()) ADD_FAILURE() << "this test failed on rank(s) " << failed;
  }
};

// A seed for fresh random inputs that every rank agrees on (drawn on rank 0, broadcast).
inline uint64_t SharedSeed() {
  uint64_t seed = std::random_device{}();
  seed = seed << 32 | std::random_device{}();
  World().Broadcast(&seed, sizeof(seed), 0);
  return seed;
}

// True when the message is one line (the error policy of core/error.h).
// Bit-for-bit equality of two buffers (empty ones included, where memcmp may not see null).
inline bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

inline bool OneLine(const std::string& message) { return message.find('\n') == std::string::npos; }

}  // namespace tessera::parallel_test
