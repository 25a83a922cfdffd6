// Core layer: dtype conversions, thread pool, CPU feature plumbing.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/cpu_features.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/thread_pool.h"

namespace tessera {
namespace {

TEST(DType, TableRoundTripsNames) {
  for (const char* name : {"BOOL", "U8", "I8", "U16", "I16", "U32", "I32", "U64", "I64", "F16", "BF16",
                           "F32", "F64", "F8_E4M3", "F8_E5M2", "F8_E8M0"}) {
    const auto dtype = DTypeFromName(name);
    ASSERT_TRUE(dtype.has_value()) << name;
    EXPECT_EQ(DTypeName(*dtype), name);
  }
  EXPECT_FALSE(DTypeFromName("F4").has_value());
  EXPECT_FALSE(DTypeFromName("bf16").has_value());
  EXPECT_EQ(DTypeSize(DType::kBF16), 2u);
  EXPECT_EQ(DTypeSize(DType::kI64), 8u);
}

TEST(DType, Bf16RoundTripAndRounding) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = Bf16ToF32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    EXPECT_EQ(F32ToBf16(f), h);
  }
  // 1 + 2^-8 is exactly halfway between bf16 1.0 and 1.0078125: ties to even (1.0).
  EXPECT_EQ(F32ToBf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  EXPECT_EQ(F32ToBf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_TRUE(std::isnan(Bf16ToF32(F32ToBf16(std::nanf("")))));
}

TEST(DType, F16MatchesHardwareSemantics) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = F16ToF32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    EXPECT_EQ(F32ToF16(f), h) << h;
  }
  EXPECT_EQ(F16ToF32(0x3c00), 1.0f);
  EXPECT_EQ(F16ToF32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(F32ToF16(65520.0f), 0x7c00);  // rounds to infinity
  EXPECT_EQ(F32ToF16(65519.0f), 0x7bff);
}

TEST(DType, Fp8Decoders) {
  EXPECT_EQ(F8E4M3ToF32(0x38), 1.0f);
  EXPECT_EQ(F8E4M3ToF32(0x7e), 448.0f);  // largest finite E4M3FN
  EXPECT_TRUE(std::isnan(F8E4M3ToF32(0x7f)));
  EXPECT_EQ(F8E4M3ToF32(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(F8E4M3ToF32(0xb8), -1.0f);
  EXPECT_EQ(F8E5M2ToF32(0x3c), 1.0f);
  EXPECT_EQ(E8M0ToF32(127), 1.0f);
  EXPECT_EQ(E8M0ToF32(0), std::ldexp(1.0f, -127));
  EXPECT_TRUE(std::isnan(E8M0ToF32(255)));
}

TEST(ThreadPool, RunsEveryTaskOnce) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    for (size_t n : {0u, 1u, 2u, 7u, 1000u}) {
      std::vector<std::atomic<int>> hits(n);
      std::set<int> seen_threads;
      std::mutex m;
      pool.Run(n, [&](size_t task, int thread) {
        hits[task].fetch_add(1);
        std::lock_guard<std::mutex> lock(m);
        seen_threads.insert(thread);
      });
      for (size_t i = 0; i < n; ++i) EXPECT_EQ(hits[i].load(), 1);
      for (int t : seen_threads) {
        EXPECT_GE(t, 0);
        EXPECT_LT(t, threads);
      }
    }
  }
}

TEST(ThreadPool, ParallelForCoversRangeWithAwkwardSizes) {
  ThreadPool pool(3);
  for (size_t n : {1u, 5u, 13u, 1001u}) {
    for (size_t grain : {1u, 4u, 64u}) {
      std::vector<int> hits(n, 0);
      pool.ParallelFor(n, grain, [&](size_t b, size_t e) {
        for (size_t i = b; i < e; ++i) ++hits[i];  // chunks are disjoint
      });
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i], 1) << n << " " << grain;
    }
  }
}

TEST(ThreadPool, NestedRunDoesNotDeadlock) {
  ThreadPool pool(2);
  std::atomic<int> total{0};
  pool.Run(4, [&](size_t, int) { pool.Run(3, [&](size_t, int) { total.fetch_add(1); }); });
  EXPECT_EQ(total.load(), 12);
}

// Every task, nested Runs' tasks included, sees a thread index no other running task holds at the
// same moment (the header's contract, which per-thread scratch relies on): a nested Run passes its
// own thread's index, not 0.
TEST(ThreadPool, ThreadIndexIsUniqueAmongRunningTasksIncludingNested) {
  ThreadPool pool(4);
  std::vector<std::atomic<int>> running(pool.num_threads());
  std::atomic<int> clashes{0}, nested_mismatch{0}, tasks{0};
  auto enter = [&](int thread) {
    if (running[thread].fetch_add(1) != 0) clashes.fetch_add(1);
  };
  auto leave = [&](int thread) { running[thread].fetch_sub(1); };
  for (int round = 0; round < 20; ++round) {
    pool.Run(16, [&](size_t, int outer) {
      enter(outer);
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      leave(outer);
      pool.Run(3, [&](size_t, int inner) {
        if (inner != outer) nested_mismatch.fetch_add(1);
        enter(inner);
        std::this_thread::sleep_for(std::chrono::microseconds(100));
        leave(inner);
        tasks.fetch_add(1);
      });
    });
  }
  EXPECT_EQ(tasks.load(), 20 * 16 * 3);
  EXPECT_EQ(nested_mismatch.load(), 0);
  EXPECT_EQ(clashes.load(), 0);
}

// Two threads outside the pool calling Run at once (one with a single task, which runs inline)
// never run tasks under the same index at the same time.
TEST(ThreadPool, OutsideCallersTakeTurns) {
  ThreadPool pool(2);
  std::vector<std::atomic<int>> running(pool.num_threads());
  std::atomic<int> clashes{0};
  auto body = [&](size_t, int thread) {
    if (running[thread].fetch_add(1) != 0) clashes.fetch_add(1);
    std::this_thread::sleep_for(std::chrono::microseconds(300));
    running[thread].fetch_sub(1);
  };
  std::thread other([&] {
    for (int i = 0; i < 200; ++i) pool.Run(1, body);
  });
  for (int i = 0; i < 100; ++i) pool.Run(4, body);
  other.join();
  EXPECT_EQ(clashes.load(), 0);
}

// A throwing task (on the caller or on a worker) reaches the caller as the exception; Run returns
// only after every started task has returned, starts no further tasks, and the pool keeps working.
TEST(ThreadPool, RunIsExceptionSafe) {
  ThreadPool pool(3);
  for (int round = 0; round < 50; ++round) {
    std::atomic<int> inside{0}, started{0};
    bool caught = false;
    try {
      pool.Run(64, [&](size_t task, int) {
        inside.fetch_add(1);
        started.fetch_add(1);
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        inside.fetch_sub(1);
        if (task % 7 == 3) throw Error(StrCat("task ", task, " failed"));
      });
    } catch (const Error& e) {
      caught = true;
      EXPECT_NE(std::string(e.what()).find("failed"), std::string::npos);
    }
    EXPECT_TRUE(caught);
    EXPECT_EQ(inside.load(), 0) << "a task was still running after Run returned";
    const int started_at_return = started.load();
    EXPECT_LT(started_at_return, 64) << "tasks kept being started after the exception";
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_EQ(started.load(), started_at_return);
    std::atomic<int> after{0};
    pool.Run(10, [&](size_t, int) { after.fetch_add(1); });
    EXPECT_EQ(after.load(), 10);
  }
}

TEST(ThreadPool, ManyBackToBackRuns) {
  ThreadPool pool(2);
  std::atomic<long> sum{0};
  for (int r = 0; r < 2000; ++r) pool.Run(5, [&](size_t t, int) { sum.fetch_add(static_cast<long>(t)); });
  EXPECT_EQ(sum.load(), 2000L * 10);
}

TEST(CpuFeatures, ConsistentLevels) {
  const CpuFeatures& f = GetCpuFeatures();
  EXPECT_TRUE(IsaSupported(Isa::kScalar));
  EXPECT_TRUE(IsaSupported(f.BestIsa()));
  if (f.BestIsa() >= Isa::kAvx512) {
    EXPECT_TRUE(f.avx512f && f.avx512bw && f.avx512vl && f.os_avx512);
  }
  EXPECT_LE(static_cast<int>(ActiveIsa()), static_cast<int>(f.BestIsa()));
  EXPECT_NE(f.Summary().find("AVX2 = "), std::string::npos);
}

TEST(CpuFeatures, ParseIsaNames) {
  EXPECT_EQ(ParseIsa("scalar"), Isa::kScalar);
  EXPECT_EQ(ParseIsa("avx2"), Isa::kAvx2);
  EXPECT_EQ(ParseIsa("avx512"), Isa::kAvx512);
  EXPECT_EQ(ParseIsa("amx"), Isa::kAmx);
  EXPECT_THROW(ParseIsa("sse4"), Error);
}

}  // namespace
}  // namespace tessera
