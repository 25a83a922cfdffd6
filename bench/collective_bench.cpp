// Collective matmuls over MPI (parallel/collective_matmul.h): the fused kernels against their parts
// and against the unfused forms, run under mpirun (a plain main: every rank must run the same
// number of iterations, which Google Benchmark's adaptive loop does not guarantee).
//
// For AllGather+MatMul (column-parallel, global X [m, k] row-sharded, W [n, k] column-sharded,
// BF16 weights through MatmulBf16) each repetition times, in turn:
//   gemm     the local GEMM alone: all m rows times this rank's n/P columns
//   comm     the all-gather alone (MPI_Allgather of the [m/P, k] shards)
//   ring     AllGatherMatmul with a GEMM that does nothing: the fused kernel's own messages
//   unfused  AllGatherThenMatmul: MPI_Allgather, then one GEMM
//   fused    AllGatherMatmul (GEMMs on a separate thread while the caller drives MPI)
//   naive    AllGatherMatmul without the GEMM thread: MPI progresses only when the caller waits
// and MatMul+ReduceScatter the same way (row-parallel: X [m, k] and W [n, k] split along k,
// y [m/P, n]; comm = MPI_Reduce_scatter_block of the [m, n] partials). Every time is the slowest
// rank's, after a barrier; the table gives medians over the repetitions, each variant's process
// CPU time, and the ratios the issue asks for: fused / max(comm, gemm) (1.0 = perfect overlap;
// also against the kernel's own messages, `ring`) and fused / unfused.
//
//   mpirun -n 2 build/collective_bench [--m 2048 --k 2880 --n 5760] [--op ag|rs|both]
//          [--reps 7] [--piece-rows 128] [--poll-us 50] [--max-poll-us 1000] [--threads T]
//          [--label TEXT]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "parallel/collective_matmul.h"
#include "parallel/communicator.h"
#include "model/linear.h"

namespace tessera {
namespace {

struct Args {
  size_t m = 2048, k = 2880, n = 5760;
  std::string op = "ag";
  int reps = 7;
  size_t piece_rows = 128;
  unsigned poll_us = 50;
  unsigned max_poll_us = 1000;
  int threads = 0;
  std::string label;
};

Args ParseArgs(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) Fail("collective_bench: ", flag, " needs a value");
    const std::string value = argv[++i];
    const auto number = [&] {
      char* end = nullptr;
      const unsigned long long v = std::strtoull(value.c_str(), &end, 10);
      if (end == value.c_str() || *end != '\0') {
        Fail("collective_bench: ", flag, " expects a number, got '", value, "'");
      }
      return static_cast<size_t>(v);
    };
    if (flag == "--m") a.m = number();
    else if (flag == "--k") a.k = number();
    else if (flag == "--n") a.n = number();
    else if (flag == "--op") a.op = value;
    else if (flag == "--reps") a.reps = static_cast<int>(number());
    else if (flag == "--piece-rows") a.piece_rows = number();
    else if (flag == "--poll-us") a.poll_us = static_cast<unsigned>(number());
    else if (flag == "--max-poll-us") a.max_poll_us = static_cast<unsigned>(number());
    else if (flag == "--threads") a.threads = static_cast<int>(number());
    else if (flag == "--label") a.label = value;
    else Fail("collective_bench: unknown option ", flag);
  }
  if (a.op != "ag" && a.op != "rs" && a.op != "both") Fail("collective_bench: --op must be ag, rs or both");
  if (a.reps < 1) Fail("collective_bench: --reps must be at least 1");
  return a;
}

std::string LoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string one, five, fifteen;
  in >> one >> five >> fifteen;
  return one + " " + five + " " + fifteen;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : 0.5 * (v[h - 1] + v[h]);
}

int64_t ProcessCpuNs() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return int64_t{t.tv_sec} * 1000000000 + t.tv_nsec;
}

struct Variant {
  const char* name;
  std::function<void()> run;
  std::vector<double> seconds;      // wall time of the slowest rank
  std::vector<double> cpu_seconds;  // CPU time of the process (all its threads; the kernel's
                                    // network work in its system calls included), busiest rank
};

// One call of v.run on every rank, started together after a barrier.
void TimeSlowest(const Communicator& comm, Variant& v) {
  comm.Barrier();
  const auto start = std::chrono::steady_clock::now();
  const int64_t cpu_start = ProcessCpuNs();
  v.run();
  const auto wall = std::chrono::steady_clock::now() - start;
  int64_t ns[2] = {std::chrono::duration_cast<std::chrono::nanoseconds>(wall).count(), ProcessCpuNs() - cpu_start};
  comm.AllReduceMax(ns, 2);
  v.seconds.push_back(static_cast<double>(ns[0]) * 1e-9);
  v.cpu_seconds.push_back(static_cast<double>(ns[1]) * 1e-9);
}

// Runs every variant once per repetition, in turn (so slow drifts of a shared machine's load hit
// all of them alike), after one untimed warm-up round; returns the medians in ms.
std::vector<double> Measure(const Communicator& comm, std::vector<Variant>& variants, int reps) {
  for (Variant& v : variants) v.run();
  for (int rep = 0; rep < reps; ++rep) {
    for (Variant& v : variants) TimeSlowest(comm, v);
  }
  std::vector<double> medians;
  for (const Variant& v : variants) medians.push_back(Median(v.seconds) * 1e3);
  return medians;
}

void Report(const Communicator& comm, const char* op, const Args& a, const std::vector<Variant>& variants,
            const std::vector<double>& ms) {
  if (comm.rank() != 0) return;
  const auto at = [&](const char* name) {
    for (size_t i = 0; i < variants.size(); ++i) {
      if (std::strcmp(variants[i].name, name) == 0) return ms[i];
    }
    return 0.0;
  };
  std::printf("%s  m=%zu k=%zu n=%zu  P=%d  piece_rows=%zu poll_us=%u..%u  threads/rank=%d  %s\n", op, a.m, a.k,
              a.n, comm.size(), a.piece_rows, a.poll_us, a.max_poll_us, GlobalPool().num_threads(), a.label.c_str());
  std::printf("  median ms (min..max over %d reps), median process CPU ms:\n", a.reps);
  for (size_t i = 0; i < variants.size(); ++i) {
    const auto [lo, hi] = std::minmax_element(variants[i].seconds.begin(), variants[i].seconds.end());
    std::printf("    %-8s %9.2f  (%.2f..%.2f)  cpu %9.2f\n", variants[i].name, ms[i], *lo * 1e3, *hi * 1e3,
                Median(variants[i].cpu_seconds) * 1e3);
  }
  const double gemm = at("gemm"), comm_ms = at("comm"), ring = at("ring");
  const double fused = at("fused"), unfused = at("unfused"), naive = at("naive");
  // Two ceilings: the parts timed alone with MPI's collective as the communication (the issue's
  // t_comm), and with the fused kernel's own ring messages (the same bytes, its own protocol).
  const double ceiling = std::max(gemm, comm_ms), ring_ceiling = std::max(gemm, ring);
  std::printf("  fused / max(comm, gemm) = %.3f   fused / max(ring, gemm) = %.3f   fused / unfused = %.3f\n",
              fused / ceiling, fused / ring_ceiling, fused / unfused);
  std::printf("  naive / max(comm, gemm) = %.3f   comm / gemm = %.2f   ring / gemm = %.2f\n", naive / ceiling,
              comm_ms / gemm, ring / gemm);
  std::fflush(stdout);
}

std::vector<uint16_t> RandomBf16(std::mt19937& rng, size_t count, float scale) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<uint16_t> v(count);
  for (auto& e : v) e = F32ToBf16(normal(rng));
  return v;
}

std::vector<float> RandomF32(std::mt19937& rng, size_t count) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(count);
  for (auto& e : v) e = normal(rng);
  return v;
}

// A BF16 shard W [n, k] through the model's linear-weight path.
std::unique_ptr<LinearWeights> Bf16Weights(const std::vector<uint16_t>& w, size_t n, size_t k) {
  LinearSource source = LinearSource::Tensor("w", DType::kBF16, reinterpret_cast<const uint8_t*>(w.data()), 1,
                                             static_cast<int64_t>(n), static_cast<int64_t>(k));
  source.mapped.clear();  // a vector, not a mapping
  return LoadLinear(source, LinearFormat::kBf16, "collective_bench");  // copied, as the model holds it
}

// The same shard with a GEMM that does nothing: the fused kernel's own messages alone (`ring`).
LocalMatmul Idle(const LocalMatmul& shard) {
  return LocalMatmul{shard.format, shard.n, shard.k, [](const float*, size_t, float*, size_t) {}};
}

// The command line's schedule, with the GEMM overlapped (fused) or not (naive).
CollectiveMatmulOptions Options(const Args& a, bool overlap) {
  CollectiveMatmulOptions o;
  o.piece_rows = a.piece_rows;
  o.poll_us = a.poll_us;
  o.max_poll_us = a.max_poll_us;
  o.overlap = overlap;
  return o;
}

void BenchAllGatherMatmul(const Communicator& comm, const Args& a) {
  const size_t p = static_cast<size_t>(comm.size()), r = static_cast<size_t>(comm.rank());
  const size_t m_local = EvenShard("--m", a.m, comm.size()), n_local = EvenShard("--n", a.n, comm.size());
  std::mt19937 rng(1234 + static_cast<unsigned>(r));
  const std::vector<float> x = RandomF32(rng, m_local * a.k);
  const std::vector<uint16_t> w = RandomBf16(rng, n_local * a.k, 0.05f);
  const auto weights = Bf16Weights(w, n_local, a.k);
  const LocalMatmul shard = LinearShard(*weights);
  const LocalMatmul idle = Idle(shard);
  std::vector<float> gathered(p * m_local * a.k), y(a.m * n_local);
  const CollectiveMatmulOptions fused = Options(a, true), naive = Options(a, false);
  std::vector<Variant> variants = {
      {"gemm", [&] { shard.gemm(gathered.data(), a.m, y.data(), n_local); }, {}, {}},
      {"comm", [&] { comm.AllGather(x.data(), m_local * a.k * sizeof(float), gathered.data()); }, {}, {}},
      {"ring", [&] { AllGatherMatmul(comm, x.data(), m_local, a.k, idle, y.data(), n_local, fused); }, {}, {}},
      {"unfused", [&] { AllGatherThenMatmul(comm, x.data(), m_local, a.k, shard, y.data(), n_local); }, {}, {}},
      {"fused", [&] { AllGatherMatmul(comm, x.data(), m_local, a.k, shard, y.data(), n_local, fused); }, {}, {}},
      {"naive", [&] { AllGatherMatmul(comm, x.data(), m_local, a.k, shard, y.data(), n_local, naive); }, {}, {}},
  };
  Report(comm, "AllGather+MatMul", a, variants, Measure(comm, variants, a.reps));
}

void BenchMatmulReduceScatter(const Communicator& comm, const Args& a) {
  const size_t r = static_cast<size_t>(comm.rank());
  const size_t k_local = EvenShard("--k", a.k, comm.size()), block = EvenShard("--m", a.m, comm.size());
  std::mt19937 rng(4321 + static_cast<unsigned>(r));
  const std::vector<float> x = RandomF32(rng, a.m * k_local);
  const std::vector<uint16_t> w = RandomBf16(rng, a.n * k_local, 0.05f);
  const auto weights = Bf16Weights(w, a.n, k_local);
  const LocalMatmul shard = LinearShard(*weights);
  const LocalMatmul idle = Idle(shard);
  std::vector<float> partial(a.m * a.n), y(block * a.n);
  const CollectiveMatmulOptions fused = Options(a, true), naive = Options(a, false);
  std::vector<Variant> variants = {
      {"gemm", [&] { shard.gemm(x.data(), a.m, partial.data(), a.n); }, {}, {}},
      {"comm", [&] { comm.ReduceScatterSum(partial.data(), y.data(), block * a.n); }, {}, {}},
      {"ring", [&] { MatmulReduceScatter(comm, x.data(), a.m, k_local, idle, y.data(), a.n, fused); }, {}, {}},
      {"unfused", [&] { MatmulThenReduceScatter(comm, x.data(), a.m, k_local, shard, y.data(), a.n); }, {}, {}},
      {"fused", [&] { MatmulReduceScatter(comm, x.data(), a.m, k_local, shard, y.data(), a.n, fused); }, {}, {}},
      {"naive", [&] { MatmulReduceScatter(comm, x.data(), a.m, k_local, shard, y.data(), a.n, naive); }, {}, {}},
  };
  Report(comm, "MatMul+ReduceScatter", a, variants, Measure(comm, variants, a.reps));
}

int Main(int argc, char** argv) {
  const Args a = ParseArgs(argc, argv);
  const Communicator& comm = World();
  int threads = a.threads;
  if (threads <= 0) {
    int local_ranks = comm.size();
    if (const char* env = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE")) local_ranks = std::max(1, std::atoi(env));
    threads = std::max(1, DefaultThreadCount() / local_ranks);
  }
  SetGlobalThreadCount(threads);
  if (comm.rank() == 0) std::printf("load average before: %s\n", LoadAverage().c_str());
  if (a.op == "ag" || a.op == "both") BenchAllGatherMatmul(comm, a);
  if (a.op == "rs" || a.op == "both") BenchMatmulReduceScatter(comm, a);
  if (comm.rank() == 0) std::printf("load average after: %s\n", LoadAverage().c_str());
  return 0;
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
  try {
    return tessera::Main(argc, argv);
  } catch (const tessera::Error& e) {
    std::fprintf(stderr, "collective_bench: error: %s\n", e.what());
    return 2;
  }
}
