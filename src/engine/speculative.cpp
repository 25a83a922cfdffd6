#include "engine/speculative.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "model/architecture.h"
#include "model/tensor_specs.h"

namespace tessera {

SpecMethod ParseSpecMethod(const std::string& name) {
  if (name == "none") return SpecMethod::kNone;
  if (name == "ngram") return SpecMethod::kNgram;
  Fail("unknown speculation method '", name, "' (expected ngram or none)");
}

const char* SpecMethodName(SpecMethod method) { return method == SpecMethod::kNgram ? "ngram" : "none"; }

void ValidateSpecOptions(const SpecOptions& o) {
  ValidateNgramParams(o.min_n, o.max_n, o.k);
  if (o.cost.empty()) return;
  if (static_cast<int64_t>(o.cost.size()) != o.k + 1) {
    Fail("speculation cost table has ", o.cost.size(), " entries; it needs k + 1 = ", o.k + 1);
  }
  if (o.cost[0] != 1.0) Fail("speculation cost table must start with c(0) = 1 (got ", o.cost[0], ")");
  for (size_t k = 0; k < o.cost.size(); ++k) {
    if (!(o.cost[k] > 0.0) || !std::isfinite(o.cost[k])) {
      Fail("speculation cost c(", k, ") must be a positive finite number (got ", o.cost[k], ")");
    }
  }
}

VerifyResult VerifyDrafts(std::span<const int32_t> drafts, const std::function<int32_t(int64_t)>& target,
                          const std::function<bool(int32_t)>& emit) {
  const int64_t k = static_cast<int64_t>(drafts.size());
  for (int64_t i = 0;; ++i) {
    const int32_t token = target(i);
    const bool match = i < k && token == drafts[static_cast<size_t>(i)];
    const bool more = emit(token);
    if (!match || !more) return {i + 1, match ? i + 1 : i};
  }
}

// ---- cost model --------------------------------------------------------------------------------

DecodeByteModel DecodeBytesOf(const ModelConfig& config, const ModelOptions& options) {
  DecodeByteModel m;
  // Layers with experts (Qwen3-MoE may keep some dense); the dense ones' weights are shared.
  const Architecture& arch = ArchitectureOf(config);
  m.layers = 0;
  for (int64_t l = 0; l < config.num_hidden_layers; ++l) m.layers += PlanLayer(arch, config, l).moe;
  m.experts = config.num_local_experts;
  m.top_k = config.num_experts_per_tok;
  const bool int8 = options.dense == DenseWeights::kInt8;
  double expert_bytes = 0.0;
  for (const TensorSpec& t : ModelTensorSpecs(config)) {
    const double numel = static_cast<double>(t.numel());
    // A matrix as held: int8 rows with a scale each, or as stored (BF16; FP8 one byte).
    const double held = int8 ? numel + 4.0 * static_cast<double>(t.shape[0])
                              : (t.dtype == DType::kF8E4M3 ? 1.0 : 2.0) * numel;
    switch (t.kind) {
      case TensorKind::kEmbedding:
        m.per_token += static_cast<double>(t.shape[1] * 2);  // one BF16 row per token
        if (config.tie_word_embeddings) m.shared += int8 ? numel + 4.0 * t.shape[0] : 2.0 * numel;
        break;
      case TensorKind::kLinearWeight:
      case TensorKind::kRouterWeight:
      case TensorKind::kLmHead:
        m.shared += held;
        break;
      case TensorKind::kExpertBlocks:
      case TensorKind::kExpertScales:
      case TensorKind::kExpertWeight:
        expert_bytes += static_cast<double>(t.nbytes());
        break;
      case TensorKind::kExpertLinear:
        expert_bytes += held;
        break;
      case TensorKind::kInt4Codes:
      case TensorKind::kInt4Zeros:
      case TensorKind::kInt4Scales: {
        // Resident: the codes as stored, one zero byte and one f32 scale per group.
        const double bytes = t.kind == TensorKind::kInt4Codes ? 4.0 * numel : t.kind == TensorKind::kInt4Zeros ? 8.0 * numel : 4.0 * numel;
        (t.name.find(".experts.") != std::string::npos ? expert_bytes : m.shared) += bytes;
        break;
      }
      case TensorKind::kNmValues:
      case TensorKind::kNmBitmask:
        // Held as kept values plus one mask bit per weight: about what is stored.
        (t.name.find(".experts.") != std::string::npos ? expert_bytes : m.shared) += static_cast<double>(t.nbytes());
        break;
      case TensorKind::kInt4Shape:
      case TensorKind::kNmShape:
        break;
      case TensorKind::kExpertBias:
      case TensorKind::kNorm:
      case TensorKind::kLinearBias:
      case TensorKind::kAttentionSinks:
      case TensorKind::kRouterBias:
      case TensorKind::kRouterCorrectionBias:
        break;  // float32 copies of a few KB per layer, as Model::DecodeBytes leaves out
      case TensorKind::kFp8Scales:  // one f32 per 128 x 128 block when held as fp8
        if (!int8) (t.name.find(".experts.") != std::string::npos ? expert_bytes : m.shared) += static_cast<double>(t.nbytes());
        break;
    }
  }
  if (m.layers > 0 && m.experts > 0) m.per_expert = expert_bytes / static_cast<double>(m.layers * m.experts);
  return m;
}

double ExpectedDistinctExperts(int64_t experts, int64_t top_k, int64_t tokens) {
  if (experts <= 0 || tokens <= 0) return 0.0;
  const double e = static_cast<double>(experts);
  const double miss = 1.0 - static_cast<double>(std::min(top_k, experts)) / e;
  return e * (1.0 - std::pow(miss, static_cast<double>(tokens)));
}

std::vector<double> ByteCostRatios(const DecodeByteModel& model, int64_t k_max) {
  const double one = model.Bytes(1, ExpectedDistinctExperts(model.experts, model.top_k, 1));
  std::vector<double> ratios;
  for (int64_t k = 0; k <= k_max; ++k) {
    ratios.push_back(model.Bytes(k + 1, ExpectedDistinctExperts(model.experts, model.top_k, k + 1)) / one);
  }
  return ratios;
}

double ExpectedTokens(std::span<const double> accept, int64_t k) {
  double expected = 1.0, run = 1.0;
  for (int64_t i = 0; i < k && i < static_cast<int64_t>(accept.size()); ++i) {
    run *= accept[static_cast<size_t>(i)];
    expected += run;
  }
  return expected;
}

double ExpectedTokensIid(double alpha, int64_t k) {
  if (alpha >= 1.0) return static_cast<double>(k + 1);
  return (1.0 - std::pow(alpha, static_cast<double>(k + 1))) / (1.0 - alpha);
}

// ---- SpecController ------------------------------------------------------------------------------

SpecController::SpecController(int64_t k_max, bool adaptive, std::vector<double> prior_cost, bool fixed_cost)
    : k_max_(k_max), adaptive_(adaptive), fixed_cost_(fixed_cost), prior_(std::move(prior_cost)) {
  TESSERA_CHECK(k_max_ >= 0 && static_cast<int64_t>(prior_.size()) == k_max_ + 1);
  seconds_.assign(static_cast<size_t>(k_max_ + 1), -1.0);
  tried_.assign(static_cast<size_t>(k_max_), 0.0);
  confirmed_.assign(static_cast<size_t>(k_max_), 0.0);
}

double SpecController::acceptance(int64_t i) const {
  TESSERA_CHECK(i >= 1 && i <= k_max_);
  return (confirmed_[static_cast<size_t>(i - 1)] + 1.0) / (tried_[static_cast<size_t>(i - 1)] + 2.0);
}

double SpecController::cost(int64_t k) const {
  TESSERA_CHECK(k >= 0 && k <= k_max_);
  if (k == 0) return 1.0;
  const double t0 = seconds_[0], tk = seconds_[static_cast<size_t>(k)];
  if (!fixed_cost_ && t0 > 0.0 && tk > 0.0) return tk / t0;
  return prior_[static_cast<size_t>(k)] * scale_;
}

int64_t SpecController::Choose(int64_t available) {
  const int64_t n = std::min(available, k_max_);
  if (n <= 0) return 0;
  if (!adaptive_) return n;
  int64_t best_k = 0;
  double best_rate = 1.0;  // k = 0: one token per decode step
  double expected = 1.0, run = 1.0;
  for (int64_t k = 1; k <= n; ++k) {
    run *= acceptance(k);
    expected += run;
    const double rate = expected / cost(k);
    if (rate > best_rate) {
      best_rate = rate;
      best_k = k;
    }
  }
  if (best_k > 0) {
    idle_ = 0;
    return best_k;
  }
  if (++idle_ >= kProbeInterval) {
    idle_ = 0;
    return 1;
  }
  return 0;
}

void SpecController::RecordOutcome(int64_t drafted, int64_t accepted) {
  TESSERA_CHECK(drafted >= 1 && drafted <= k_max_ && accepted >= 0 && accepted <= drafted);
  for (size_t i = 0; i < tried_.size(); ++i) {
    tried_[i] *= kDecay;
    confirmed_[i] *= kDecay;
  }
  // Position i was tried iff drafts 1..i-1 were confirmed.
  const int64_t tried = std::min(accepted + 1, drafted);
  for (int64_t i = 0; i < tried; ++i) tried_[static_cast<size_t>(i)] += 1.0;
  for (int64_t i = 0; i < accepted; ++i) confirmed_[static_cast<size_t>(i)] += 1.0;
}

void SpecController::RecordTime(int64_t k, double seconds) {
  TESSERA_CHECK(k >= 0 && k <= k_max_);
  if (fixed_cost_ || !(seconds > 0.0)) return;
  double& s = seconds_[static_cast<size_t>(k)];
  s = s < 0.0 ? seconds : (1.0 - kTimeSmoothing) * s + kTimeSmoothing * seconds;
  if (k > 0 && seconds_[0] > 0.0) {
    const double ratio = (seconds / seconds_[0]) / prior_[static_cast<size_t>(k)];
    scale_ = (1.0 - kTimeSmoothing) * scale_ + kTimeSmoothing * ratio;
  }
}

}  // namespace tessera
