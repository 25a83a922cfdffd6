// Core layer: dtype conversions, thread pool, CPU feature plumbing.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <random>
#include <set>
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
