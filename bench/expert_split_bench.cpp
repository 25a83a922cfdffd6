// Expert-parallel vs tensor-parallel MoE experts (issue 7): which way should P ranks split the
// experts of one gpt-oss-20b MoE layer (E = 32 experts, top-K = 4, hidden H = 2880, intermediate
// I = 2880, MXFP4 experts on the fast q8 path)? Both splits end in the same collective (the
// ranks' partial [T, H] sums are added by an all-reduce or reduce-scatter), so this measures what
// differs: the per-rank expert work.
//
//   one_rank/<routing>/T:t/P:1  all 32 experts in one process (the baseline)
//   ep/<routing>/T:t/P:p        expert parallel, as tessera does it (src/model/gpt_oss_model.cpp
//                               Model::Moe): rank r holds experts [r E/p, (r+1) E/p) whole
//                               and runs only the (token, slot) pairs routed to them
//   tp/<routing>/T:t/P:p        tensor-parallel experts: rank r holds a slice of every expert's
//                               intermediate dimension, intermediate units [u_r, u_r+1): the
//                               gate_up rows [2 u_r, 2 u_r+1) (rows alternate gate, up) and the
//                               same down_proj input columns (the contracting dimension), and
//                               runs every routed pair on its slice. The down bias is added by
//                               rank 0 only.
//   read_bandwidth/threads:2    the read ceiling (bench/ceilings.h), measured in the same run
//
// The block-granularity constraint: MXFP4 blocks are 32 weights along the contracting dimension,
// so a down slice must cover whole blocks (and the q8 activation blocks of the slice must line up
// with the full matrix's for the result to match). I = 2880 is 90 blocks: P = 2 gives 45 + 45,
// P = 4 cannot split evenly (22.5 blocks each) and uses 23/22/23/22 blocks (736/704 units); the
// larger ranks bound the step.
//
// Each rank's step is what Model::Moe does after the router, with the fast path: gather
// its pairs' quantized rows sorted by expert, one grouped gate_up matmul (the model's column
// chunking, moe_ops.h ExpertChunks), swigluoai, QuantizeQ8, one grouped down matmul, the
// weighted combine into its partial [T, H] (moe_ops.h GatherReduce). Buffers are allocated once, outside the
// timed region. The router, the quantization of h (the same on every rank in both splits) and
// the collective (the same in both) are not timed.
//
// One "rank" runs at a time on the whole machine (2 pool threads, as one rank per host would),
// the ranks of a step one after the other. Each iteration uses the next of R fixed routings
// (R = 24 for T <= 16, 8 above) and first streams a 512 MiB buffer (2x the 260 MiB L3, not
// timed) so that the weights come from DRAM as they do in a 24-layer model. The reported time
// (manual time) is the slowest rank's, which the step waits for, averaged over the routings.
// Counters: mean_ms (mean over ranks), imbalance (slowest / mean), MB (packed weight bytes incl.
// E8M0 scales read by the slowest rank: whole matrices of the experts it runs), GBps (those bytes
// / its time) and bw_frac (GBps / the 2-thread read ceiling of this run), rows (the slowest
// rank's gathered pairs), GOPs (its 2 rows (2u H + H u) matmul ops / its time), cpu_frac (process
// CPU time / (2 x wall time) over all ranks' steps; the serial parts (sort, gather, combine) and
// worker wake-ups keep it at 0.65 to 0.95 in decode and about 0.97 in prefill: a prefill row well
// below that lost its cores to other load on the shared machine, and its times are suspect).
// Setup prints the TP block split, the skewed popularity share of each EP rank and the checks.
//
// Routings, fixed seeds: per token K distinct experts, drawn one after another without
// replacement, either uniformly or (skewed) with probability proportional to popularity
// p_e = 1 / (pi(e) + 1)^0.8, pi a fixed random permutation of the experts (the hottest expert
// 16x the coldest's weight). Combine weights: K random positives summing to 1.
//
// Setup checks (abort with a message on failure): for T = 4 the sum over ranks of the EP partial
// outputs and of the TP partial outputs equal the P = 1 output within 1e-5 of max |y| (TP
// reorders the down sum, so it is close, not bit-identical), for P = 2 and 4.
//
//   build-h1/expert_split_bench --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <time.h>

#include "bench/ceilings.h"
#include "core/bandwidth.h"
#include "core/thread_pool.h"
#include "kernels/kernels.h"
#include "kernels/moe_ops.h"
#include "kernels/mxfp4.h"
#include "kernels/parallel_matmul.h"
#include "kernels/q8.h"

namespace tessera {
namespace {

using bench::BM_ReadBandwidth;
using bench::g_best_bandwidth;

constexpr int kThreads = 2;
constexpr size_t kE = 32, kK = 4, kH = 2880, kI = 2880;
constexpr size_t kIBlocks = kI / kQ8Block;  // 90 blocks along down's contracting dimension
constexpr float kSwigluLimit = 7.0f, kSwigluAlpha = 1.702f;
constexpr size_t kMaxTokens = 512;
constexpr size_t kFlushBytes = size_t{512} << 20;

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "expert_split_bench: %s\n", message.c_str());
  std::exit(1);
}

uint64_t NextRandom(uint64_t& state) {  // xorshift64*: fast enough to fill hundreds of MB
  state ^= state >> 12;
  state ^= state << 25;
  state ^= state >> 27;
  return state * 0x2545F4914F6CDD1Dull;
}

// ---- weights ------------------------------------------------------------------------------------

// kE packed q8 matrices W_e[n, k] (kernels/q8.h layout), expert e at e * CodeStride().
struct ExpertSet {
  size_t n = 0, k = 0;
  std::vector<uint8_t> codes, scales;
  std::vector<float> bias;  // [kE, n]; empty: no bias
  size_t CodeStride() const { return Q8Mxfp4CodeBytes(n, k); }
  size_t ScaleStride() const { return Q8Mxfp4ScaleBytes(n, k); }
  size_t BytesPerExpert() const { return CodeStride() + ScaleStride(); }
};

// What one rank holds: gate_up [2u, H] and down [H, u] of every expert it has (u = kI whole).
struct RankWeights {
  ExpertSet gate_up, down;
  size_t BytesPerExpert() const { return gate_up.BytesPerExpert() + down.BytesPerExpert(); }
};

// Checkpoint layout (kernels/mxfp4.h): gate_up blocks [E, 2I, H/32, 16], scales [E, 2I, H/32];
// down blocks [E, H, I/32, 16], scales [E, H, I/32].
struct Checkpoint {
  std::vector<uint8_t> gu_blocks, gu_scales, down_blocks, down_scales;
  std::vector<float> gu_bias, down_bias;  // [E, 2I], [E, H]
};

Checkpoint RandomCheckpoint() {
  Checkpoint c;
  uint64_t rng = 0x9E3779B97F4A7C15ull;
  auto fill_codes = [&](std::vector<uint8_t>& v, size_t n) {
    v.resize(n);
    for (size_t i = 0; i + 8 <= n; i += 8) {
      const uint64_t r = NextRandom(rng);
      std::memcpy(&v[i], &r, 8);
    }
  };
  // Scales 2^-11 .. 2^-5: with h in [-1, 1] the gate/up pre-activations are O(1), so swigluoai's
  // clamps (at 7) do not flatten the activations the correctness check compares.
  auto fill_scales = [&](std::vector<uint8_t>& v, size_t n) {
    v.resize(n);
    for (auto& s : v) s = static_cast<uint8_t>(116 + NextRandom(rng) % 7);
  };
  auto fill_bias = [&](std::vector<float>& v, size_t n) {
    v.resize(n);
    for (auto& b : v) b = static_cast<float>(NextRandom(rng) % 2001) * 1e-4f - 0.1f;
  };
  fill_codes(c.gu_blocks, kE * 2 * kI * kH / 2);
  fill_scales(c.gu_scales, kE * 2 * kI * (kH / kQ8Block));
  fill_codes(c.down_blocks, kE * kH * kI / 2);
  fill_scales(c.down_scales, kE * kH * kIBlocks);
  fill_bias(c.gu_bias, kE * 2 * kI);
  fill_bias(c.down_bias, kE * kH);
  return c;
}

// Packs expert e's checkpoint matrix [n, k] (blocks [n, k/32, 16], scales [n, k/32]) into `set`.
void PackExpert(const uint8_t* blocks, const uint8_t* scales, size_t e, ExpertSet& set) {
  size_t bad_row = 0;
  if (!PackMxfp4ForQ8(blocks, scales, set.n, set.k, &set.codes[e * set.CodeStride()],
                      &set.scales[e * set.ScaleStride()], &bad_row)) {
    Die("PackMxfp4ForQ8 rejected row " + std::to_string(bad_row) + " (scale byte 255)");
  }
}

void Allocate(ExpertSet& set, size_t n, size_t k) {
  set.n = n;
  set.k = k;
  set.codes.resize(kE * set.CodeStride());
  set.scales.resize(kE * set.ScaleStride());
}

// The slice of intermediate units [u0, u1) (multiples of 32) of every expert: gate_up rows
// [2 u0, 2 u1), contiguous in the checkpoint, and down block columns [u0/32, u1/32) of every
// row, cut out of the checkpoint rows and repacked. The down bias goes to rank 0 only (with_bias).
RankWeights SliceExperts(const Checkpoint& c, size_t u0, size_t u1, bool with_bias) {
  RankWeights w;
  const size_t units = u1 - u0, hb = kH / kQ8Block, b0 = u0 / kQ8Block, nb = units / kQ8Block;
  Allocate(w.gate_up, 2 * units, kH);
  Allocate(w.down, kH, units);
  w.gate_up.bias.resize(kE * 2 * units);
  if (with_bias) w.down.bias = c.down_bias;
  std::vector<uint8_t> blocks(kH * nb * kMxfp4BlockBytes), scales(kH * nb);
  for (size_t e = 0; e < kE; ++e) {
    const size_t row0 = e * 2 * kI + 2 * u0;
    PackExpert(&c.gu_blocks[row0 * hb * kMxfp4BlockBytes], &c.gu_scales[row0 * hb], e, w.gate_up);
    std::copy_n(&c.gu_bias[row0], 2 * units, &w.gate_up.bias[e * 2 * units]);
    for (size_t j = 0; j < kH; ++j) {
      const size_t row = e * kH + j;
      std::memcpy(&blocks[j * nb * kMxfp4BlockBytes], &c.down_blocks[(row * kIBlocks + b0) * kMxfp4BlockBytes],
                  nb * kMxfp4BlockBytes);
      std::memcpy(&scales[j * nb], &c.down_scales[row * kIBlocks + b0], nb);
    }
    PackExpert(blocks.data(), scales.data(), e, w.down);
  }
  return w;
}

// Down block columns owned by each of p ranks: [bounds[r], bounds[r + 1]) with bounds[r] =
// ceil(r * 90 / p): 45/45 for p = 2, 23/22/23/22 for p = 4.
std::vector<size_t> BlockBounds(int p) {
  std::vector<size_t> bounds(p + 1);
  for (int r = 0; r <= p; ++r) bounds[r] = (r * kIBlocks + p - 1) / p;
  return bounds;
}

std::string BlockSplitText(int p) {
  const std::vector<size_t> b = BlockBounds(p);
  std::string s;
  for (int r = 0; r < p; ++r) {
    if (r > 0) s += '/';
    s += std::to_string(b[r + 1] - b[r]);
  }
  return s;
}

// ---- routing ------------------------------------------------------------------------------------

enum class Dist { kUniform, kSkewed };

struct Routing {
  size_t tokens = 0;
  std::vector<int32_t> chosen;  // [tokens, kK], distinct per token
  std::vector<float> weight;    // [tokens, kK], positive, summing to 1 per token
};

// p_e = 1 / (pi(e) + 1)^0.8 with pi a fixed random permutation of the experts.
const std::vector<double>& SkewedPopularity() {
  static const std::vector<double> popularity = [] {
    std::vector<int> pi(kE);
    std::iota(pi.begin(), pi.end(), 0);
    std::mt19937_64 rng(20240807);
    std::shuffle(pi.begin(), pi.end(), rng);
    std::vector<double> p(kE);
    for (size_t e = 0; e < kE; ++e) p[e] = 1.0 / std::pow(pi[e] + 1.0, 0.8);
    return p;
  }();
  return popularity;
}

Routing MakeRouting(Dist dist, size_t tokens, uint64_t seed) {
  Routing r;
  r.tokens = tokens;
  r.chosen.resize(tokens * kK);
  r.weight.resize(tokens * kK);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const std::vector<double> uniform(kE, 1.0);
  const std::vector<double>& popularity = dist == Dist::kUniform ? uniform : SkewedPopularity();
  for (size_t t = 0; t < tokens; ++t) {
    std::vector<double> left = popularity;
    float sum = 0.0f;
    for (size_t j = 0; j < kK; ++j) {
      const double total = std::accumulate(left.begin(), left.end(), 0.0);
      double u = unit(rng) * total;
      size_t e = 0;
      while (e + 1 < kE && (left[e] == 0.0 || u >= left[e])) u -= left[e++];
      if (left[e] == 0.0) {  // rounding ran past the end: take the last expert still left
        e = kE;
        while (left[--e] == 0.0) {
        }
      }
      left[e] = 0.0;
      r.chosen[t * kK + j] = static_cast<int32_t>(e);
      r.weight[t * kK + j] = static_cast<float>(0.05 + unit(rng));
      sum += r.weight[t * kK + j];
    }
    for (size_t j = 0; j < kK; ++j) r.weight[t * kK + j] /= sum;
  }
  return r;
}

size_t RoutingCount(size_t tokens) { return tokens <= 16 ? 24 : 8; }

const std::vector<Routing>& Routings(Dist dist, size_t tokens) {
  static std::map<std::pair<int, size_t>, std::vector<Routing>> cache;
  auto& v = cache[{static_cast<int>(dist), tokens}];
  if (v.empty()) {
    for (size_t i = 0; i < RoutingCount(tokens); ++i) {
      v.push_back(MakeRouting(dist, tokens, 1000003 * tokens + 7919 * i + (dist == Dist::kSkewed ? 17 : 0)));
    }
  }
  return v;
}

// h [tokens, H] in [-1, 1], quantized once (the model quantizes it once per layer for all ranks'
// experts; every rank does the same work here in both splits).
const Q8Activations& Hidden(size_t tokens) {
  static std::map<size_t, Q8Activations> cache;
  auto it = cache.find(tokens);
  if (it != cache.end()) return it->second;
  std::vector<float> h(tokens * kH);
  uint64_t rng = 12345 + tokens;
  for (auto& v : h) v = static_cast<float>(NextRandom(rng) % 2001) * 1e-3f - 1.0f;
  QuantizeQ8(h.data(), tokens, kH, kH, cache[tokens]);
  return cache[tokens];
}

// ---- one rank's MoE step --------------------------------------------------------------------------

// Buffers of a rank's step, sized once for kMaxTokens (the timed region allocates little).
struct Scratch {
  std::vector<int64_t> offsets, next;
  std::vector<int32_t> row_of_slot;
  std::vector<float> weight;
  Q8Activations xq, actq;
  std::vector<float> gu, act, ys;
  Scratch() {
    const size_t rows = kMaxTokens * kK, nb = kH / kQ8Block;
    row_of_slot.resize(rows);
    weight.resize(rows);
    xq.q.resize(rows * kH);
    xq.d.resize(rows * nb);
    xq.sum.resize(rows * nb);
    actq.q.reserve(rows * kI);
    actq.d.reserve(rows * kIBlocks);
    actq.sum.reserve(rows * kIBlocks);
    gu.resize(rows * 2 * kI);
    act.resize(rows * kI);
    ys.resize(rows * kH);
  }
};

// y[rows of e, w.n] = x[rows of e, w.k] . W_{e0 + e}^T + bias for every local expert e with rows.
void Grouped(const ExpertSet& w, size_t e0, const std::vector<int64_t>& offsets, const Q8Activations& x, float* y) {
  const KernelTable& kt = ActiveKernels();
  const std::vector<ExpertChunk> chunks = ExpertChunks(offsets, w.n);
  const size_t nb = w.k / kQ8Block;
  GlobalPool().Run(chunks.size(), [&](size_t i, int) {
    const ExpertChunk& ch = chunks[i];
    const int64_t row = offsets[ch.expert], m = offsets[ch.expert + 1] - row;
    const size_t e = e0 + static_cast<size_t>(ch.expert);
    const float* bias = w.bias.empty() ? nullptr : &w.bias[e * w.n];
    const Q8Rows xr{&x.q[row * w.k], &x.d[row * nb], &x.sum[row * nb]};
    kt.matmul_q8_mxfp4(xr, m, w.k, &w.codes[e * w.CodeStride()], &w.scales[e * w.ScaleStride()], ch.begin, ch.end,
                       bias, y + row * w.n, w.n);
  });
}

struct RankResult {
  size_t rows = 0, experts = 0;  // pairs run, experts with at least one pair
};

// The rank holding experts [e0, e0 + ne) of `w` (whole or sliced) runs its pairs of `rt`:
// out [T, H] = its partial sum of the layer's MoE output (gpt_oss_model.cpp Model::Moe).
RankResult RunRank(const RankWeights& w, size_t e0, size_t ne, const Routing& rt, const Q8Activations& hq,
                   Scratch& s, float* out) {
  const size_t T = rt.tokens, S = T * kK, nb = kH / kQ8Block, units = w.gate_up.n / 2;
  s.offsets.assign(ne + 1, 0);
  auto local = [&](size_t slot) { return static_cast<int64_t>(rt.chosen[slot]) - static_cast<int64_t>(e0); };
  auto mine = [&](size_t slot) { return local(slot) >= 0 && local(slot) < static_cast<int64_t>(ne); };
  for (size_t slot = 0; slot < S; ++slot) {
    if (mine(slot)) ++s.offsets[local(slot) + 1];
  }
  RankResult result;
  for (size_t e = 0; e < ne; ++e) {
    result.experts += s.offsets[e + 1] > 0;
    s.offsets[e + 1] += s.offsets[e];
  }
  result.rows = static_cast<size_t>(s.offsets[ne]);
  if (result.rows == 0) {
    std::fill(out, out + T * kH, 0.0f);
    return result;
  }
  s.next.assign(s.offsets.begin(), s.offsets.end() - 1);
  for (size_t slot = 0; slot < S; ++slot) {
    s.row_of_slot[slot] = mine(slot) ? static_cast<int32_t>(s.next[local(slot)]++) : -1;
  }
  s.xq.m = result.rows;
  s.xq.k = kH;
  for (size_t slot = 0; slot < S; ++slot) {
    const int64_t r = s.row_of_slot[slot], t = slot / kK;
    if (r < 0) continue;
    std::memcpy(&s.xq.q[r * kH], &hq.q[t * kH], kH);
    std::memcpy(&s.xq.d[r * nb], &hq.d[t * nb], nb * sizeof(float));
    std::memcpy(&s.xq.sum[r * nb], &hq.sum[t * nb], nb * sizeof(int32_t));
  }
  Grouped(w.gate_up, e0, s.offsets, s.xq, s.gu.data());
  // swigluoai (gpt-oss.md §3.5.2), as the model: gate clamped above, up to [-limit, limit].
  GlobalPool().ParallelFor(result.rows, 4, [&](size_t begin, size_t end) {
    for (size_t i = begin * units; i < end * units; ++i) {
      const float g = std::min(s.gu[2 * i], kSwigluLimit);
      const float u = std::clamp(s.gu[2 * i + 1], -kSwigluLimit, kSwigluLimit);
      s.act[i] = (u + 1.0f) * (g * (1.0f / (1.0f + std::exp(-g * kSwigluAlpha))));
    }
  });
  QuantizeQ8(s.act.data(), result.rows, units, units, s.actq);
  Grouped(w.down, e0, s.offsets, s.actq, s.ys.data());
  for (size_t slot = 0; slot < S; ++slot) {
    const bool here = s.row_of_slot[slot] >= 0;
    s.weight[slot] = here ? rt.weight[slot] : 0.0f;
    if (!here) s.row_of_slot[slot] = 0;
  }
  GatherReduce(s.ys.data(), result.rows, kH, s.row_of_slot.data(), s.weight.data(), T, kK, kH, out, kH);
  return result;
}

// ---- rank configurations --------------------------------------------------------------------------

enum class Mode { kOne, kExpert, kTensor };

struct Rank {
  const RankWeights* weights;
  size_t e0, ne;
};

struct Model {
  RankWeights full;
  std::map<int, std::vector<RankWeights>> tp;  // p -> slices of ranks 0 .. p-1

  std::vector<Rank> Ranks(Mode mode, int p) const {
    std::vector<Rank> ranks;
    for (int r = 0; r < p; ++r) {
      if (mode == Mode::kTensor) {
        ranks.push_back({&tp.at(p)[r], 0, kE});
      } else {
        ranks.push_back({&full, r * kE / p, kE / p});
      }
    }
    return ranks;
  }
};

// Sum over the ranks of their partial outputs for routing `rt`.
std::vector<float> SumOfRanks(const Model& m, Mode mode, int p, const Routing& rt, Scratch& s) {
  const Q8Activations& hq = Hidden(rt.tokens);
  std::vector<float> sum(rt.tokens * kH, 0.0f), part(rt.tokens * kH);
  for (const Rank& r : m.Ranks(mode, p)) {
    RunRank(*r.weights, r.e0, r.ne, rt, hq, s, part.data());
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += part[i];
  }
  return sum;
}

// The slicing is right iff the ranks' partial sums add up to the single-rank output: checked for
// both splits at P = 2 and 4 on both routings, T = 4; any mismatch aborts the benchmark.
void CheckSplits(const Model& m, Scratch& s) {
  for (Dist dist : {Dist::kUniform, Dist::kSkewed}) {
    const Routing& rt = Routings(dist, 4)[0];
    const std::vector<float> want = SumOfRanks(m, Mode::kOne, 1, rt, s);
    float amax = 0.0f;
    for (float v : want) {
      if (!std::isfinite(v)) Die("single-rank output is not finite");
      amax = std::max(amax, std::fabs(v));
    }
    if (amax == 0.0f) Die("single-rank output is all zero");
    for (Mode mode : {Mode::kExpert, Mode::kTensor}) {
      for (int p : {2, 4}) {
        const std::vector<float> got = SumOfRanks(m, mode, p, rt, s);
        float err = 0.0f;
        for (size_t i = 0; i < got.size(); ++i) err = std::max(err, std::fabs(got[i] - want[i]));
        const char* name = mode == Mode::kExpert ? "ep" : "tp";
        std::fprintf(stderr, "check %s P=%d %s T=4: max |sum of ranks - single rank| = %.3g = %.3g of max |y| %.3g\n",
                     name, p, dist == Dist::kUniform ? "uniform" : "skewed", err, err / amax, amax);
        if (!(err <= 1e-5f * amax)) {
          Die(std::string("the ") + name + " split at P = " + std::to_string(p) +
              " does not reproduce the single-rank output (max error " + std::to_string(err / amax) +
              " of max |y|, tolerance 1e-5): the slicing is wrong");
        }
      }
    }
  }
}

const Model& GetModel() {
  static const std::unique_ptr<Model> model = [] {
    const auto start = std::chrono::steady_clock::now();
    auto m = std::make_unique<Model>();
    {
      const Checkpoint c = RandomCheckpoint();
      const size_t hb = kH / kQ8Block;
      Allocate(m->full.gate_up, 2 * kI, kH);
      Allocate(m->full.down, kH, kI);
      m->full.gate_up.bias = c.gu_bias;
      m->full.down.bias = c.down_bias;
      for (size_t e = 0; e < kE; ++e) {
        PackExpert(&c.gu_blocks[e * 2 * kI * hb * kMxfp4BlockBytes], &c.gu_scales[e * 2 * kI * hb], e, m->full.gate_up);
        PackExpert(&c.down_blocks[e * kH * kIBlocks * kMxfp4BlockBytes], &c.down_scales[e * kH * kIBlocks], e,
                   m->full.down);
      }
      for (int p : {2, 4}) {
        const std::vector<size_t> bounds = BlockBounds(p);
        for (int r = 0; r < p; ++r) {
          m->tp[p].push_back(SliceExperts(c, bounds[r] * kQ8Block, bounds[r + 1] * kQ8Block, r == 0));
        }
      }
    }
    // A gate_up slice is whole 16-row groups of the q8 layout (2 u0 % 16 == 0), so it is a
    // contiguous byte range of the full packed matrix: a tensor-parallel loader could take it
    // without repacking; down (sliced along k) needs the repack.
    bool contiguous = true;
    for (int p : {2, 4}) {
      const std::vector<size_t> bounds = BlockBounds(p);
      for (int r = 0; r < p; ++r) {
        const ExpertSet& slice = m->tp[p][r].gate_up;
        const size_t g0 = 2 * bounds[r] * kQ8Block / kQ8Group;
        for (size_t e = 0; e < kE; ++e) {
          contiguous &= std::memcmp(&slice.codes[e * slice.CodeStride()],
                                    &m->full.gate_up.codes[e * m->full.gate_up.CodeStride() + g0 * kH * kQ8Group / 2],
                                    slice.CodeStride()) == 0;
          contiguous &= std::memcmp(&slice.scales[e * slice.ScaleStride()],
                                    &m->full.gate_up.scales[e * m->full.gate_up.ScaleStride() +
                                                            g0 * (kH / kQ8Block) * kQ8Group],
                                    slice.ScaleStride()) == 0;
        }
      }
    }
    std::fprintf(stderr, "gate_up slices are %s byte ranges of the full q8 matrices\n",
                 contiguous ? "contiguous" : "NOT contiguous");
    std::fprintf(stderr,
                 "tp down k-blocks of 32 per rank: P=2 %s, P=4 %s (90 blocks do not split 4 ways evenly)\n",
                 BlockSplitText(2).c_str(), BlockSplitText(4).c_str());
    const std::vector<double>& pop = SkewedPopularity();
    const double total = std::accumulate(pop.begin(), pop.end(), 0.0);
    for (int p : {2, 4}) {
      std::fprintf(stderr, "skewed: share of single-draw popularity held by each ep rank at P=%d:", p);
      for (int r = 0; r < p; ++r) {
        double share = 0.0;
        for (size_t e = r * kE / p; e < (r + 1) * kE / p; ++e) share += pop[e];
        std::fprintf(stderr, " %.3f", share / total);
      }
      std::fprintf(stderr, "\n");
    }
    Scratch s;
    CheckSplits(*m, s);
    std::fprintf(stderr, "setup %.1f s\n",
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    return m;
  }();
  return *model;
}

// Streams kFlushBytes (2x the L3) with both threads, so the next step's weights come from DRAM.
void FlushCaches() {
  static float* buffer = [] {
    auto* p = static_cast<float*>(std::aligned_alloc(64, kFlushBytes));
    for (size_t i = 0; i < kFlushBytes / sizeof(float); ++i) p[i] = 1.0f;
    return p;
  }();
  const size_t part = kFlushBytes / sizeof(float) / kThreads;
  float sums[kThreads];
  GlobalPool().Run(kThreads, [&](size_t t, int) { sums[t] = StreamSumF32(buffer + t * part, part); });
  benchmark::DoNotOptimize(sums);
}

// ---- benchmark ------------------------------------------------------------------------------------

double ProcessCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

void BM_ExpertSplit(benchmark::State& state, Mode mode, Dist dist, size_t tokens, int p) {
  SetGlobalThreadCount(kThreads);
  const Model& m = GetModel();
  const std::vector<Routing>& routings = Routings(dist, tokens);
  const Q8Activations& hq = Hidden(tokens);
  const std::vector<Rank> ranks = m.Ranks(mode, p);
  static Scratch s;
  std::vector<float> out(tokens * kH);
  double sum_max_s = 0.0, sum_mean_s = 0.0, sum_bytes = 0.0, sum_rows = 0.0, sum_ops = 0.0;
  double sum_wall_s = 0.0, sum_cpu_s = 0.0;  // all ranks: wall and process CPU time
  size_t i = 0;
  for (auto _ : state) {
    const Routing& rt = routings[i++ % routings.size()];
    FlushCaches();
    double max_s = 0.0, total_s = 0.0, bytes = 0.0, rows = 0.0, ops = 0.0;
    for (const Rank& r : ranks) {
      const double cpu_start = ProcessCpuSeconds();
      const auto start = std::chrono::steady_clock::now();
      const RankResult res = RunRank(*r.weights, r.e0, r.ne, rt, hq, s, out.data());
      const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      sum_cpu_s += ProcessCpuSeconds() - cpu_start;
      sum_wall_s += sec;
      benchmark::DoNotOptimize(out.data());
      total_s += sec;
      if (sec > max_s) {
        max_s = sec;
        bytes = static_cast<double>(res.experts) * r.weights->BytesPerExpert();
        rows = static_cast<double>(res.rows);
        ops = 2.0 * rows * (r.weights->gate_up.n * kH + kH * r.weights->down.k);
      }
    }
    state.SetIterationTime(max_s);
    sum_max_s += max_s;
    sum_mean_s += total_s / p;
    sum_bytes += bytes;
    sum_rows += rows;
    sum_ops += ops;
  }
  using benchmark::Counter;
  state.counters["mean_ms"] = Counter(sum_mean_s * 1e3, Counter::kAvgIterations);
  state.counters["imbalance"] = sum_max_s / sum_mean_s;
  state.counters["MB"] = Counter(sum_bytes * 1e-6, Counter::kAvgIterations);
  state.counters["rows"] = Counter(sum_rows, Counter::kAvgIterations);
  state.counters["GBps"] = sum_bytes / sum_max_s * 1e-9;
  state.counters["GOPs"] = sum_ops / sum_max_s * 1e-9;
  if (g_best_bandwidth[kThreads] > 0) state.counters["bw_frac"] = sum_bytes / sum_max_s / g_best_bandwidth[kThreads];
  state.counters["cpu_frac"] = sum_cpu_s / (kThreads * sum_wall_s);
  if (mode == Mode::kTensor) state.SetLabel("down k-blocks/rank " + BlockSplitText(p));
}

int RegisterAll() {
  benchmark::RegisterBenchmark(("read_bandwidth/threads:" + std::to_string(kThreads)).c_str(), BM_ReadBandwidth,
                               kThreads)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  for (size_t tokens : {1, 4, 16, 128, 512}) {
    for (Dist dist : {Dist::kUniform, Dist::kSkewed}) {
      const std::string suffix =
          std::string(dist == Dist::kUniform ? "/uniform" : "/skewed") + "/T:" + std::to_string(tokens);
      struct Config {
        const char* name;
        Mode mode;
        int p;
      };
      for (const Config& c : {Config{"one_rank", Mode::kOne, 1}, Config{"ep", Mode::kExpert, 2},
                              Config{"tp", Mode::kTensor, 2}, Config{"ep", Mode::kExpert, 4},
                              Config{"tp", Mode::kTensor, 4}}) {
        const std::string name = c.name + suffix + "/P:" + std::to_string(c.p);
        benchmark::RegisterBenchmark(name.c_str(), BM_ExpertSplit, c.mode, dist, tokens, c.p)
            ->UseManualTime()
            ->Iterations(static_cast<int64_t>(RoutingCount(tokens)))
            ->Unit(benchmark::kMillisecond);
      }
    }
  }
  return 0;
}

[[maybe_unused]] const int kRegistered = RegisterAll();

}  // namespace
}  // namespace tessera
