// Speculative decoding with point-mass drafts: verification, statistics and the cost-aware choice
// of the draft length (../shared/reference/speculative-ngram.md §3, §4, §7).
//
// Verification. Drafts d_1..d_k are fed after the last emitted token y in ONE forward pass over
// k + 1 positions; row i of its logits is the target's distribution for the token after d_i
// (row 0: after y). Because the model's kernels are batch-invariant, row i is bit for bit the row
// token-by-token decoding would compute once d_1..d_i had been emitted. VerifyDrafts walks the
// rows in order: z_{i+1} = target(row i), emitted at once; it stops after the first z that
// differs from its draft (the target's correction) or after row k (the bonus token, every draft
// accepted). So a step emits accepted + 1 tokens; the positions of the rejected drafts are
// rolled back from the KV cache by the caller.
//
// target(row) is the ordinary sampler on that row (the same temperature / top-k / top-p / min-p
// transform, sampler.h), so:
//   - greedy (T = 0): target = argmax: accept the longest prefix of drafts equal to the argmax,
//     then emit the argmax (§3);
//   - sampling: z ~ p and accept iff z = d. For a point-mass draft this IS the lossless rule of
//     §4: P(accept) = P(z = d) = p(d); given rejection, z is distributed as p with d removed and
//     renormalised (P(z = y | z != d) = p(y) / (1 - p(d))). It draws one random number per
//     emitted token, exactly what plain decoding draws, so with the same seed speculative and
//     plain decoding emit the SAME tokens whatever drafts were proposed (tests check this, and
//     the frequencies of both branches against p).
//
// Cost-aware k (§7). A verification of k drafts costs c(k) decode steps (c(0) = 1) and emits
// E(k) = 1 + sum_{j=1..k} prod_{i<=j} a_i tokens, a_i = P(draft i accepted | drafts < i were):
// per-position conditional rates capture that n-gram acceptance is bursty (a copied run goes on
// once it has started). SpecController picks the k in [0, drafts available] maximising E(k) /
// c(k), i.e. tokens per second. a_i are decayed counts (recent verifications weigh more) with a
// Beta(1, 1) prior; c(k) starts from the byte model below and follows measured step times once a
// k has been run. When the model keeps choosing k = 0 although drafts exist, every
// kProbeInterval-th such step drafts one token anyway, so acceptance that has improved is seen.
//
// Byte model (for the prior and for the benchmark's target): one forward over n tokens reads the
// shared weights once (attention projections, router, lm_head; BF16 or int8 as loaded) plus,
// per layer, every DISTINCT expert its n tokens route to, plus n embedding rows; for n = 1 it is
// Model::DecodeBytes without the KV rows (norms and biases, a few KB, left out). With
// independent uniform routing the expected distinct experts per layer are
// E (1 - (1 - K/E)^n) (§7: gpt-oss-20b 4, 7.5, 13.2, 21.0 for n = 1, 2, 4, 8).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "engine/ngram.h"
#include "io/config.h"
#include "model/model.h"

namespace tessera {

enum class SpecMethod { kNone, kNgram };
// "none" | "ngram"; anything else is a one-line tessera::Error.
SpecMethod ParseSpecMethod(const std::string& name);
const char* SpecMethodName(SpecMethod method);

struct SpecOptions {
  SpecMethod method = SpecMethod::kNone;
  int64_t k = kDefaultSpecK;  // most drafted tokens per step
  int64_t min_n = kDefaultNgramMinN;
  int64_t max_n = kDefaultNgramMaxN;
  bool adaptive = true;  // choose k per step (cost model); false: draft every token available
  // c(0..k) to use instead of the byte-model prior and measured times (c[0] = 1); empty: measure.
  std::vector<double> cost;
};

// One-line tessera::Error for k < 0, min_n < 1, min_n > max_n, or a cost table that is not
// k + 1 positive finite numbers starting with 1.
void ValidateSpecOptions(const SpecOptions& options);

struct SpecStats {
  int64_t proposed = 0;      // drafts sent to verification
  int64_t accepted = 0;      // drafts the target confirmed
  int64_t verify_steps = 0;  // forward passes that verified at least one draft
  int64_t decode_steps = 0;  // every forward pass after the prefill
  double acceptance_rate() const { return proposed > 0 ? static_cast<double>(accepted) / proposed : 0.0; }
  // Tokens per verification step, the confirmed drafts plus the target's own token (vLLM's
  // "mean acceptance length"); 0 before any verification.
  double mean_accepted_len() const {
    return verify_steps > 0 ? 1.0 + static_cast<double>(accepted) / verify_steps : 0.0;
  }
};

struct VerifyResult {
  int64_t emitted = 0;   // tokens passed to emit (1 .. k + 1)
  int64_t accepted = 0;  // of the drafts, those emitted unchanged
};

// The verification walk described above. target(i), i = 0..k, is called lazily, in order, and
// only for rows whose token is emitted; emit(token) returns false to stop early (a stop token,
// the caller's limit), in which case no further target is evaluated.
VerifyResult VerifyDrafts(std::span<const int32_t> drafts, const std::function<int32_t(int64_t)>& target,
                          const std::function<bool(int32_t)>& emit);

// ---- cost model --------------------------------------------------------------------------------

struct DecodeByteModel {
  double shared = 0.0;      // bytes read once per forward, whatever its token count
  double per_token = 0.0;   // bytes read per token (its embedding row)
  double per_expert = 0.0;  // one expert of one layer: both projections' codes and scales
  int64_t layers = 0, experts = 0, top_k = 0;
  // Bytes one forward over `tokens` positions reads when they route to `distinct` experts per
  // layer on average.
  double Bytes(int64_t tokens, double distinct) const {
    return shared + per_token * static_cast<double>(tokens) + per_expert * distinct * static_cast<double>(layers);
  }
};

// From the tensor description (model/tensor_specs.h): experts as stored (MXFP4 codes and
// scales; the fast path's repacked layout has the same sizes), dense matrices at 2 bytes a
// weight, or 1 byte plus a float scale per row with DenseWeights::kInt8.
DecodeByteModel DecodeBytesOf(const ModelConfig& config, const ModelOptions& options);

// E (1 - (1 - K/E)^n): expected distinct experts of n tokens under independent uniform routing.
double ExpectedDistinctExperts(int64_t experts, int64_t top_k, int64_t tokens);

// bytes(k + 1) / bytes(1) for k = 0..k_max with ExpectedDistinctExperts.
std::vector<double> ByteCostRatios(const DecodeByteModel& model, int64_t k_max);

// E(k) for per-position conditional acceptance rates accept[0..k-1] (formula above).
double ExpectedTokens(std::span<const double> accept, int64_t k);
// The i.i.d. case, acceptance alpha at every position: (1 - alpha^(k+1)) / (1 - alpha).
double ExpectedTokensIid(double alpha, int64_t k);

class SpecController {
 public:
  static constexpr double kDecay = 0.9;         // weight of the past per recorded verification
  static constexpr double kTimeSmoothing = 0.25;  // weight of a new step time in its average
  static constexpr int64_t kProbeInterval = 16;

  // prior_cost: c(0..k_max). fixed_cost: never replace it with measured times. adaptive false:
  // Choose returns every draft available (up to k_max).
  SpecController(int64_t k_max, bool adaptive, std::vector<double> prior_cost, bool fixed_cost);

  // The draft length for a step with `available` drafts.
  int64_t Choose(int64_t available);
  // A verification of `drafted` drafts that ran to its end with `accepted` of them confirmed.
  void RecordOutcome(int64_t drafted, int64_t accepted);
  // Wall time of a whole step (forward and sampling) that verified k drafts.
  void RecordTime(int64_t k, double seconds);

  double cost(int64_t k) const;          // current c(k)
  double acceptance(int64_t i) const;    // current a_i, i = 1..k_max
  int64_t k_max() const { return k_max_; }

 private:
  int64_t k_max_;
  bool adaptive_;
  bool fixed_cost_;
  std::vector<double> prior_;     // [k_max + 1]
  std::vector<double> seconds_;   // [k_max + 1] smoothed step time, < 0 until measured
  double scale_ = 1.0;            // smoothed measured / prior cost, for k not measured yet
  std::vector<double> tried_, confirmed_;  // [k_max] decayed counts per draft position
  int64_t idle_ = 0;              // consecutive steps with drafts where 0 was chosen
};

}  // namespace tessera
