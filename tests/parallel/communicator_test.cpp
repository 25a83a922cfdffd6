// parallel/communicator.h on 1, 2 and 4 ranks (and on the MPI-less one-rank world when the binary is
// started without mpirun: tests/cli/parallel_local.sh).
#include "parallel/communicator.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "core/error.h"
#include "parallel/parallel_test_util.h"

namespace tessera {
namespace {

using parallel_test::ParallelTest;
using parallel_test::OneLine;

using CommunicatorTest = ParallelTest;

TEST_F(CommunicatorTest, WorldMatchesTheLauncher) {
  const Communicator& world = World();
  EXPECT_EQ(world.uses_mpi(), StartedByMpiLauncher());
  if (const char* size = std::getenv("OMPI_COMM_WORLD_SIZE")) {
    EXPECT_EQ(world.size(), std::atoi(size));
  }
  if (const char* rank = std::getenv("OMPI_COMM_WORLD_RANK")) {
    EXPECT_EQ(world.rank(), std::atoi(rank));
  }
  if (!world.uses_mpi()) {
    EXPECT_EQ(world.size(), 1);
    EXPECT_EQ(world.handle(), MPI_COMM_NULL);
  }
  EXPECT_GE(world.rank(), 0);
  EXPECT_LT(world.rank(), world.size());
  EXPECT_GE(world.max_tag(), 32767);
  EXPECT_EQ(&World(), &world);
}

TEST_F(CommunicatorTest, AllReduceSums) {
  const Communicator& world = World();
  const int p = world.size(), r = world.rank();
  // Small integers: exact in f32 whatever order MPI adds them in.
  std::vector<float> values(1001);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>((r + 1) * static_cast<int>(i % 97));
  world.AllReduceSum(values.data(), values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    ASSERT_EQ(values[i], static_cast<float>(p * (p + 1) / 2 * static_cast<int>(i % 97))) << "element " << i;
  }
  std::vector<int64_t> counts = {r, int64_t{1} << 40, -r};
  world.AllReduceSum(counts.data(), counts.size());
  EXPECT_EQ(counts[0], int64_t{p} * (p - 1) / 2);
  EXPECT_EQ(counts[1], int64_t{p} << 40);
  EXPECT_EQ(counts[2], -int64_t{p} * (p - 1) / 2);
  int64_t highest = r * 7;
  world.AllReduceMax(&highest, 1);
  EXPECT_EQ(highest, (p - 1) * 7);
  world.AllReduceSum(static_cast<float*>(nullptr), 0);  // empty: a no-op on every rank
}

TEST_F(CommunicatorTest, AllGatherBroadcastReduceScatter) {
  const Communicator& world = World();
  const int p = world.size(), r = world.rank();
  // Blocks of an odd byte count, in rank order.
  constexpr size_t kBytes = 13;
  std::vector<unsigned char> mine(kBytes), all(kBytes * p);
  for (size_t i = 0; i < kBytes; ++i) mine[i] = static_cast<unsigned char>(r * 31 + i);
  world.AllGather(mine.data(), kBytes, all.data());
  for (int q = 0; q < p; ++q) {
    for (size_t i = 0; i < kBytes; ++i) ASSERT_EQ(all[q * kBytes + i], static_cast<unsigned char>(q * 31 + i));
  }

  std::vector<double> message(5, r == p - 1 ? 2.5 : -1.0);
  world.Broadcast(message.data(), message.size() * sizeof(double), p - 1);
  for (double v : message) EXPECT_EQ(v, 2.5);

  // Block q of rank s's input holds s + q: block r of the sum is sum_s (s + r).
  constexpr size_t kCount = 7;
  std::vector<float> input(kCount * p), output(kCount, -1.0f);
  for (int q = 0; q < p; ++q) {
    for (size_t i = 0; i < kCount; ++i) input[q * kCount + i] = static_cast<float>(r + q + static_cast<int>(i));
  }
  world.ReduceScatterSum(input.data(), output.data(), kCount);
  for (size_t i = 0; i < kCount; ++i) {
    EXPECT_EQ(output[i], static_cast<float>(p * (p - 1) / 2 + p * (r + static_cast<int>(i))));
  }
  world.Barrier();
}

TEST_F(CommunicatorTest, NonblockingRingAndSelfMessages) {
  const Communicator& world = World();
  const int p = world.size(), r = world.rank();
  const int next = (r + 1) % p, prev = (r + p - 1) % p;
  // A ring exchange with two tags posted in the opposite order to the sends (matching is by tag),
  // plus a message to itself.
  std::vector<int> out_a(1000, r), out_b(3, 100 + r), in_a(1000, -1), in_b(3, -1);
  int self_out = 42 + r, self_in = 0;
  CommRequest recv_b = world.Irecv(in_b.data(), in_b.size() * sizeof(int), prev, 2);
  CommRequest recv_a = world.Irecv(in_a.data(), in_a.size() * sizeof(int), prev, 1);
  CommRequest recv_self = world.Irecv(&self_in, sizeof(int), r, 9);
  CommRequest send_a = world.Isend(out_a.data(), out_a.size() * sizeof(int), next, 1);
  CommRequest send_b = world.Isend(out_b.data(), out_b.size() * sizeof(int), next, 2);
  CommRequest send_self = world.Isend(&self_out, sizeof(int), r, 9);
  EXPECT_TRUE(recv_a.active() || p == 1);
  while (!recv_a.Test()) {
  }
  EXPECT_FALSE(recv_a.active());
  EXPECT_TRUE(recv_a.Test());  // an inactive request stays complete
  recv_b.Wait();
  recv_self.Wait();
  send_a.Wait();
  send_b.Wait();
  send_self.Wait();
  for (int v : in_a) ASSERT_EQ(v, prev);
  for (int v : in_b) ASSERT_EQ(v, 100 + prev);
  EXPECT_EQ(self_in, 42 + r);

  // Moving a request moves the operation; the destructor of an active request waits for it.
  int late_out = 7, late_in = 0;
  {
    CommRequest recv = world.Irecv(&late_in, sizeof(int), prev, 3);
    CommRequest moved = std::move(recv);
    EXPECT_FALSE(recv.active());
    CommRequest send = world.Isend(&late_out, sizeof(int), next, 3);
  }
  EXPECT_EQ(late_in, 7);
}

TEST_F(CommunicatorTest, SplitFormsSubCommunicators) {
  const Communicator& world = World();
  const int p = world.size(), r = world.rank();
  // Even and odd ranks, each group in reverse rank order.
  const Communicator half = world.Split(r % 2, -r);
  const int group_size = (p - r % 2 + 1) / 2;
  EXPECT_EQ(half.size(), group_size);
  EXPECT_EQ(half.rank(), group_size - 1 - r / 2);
  EXPECT_EQ(half.uses_mpi(), world.uses_mpi());
  int64_t sum = r;
  half.AllReduceSum(&sum, 1);
  int64_t expected = 0;
  for (int q = r % 2; q < p; q += 2) expected += q;
  EXPECT_EQ(sum, expected);
  // A copy shares the communicator; a split of a split works.
  const Communicator copy = half;
  EXPECT_EQ(copy.handle(), half.handle());
  const Communicator single = copy.Split(copy.rank(), 0);
  EXPECT_EQ(single.size(), 1);
  EXPECT_EQ(single.rank(), 0);
}

TEST_F(CommunicatorTest, BadArgumentsAreOneLineErrors) {
  const Communicator& world = World();
  const int p = world.size();
  int value = 0;
  const auto expect_error = [](const auto& call, const std::string& needle) {
    try {
      call();
      ADD_FAILURE() << "no error; expected one mentioning '" << needle << "'";
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find(needle), std::string::npos) << message;
      EXPECT_TRUE(OneLine(message)) << message;
    }
  };
  expect_error([&] { world.Isend(&value, sizeof(value), p, 0); }, "is not in a communicator of");
  expect_error([&] { world.Irecv(&value, sizeof(value), -1, 0); }, "is not in a communicator of");
  expect_error([&] { world.Isend(&value, sizeof(value), 0, -1); }, "tag -1 outside");
  expect_error([&] { world.Isend(&value, size_t{1} << 31, 0, 0); }, "exceeds");
  expect_error([&] { world.Broadcast(&value, sizeof(value), p); }, "is not in a communicator of");
  expect_error([&] { world.Split(-1, 0); }, "color -1 is negative");
  // MPI's own failures: one line naming the operation, then MPI's error string.
  expect_error([] { CheckMpi(MPI_ERR_TRUNCATE, "MPI_Recv from rank 3"); },
               world.uses_mpi() ? "MPI_Recv from rank 3: MPI_ERR_TRUNCATE" : "MPI_Recv from rank 3: MPI error code");
  CheckMpi(MPI_SUCCESS, "nothing");
  if (world.uses_mpi()) {
    // A real failing call: errors without a communicator go to MPI_COMM_WORLD's handler, which
    // tessera sets to MPI_ERRORS_RETURN.
    int rank = 0;
    expect_error([&] { CheckMpi(MPI_Comm_rank(MPI_COMM_NULL, &rank), "MPI_Comm_rank"); },
                 "MPI_Comm_rank: MPI_ERR_COMM");
  }
}

TEST_F(CommunicatorTest, UnmatchedSelfMessageIsAnErrorWithoutMpi) {
  const Communicator& world = World();
  if (world.uses_mpi()) GTEST_SKIP() << "an unmatched message under MPI waits for its partner, as MPI specifies";
  int value = 0;
  CommRequest recv = world.Irecv(&value, sizeof(value), 0, 1);
  EXPECT_FALSE(recv.Test());
  try {
    recv.Wait();
    ADD_FAILURE() << "waiting for a message nobody sends returned";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("can never complete"), std::string::npos) << e.what();
  }
  // Dropping the request withdraws it: a later send does not write into the dead buffer.
  recv = CommRequest();
  int later = 5, got = 0;
  CommRequest send = world.Isend(&later, sizeof(later), 0, 1);
  CommRequest recv2 = world.Irecv(&got, sizeof(got), 0, 1);
  send.Wait();
  recv2.Wait();
  EXPECT_EQ(got, 5);
  EXPECT_EQ(value, 0);
}

}  // namespace
}  // namespace tessera
