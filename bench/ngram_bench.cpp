// The n-gram proposer's cost per decode step (engine/ngram.h), on histories of 1k, 8k and 32k
// tokens, single-threaded:
//   ngram_step/index/<len>   NgramIndex: Append the step's token, then Propose (the generator's
//                            use): O(max_n) per step whatever the history length
//   ngram_step/kmp/<len>     vLLM's scan (ProposeNgramKmp) over the whole history: O(len)
//   ngram_step/brute/<len>   the brute-force definition (ProposeNgramBrute): O(len * max_n)
// min_n 2, max_n 5, k 8. Each iteration runs kSteps consecutive steps that grow the history from
// <len> tokens, starting from a copy of the same prebuilt state (copied outside the timing), so
// every step sees a history of about <len>. The text imitates copying: runs of 4..31 tokens
// copied from earlier positions half of the time, otherwise fresh tokens from 50,000 ids, so most
// steps find a match (counter drafts = the fraction of steps with a non-empty draft).
//
//   build/ngram_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "engine/ngram.h"

namespace tessera {
namespace {

constexpr int64_t kMinN = 2, kMaxN = 5, kDraft = 8;
constexpr int64_t kSteps = 256;
constexpr int64_t kContext = int64_t{1} << 30;

// `len + kSteps` tokens of copy-heavy text (fixed seed).
const std::vector<int32_t>& Text(int64_t len) {
  static std::vector<int32_t> text;
  const size_t need = static_cast<size_t>(len + kSteps);
  if (text.size() >= need) return text;
  std::mt19937_64 rng(2026);
  text.clear();
  while (text.size() < need + 64) {
    if (text.size() > 64 && rng() % 2 == 0) {
      const size_t from = rng() % (text.size() - 32);
      const size_t n = 4 + rng() % 28;
      for (size_t j = 0; j < n; ++j) text.push_back(text[from + j]);
    } else {
      text.push_back(static_cast<int32_t>(rng() % 50000));
    }
  }
  return text;
}

void BM_IndexStep(benchmark::State& state) {
  const int64_t len = state.range(0);
  const std::vector<int32_t>& text = Text(len);
  NgramIndex start(kMinN, kMaxN);
  start.Append(std::span<const int32_t>(text.data(), static_cast<size_t>(len)));
  std::vector<int32_t> draft;
  int64_t drafts = 0;
  for (auto _ : state) {
    state.PauseTiming();
    NgramIndex index = start;
    state.ResumeTiming();
    for (int64_t s = 0; s < kSteps; ++s) {
      index.Append(text[static_cast<size_t>(len + s)]);
      index.Propose(kDraft, kContext, draft);
      drafts += draft.empty() ? 0 : 1;
    }
    benchmark::DoNotOptimize(draft.data());
  }
  state.SetItemsProcessed(state.iterations() * kSteps);
  state.counters["drafts"] = static_cast<double>(drafts) / static_cast<double>(state.iterations() * kSteps);
}

template <std::vector<int32_t> (*Propose)(std::span<const int32_t>, int64_t, int64_t, int64_t, int64_t)>
void BM_ScanStep(benchmark::State& state) {
  const int64_t len = state.range(0);
  const std::vector<int32_t>& text = Text(len);
  int64_t drafts = 0;
  for (auto _ : state) {
    for (int64_t s = 0; s < kSteps; ++s) {
      // The history of step s: the first len + s + 1 tokens (the scan keeps no state).
      const std::span<const int32_t> history(text.data(), static_cast<size_t>(len + s + 1));
      const std::vector<int32_t> draft = Propose(history, kMinN, kMaxN, kContext, kDraft);
      drafts += draft.empty() ? 0 : 1;
      benchmark::DoNotOptimize(draft.data());
    }
  }
  state.SetItemsProcessed(state.iterations() * kSteps);
  state.counters["drafts"] = static_cast<double>(drafts) / static_cast<double>(state.iterations() * kSteps);
}

BENCHMARK(BM_IndexStep)->Name("ngram_step/index")->Arg(1024)->Arg(8192)->Arg(32768)->Unit(benchmark::kNanosecond);
BENCHMARK(BM_ScanStep<ProposeNgramKmp>)->Name("ngram_step/kmp")->Arg(1024)->Arg(8192)->Arg(32768)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ScanStep<ProposeNgramBrute>)->Name("ngram_step/brute")->Arg(1024)->Arg(8192)->Arg(32768)
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace tessera
