// Token sampling from one row of logits, and the stop condition of a generation loop.
//
// Filters follow Hugging Face `generate()` (transformers generation/utils.py _get_logits_processor
// and logits_process.py), in its order, each on the output of the previous one:
//   1. temperature: weights exp((logit - max) / T). T = 0 means greedy: argmax, ties to the
//      lowest id (as torch.argmax), no filter and no random draw.
//   2. top-k (TopKLogitsWarper): keep every token whose logit is >= the k-th largest one (ties at
//      the boundary are all kept, as HF's `scores < topk(...)[-1]` removal does).
//   3. top-p (TopPLogitsWarper): in order of decreasing probability (ties: lower id first), keep
//      a token while the probability mass before it is < top_p; i.e. the smallest prefix whose
//      mass reaches top_p, at least one token (HF min_tokens_to_keep = 1).
//   4. min-p (MinPLogitsWarper): keep tokens with probability >= min_p * (largest probability),
//      probabilities taken after the filters above (the ratio does not depend on renormalising).
//   5. draw from the renormalised weights of the survivors.
// Tokens with logit -inf (masked) never survive, nor do tokens whose weight is below e^-87.34
// (where float exp leaves the normal range; their total probability is < 1e-32).
//
// Reproducibility: the sampler owns its generator, xoshiro256** seeded through SplitMix64 from
// the 64-bit seed. Every sampled (T > 0) token consumes exactly one 64-bit draw, turned into a
// double u in [0, 1) from its top 53 bits; the token is the first (in increasing id order) at
// which the running sum of weights exceeds u * total, sums taken in double over fixed chunks of
// 256 ids. Weights come from SamplerExp, which uses IEEE additions, multiplications and one
// division only (no libm, no FMA contraction under ISO C++), so a seed gives the same tokens for
// the same logits on every x86-64 machine, ISA level and thread count.
//
// Cost for a vocabulary of V = 201088, single-threaded: greedy is one vectorised pass; sampling
// is a validation pass, one weight pass (4 lanes, GCC vector extensions on the SSE2 baseline;
// with top-k only the survivors get an exp), one summing pass and the walk. Top-k finds its
// threshold with a k-entry insertion buffer (k <= 64; one pass) or std::nth_element. Top-p never
// sorts the vocabulary: up to 2048 survivors are sorted outright; with more, a histogram of the
// weights' top 16 bits (exponent and 7 mantissa bits, monotonic in the weight) locates the bin
// holding the cut and only that bin's members are sorted.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "io/config.h"

namespace tessera {

struct SamplingParams {
  float temperature = 1.0f;  // >= 0; 0 = greedy
  int64_t top_k = 0;         // >= 0; 0 = off
  float top_p = 1.0f;        // in (0, 1]; 1 = off
  float min_p = 0.0f;        // in [0, 1]; 0 = off
  uint64_t seed = 0;
};

// Throws tessera::Error with a one-line message naming the first invalid parameter.
void ValidateSamplingParams(const SamplingParams& params);

// The parameters HF generate() would use with this generation_config.json: do_sample false ->
// greedy; otherwise temperature (default 1.0), top_p (default 1.0) and top_k (default 50, HF's
// GenerationConfig default). gpt-oss's file has do_sample true and none of the three, so this
// gives T 1.0, top_p 1.0, top_k 50; the model card recommends T 1.0, top_p 1.0 and no top-k.
SamplingParams SamplingParamsFromGenerationConfig(const GenerationConfig& config, uint64_t seed);

// argmax of `logits`, ties to the lowest id. Throws tessera::Error for an empty row, a NaN or
// +inf logit, or a row that is all -inf.
int32_t Argmax(std::span<const float> logits);

// exp(x) as the sampler's weights: 0 for x < -87.33654 (and -inf), else a Cephes-style
// polynomial after range reduction, within 2 ulp of exp for x in [-87.33654, 0]; SamplerExp(0)
// is exactly 1. Meant for x <= 0.
float SamplerExp(float x);

// SplitMix64 (Steele, Lea, Flood): advances `state` by the golden gamma and returns its mix.
uint64_t SplitMix64(uint64_t& state);

// xoshiro256** 1.0 (Blackman and Vigna), the sampler's generator.
class Xoshiro256 {
 public:
  // State = four successive SplitMix64 outputs from `seed` (as rand_xoshiro's seed_from_u64).
  explicit Xoshiro256(uint64_t seed);
  // A raw state; must not be all zero (TESSERA_CHECK).
  static Xoshiro256 FromState(uint64_t s0, uint64_t s1, uint64_t s2, uint64_t s3);

  uint64_t Next();
  // (Next() >> 11) * 2^-53: uniform in [0, 1).
  double NextDouble() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

 private:
  Xoshiro256() = default;
  uint64_t s_[4] = {};
};

struct TokenProb {
  int32_t id;
  double prob;
  bool operator==(const TokenProb&) const = default;
};

class Sampler {
 public:
  // Validates `params` (ValidateSamplingParams).
  explicit Sampler(const SamplingParams& params);

  // One token id drawn from `logits` [vocab]. Throws tessera::Error for an empty row, a NaN or
  // +inf logit (naming its index), or a row that is all -inf.
  int32_t Sample(std::span<const float> logits);

  // The distribution Sample draws from: the survivors of the filters with their renormalised
  // probabilities, in increasing id order. Greedy gives the argmax with probability 1. Same
  // errors as Sample; consumes no random draw.
  std::vector<TokenProb> Distribution(std::span<const float> logits);

  // Restarts the generator as if constructed with `seed`.
  void Reseed(uint64_t seed);
  const SamplingParams& params() const { return params_; }

 private:
  // Leaves the survivors' weights in weights_ (0 for filtered tokens) and their chunk sums in
  // chunk_sums_; returns the total.
  double Filter(std::span<const float> logits);
  void ApplyTopP(double total);

  SamplingParams params_;
  Xoshiro256 rng_;
  std::vector<float> weights_;      // [vocab]
  std::vector<double> chunk_sums_;  // [ceil(vocab / kChunk)]
  std::vector<float> scratch_;      // top-k selection
  std::vector<double> bins_;        // top-p histogram
  std::vector<int32_t> boundary_;   // top-p: ids in the bin holding the cut
};

// When a generation loop stops: after a stop token (the token is part of the output) or after
// max_new_tokens tokens, whichever comes first.
class StopCondition {
 public:
  enum class Reason { kNone, kStopToken, kLength };

  // max_new_tokens < 0: no limit; 0: done before the first token. Throws tessera::Error for a
  // negative stop id.
  StopCondition(std::span<const int32_t> stop_tokens, int64_t max_new_tokens);
  // Stops on the generation config's eos_token_id list (gpt-oss: 200002, 199999, 200012).
  static StopCondition FromGenerationConfig(const GenerationConfig& config, int64_t max_new_tokens);

  void AddStopTokens(std::span<const int32_t> stop_tokens);
  bool IsStopToken(int32_t token) const;

  // Records one generated token; returns true when generation must end after it.
  bool Accept(int32_t token);
  // True once a stop token was accepted or the limit reached (including max_new_tokens 0).
  bool done() const { return reason() != Reason::kNone; }
  Reason reason() const;
  int64_t generated() const { return generated_; }
  int64_t max_new_tokens() const { return max_new_tokens_; }
  const std::vector<int32_t>& stop_tokens() const { return stop_tokens_; }

 private:
  std::vector<int32_t> stop_tokens_;  // sorted, unique
  int64_t max_new_tokens_;
  int64_t generated_ = 0;
  bool stopped_on_token_ = false;
};

}  // namespace tessera
