// Accuracy of the fast paths (Precision::kFast with BF16 or int8 dense weights) measured over a
// sweep of synthetic tiny gpt-oss checkpoints (model/synth.h: varied seeds, widths, depths,
// expert counts, top-k, head layouts, sliding windows and prompt lengths), in two families of
// weight statistics (Family below), and the bounds the fast path must keep on their
// distributions (docs/ACCURACY.md).
//
// Reference: tessera's exact path (ModelOptions{}), itself held to the transformers float32
// goldens at 1e-4 of max |ref| by gpt_oss_golden_test.cpp; the synthetic models have no HF
// goldens of their own.
//
// Per checkpoint and fast variant, teacher-forced over a random prompt:
//   rel_err      max |logit - ref| / max |ref| over every position and vocabulary entry
//   kl           mean over positions of KL(ref || fast) of the next-token distributions
//   top1         fraction of positions with the same argmax
//   flips        fraction of (token, layer) whose top-k expert set differs from the reference's
//   clean_*      the same error measures over the positions whose expert sets match the
//                reference in every layer (what the error is without routing flips)
// and free-running greedy decoding of kGreedySteps tokens from the prompt: the number of tokens
// equal to the reference's greedy continuation before the first difference, and the reference's
// margin (its top logit minus its logit of the fast path's token, / max |ref|) at that step.
// Variants: BF16 or int8 dense weights, each with ModelOptions::exact_layers 0, 1 and 2.
//
// The sweep is every shape with kSeeds seeds (36 checkpoints per family, seconds); the bounds
// below are its measured distributions with margin (docs/ACCURACY.md). TESSERA_ACCURACY_SWEEP=N
// runs N seeds per shape instead (a larger sample for the doc; the bounds are checked only on the
// default sweep, whose numbers they were derived from) and also prints, per checkpoint, the mean
// KL with exact_layers = 0 .. layers (how much each layer's noise costs, given the later ones).
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "model/model.h"
#include "model/synth.h"
#include "test_util.h"
#include "scratch_dir.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kGreedySteps = 32;
constexpr int32_t kVocab = 512;
constexpr uint64_t kSeeds = 3;

// One synthetic checkpoint: a variant of the "tiny" preset with a small vocabulary (random token
// ids need no tokenizer; a 512-entry lm_head keeps each model below a megabyte).
struct SweepShape {
  int64_t hidden, intermediate, layers, heads, kv_heads, head_dim, experts, top_k, window, prompt;
};

// Widths and inner sizes are multiples of 32 (MXFP4 blocks and int8 dense rows need it).
const SweepShape kShapes[] = {
    {64, 64, 4, 4, 2, 16, 8, 4, 8, 64},       {96, 96, 4, 6, 2, 32, 12, 4, 16, 128},
    {64, 64, 6, 4, 1, 64, 8, 4, 12, 96},      {128, 128, 4, 8, 2, 32, 16, 4, 32, 256},
    {64, 96, 8, 4, 2, 32, 32, 4, 16, 192},    {96, 192, 6, 6, 3, 32, 16, 2, 24, 128},
    {128, 64, 6, 4, 4, 32, 32, 8, 64, 300},   {64, 64, 4, 2, 1, 32, 4, 2, 8, 64},
    {160, 96, 5, 5, 1, 32, 24, 4, 20, 160},   {64, 64, 12, 4, 2, 16, 8, 4, 16, 128},
    {192, 128, 4, 6, 2, 32, 64, 4, 48, 256},  {96, 96, 8, 3, 1, 32, 16, 4, 32, 384},
};

nlohmann::json SweepConfig(const SweepShape& s) {
  nlohmann::json c = SynthPresetConfigJson("tiny");
  c["hidden_size"] = s.hidden;
  c["intermediate_size"] = s.intermediate;
  c["num_hidden_layers"] = s.layers;
  c["num_attention_heads"] = s.heads;
  c["num_key_value_heads"] = s.kv_heads;
  c["head_dim"] = s.head_dim;
  c["num_local_experts"] = s.experts;
  c["num_experts_per_tok"] = s.top_k;
  c["experts_per_token"] = s.top_k;
  c["sliding_window"] = s.window;
  c["vocab_size"] = kVocab;
  c["eos_token_id"] = kVocab - 1;
  c["pad_token_id"] = kVocab - 2;
  nlohmann::json types = nlohmann::json::array();
  for (int64_t i = 0; i < s.layers; ++i) types.push_back(i % 2 == 0 ? "sliding_attention" : "full_attention");
  c["layer_types"] = types;
  return c;
}

// The two families of checkpoints. kSynthInit: model/synth.h as written (weights std
// 1/sqrt(fan_in), experts included; embeddings std 0.02; lm_head std 2/sqrt(H)). kGoldenLike:
// the same files rescaled to the statistics of the transformers-initialized golden checkpoints
// of tests/data/gpt_oss_golden (measured there: embeddings of unit RMS, router RMS 2/sqrt(H),
// lm_head RMS 1/sqrt(H), MXFP4 expert scale bytes centred 2 lower, i.e. experts 4x smaller).
enum class Family { kSynthInit, kGoldenLike };

void RescaleToGoldenStatistics(const std::string& dir) {
  const std::string file = dir + "/model.safetensors";
  struct Edit {
    uint64_t offset, bytes;
    DType dtype;
    float factor;      // BF16 tensors: values x factor
    int scale_shift;   // U8 expert scales: bytes + shift
  };
  std::vector<Edit> edits;
  {
    const SafetensorsFile f = SafetensorsFile::Open(file);
    std::ifstream in(file, std::ios::binary);
    uint64_t header = 0;  // safetensors: u64 header length, the header, then the data section
    in.read(reinterpret_cast<char*>(&header), sizeof(header));
    for (const TensorInfo& t : f.tensors()) {
      const uint64_t at = 8 + header + t.begin;
      auto ends = [&](std::string_view suffix) {
        return t.name.size() >= suffix.size() &&
               t.name.compare(t.name.size() - suffix.size(), suffix.size(), suffix) == 0;
      };
      if (t.name == "model.embed_tokens.weight") edits.push_back({at, t.nbytes(), t.dtype, 50.0f, 0});
      if (ends(".mlp.router.weight")) edits.push_back({at, t.nbytes(), t.dtype, 2.0f, 0});
      if (t.name == "lm_head.weight") edits.push_back({at, t.nbytes(), t.dtype, 0.5f, 0});
      if (ends("_proj_scales")) edits.push_back({at, t.nbytes(), t.dtype, 1.0f, -2});
    }
  }
  std::fstream io(file, std::ios::binary | std::ios::in | std::ios::out);
  for (const Edit& e : edits) {
    std::vector<uint8_t> bytes(e.bytes);
    io.seekg(static_cast<std::streamoff>(e.offset));
    io.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(e.bytes));
    if (e.dtype == DType::kU8) {
      // The sweep's scale bytes are 120..123 (synth.h: centre 121 or 122, +- 1): no wrap-around.
      for (uint8_t& b : bytes) b = static_cast<uint8_t>(b + e.scale_shift);
    } else {
      ASSERT_EQ(e.dtype, DType::kBF16);
      for (size_t i = 0; i < bytes.size(); i += 2) {
        uint16_t h;
        std::memcpy(&h, &bytes[i], 2);
        h = F32ToBf16(Bf16ToF32(h) * e.factor);
        std::memcpy(&bytes[i], &h, 2);
      }
    }
    io.seekp(static_cast<std::streamoff>(e.offset));
    io.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(e.bytes));
  }
  ASSERT_TRUE(io.good()) << file;
}

struct Metrics {
  double rel_err = 0, kl = 0, top1 = 0, flips = 0;
  double clean_rel_err = 0, clean_top1 = 0, clean_fraction = 0;
  int64_t first_flip_layer = -1;  // lowest layer with a flipped expert set, -1 for none
  int64_t greedy_prefix = 0;
  double divergence_margin = 0;  // reference margin / max |ref| where greedy first differs
};

struct Teacher {  // one teacher-forced run
  std::vector<float> logits;  // [T, V]
  std::vector<float> router;  // [layers, T, E]
};

Teacher TeacherForced(const Model& m, const std::vector<int32_t>& tokens) {
  KvCache cache(m.config(), static_cast<int64_t>(tokens.size()), KvType::kF32);
  Teacher t;
  m.Forward(tokens, 0, cache, LogitsMode::kAll, t.logits);
  t.router = m.last_forward_router_logits();
  return t;
}

// Greedy continuation of `prompt`; rows[i] = the logits the i-th generated token was chosen from.
std::vector<int32_t> Greedy(const Model& m, const std::vector<int32_t>& prompt, std::vector<float>* rows) {
  const int64_t P = static_cast<int64_t>(prompt.size()), V = m.vocab_size();
  KvCache cache(m.config(), P + kGreedySteps, KvType::kF32);
  std::vector<float> logits;
  m.Forward(prompt, 0, cache, LogitsMode::kLast, logits);
  std::vector<int32_t> out;
  for (int64_t step = 0; step < kGreedySteps; ++step) {
    if (rows) rows->insert(rows->end(), logits.begin(), logits.end());
    const int32_t next = static_cast<int32_t>(std::max_element(logits.begin(), logits.begin() + V) - logits.begin());
    out.push_back(next);
    const int32_t tok[1] = {next};
    if (step + 1 < kGreedySteps) m.Forward(tok, P + step, cache, LogitsMode::kLast, logits);
  }
  return out;
}

// The expert set the model picks from router logits r[E]: top k, higher logit first, lower id
// on ties (gpt_oss_model.cpp Moe), as a sorted id list.
std::vector<int32_t> TopKSet(const float* r, int64_t E, int64_t K) {
  std::vector<int32_t> order(E);
  for (int64_t e = 0; e < E; ++e) order[e] = static_cast<int32_t>(e);
  std::partial_sort(order.begin(), order.begin() + K, order.end(),
                    [&](int32_t a, int32_t b) { return r[a] > r[b] || (r[a] == r[b] && a < b); });
  order.resize(K);
  std::sort(order.begin(), order.end());
  return order;
}


Metrics Compare(const ModelConfig& c, const Teacher& ref, const Teacher& got, const std::vector<int32_t>& ref_greedy,
                const std::vector<float>& ref_greedy_rows, const std::vector<int32_t>& got_greedy) {
  const int64_t V = c.vocab_size, L = c.num_hidden_layers, E = c.num_local_experts, K = c.num_experts_per_tok;
  const int64_t T = static_cast<int64_t>(ref.logits.size()) / V;
  Metrics m;
  double max_ref = 0;
  for (float r : ref.logits) max_ref = std::max(max_ref, static_cast<double>(std::fabs(r)));
  std::vector<bool> clean(T, true);
  int64_t flipped = 0;
  for (int64_t l = 0; l < L; ++l) {
    for (int64_t t = 0; t < T; ++t) {
      const int64_t at = (l * T + t) * E;
      if (TopKSet(&ref.router[at], E, K) != TopKSet(&got.router[at], E, K)) {
        ++flipped;
        clean[t] = false;
        if (m.first_flip_layer < 0 || l < m.first_flip_layer) m.first_flip_layer = l;
      }
    }
  }
  m.flips = static_cast<double>(flipped) / static_cast<double>(L * T);
  int64_t top1 = 0, clean_top1 = 0, clean_n = 0;
  double kl = 0, max_err = 0, clean_max_err = 0;
  for (int64_t t = 0; t < T; ++t) {
    const float* r = &ref.logits[t * V];
    const float* g = &got.logits[t * V];
    double err = 0;
    for (int64_t v = 0; v < V; ++v) err = std::max(err, static_cast<double>(std::fabs(g[v] - r[v])));
    const bool same = std::max_element(r, r + V) == r + (std::max_element(g, g + V) - g);
    max_err = std::max(max_err, err);
    kl += KlDivergence(r, g, V);
    top1 += same;
    if (clean[t]) {
      ++clean_n;
      clean_max_err = std::max(clean_max_err, err);
      clean_top1 += same;
    }
  }
  m.rel_err = max_err / max_ref;
  m.kl = kl / static_cast<double>(T);
  m.top1 = static_cast<double>(top1) / static_cast<double>(T);
  m.clean_fraction = static_cast<double>(clean_n) / static_cast<double>(T);
  m.clean_rel_err = clean_max_err / max_ref;
  m.clean_top1 = clean_n ? static_cast<double>(clean_top1) / static_cast<double>(clean_n) : 1.0;
  while (m.greedy_prefix < kGreedySteps && got_greedy[m.greedy_prefix] == ref_greedy[m.greedy_prefix]) {
    ++m.greedy_prefix;
  }
  if (m.greedy_prefix < kGreedySteps) {
    // Same history up to here, so the reference's row at this step judges the fast path's pick.
    const float* row = &ref_greedy_rows[m.greedy_prefix * V];
    m.divergence_margin = (row[ref_greedy[m.greedy_prefix]] - row[got_greedy[m.greedy_prefix]]) / max_ref;
  }
  return m;
}

// Nearest-rank quantile of the values (q in [0, 1]).
double Quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

struct Distribution {
  double min, median, p90, max;
};
Distribution Distribute(const std::vector<double>& v) {
  return {Quantile(v, 0.0), Quantile(v, 0.5), Quantile(v, 0.9), Quantile(v, 1.0)};
}

// Measured bounds of one fast variant over the sweep's checkpoints (docs/ACCURACY.md).
struct Bounds {
  double median_rel_err, max_rel_err, median_kl, max_kl, median_top1, min_top1;
  double max_clean_rel_err;    // on positions whose routing matches the reference everywhere
  double mean_greedy_prefix;   // at least
  // Greedy decoding may leave the reference only where the reference's margin is within this
  // multiple of the checkpoint's own teacher-forced error (rel_err): near a tie.
  double max_margin_over_rel_err;
};

struct Variant {
  const char* name;
  DenseWeights dense;
  int64_t exact_layers;
  Bounds bounds;
};

ModelOptions FastOptions(DenseWeights dense, int64_t exact_layers) {
  return ModelOptions{.precision = Precision::kFast, .dense = dense, .exact_layers = exact_layers,
                      .record_router_logits = true};
}

std::string ShapeName(const SweepShape& s, uint64_t seed) {
  char buf[128];
  std::snprintf(buf, sizeof(buf), "h%lldi%lldL%lldq%lldkv%lldd%lldE%lldk%lldw%lldT%llds%llu",
                static_cast<long long>(s.hidden), static_cast<long long>(s.intermediate),
                static_cast<long long>(s.layers), static_cast<long long>(s.heads), static_cast<long long>(s.kv_heads),
                static_cast<long long>(s.head_dim), static_cast<long long>(s.experts),
                static_cast<long long>(s.top_k), static_cast<long long>(s.window), static_cast<long long>(s.prompt),
                static_cast<unsigned long long>(seed));
  return buf;
}

// Bounds: the measured distributions of each family's default sweep (docs/ACCURACY.md) with
// margin: medians and maxima of errors x 1.25 (rel err, clean rel err) or x 1.5 (KL, margin),
// top-1 median - 0.05 and minimum - 0.1, mean greedy prefix x 0.6. Where greedy decoding leaves
// the reference: margin <= 2 x rel_err on the golden-like family (a near-tie, measured <= 0.98 x),
// <= 6 x on the synth-init one (measured up to 3.9 x: after a routing flip the greedy steps past
// the prompt see larger errors than the teacher-forced ones). The sweep is deterministic; the
// margin covers the exact path's last-bit differences between instruction sets (which can flip a
// near-tie) and leaves room for changes that do not make the fast path worse.
const Variant kSynthInitVariants[] = {
    {"bf16", DenseWeights::kBf16, 0,
     Bounds{.median_rel_err = 0.5, .max_rel_err = 0.98, .median_kl = 0.032, .max_kl = 0.23,
            .median_top1 = 0.84, .min_top1 = 0.54, .max_clean_rel_err = 0.24,
            .mean_greedy_prefix = 4.8, .max_margin_over_rel_err = 6}},
    {"bf16 exact1", DenseWeights::kBf16, 1,
     Bounds{.median_rel_err = 0.26, .max_rel_err = 1.1, .median_kl = 0.0074, .max_kl = 0.11,
            .median_top1 = 0.89, .min_top1 = 0.68, .max_clean_rel_err = 0.17,
            .mean_greedy_prefix = 7.3, .max_margin_over_rel_err = 6}},
    {"bf16 exact2", DenseWeights::kBf16, 2,
     Bounds{.median_rel_err = 0.17, .max_rel_err = 0.63, .median_kl = 0.002, .max_kl = 0.048,
            .median_top1 = 0.92, .min_top1 = 0.8, .max_clean_rel_err = 0.097,
            .mean_greedy_prefix = 11, .max_margin_over_rel_err = 6}},
    {"int8", DenseWeights::kInt8, 0,
     Bounds{.median_rel_err = 0.82, .max_rel_err = 1.3, .median_kl = 0.19, .max_kl = 0.84,
            .median_top1 = 0.55, .min_top1 = 0.31, .max_clean_rel_err = 0.33,
            .mean_greedy_prefix = 1.4, .max_margin_over_rel_err = 6}},
    {"int8 exact1", DenseWeights::kInt8, 1,
     Bounds{.median_rel_err = 0.41, .max_rel_err = 0.95, .median_kl = 0.034, .max_kl = 0.27,
            .median_top1 = 0.8, .min_top1 = 0.49, .max_clean_rel_err = 0.42,
            .mean_greedy_prefix = 4.7, .max_margin_over_rel_err = 6}},
    {"int8 exact2", DenseWeights::kInt8, 2,
     Bounds{.median_rel_err = 0.32, .max_rel_err = 0.85, .median_kl = 0.013, .max_kl = 0.12,
            .median_top1 = 0.87, .min_top1 = 0.67, .max_clean_rel_err = 0.18,
            .mean_greedy_prefix = 5.3, .max_margin_over_rel_err = 6}},
};

const Variant kGoldenLikeVariants[] = {
    {"bf16", DenseWeights::kBf16, 0,
     Bounds{.median_rel_err = 0.0013, .max_rel_err = 0.0087, .median_kl = 3.2e-7, .max_kl = 8.7e-7,
            .median_top1 = 0.95, .min_top1 = 0.88, .max_clean_rel_err = 0.0021,
            .mean_greedy_prefix = 18, .max_margin_over_rel_err = 2}},
    {"bf16 exact1", DenseWeights::kBf16, 1,
     Bounds{.median_rel_err = 0.00082, .max_rel_err = 0.0092, .median_kl = 1.9e-7, .max_kl = 8.3e-7,
            .median_top1 = 0.95, .min_top1 = 0.88, .max_clean_rel_err = 0.0026,
            .mean_greedy_prefix = 18, .max_margin_over_rel_err = 2}},
    {"bf16 exact2", DenseWeights::kBf16, 2,
     Bounds{.median_rel_err = 0.00067, .max_rel_err = 0.0082, .median_kl = 1.4e-7, .max_kl = 6.5e-7,
            .median_top1 = 0.95, .min_top1 = 0.88, .max_clean_rel_err = 0.0014,
            .mean_greedy_prefix = 18, .max_margin_over_rel_err = 2}},
    {"int8", DenseWeights::kInt8, 0,
     Bounds{.median_rel_err = 0.031, .max_rel_err = 0.051, .median_kl = 3.1e-4, .max_kl = 7.4e-4,
            .median_top1 = 0.91, .min_top1 = 0.8, .max_clean_rel_err = 0.051,
            .mean_greedy_prefix = 13, .max_margin_over_rel_err = 2}},
    {"int8 exact1", DenseWeights::kInt8, 1,
     Bounds{.median_rel_err = 0.024, .max_rel_err = 0.04, .median_kl = 2.0e-4, .max_kl = 4.5e-4,
            .median_top1 = 0.92, .min_top1 = 0.83, .max_clean_rel_err = 0.039,
            .mean_greedy_prefix = 14, .max_margin_over_rel_err = 2}},
    {"int8 exact2", DenseWeights::kInt8, 2,
     Bounds{.median_rel_err = 0.019, .max_rel_err = 0.037, .median_kl = 1.5e-4, .max_kl = 3.7e-4,
            .median_top1 = 0.92, .min_top1 = 0.84, .max_clean_rel_err = 0.037,
            .mean_greedy_prefix = 14, .max_margin_over_rel_err = 2}},
};

// Runs the sweep of `family` (kSeeds seeds per shape, or TESSERA_ACCURACY_SWEEP) for `variants`
// ({bf16, int8} x exact_layers {0, 1, 2}, in that order), prints every checkpoint and the
// distributions, and checks the bounds (default sweep only).
void RunSweep(Family family, std::span<const Variant> variants, bool check_exact_layer_gain) {
  const char* env = std::getenv("TESSERA_ACCURACY_SWEEP");
  const uint64_t seeds = env != nullptr ? std::strtoull(env, nullptr, 10) : kSeeds;
  ASSERT_GT(seeds, 0u) << "TESSERA_ACCURACY_SWEEP must be a number of seeds";
  const bool custom = seeds != kSeeds;
  std::printf("%s checkpoints:\n", family == Family::kGoldenLike ? "golden-like" : "synth-init");
  ScratchDir tmp;
  const size_t kVariants = variants.size();
  std::vector<std::vector<Metrics>> results(kVariants);
  std::printf("| checkpoint | dense | exact layers | rel err | mean KL | top-1 | flips | first flip layer | "
              "clean pos | clean rel err | clean top-1 | greedy prefix | margin there |\n");
  int index = 0;
  for (uint64_t seed = 1; seed <= seeds; ++seed) {
    for (const SweepShape& s : kShapes) {
      const std::string name = ShapeName(s, seed);
      const std::string dir = tmp / std::to_string(index++);
      SynthOptions synth;
      synth.config_json = SweepConfig(s);
      synth.seed = seed * 1000 + static_cast<uint64_t>(index);  // every checkpoint its own weights
      WriteSyntheticModel(dir, synth);
      if (family == Family::kGoldenLike) {
        ASSERT_NO_FATAL_FAILURE(RescaleToGoldenStatistics(dir));
      }

      std::mt19937_64 rng(synth.seed);
      std::uniform_int_distribution<int32_t> id(0, kVocab - 1);
      std::vector<int32_t> prompt(s.prompt);
      for (int32_t& t : prompt) t = id(rng);

      const auto exact = Model::Load(dir, ModelOptions{.record_router_logits = true});
      const Teacher ref = TeacherForced(*exact, prompt);
      std::vector<float> ref_rows;
      const std::vector<int32_t> ref_greedy = Greedy(*exact, prompt, &ref_rows);
      for (size_t v = 0; v < kVariants; ++v) {
        const auto fast = Model::Load(dir, FastOptions(variants[v].dense, variants[v].exact_layers));
        const Teacher got = TeacherForced(*fast, prompt);
        const Metrics m = Compare(exact->config(), ref, got, ref_greedy, ref_rows, Greedy(*fast, prompt, nullptr));
        results[v].push_back(m);
        std::printf("| %s | %s | %lld | %.3g | %.3g | %.3f | %.4f | %lld | %.2f | %.3g | %.3f | %lld | %.3g |\n",
                    name.c_str(), variants[v].dense == DenseWeights::kInt8 ? "int8" : "bf16",
                    static_cast<long long>(variants[v].exact_layers), m.rel_err, m.kl, m.top1, m.flips,
                    static_cast<long long>(m.first_flip_layer), m.clean_fraction, m.clean_rel_err, m.clean_top1,
                    static_cast<long long>(m.greedy_prefix), m.divergence_margin);
      }
      if (custom) {
        // Mean KL with the first N layers exact, N = 0 .. layers (N = layers leaves lm_head alone).
        for (DenseWeights dense : {DenseWeights::kBf16, DenseWeights::kInt8}) {
          std::printf("depth %s %s:", name.c_str(), dense == DenseWeights::kInt8 ? "int8" : "bf16");
          for (int64_t n = 0; n <= s.layers; ++n) {
            const auto fast = Model::Load(dir, FastOptions(dense, n));
            const Teacher got = TeacherForced(*fast, prompt);
            const int64_t V = kVocab, T = s.prompt;
            double kl = 0;
            for (int64_t t = 0; t < T; ++t) kl += KlDivergence(&ref.logits[t * V], &got.logits[t * V], V);
            std::printf(" %.3g", kl / static_cast<double>(T));
          }
          std::printf("\n");
        }
      }
      fs::remove_all(dir);
    }
  }

  std::printf("\n%zu checkpoints; distributions min / median / p90 / max:\n", results[0].size());
  std::printf("| dense | exact layers | measure | min | median | p90 | max |\n");
  for (size_t v = 0; v < kVariants; ++v) {
    auto column = [&](auto field) {
      std::vector<double> out;
      for (const Metrics& m : results[v]) out.push_back(static_cast<double>(field(m)));
      return out;
    };
    const auto rel = column([](const Metrics& m) { return m.rel_err; });
    const auto kl = column([](const Metrics& m) { return m.kl; });
    const auto top1 = column([](const Metrics& m) { return m.top1; });
    const auto flips = column([](const Metrics& m) { return m.flips; });
    const auto clean = column([](const Metrics& m) { return m.clean_rel_err; });
    const auto prefix = column([](const Metrics& m) { return m.greedy_prefix; });
    // Over the checkpoints whose greedy run left the reference's (0 when none did).
    std::vector<double> margin, margin_over_err;
    for (const Metrics& m : results[v]) {
      if (m.greedy_prefix < kGreedySteps) {
        margin.push_back(m.divergence_margin);
        margin_over_err.push_back(m.divergence_margin / m.rel_err);
      }
    }
    if (margin.empty()) margin = margin_over_err = {0.0};
    const struct {
      const char* what;
      const std::vector<double>& values;
    } rows[] = {{"rel err", rel},         {"mean KL", kl},          {"top-1", top1},
                {"routing flips", flips}, {"clean rel err", clean}, {"greedy prefix", prefix},
                {"margin where greedy differs", margin}, {"that margin / rel err", margin_over_err}};
    for (const auto& row : rows) {
      const Distribution d = Distribute(row.values);
      std::printf("| %s | %lld | %s | %.3g | %.3g | %.3g | %.3g |\n",
                  variants[v].dense == DenseWeights::kInt8 ? "int8" : "bf16",
                  static_cast<long long>(variants[v].exact_layers), row.what, d.min, d.median, d.p90, d.max);
    }
    const double mean_prefix = std::accumulate(prefix.begin(), prefix.end(), 0.0) / static_cast<double>(prefix.size());
    std::printf("| %s | %lld | mean greedy prefix | %.3g |\n",
                variants[v].dense == DenseWeights::kInt8 ? "int8" : "bf16",
                static_cast<long long>(variants[v].exact_layers), mean_prefix);
    std::printf("| %s | %lld | greedy runs equal to the reference's for all %lld tokens | %zu of %zu |\n",
                variants[v].dense == DenseWeights::kInt8 ? "int8" : "bf16",
                static_cast<long long>(variants[v].exact_layers), static_cast<long long>(kGreedySteps),
                static_cast<size_t>(std::count(prefix.begin(), prefix.end(), static_cast<double>(kGreedySteps))),
                prefix.size());
    if (custom) continue;
    const Bounds& b = variants[v].bounds;
    SCOPED_TRACE(variants[v].name);
    EXPECT_LE(Quantile(rel, 0.5), b.median_rel_err);
    EXPECT_LE(Quantile(rel, 1.0), b.max_rel_err);
    EXPECT_LE(Quantile(kl, 0.5), b.median_kl);
    EXPECT_LE(Quantile(kl, 1.0), b.max_kl);
    EXPECT_GE(Quantile(top1, 0.5), b.median_top1);
    EXPECT_GE(Quantile(top1, 0.0), b.min_top1);
    EXPECT_LE(Quantile(clean, 1.0), b.max_clean_rel_err);
    EXPECT_GE(mean_prefix, b.mean_greedy_prefix);
    EXPECT_LE(Quantile(margin_over_err, 1.0), b.max_margin_over_rel_err);
  }
  if (custom || !check_exact_layer_gain) return;
  // What exact_layers is for: the first layer's noise costs the most (docs/ACCURACY.md; measured
  // median KL ratios 4.3 and 5.5 for one exact layer, 3.9 and 2.6 for the second).
  auto median_kl = [&](size_t v) {
    std::vector<double> kl;
    for (const Metrics& m : results[v]) kl.push_back(m.kl);
    return Quantile(kl, 0.5);
  };
  for (size_t v : {size_t{0}, size_t{3}}) {
    SCOPED_TRACE(variants[v].name);
    EXPECT_LE(median_kl(v + 1), median_kl(v) / 3) << "one exact layer";
    EXPECT_LE(median_kl(v + 2), median_kl(v + 1) / 2) << "two exact layers";
  }
}

TEST(GptOssAccuracySweep, SynthInitCheckpoints) { RunSweep(Family::kSynthInit, kSynthInitVariants, true); }

TEST(GptOssAccuracySweep, GoldenLikeCheckpoints) { RunSweep(Family::kGoldenLike, kGoldenLikeVariants, false); }

// With every layer exact and BF16 dense weights the fast precision runs no int8 kernel at all:
// its logits must equal the exact path's bit for bit (exact_layers takes the exact kernels, not
// a look-alike).
TEST(GptOssAccuracySweep, AllLayersExactIsTheExactPath) {
  ScratchDir tmp;
  const SweepShape& s = kShapes[2];
  SynthOptions synth;
  synth.config_json = SweepConfig(s);
  synth.seed = 7;
  const std::string dir = tmp / "all_exact";
  WriteSyntheticModel(dir, synth);
  std::vector<int32_t> prompt(40);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>((i * 37 + 5) % kVocab);
  const auto exact = Model::Load(dir);
  const auto all = Model::Load(dir, FastOptions(DenseWeights::kBf16, s.layers));
  const auto none = Model::Load(dir, FastOptions(DenseWeights::kBf16, 0));
  const std::vector<float> want = TeacherForced(*exact, prompt).logits;
  EXPECT_EQ(TeacherForced(*all, prompt).logits, want);
  EXPECT_NE(TeacherForced(*none, prompt).logits, want);  // the q8 path does run otherwise
}

TEST(GptOssAccuracySweep, ExactLayersOutsideTheModelAreRejected) {
  ScratchDir tmp;
  SynthOptions synth;
  synth.config_json = SweepConfig(kShapes[0]);
  const std::string dir = tmp / "range";
  WriteSyntheticModel(dir, synth);
  for (int64_t n : {int64_t{-1}, kShapes[0].layers + 1}) {
    try {
      Model::Load(dir, FastOptions(DenseWeights::kBf16, n));
      ADD_FAILURE() << "exact_layers " << n << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("exact layers"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace tessera
