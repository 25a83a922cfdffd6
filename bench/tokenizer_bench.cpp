// Tokenizer throughput, single thread, on 1 MiB of mixed text (o200k_harmony).
//
// The text is built deterministically from tests/data/tokenizer/golden.jsonl: the "encode"
// texts of every category except "long" and "random" (pathological on purpose), in file
// order, each followed by "\n", repeated until 1 MiB and cut there at a character boundary.
// tools/bench_tokenizers.py builds the same text for tiktoken and HF tokenizers; both print
// its FNV-1a 64 hash so the inputs can be compared.
//
//   build/tokenizer_bench --benchmark_repetitions=10 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/embedded_assets.h"
#include "tokenizer/tokenizer.h"

namespace tessera {
namespace {

constexpr size_t kTextBytes = 1 << 20;

std::string BuildBenchText() {
  std::ifstream in(std::string(TESSERA_SOURCE_DIR) + "/tests/data/tokenizer/golden.jsonl");
  if (!in) {
    std::fprintf(stderr, "tokenizer_bench: cannot read tests/data/tokenizer/golden.jsonl\n");
    std::exit(1);
  }
  std::string unit, line;
  while (std::getline(in, line)) {
    const auto entry = nlohmann::json::parse(line);
    if (entry["kind"] != "encode") continue;
    const std::string category = entry["category"];
    if (category == "long" || category == "random") continue;
    unit += entry["text"].get<std::string>();
    unit += '\n';
  }
  std::string text;
  while (text.size() < kTextBytes) text += unit;
  size_t cut = kTextBytes;
  while ((static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;  // do not split a character
  text.resize(cut);
  return text;
}

const std::string& BenchText() {
  static const std::string text = BuildBenchText();
  return text;
}

std::string Fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  char buf[32];
  std::snprintf(buf, sizeof(buf), "fnv1a=%016llx", static_cast<unsigned long long>(h));
  return buf;
}

void BM_Encode(benchmark::State& state) {
  const Tokenizer& tok = Tokenizer::BuiltIn();
  const std::string& text = BenchText();
  size_t tokens = 0;
  for (auto _ : state) {
    const std::vector<int32_t> ids = tok.Encode(text);
    tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["tokens"] = static_cast<double>(tokens);
  state.SetLabel(Fnv1a(text) + " bytes=" + std::to_string(text.size()));
}
BENCHMARK(BM_Encode)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Decode(benchmark::State& state) {
  const Tokenizer& tok = Tokenizer::BuiltIn();
  const std::vector<int32_t> ids = tok.Encode(BenchText());
  for (auto _ : state) {
    std::string text = tok.Decode(ids);
    benchmark::DoNotOptimize(text.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * BenchText().size()));
  state.counters["tokens"] = static_cast<double>(ids.size());
}
BENCHMARK(BM_Decode)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_IncrementalDecode(benchmark::State& state) {
  const Tokenizer& tok = Tokenizer::BuiltIn();
  const std::vector<int32_t> ids = tok.Encode(BenchText());
  for (auto _ : state) {
    IncrementalDecoder decoder(tok);
    size_t bytes = 0;
    for (int32_t id : ids) bytes += decoder.Add(id).size();
    bytes += decoder.Flush().size();
    benchmark::DoNotOptimize(bytes);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * BenchText().size()));
}
BENCHMARK(BM_IncrementalDecode)->Unit(benchmark::kMillisecond)->UseRealTime();

// Parsing the 12 MB tokenizer.json (already decompressed) into a ready tokenizer.
void BM_LoadTokenizerJson(benchmark::State& state) {
  const std::string& json = EmbeddedTokenizerJson();
  for (auto _ : state) {
    Tokenizer tok = Tokenizer::FromJson(json, "tokenizer.json");
    benchmark::DoNotOptimize(&tok);
  }
}
BENCHMARK(BM_LoadTokenizerJson)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace tessera
