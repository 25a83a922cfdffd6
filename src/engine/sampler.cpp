#include "engine/sampler.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <type_traits>

#include "core/error.h"

namespace tessera {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kMinExpArg = -87.33654f;  // exp of it is 2^-126: the smallest normal float
constexpr size_t kLanes = 4;
constexpr size_t kChunk = 256;              // ids per chunk sum (a multiple of kLanes)
constexpr size_t kInsertionTopK = 64;       // top-k up to this uses the insertion buffer
constexpr size_t kSortAllTopP = 2048;       // top-p sorts up to this many survivors outright
constexpr uint32_t kBins = (0x3F800000u >> 16) + 1;  // weight bits >> 16 for weights in [0, 1]

// Four floats / ints, two doubles as one value (GCC and Clang vector extensions): SSE2 code on
// the x86-64 baseline with lane-wise IEEE results, whatever the instruction set.
typedef float F4 __attribute__((vector_size(16)));
typedef int32_t I4 __attribute__((vector_size(16)));
typedef double D2 __attribute__((vector_size(16)));

F4 Load(const float* p) {
  F4 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
void Store(float* p, F4 v) { std::memcpy(p, &v, sizeof(v)); }
F4 Splat(float x) { return F4{x, x, x, x}; }

// Cephes expf after range reduction x = n ln2 + r, |r| <= ln2 / 2, and 2^n built from its bits;
// valid for x in [kMinExpArg, 0] (n in [-126, 0]). `c` turns a constant into a V. The scalar and
// vector forms run the same IEEE operations in the same order, so their results are identical.
template <typename V, typename I, typename Const>
V ExpCore(V x, Const c) {
  const V n = (x * c(1.44269504088896341f) + c(12582912.0f)) - c(12582912.0f);  // round to nearest
  V r = x - n * c(0.693359375f);
  r = r - n * c(-2.12194440e-4f);
  V p = c(1.9875691500e-4f);
  p = p * r + c(1.3981999507e-3f);
  p = p * r + c(8.3334519073e-3f);
  p = p * r + c(4.1665795894e-2f);
  p = p * r + c(1.6666665459e-1f);
  p = p * r + c(5.0000001201e-1f);
  const V y = p * (r * r) + r + c(1.0f);
  I bits;
  if constexpr (std::is_same_v<V, float>) {
    bits = (static_cast<int32_t>(n) + 127) << 23;
  } else {
    bits = (__builtin_convertvector(n, I) + 127) << 23;
  }
  return y * std::bit_cast<V>(bits);
}

float ExpScalar(float x) {
  return ExpCore<float, int32_t>(x, [](float v) { return v; });
}
F4 Exp4(F4 x) { return ExpCore<F4, I4>(x, Splat); }

// Weights of 4 logits: exp((v - max) / t) where v >= threshold and the argument is not below
// kMinExpArg, else 0.
F4 Weights4(F4 v, F4 max, F4 t, F4 threshold) {
  const F4 a = (v - max) / t;
  const F4 floor = Splat(kMinExpArg);
  const I4 keep = (v >= threshold) & (a >= floor);
  const F4 e = Exp4(keep ? a : floor);
  return keep ? e : Splat(0.0f);
}

// Sum of w[0, n) in double: 4 lanes (two pairs), then a fixed reduction order.
double ChunkSum(const float* w, size_t n) {
  D2 lo = {0, 0};
  D2 hi = {0, 0};
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const F4 v = Load(w + i);
    lo += D2{v[0], v[1]};
    hi += D2{v[2], v[3]};
  }
  const D2 s = lo + hi;
  double sum = s[0] + s[1];
  for (; i < n; ++i) sum += w[i];
  return sum;
}

struct RowScan {
  float max;
  int32_t argmax;
};

// Rejects NaN, +inf and all -inf rows; the maximum and its first index.
RowScan ScanLogits(std::span<const float> logits) {
  if (logits.empty()) Fail("sampler: empty logits row");
  if (logits.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    Fail("sampler: logits row of ", logits.size(), " entries is larger than any token id");
  }
  const size_t n = logits.size();
  const float* x = logits.data();
  F4 vmax = Splat(-kInf);
  I4 bad = {};
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const F4 v = Load(x + i);
    bad |= !(v < Splat(kInf));  // NaN or +inf
    vmax = v > vmax ? v : vmax;
  }
  float max = -kInf;
  bool any_bad = false;
  for (size_t j = 0; j < kLanes; ++j) {
    any_bad = any_bad || bad[j] != 0;
    if (vmax[j] > max) max = vmax[j];
  }
  for (; i < n; ++i) {
    any_bad = any_bad || !(x[i] < kInf);
    if (x[i] > max) max = x[i];
  }
  if (any_bad) {
    for (size_t k = 0; k < n; ++k) {
      if (!(x[k] < kInf)) Fail("sampler: logit ", k, " is ", std::isnan(x[k]) ? "NaN" : "+inf");
    }
  }
  if (max == -kInf) Fail("sampler: all ", n, " logits are -inf");
  int32_t argmax = 0;
  while (x[argmax] != max) ++argmax;
  return {max, argmax};
}

// The k-th largest of `logits` (1 <= k < size): an insertion buffer for small k, nth_element
// otherwise.
float KthLargest(std::span<const float> logits, size_t k, std::vector<float>& scratch) {
  if (k <= kInsertionTopK) {
    scratch.assign(k, -kInf);  // descending
    for (const float v : logits) {
      if (v <= scratch[k - 1]) continue;
      size_t j = k - 1;
      while (j > 0 && scratch[j - 1] < v) {
        scratch[j] = scratch[j - 1];
        --j;
      }
      scratch[j] = v;
    }
    return scratch[k - 1];
  }
  scratch.assign(logits.begin(), logits.end());
  std::nth_element(scratch.begin(), scratch.begin() + static_cast<ptrdiff_t>(k - 1), scratch.end(),
                   std::greater<float>());
  return scratch[k - 1];
}

uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

float SamplerExp(float x) {
  if (!(x >= kMinExpArg)) return 0.0f;  // also -inf and NaN
  return ExpScalar(x);
}

uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

Xoshiro256::Xoshiro256(uint64_t seed) {
  // SplitMix64 never yields four zero words in a row, so the state is valid for every seed.
  for (uint64_t& word : s_) word = SplitMix64(seed);
}

Xoshiro256 Xoshiro256::FromState(uint64_t s0, uint64_t s1, uint64_t s2, uint64_t s3) {
  TESSERA_CHECK((s0 | s1 | s2 | s3) != 0);
  Xoshiro256 rng;
  rng.s_[0] = s0;
  rng.s_[1] = s1;
  rng.s_[2] = s2;
  rng.s_[3] = s3;
  return rng;
}

uint64_t Xoshiro256::Next() {
  const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = Rotl(s_[3], 45);
  return result;
}

void ValidateSamplingParams(const SamplingParams& p) {
  if (!(p.temperature >= 0.0f) || std::isinf(p.temperature)) {
    Fail("sampling: temperature must be a finite number >= 0 (got ", p.temperature, ")");
  }
  if (p.top_k < 0) Fail("sampling: top_k must be >= 0, 0 = off (got ", p.top_k, ")");
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) {
    Fail("sampling: top_p must be in (0, 1], 1 = off (got ", p.top_p, ")");
  }
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) {
    Fail("sampling: min_p must be in [0, 1], 0 = off (got ", p.min_p, ")");
  }
}

SamplingParams SamplingParamsFromGenerationConfig(const GenerationConfig& config, uint64_t seed) {
  SamplingParams params;
  params.seed = seed;
  if (!config.do_sample) {
    params.temperature = 0.0f;
    return params;
  }
  params.temperature = static_cast<float>(config.temperature.value_or(1.0));
  params.top_p = static_cast<float>(config.top_p.value_or(1.0));
  params.top_k = config.top_k.value_or(50);
  ValidateSamplingParams(params);
  return params;
}

int32_t Argmax(std::span<const float> logits) { return ScanLogits(logits).argmax; }

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) {
  ValidateSamplingParams(params_);
}

void Sampler::Reseed(uint64_t seed) {
  params_.seed = seed;
  rng_ = Xoshiro256(seed);
}

double Sampler::Filter(std::span<const float> logits) {
  const RowScan scan = ScanLogits(logits);
  const size_t n = logits.size();
  weights_.assign(n, 0.0f);
  if (params_.temperature == 0.0f) {
    weights_[static_cast<size_t>(scan.argmax)] = 1.0f;
  } else {
    // Top-k: ordering by logit equals ordering by logit / T. A -inf threshold (fewer than k
    // finite logits) keeps every finite one.
    float threshold = -kInf;
    if (params_.top_k > 0 && static_cast<uint64_t>(params_.top_k) < n) {
      threshold = KthLargest(logits, static_cast<size_t>(params_.top_k), scratch_);
    }
    const float* x = logits.data();
    float* w = weights_.data();
    if (threshold > -kInf) {
      // Top-k: only the (few) survivors need a weight; same operations as Weights4.
      const float max = scan.max;
      const float t = params_.temperature;
      for (size_t i = 0; i < n; ++i) {
        if (x[i] >= threshold) w[i] = SamplerExp((x[i] - max) / t);
      }
    } else {
      const F4 max = Splat(scan.max);
      const F4 t = Splat(params_.temperature);
      const F4 thr = Splat(threshold);
      size_t i = 0;
      for (; i + kLanes <= n; i += kLanes) Store(w + i, Weights4(Load(x + i), max, t, thr));
      if (i < n) {  // the tail, padded with -inf (weight 0)
        float pad[kLanes];
        std::fill(pad, pad + kLanes, -kInf);
        std::copy(x + i, x + n, pad);
        const F4 tail = Weights4(Load(pad), max, t, thr);
        for (size_t j = 0; i + j < n; ++j) w[i + j] = tail[j];
      }
    }
  }

  if (params_.temperature != 0.0f && params_.top_p < 1.0f) {
    ApplyTopP(ChunkSum(weights_.data(), n));
  }
  if (params_.temperature != 0.0f && params_.min_p > 0.0f) {
    // Weights are relative to the most likely survivor (weight exactly 1: SamplerExp(0)), so
    // prob >= min_p * max_prob is weight >= min_p; that survivor always stays.
    const F4 min_p = Splat(params_.min_p);
    float* w = weights_.data();
    size_t i = 0;
    for (; i + kLanes <= n; i += kLanes) {
      const F4 v = Load(w + i);
      Store(w + i, v >= min_p ? v : Splat(0.0f));
    }
    for (; i < n; ++i) w[i] = w[i] >= params_.min_p ? w[i] : 0.0f;
  }

  chunk_sums_.resize((n + kChunk - 1) / kChunk);
  double total = 0.0;
  for (size_t c = 0; c < chunk_sums_.size(); ++c) {
    const size_t begin = c * kChunk;
    chunk_sums_[c] = ChunkSum(weights_.data() + begin, std::min(kChunk, n - begin));
    total += chunk_sums_[c];
  }
  return total;
}

void Sampler::ApplyTopP(double total) {
  const double target = static_cast<double>(params_.top_p) * total;
  float* w = weights_.data();
  const size_t n = weights_.size();
  const auto more_likely = [w](int32_t a, int32_t b) {
    return w[a] > w[b] || (w[a] == w[b] && a < b);
  };
  // Keeps the heaviest of boundary_ (sorted) while the mass before them is < target; zeroes the
  // rest. `before` is the mass of everything heavier than boundary_.
  const auto cut = [&](double before) {
    std::sort(boundary_.begin(), boundary_.end(), more_likely);
    size_t keep = 0;
    while (keep < boundary_.size() && before < target) before += w[boundary_[keep++]];
    for (size_t j = keep; j < boundary_.size(); ++j) w[boundary_[j]] = 0.0f;
  };

  // Few survivors (after top-k, or a peaked row): sort them all.
  boundary_.clear();
  bool few = true;
  for (size_t i = 0; i < n && few; ++i) {
    if (w[i] > 0.0f) {
      few = boundary_.size() < kSortAllTopP;
      boundary_.push_back(static_cast<int32_t>(i));
    }
  }
  if (few) {
    cut(0.0);
    return;
  }

  // Many: a weight's bits >> 16 (sign 0, exponent, 7 mantissa bits) order bins like weights:
  // every member of a higher bin weighs more than every member of a lower one, and equal
  // weights share a bin. Whole bins above the one where the running mass reaches the target
  // are kept, bins below are dropped, and only the boundary bin is sorted.
  bins_.assign(kBins, 0.0);
  for (size_t i = 0; i < n; ++i) {
    if (w[i] > 0.0f) bins_[std::bit_cast<uint32_t>(w[i]) >> 16] += w[i];
  }
  double before = 0.0;  // mass of the bins above `bin - 1`
  uint32_t bin = kBins;
  while (bin > 0 && before + bins_[bin - 1] < target) before += bins_[--bin];
  if (bin == 0) return;  // rounding kept the target out of reach: everything stays
  const uint32_t boundary = bin - 1;
  const float low = std::bit_cast<float>(boundary << 16);  // the bin's smallest weight
  boundary_.clear();
  for (size_t i = 0; i < n; ++i) {
    if (w[i] >= low && (std::bit_cast<uint32_t>(w[i]) >> 16) == boundary) {
      boundary_.push_back(static_cast<int32_t>(i));
    }
  }
  cut(before);  // keeps at least one: before < target on entry
  const F4 floor = Splat(low);
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const F4 v = Load(w + i);
    Store(w + i, v >= floor ? v : Splat(0.0f));
  }
  for (; i < n; ++i) w[i] = w[i] >= low ? w[i] : 0.0f;
}

int32_t Sampler::Sample(std::span<const float> logits) {
  if (params_.temperature == 0.0f) return Argmax(logits);
  const double total = Filter(logits);
  const double target = rng_.NextDouble() * total;
  const float* w = weights_.data();
  const size_t n = weights_.size();
  double before = 0.0;
  int32_t last = -1;  // the last token with weight seen
  for (size_t c = 0; c < chunk_sums_.size(); ++c) {
    const size_t begin = c * kChunk;
    const size_t end = std::min(n, begin + kChunk);
    if (before + chunk_sums_[c] > target) {
      double sum = before;
      for (size_t i = begin; i < end; ++i) {
        if (w[i] <= 0.0f) continue;
        sum += w[i];
        last = static_cast<int32_t>(i);
        if (target < sum) return last;
      }
      // The in-order sum rounded below the chunk sum: the chunk's last token.
      if (last >= static_cast<int32_t>(begin)) return last;
    }
    before += chunk_sums_[c];
    if (chunk_sums_[c] > 0.0) {
      for (size_t i = end; i > begin; --i) {
        if (w[i - 1] > 0.0f) {
          last = static_cast<int32_t>(i - 1);
          break;
        }
      }
    }
  }
  TESSERA_CHECK(last >= 0);  // the argmax always has weight 1
  return last;
}

std::vector<TokenProb> Sampler::Distribution(std::span<const float> logits) {
  const double total = Filter(logits);
  std::vector<TokenProb> out;
  for (size_t i = 0; i < weights_.size(); ++i) {
    if (weights_[i] > 0.0f) out.push_back({static_cast<int32_t>(i), weights_[i] / total});
  }
  return out;
}

// ---- StopCondition -----------------------------------------------------------------------------

StopCondition::StopCondition(std::span<const int32_t> stop_tokens, int64_t max_new_tokens)
    : max_new_tokens_(max_new_tokens) {
  AddStopTokens(stop_tokens);
}

StopCondition StopCondition::FromGenerationConfig(const GenerationConfig& config,
                                                  int64_t max_new_tokens) {
  std::vector<int32_t> ids;
  for (int64_t id : config.eos_token_ids) {
    if (id < 0 || id > std::numeric_limits<int32_t>::max()) {
      Fail("generation_config.json: eos_token_id ", id, " is not a valid token id");
    }
    ids.push_back(static_cast<int32_t>(id));
  }
  return StopCondition(ids, max_new_tokens);
}

void StopCondition::AddStopTokens(std::span<const int32_t> stop_tokens) {
  for (int32_t id : stop_tokens) {
    if (id < 0) Fail("stop token id ", id, " is negative");
    stop_tokens_.push_back(id);
  }
  std::sort(stop_tokens_.begin(), stop_tokens_.end());
  stop_tokens_.erase(std::unique(stop_tokens_.begin(), stop_tokens_.end()), stop_tokens_.end());
}

bool StopCondition::IsStopToken(int32_t token) const {
  return std::binary_search(stop_tokens_.begin(), stop_tokens_.end(), token);
}

bool StopCondition::Accept(int32_t token) {
  ++generated_;
  if (IsStopToken(token)) stopped_on_token_ = true;
  return done();
}

StopCondition::Reason StopCondition::reason() const {
  if (stopped_on_token_) return Reason::kStopToken;
  if (max_new_tokens_ >= 0 && generated_ >= max_new_tokens_) return Reason::kLength;
  return Reason::kNone;
}

}  // namespace tessera
