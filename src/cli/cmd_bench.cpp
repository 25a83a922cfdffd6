// `tessera bench`: llama-bench-style throughput of prompt processing (pp<N>: one prefill of N
// tokens into an empty cache) and generation (tg<N>: N single-token decode steps from an empty
// cache). Each test runs -r times after one untimed warm-up; the table shows mean ± standard
// deviation of tokens per second, in llama-bench's table shape (ecosystem.md §3).
//
// --sequences B (B > 1): the tg test decodes B sequences together, one ForwardBatch per step (the
// step a continuous-batching server runs): aggregate tokens per second, and the step time against
// the bytes the step must read (the dense weights once, the distinct experts the B tokens route to
// as the model counts them, B embedding rows and every sequence's KV rows) over the read bandwidth
// measured after each repetition.
//
// -d D (llama-bench's depth): both tests, and --profile, start after D positions already in the
// cache: a prompt of D random tokens prefilled once, untimed, in 512-token batches; every
// repetition rolls the cache back to D. The byte model then counts the D positions' keys and
// values each decode step reads.
//
// --profile: where a decode token's time goes (cli/bench_profile.h); --profile-prefill: where a
// prefill of -p tokens goes, each operation's compute rate next to the machine's peaks.
//
// --spec-cost: the verification cost of speculative decoding instead (engine/speculative.h).
// After a prefill of -p random tokens, each repetition times, at that position, one decode step
// (1 token) and one verification of k + 1 tokens for k = 1..8 (logits for every row, as the
// generator asks), interleaved so machine load drifts hit every k alike, rolling the cache back
// after each. c(k) = median verify time / median decode time, next to the byte ratio
// bytes(k + 1) / bytes(1) (shared weights once, plus the distinct experts the timed runs routed
// to, as the model counts them) and the speedup (1 - a^(k+1)) / (1 - a) / c(k) it implies at i.i.d. acceptance a.
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <numeric>
#include <random>

#include <nlohmann/json.hpp>

#include "cli/bench_profile.h"
#include "cli/commands.h"
#include "io/gguf.h"
#include "io/gguf_config.h"
#include "kernels/nm_linear.h"
#include "kernels/peak.h"
#include "cli/model_options.h"
#include "core/bandwidth.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "engine/speculative.h"
#include "model/model.h"

namespace tessera::cli {
namespace {

struct BenchArgs {
  std::string model;
  int prompt = 512;
  int gen = 128;
  int depth = 0;
  int reps = 3;
  std::string kv_type = "bf16";
  bool json = false;
  ModelArgs model_args;
  bool spec_cost = false;
  int sequences = 1;
  bool profile = false;
  bool profile_prefill = false;
};

// llama.cpp's label for the published checkpoints ("gpt-oss 20B MXFP4 MoE"); other shapes get
// their parameter count.
std::string ModelLabel(const Model& m) {
  const ModelConfig& c = m.config();
  std::string size;
  if (c.num_hidden_layers == 24 && c.num_local_experts == 32 && c.hidden_size == 2880) {
    size = "20B";
  } else if (c.num_hidden_layers == 36 && c.num_local_experts == 128 && c.hidden_size == 2880) {
    size = "120B";
  } else {
    char buf[32];
    const double p = static_cast<double>(m.parameters());
    std::snprintf(buf, sizeof(buf), p >= 1e9 ? "%.1fB" : "%.0fM", p >= 1e9 ? p / 1e9 : p / 1e6);
    size = buf;
  }
  // A GGUF file: llama-bench's own label for it, so the two tables line up.
  if (IsGgufPath(m.path())) return GgufModelLabel(*GgufFile::Open(m.path()), m.parameters());
  if (c.model_type == "gpt_oss") return "gpt-oss " + size + " MXFP4 MoE";
  // llama.cpp style for the other families: "llama 8.0B BF16", "qwen3_moe 30.5B BF16".
  std::string dtype = m.options().dense == DenseWeights::kInt8 ? "Q8 (int8 rows)" : "as stored";
  if (m.int4_scheme()) {
    const int64_t g = m.int4_scheme()->group_size;
    dtype = (m.int4_scheme()->layout == Int4Layout::kAutoAwqGemm ? "AWQ int4 g" : "int4 g") +
            (g > 0 ? std::to_string(g) : std::string("row")) +
            (m.options().dense == DenseWeights::kInt8 ? ", Q8 rest" : "");
  }
  if (m.sparse_scheme() && m.LinearFormatsInUse().find("nm-") != std::string::npos) {
    dtype += ", " + NmPatternName(m.sparse_scheme()->kept, m.sparse_scheme()->group) + " sparse";
  }
  return c.model_type + " " + size + " " + dtype;
}

struct Result {
  std::string test;
  int n_prompt = 0, n_gen = 0;
  std::vector<double> samples;  // tokens per second per repetition
  double mean() const { return std::accumulate(samples.begin(), samples.end(), 0.0) / samples.size(); }
  double sd() const {
    if (samples.size() < 2) return 0.0;
    const double mu = mean();
    double ss = 0.0;
    for (double s : samples) ss += (s - mu) * (s - mu);
    return std::sqrt(ss / (samples.size() - 1));
  }
};

double Seconds(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void RunSpecCost(const BenchArgs& a, const Model& model) {
  constexpr int64_t kMaxK = 8;
  const double kAlphas[] = {0.5, 0.7, 0.9};
  const int64_t P = std::max(1, a.prompt);
  KvCache cache(model.cache_config(), P + kMaxK + 1, ParseKvType(a.kv_type));
  std::mt19937 rng(4321);
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(model.vocab_size()) - 1);
  std::vector<int32_t> ids(P);
  for (auto& t : ids) t = token(rng);
  std::vector<float> logits;
  model.Forward(ids, 0, cache, LogitsMode::kLast, logits);
  std::vector<std::vector<double>> seconds(kMaxK + 1);
  std::vector<double> counted(kMaxK + 1, 0.0);  // distinct experts per layer the timed runs used
  for (int rep = -1; rep < a.reps; ++rep) {  // rep -1: untimed warm-up of every shape
    for (int64_t k = 0; k <= kMaxK; ++k) {
      ids.resize(k + 1);
      for (auto& t : ids) t = token(rng);
      const auto t0 = std::chrono::steady_clock::now();
      model.Forward(ids, P, cache, LogitsMode::kAll, logits);
      const double s = Seconds(t0, std::chrono::steady_clock::now());
      cache.Truncate(P);
      if (rep >= 0) {
        seconds[k].push_back(s);
        counted[k] += model.last_forward_experts_per_layer() / a.reps;
      }
    }
  }
  const double bandwidth = MeasureReadBandwidth(size_t{1} << 30, GlobalPool().num_threads(), 5);
  const DecodeByteModel bytes = DecodeBytesOf(model.config(), model.options());
  // Bytes with the distinct experts the runs actually routed to (counted by the model).
  const double one = bytes.Bytes(1, counted[0]);
  std::vector<double> c(kMaxK + 1), ratio(kMaxK + 1), distinct(kMaxK + 1), ms(kMaxK + 1);
  for (int64_t k = 0; k <= kMaxK; ++k) {
    ms[k] = Median(seconds[k]) * 1e3;
    c[k] = ms[k] / ms[0];
    distinct[k] = counted[k];
    ratio[k] = bytes.Bytes(k + 1, distinct[k]) / one;
  }
  auto speedup = [&](double alpha, int64_t k) { return ExpectedTokensIid(alpha, k) / c[k]; };
  if (a.json) {
    nlohmann::json rows = nlohmann::json::array();
    for (int64_t k = 0; k <= kMaxK; ++k) {
      nlohmann::json sp;
      for (double alpha : kAlphas) sp[std::to_string(alpha).substr(0, 3)] = speedup(alpha, k);
      std::vector<double> samples_ms;
      for (double s : seconds[k]) samples_ms.push_back(s * 1e3);
      rows.push_back({{"k", k}, {"tokens", k + 1}, {"median_ms", ms[k]}, {"samples_ms", samples_ms},
                      {"c", c[k]}, {"distinct_experts", distinct[k]}, {"bytes_ratio", ratio[k]},
                      {"c_over_bytes_ratio", c[k] / ratio[k]}, {"speedup", sp}});
    }
    nlohmann::json out = {{"model", ModelLabel(model)}, {"model_path", model.path()},
                          {"precision", a.model_args.precision}, {"dense", a.model_args.dense},
                          {"threads", GlobalPool().num_threads()}, {"position", P}, {"repetitions", a.reps},
                          {"read_bandwidth_gbs", bandwidth * 1e-9}, {"bytes_per_token", one}, {"rows", rows}};
    std::printf("%s\n", out.dump(2).c_str());
    return;
  }
  std::printf("%s, %s precision, %s dense weights, %d threads, position %lld, medians of %d\n",
              ModelLabel(model).c_str(), a.model_args.precision.c_str(), a.model_args.dense.c_str(),
              GlobalPool().num_threads(), static_cast<long long>(P), a.reps);
  std::printf("read bandwidth %.2f GB/s (measured now); one token reads %.3f GB (weights, no KV)\n\n",
              bandwidth * 1e-9, one * 1e-9);
  std::printf("|  k | tokens | median ms |  c(k) | distinct experts/layer | bytes ratio | c / bytes ratio "
              "| GB/s |\n");
  std::printf("|---:|-------:|----------:|------:|-----------------------:|------------:|----------------:"
              "|-----:|\n");
  for (int64_t k = 0; k <= kMaxK; ++k) {
    std::printf("| %2lld | %6lld | %9.1f | %5.2f | %22.1f | %11.2f | %15.2f | %4.1f |\n", static_cast<long long>(k),
                static_cast<long long>(k + 1), ms[k], c[k], distinct[k], ratio[k], c[k] / ratio[k],
                bytes.Bytes(k + 1, distinct[k]) / (ms[k] * 1e-3) * 1e-9);
  }
  std::printf("\nspeedup E(k) / c(k) at i.i.d. acceptance a, E(k) = (1 - a^(k+1)) / (1 - a):\n\n");
  std::printf("|   a |");
  for (int64_t k = 1; k <= kMaxK; ++k) std::printf("  k=%lld |", static_cast<long long>(k));
  std::printf(" best k | best speedup |\n|----:|");
  for (int64_t k = 1; k <= kMaxK; ++k) std::printf("-----:|");
  std::printf("-------:|-------------:|\n");
  for (double alpha : kAlphas) {
    int64_t best = 0;
    std::printf("| %.1f |", alpha);
    for (int64_t k = 1; k <= kMaxK; ++k) {
      std::printf(" %5.2f |", speedup(alpha, k));
      if (speedup(alpha, k) > speedup(alpha, best)) best = k;
    }
    std::printf(" %6lld | %12.2f |\n", static_cast<long long>(best), speedup(alpha, best));
  }
}

void RunBatchedDecode(const BenchArgs& a, const Model& model) {
  if (a.gen < 1) Fail("bench --sequences needs -n >= 1 (the generation test it runs)");
  const int64_t B = a.sequences, n = a.gen;
  const KvType kv = ParseKvType(a.kv_type);
  const DecodeByteModel bytes_of = DecodeBytesOf(model.config(), model.options());
  std::mt19937 rng(99);
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(model.vocab_size()) - 1);
  std::vector<double> rates, step_ms, fractions;
  double distinct_sum = 0.0;
  int64_t steps_counted = 0;
  for (int rep = -1; rep < a.reps; ++rep) {  // rep -1: untimed warm-up
    std::vector<KvCache> caches;
    caches.reserve(B);
    for (int64_t b = 0; b < B; ++b) caches.emplace_back(model.cache_config(), n, kv);
    std::vector<std::array<int32_t, 1>> next(B);
    for (auto& t : next) t[0] = token(rng);
    std::vector<std::vector<float>> logits(B);
    std::vector<ForwardSequence> batch(B);
    double bytes = 0.0;
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t b = 0; b < B; ++b) batch[b] = {next[b], i, &caches[b], LogitsMode::kLast, &logits[b]};
      model.ForwardBatch(batch);
      const double distinct = model.last_forward_experts_per_layer();
      bytes += bytes_of.Bytes(B, distinct) + static_cast<double>(B) * (model.DecodeBytes(i, kv) - model.DecodeBytes(i));
      if (rep >= 0) {
        distinct_sum += distinct;
        ++steps_counted;
      }
      for (int64_t b = 0; b < B; ++b) {
        next[b][0] = static_cast<int32_t>(std::max_element(logits[b].begin(), logits[b].end()) - logits[b].begin());
      }
    }
    const double seconds = Seconds(t0, std::chrono::steady_clock::now());
    if (rep < 0) continue;
    const double bandwidth = MeasureReadBandwidth(size_t{1} << 30, GlobalPool().num_threads(), 3);
    rates.push_back(static_cast<double>(B * n) / seconds);
    step_ms.push_back(seconds * 1e3 / static_cast<double>(n));
    // Roofline step time / measured step time.
    fractions.push_back(bytes / bandwidth / seconds);
  }
  Result r{"tg" + std::to_string(n) + " x" + std::to_string(B), 0, a.gen, rates};
  const double distinct = distinct_sum / static_cast<double>(std::max<int64_t>(1, steps_counted));
  const double fraction = Median(fractions);
  if (a.json) {
    const nlohmann::json out = {{"test", r.test}, {"sequences", B}, {"n_gen", n}, {"avg_ts", r.mean()},
                                {"stddev_ts", r.sd()}, {"samples_ts", r.samples}, {"step_ms_median", Median(step_ms)},
                                {"distinct_experts_per_layer", distinct}, {"roofline_fraction", fraction},
                                {"precision", a.model_args.precision}, {"dense", a.model_args.dense}};
    std::printf("%s\n", out.dump(2).c_str());
    return;
  }
  std::printf("%s: %.2f ± %.2f t/s aggregate (%lld sequences), median step %.2f ms, %.1f distinct experts per layer "
              "per step; the step reached %.2f of its roofline (bytes it must read / read bandwidth measured after "
              "each repetition, median)\n",
              r.test.c_str(), r.mean(), r.sd(), static_cast<long long>(B), Median(step_ms), distinct, fraction);
}

// A cache holding `depth` positions of random tokens, prefilled in 512-token batches (a long
// prompt in one forward would size its activations for all of it), with room for `after` more
// positions and a rollback of at least `after`, so every repetition can return to `depth`.
KvCache PrefillDepth(const Model& model, int64_t depth, int64_t after, KvType kv) {
  constexpr int64_t kBatch = 512;
  KvCache cache(model.cache_config(), std::max<int64_t>(1, depth + after), kv, std::max<int64_t>(64, after));
  if (depth == 0) return cache;
  std::fprintf(stderr, "bench: prefilling a depth of %lld positions (untimed)\n", static_cast<long long>(depth));
  std::mt19937 rng(777);
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(model.vocab_size()) - 1);
  std::vector<int32_t> ids;
  std::vector<float> logits;
  for (int64_t start = 0; start < depth; start += kBatch) {
    ids.resize(static_cast<size_t>(std::min(kBatch, depth - start)));
    for (auto& t : ids) t = token(rng);
    model.Forward(ids, start, cache, LogitsMode::kLast, logits);
  }
  return cache;
}

void RunBench(const BenchArgs& a) {
  if (a.prompt < 0 || a.gen < 0 || a.reps < 1 || a.depth < 0) {
    Fail("bench: -p, -n and -d must be >= 0 and -r >= 1");
  }
  if (a.depth > 0 && (a.spec_cost || a.sequences > 1)) {
    Fail("bench: -d applies to the pp and tg tests and to the profiles, not to ", a.spec_cost ? "--spec-cost" : "--sequences");
  }
  const auto model = Model::Load(a.model, ToModelOptions(a.model_args));
  // Refused at once, naming both numbers, rather than after minutes of prefill.
  const int64_t max_positions = model->config().max_position_embeddings;
  const int64_t reach = a.spec_cost ? std::max(1, a.prompt) + 9 : int64_t{a.depth} + std::max(a.prompt, a.gen);
  if (max_positions > 0 && reach > max_positions) {
    Fail("bench: ", a.spec_cost ? "-p plus 9 verification tokens" : a.depth > 0 ? "-d plus the test" : a.prompt >= a.gen ? "-p" : "-n",
         " reaches ", reach, " positions, beyond the model's context of ", max_positions, " (max_position_embeddings)");
  }
  if (a.spec_cost) return RunSpecCost(a, *model);
  if (a.sequences > 1) return RunBatchedDecode(a, *model);
  const KvType kv = ParseKvType(a.kv_type);
  const int64_t depth = a.depth;
  const int64_t after = a.profile ? a.gen : a.profile_prefill ? a.prompt : std::max(a.prompt, a.gen);
  KvCache cache = PrefillDepth(*model, depth, after, kv);
  if (a.profile) return RunDecodeProfile(*model, cache, a.gen, a.reps, a.json);
  if (a.profile_prefill) return RunPrefillProfile(*model, cache, a.prompt, a.reps, a.json);
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(model->vocab_size()) - 1);
  std::vector<int32_t> prompt(a.prompt);
  for (auto& t : prompt) t = token(rng);
  std::vector<float> logits;

  auto run_pp = [&] {
    const auto t0 = std::chrono::steady_clock::now();
    model->Forward(prompt, depth, cache, LogitsMode::kLast, logits);
    const double seconds = Seconds(t0, std::chrono::steady_clock::now());
    cache.Truncate(depth);
    return a.prompt / seconds;
  };
  auto run_tg = [&] {
    int32_t next[1] = {token(rng)};
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < a.gen; ++i) {
      model->Forward(next, depth + i, cache, LogitsMode::kLast, logits);
      next[0] = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    }
    const double seconds = Seconds(t0, std::chrono::steady_clock::now());
    cache.Truncate(depth);
    return a.gen / seconds;
  };
  // llama-bench's names: "pp512", "tg128 @ d4096".
  const std::string at = depth > 0 ? " @ d" + std::to_string(depth) : "";

  std::vector<Result> results;
  std::vector<double> bandwidths;  // bytes/s after each tg repetition
  if (a.prompt > 0) {
    Result r{"pp" + std::to_string(a.prompt) + at, a.prompt, 0, {}};
    run_pp();  // warm-up: page in the weights, size the buffers
    for (int i = 0; i < a.reps; ++i) r.samples.push_back(run_pp());
    results.push_back(r);
  }
  if (a.gen > 0) {
    Result r{"tg" + std::to_string(a.gen) + at, 0, a.gen, {}};
    {
      const int32_t one[1] = {0};
      model->Forward(one, depth, cache, LogitsMode::kLast, logits);
      cache.Truncate(depth);
    }
    // The decode roofline, measured in this run: read bandwidth with the pool's threads over
    // 1 GiB (best of 3) right after each repetition, so that each repetition is compared with the
    // bandwidth the (shared, drifting) machine gave at that time; the fraction reported is the
    // median of the repetitions' tg rate / (bandwidth / bytes per decode step).
    for (int i = 0; i < a.reps; ++i) {
      r.samples.push_back(run_tg());
      bandwidths.push_back(MeasureReadBandwidth(size_t{1} << 30, GlobalPool().num_threads(), 3));
    }
    results.push_back(r);
  }
  // The prefill ceiling, measured in this run after the pp repetitions: int8 dot products when
  // the dense matrices are int8 or mostly GGUF blocks on the q8 path, else f32 FMAs; pp's rate in matmul FLOPs (every
  // weight a token multiplies, Model::MatmulFlopsPerToken) over it.
  ComputePeak peak;
  double pp_peak = 0.0, pp_fraction = 0.0;
  const char* peak_kind = "f32 FMA";
  if (a.prompt > 0) {
    peak = MeasureComputePeak(GlobalPool().num_threads());
    const bool q8_weights = model->options().dense == DenseWeights::kInt8 ||
                            model->LinearFormatsInUse().rfind("ggml-q8", 0) == 0;  // GGUF blocks, mostly q8 path
    const bool int8 = q8_weights && peak.int8_ops > 0;
    pp_peak = int8 ? peak.int8_ops : peak.f32_flops;
    if (int8) peak_kind = "int8 VNNI";
    if (pp_peak > 0) pp_fraction = results.front().mean() * model->MatmulFlopsPerToken() / pp_peak;
  }
  double bandwidth = 0.0, tg_bytes = 0.0, fraction = 0.0;
  if (a.gen > 0) {
    for (int64_t i = 0; i < a.gen; ++i) tg_bytes += model->DecodeBytes(depth + i, kv);
    tg_bytes /= static_cast<double>(a.gen);
    std::vector<double> fractions;
    for (size_t i = 0; i < bandwidths.size(); ++i) fractions.push_back(results.back().samples[i] * tg_bytes / bandwidths[i]);
    fraction = Median(fractions);
    bandwidth = Median(bandwidths);
  }
  const double roofline = tg_bytes > 0 ? bandwidth / tg_bytes : 0.0;

  const std::string label = ModelLabel(*model);
  const double bytes = static_cast<double>(model->weight_bytes());
  const double params = static_cast<double>(model->parameters());
  const int threads = GlobalPool().num_threads();
  if (a.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const Result& r : results) {
      out.push_back({{"model", label}, {"model_path", model->path()}, {"size_bytes", model->weight_bytes()},
                     {"params", model->parameters()}, {"backend", "CPU"}, {"threads", threads},
                     {"kv_type", a.kv_type}, {"test", r.test}, {"n_prompt", r.n_prompt}, {"n_gen", r.n_gen},
                     {"n_depth", depth},
                     {"avg_ts", r.mean()}, {"stddev_ts", r.sd()}, {"samples_ts", r.samples},
                     {"precision", a.model_args.precision}, {"dense", a.model_args.dense}});
      if (r.n_prompt > 0 && pp_peak > 0) {
        out.back()["flops_per_token"] = model->MatmulFlopsPerToken();
        out.back()["peak_ops"] = pp_peak;
        out.back()["peak_kind"] = peak_kind;
        out.back()["peak_fraction"] = pp_fraction;
      }
      if (r.n_gen > 0) {
        out.back()["read_bandwidth_gbs"] = bandwidth * 1e-9;
        out.back()["bytes_per_token"] = tg_bytes;
        out.back()["roofline_ts"] = roofline;
        out.back()["roofline_fraction"] = fraction;
      }
    }
    std::printf("%s\n", out.dump(2).c_str());
    return;
  }
  std::printf("| %-30s | %10s | %10s | %-10s | %7s | %15s | %20s |\n", "model", "size", "params", "backend",
              "threads", "test", "t/s");
  std::printf("| %s | %s: | %s: | %s | %s: | %s: | %s: |\n", std::string(30, '-').c_str(), std::string(9, '-').c_str(),
              std::string(9, '-').c_str(), std::string(10, '-').c_str(), std::string(6, '-').c_str(),
              std::string(14, '-').c_str(), std::string(19, '-').c_str());
  for (const Result& r : results) {
    char size[32], params_text[32], ts[48];
    // llama-bench units (GiB, B) for real models; MiB and M keep tiny test models readable.
    if (bytes >= 1073741824.0) std::snprintf(size, sizeof(size), "%.2f GiB", bytes / 1073741824.0);
    else std::snprintf(size, sizeof(size), "%.2f MiB", bytes / 1048576.0);
    if (params >= 1e9) std::snprintf(params_text, sizeof(params_text), "%.2f B", params / 1e9);
    else std::snprintf(params_text, sizeof(params_text), "%.2f M", params / 1e6);
    std::snprintf(ts, sizeof(ts), "%.2f ± %.2f", r.mean(), r.sd());
    std::printf("| %-30s | %10s | %10s | %-10s | %7d | %15s | %20s |\n", label.c_str(), size, params_text, "CPU", threads,
                r.test.c_str(), ts);
  }
  // The formats the weights run in, by bytes per token (a GGUF file's types, or the dense choice).
  std::printf("\nprecision %s, weights %s\n", a.model_args.precision.c_str(), model->LinearFormatsInUse().c_str());
  for (const Result& r : results) {
    if (r.n_prompt == 0 || pp_peak <= 0) continue;
    std::printf("%s ceiling: %.1f G%s/s %s peak (%d threads, per CPU-second) / %.3f GFLOP per token = %.1f t/s; "
                "reached %.3f of it\n",
                r.test.c_str(), pp_peak * 1e-9, std::string(peak_kind) == "f32 FMA" ? "FLOP" : "OP", peak_kind, threads,
                model->MatmulFlopsPerToken() * 1e-9, pp_peak / model->MatmulFlopsPerToken(), pp_fraction);
  }
  for (const Result& r : results) {
    if (r.n_gen == 0) continue;
    std::printf("%s roofline: %.2f GB/s read bandwidth (%d threads, median of the measurements after each "
                "repetition) / %.3f GB per token = %.2f t/s; reached %.2f of it (median over the repetitions)\n",
                r.test.c_str(), bandwidth * 1e-9, threads, tg_bytes * 1e-9, roofline, fraction);
  }
}

}  // namespace

void RegisterBench(CLI::App& app) {
  auto args = std::make_shared<BenchArgs>();
  auto* cmd = app.add_subcommand("bench", "llama-bench-style prompt processing / generation throughput");
  cmd->add_option("-m,--model", args->model, "Hugging Face model directory")->required();
  cmd->add_option("-p,--n-prompt", args->prompt, "prompt tokens for the pp test (0 skips it)")
      ->capture_default_str()->check(CLI::Range(0, 1 << 20));
  cmd->add_option("-n,--n-gen", args->gen, "generated tokens for the tg test (0 skips it)")
      ->capture_default_str()->check(CLI::Range(0, 1 << 20));
  cmd->add_option("-d,--n-depth", args->depth,
                  "positions already in the cache before each test: a prompt of D random tokens, prefilled once "
                  "(untimed); the tg roofline then counts their keys and values")
      ->capture_default_str()->check(CLI::Range(0, 1 << 20));
  cmd->add_option("-r,--repetitions", args->reps, "timed repetitions of each test")
      ->capture_default_str()->check(CLI::Range(1, 1000));
  cmd->add_option("--kv-type", args->kv_type, "KV cache element type: bf16, f32 or int8")
      ->capture_default_str()->check(CLI::IsMember({"f32", "bf16", "int8"}));
  cmd->add_flag("--json", args->json, "print a JSON array instead of the table");
  AddModelOptions(cmd, args->model_args, "fast");
  cmd->add_option("--sequences", args->sequences,
                  "decode this many sequences together in the tg test (one batched forward per step), instead of the "
                  "pp and tg tests")
      ->capture_default_str()->check(CLI::Range(1, 4096));
  cmd->add_flag("--profile", args->profile,
                "profile -n decode tokens instead (-r times): time, bytes and GB/s per kind of operation next to the "
                "read probe, and the thread pool's busy and idle time per thread");
  cmd->add_flag("--profile-prefill", args->profile_prefill,
                "profile one prefill of -p tokens instead (-r times): time per kind of operation, and the linears' and "
                "attention's compute rate against the measured int8 / f32 peak")
      ->excludes("--profile")
      ->excludes("--sequences");
  cmd->add_flag("--spec-cost", args->spec_cost,
                "measure the speculative verification cost c(k), k = 1..8, at position -p instead (-n ignored)")
      ->excludes("--profile-prefill");
  cmd->callback([args] { RunBench(*args); });
}

}  // namespace tessera::cli
