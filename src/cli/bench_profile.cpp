#include "cli/bench_profile.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/bandwidth.h"
#include "core/error.h"
#include "core/profile.h"
#include "core/thread_pool.h"
#include "kernels/peak.h"

namespace tessera::cli {
namespace {

std::string Fixed(double value, int digits) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.*f", digits, value);
  return text;
}

// Runs `pass` once untimed (pages the weights in, sizes the buffers), then `reps` times with the
// profile on; returns the profiled passes' wall time.
template <typename Pass>
double Profiled(int reps, const Pass& pass) {
  pass();
  StartProfiling();
  const auto t0 = std::chrono::steady_clock::now();
  try {
    for (int r = 0; r < reps; ++r) pass();
  } catch (...) {
    StopProfiling();
    throw;
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  StopProfiling();
  return wall;
}

// The entries by time, largest first.
std::vector<const ProfileEntry*> ByTime(const std::vector<ProfileEntry>& entries) {
  std::vector<const ProfileEntry*> order;
  for (const ProfileEntry& e : entries) order.push_back(&e);
  std::stable_sort(order.begin(), order.end(),
                   [](const ProfileEntry* a, const ProfileEntry* b) { return a->seconds > b->seconds; });
  return order;
}

double TotalSeconds(const std::vector<ProfileEntry>& entries) {
  double seconds = 0.0;
  for (const ProfileEntry& e : entries) seconds += e.seconds;
  return seconds;
}

// The pool's counters as JSON, scaled by `per` (totals -> per token or per prefill).
nlohmann::json PoolJson(const PoolProfile& pool, double per, const std::string& unit) {
  nlohmann::json threads = nlohmann::json::array();
  for (size_t i = 0; i < pool.threads.size(); ++i) {
    const PoolThreadProfile& t = pool.threads[i];
    threads.push_back({{"thread", i}, {"busy_ms_per_" + unit, t.busy_seconds * per * 1e3},
                       {"idle_in_runs_ms_per_" + unit, std::max(0.0, pool.run_seconds - t.busy_seconds) * per * 1e3},
                       {"wake_us_per_run", i > 0 && pool.runs > 0 ? t.wake_seconds / pool.runs * 1e6 : 0.0},
                       {"tasks_per_" + unit, t.tasks * per}});
  }
  return {{"runs_per_" + unit, pool.runs * per}, {"run_ms_per_" + unit, pool.run_seconds * per * 1e3},
          {"threads", threads}};
}

void PrintPoolTable(const PoolProfile& pool, double wall, double per, const char* unit) {
  std::printf("thread pool: %.1f parallel runs per %s, %.3f ms per %s inside them (%.1f us per run)\n\n",
              pool.runs * per, unit, pool.run_seconds * per * 1e3, unit,
              pool.runs > 0 ? pool.run_seconds / pool.runs * 1e6 : 0.0);
  std::printf("| thread | busy ms/%s | idle inside runs ms/%s | wake-up us per run | tasks/%s |\n", unit, unit, unit);
  std::printf("|---:|---:|---:|---:|---:|\n");
  for (size_t i = 0; i < pool.threads.size(); ++i) {
    const PoolThreadProfile& t = pool.threads[i];
    std::printf("| %zu | %.3f | %.3f | %s | %.1f |\n", i, t.busy_seconds * per * 1e3,
                std::max(0.0, pool.run_seconds - t.busy_seconds) * per * 1e3,
                i == 0 ? "(posts)" : Fixed(pool.runs > 0 ? t.wake_seconds / pool.runs * 1e6 : 0.0, 1).c_str(),
                t.tasks * per);
  }
  std::printf("\nthread 0 outside parallel runs (serial work and the hand-offs between runs): %.3f ms per %s\n",
              std::max(0.0, wall - pool.run_seconds) * per * 1e3, unit);
}

}  // namespace

void RunDecodeProfile(const Model& model, KvCache& cache, int tokens, int reps, bool json) {
  if (tokens < 1) Fail("bench --profile needs -n >= 1 (the decode tokens it profiles)");
  const int64_t depth = cache.length();
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(model.vocab_size()) - 1);
  std::vector<float> logits;
  // Greedy decode after the depth, as bench's tg test runs it.
  auto decode = [&] {
    int32_t next[1] = {token(rng)};
    for (int i = 0; i < tokens; ++i) {
      model.Forward(next, depth + i, cache, LogitsMode::kLast, logits);
      next[0] = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    }
    cache.Truncate(depth);
  };
  const double wall = Profiled(reps, decode);
  const std::vector<ProfileEntry> entries = ProfileEntries();
  const PoolProfile pool = GlobalPool().Profile();
  const double probe = MeasureReadBandwidth(size_t{1} << 30, GlobalPool().num_threads(), 3);
  const double per = 1.0 / (static_cast<double>(tokens) * reps);  // totals -> per decode token

  const double seconds = TotalSeconds(entries);
  double bytes = 0.0;
  for (const ProfileEntry& e : entries) bytes += e.bytes;
  double model_bytes = 0.0;  // the byte model bench's roofline uses, for comparison
  for (int i = 0; i < tokens; ++i) model_bytes += model.DecodeBytes(depth + i, cache.type());
  model_bytes /= tokens;
  auto gbs = [](double b, double s) { return s > 0 ? b / s * 1e-9 : 0.0; };

  if (json) {
    nlohmann::json ops = nlohmann::json::array();
    for (const ProfileEntry& e : entries) {
      ops.push_back({{"operation", e.category}, {"detail", e.detail}, {"calls_per_token", e.calls * per},
                     {"ms_per_token", e.seconds * per * 1e3}, {"bytes_per_token", e.bytes * per},
                     {"gbs", gbs(e.bytes, e.seconds)}});
    }
    const nlohmann::json out = {{"tokens", tokens}, {"depth", depth}, {"repetitions", reps}, {"threads", GlobalPool().num_threads()},
                                {"read_bandwidth_gbs", probe * 1e-9}, {"ms_per_token", wall * per * 1e3},
                                {"profiled_ms_per_token", seconds * per * 1e3}, {"bytes_per_token", bytes * per},
                                {"byte_model_bytes_per_token", model_bytes}, {"operations", ops},
                                {"pool", PoolJson(pool, per, "token")}};
    std::printf("%s\n", out.dump(2).c_str());
    return;
  }
  std::printf("decode profile: %d tokens from position %lld, %d repetitions, %d threads; read probe %.2f GB/s "
              "(measured after)\n\n",
              tokens, static_cast<long long>(depth), reps, GlobalPool().num_threads(), probe * 1e-9);
  std::printf("| operation | detail | calls/token | ms/token | share | MB/token | GB/s | of probe |\n");
  std::printf("|---|---|---:|---:|---:|---:|---:|---:|\n");
  for (const ProfileEntry* e : ByTime(entries)) {
    const double g = gbs(e->bytes, e->seconds);
    std::printf("| %s | %s | %.1f | %.3f | %.1f%% | %.2f | %s | %s |\n", e->category.c_str(), e->detail.c_str(),
                e->calls * per, e->seconds * per * 1e3, seconds > 0 ? 100.0 * e->seconds / seconds : 0.0,
                e->bytes * per * 1e-6, e->bytes > 0 ? Fixed(g, 2).c_str() : "",
                e->bytes > 0 ? Fixed(g * 1e9 / probe, 2).c_str() : "");
  }
  std::printf("| **all** | | | %.3f | 100%% | %.2f | %.2f | %.2f |\n\n", seconds * per * 1e3, bytes * per * 1e-6,
              gbs(bytes, seconds), gbs(bytes, seconds) * 1e9 / probe);
  std::printf("wall %.3f ms per token (the operations above cover %.1f%% of it); byte model %.2f MB per token "
              "(bench's roofline: %.2f t/s at this probe)\n\n",
              wall * per * 1e3, wall > 0 ? 100.0 * seconds / wall : 0.0, model_bytes * 1e-6, probe / model_bytes);
  PrintPoolTable(pool, wall, per, "token");
}

void RunPrefillProfile(const Model& model, KvCache& cache, int tokens, int reps, bool json) {
  if (tokens < 1) Fail("bench --profile-prefill needs -p >= 1 (the prompt tokens it profiles)");
  const int64_t depth = cache.length();
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(model.vocab_size()) - 1);
  std::vector<int32_t> prompt(static_cast<size_t>(tokens));
  for (auto& t : prompt) t = token(rng);
  std::vector<float> logits;
  // One forward over the whole prompt after the depth, as bench's pp test runs it.
  auto prefill = [&] {
    model.Forward(prompt, depth, cache, LogitsMode::kLast, logits);
    cache.Truncate(depth);
  };
  const double wall = Profiled(reps, prefill);
  const std::vector<ProfileEntry> entries = ProfileEntries();
  const PoolProfile pool = GlobalPool().Profile();
  const ComputePeak peak = MeasureComputePeak(GlobalPool().num_threads());
  const double per = 1.0 / reps;  // totals -> per prefill
  const double seconds = TotalSeconds(entries);
  auto peak_of = [&](const ProfileEntry& e) {
    return e.arithmetic == ProfileArithmetic::kInt8 ? peak.int8_ops : peak.f32_flops;
  };
  auto gops = [](const ProfileEntry& e) { return e.seconds > 0 ? e.ops / e.seconds * 1e-9 : 0.0; };

  if (json) {
    nlohmann::json ops = nlohmann::json::array();
    for (const ProfileEntry& e : entries) {
      nlohmann::json op = {{"operation", e.category}, {"detail", e.detail}, {"calls_per_prefill", e.calls * per},
                           {"ms_per_prefill", e.seconds * per * 1e3}, {"gops_per_prefill", e.ops * per * 1e-9}};
      if (e.ops > 0) {
        op["gops_per_second"] = gops(e);
        op["peak"] = e.arithmetic == ProfileArithmetic::kInt8 ? "int8" : "f32";
        op["of_peak"] = peak_of(e) > 0 ? gops(e) * 1e9 / peak_of(e) : 0.0;
      }
      ops.push_back(op);
    }
    const nlohmann::json out = {{"tokens", tokens}, {"depth", depth}, {"repetitions", reps},
                                {"threads", GlobalPool().num_threads()}, {"f32_peak_gflops", peak.f32_flops * 1e-9},
                                {"int8_peak_gops", peak.int8_ops * 1e-9}, {"ms_per_prefill", wall * per * 1e3},
                                {"tokens_per_second", wall > 0 ? tokens / (wall * per) : 0.0},
                                {"profiled_ms_per_prefill", seconds * per * 1e3}, {"operations", ops},
                                {"pool", PoolJson(pool, per, "prefill")}};
    std::printf("%s\n", out.dump(2).c_str());
    return;
  }
  std::printf("prefill profile: %d tokens from position %lld, %d repetitions, %d threads; peaks (measured after, "
              "per CPU-second): f32 FMA %.1f GFLOP/s, int8 %.1f GOP/s\n\n",
              tokens, static_cast<long long>(depth), reps, GlobalPool().num_threads(), peak.f32_flops * 1e-9,
              peak.int8_ops * 1e-9);
  std::printf("| operation | detail | calls/prefill | ms/prefill | share | GOP/prefill | GOP/s | of peak |\n");
  std::printf("|---|---|---:|---:|---:|---:|---:|---:|\n");
  for (const ProfileEntry* e : ByTime(entries)) {
    const bool counted = e->ops > 0;
    const double rate = gops(*e);
    std::printf("| %s | %s | %.1f | %.3f | %.1f%% | %s | %s | %s |\n", e->category.c_str(), e->detail.c_str(),
                e->calls * per, e->seconds * per * 1e3, seconds > 0 ? 100.0 * e->seconds / seconds : 0.0,
                counted ? Fixed(e->ops * per * 1e-9, 2).c_str() : "", counted ? Fixed(rate, 1).c_str() : "",
                counted && peak_of(*e) > 0
                    ? (Fixed(rate * 1e9 / peak_of(*e), 2) + (e->arithmetic == ProfileArithmetic::kInt8 ? " int8" : " f32")).c_str()
                    : "");
  }
  std::printf("| **all** | | | %.3f | 100%% | | | |\n\n", seconds * per * 1e3);
  std::printf("wall %.3f ms per prefill = %.2f t/s (the operations above cover %.1f%% of it)\n\n", wall * per * 1e3,
              wall > 0 ? tokens / (wall * per) : 0.0, wall > 0 ? 100.0 * seconds / wall : 0.0);
  PrintPoolTable(pool, wall, per, "prefill");
}

}  // namespace tessera::cli
