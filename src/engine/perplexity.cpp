#include "engine/perplexity.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <vector>

#include "core/error.h"

namespace tessera {

double PerplexityResult::perplexity() const { return std::exp(mean_nll); }

double PerplexityResult::perplexity_stderr() const { return perplexity() * nll_stderr; }

namespace {

double LogSumExp(std::span<const float> v) {
  double max = -INFINITY;
  for (const float x : v) max = std::max(max, static_cast<double>(x));
  double sum = 0.0;
  for (const float x : v) sum += std::exp(static_cast<double>(x) - max);
  return max + std::log(sum);
}

// RowKl with the model row's log-sum-exp given (the NLL of the same row already needs it).
double RowKlGivenLse(std::span<const float> reference, std::span<const float> logits, double lse) {
  const double lse_ref = LogSumExp(reference);
  double kl = 0.0;
  for (size_t i = 0; i < reference.size(); ++i) {
    const double log_p = static_cast<double>(reference[i]) - lse_ref;
    kl += std::exp(log_p) * (log_p - (static_cast<double>(logits[i]) - lse));
  }
  return std::max(kl, 0.0);
}

}  // namespace

double RowKl(std::span<const float> reference, std::span<const float> logits) {
  return RowKlGivenLse(reference, logits, LogSumExp(logits));
}

double TokenNll(std::span<const float> logits, int32_t target) {
  return LogSumExp(logits) - static_cast<double>(logits[static_cast<size_t>(target)]);
}

PerplexityResult EvaluatePerplexity(const Model& model, std::span<const int32_t> tokens,
                                    const PerplexityOptions& options,
                                    const std::function<void(int64_t, int64_t, const PerplexityResult&)>& on_window) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int64_t max_positions = model.config().max_position_embeddings;
  const int64_t context = options.context;
  const int64_t stride = options.stride == 0 ? context : options.stride;
  if (n < 2) Fail("perplexity needs at least 2 tokens (got ", n, ")");
  if (context < 2 || (max_positions > 0 && context > max_positions)) {
    Fail("perplexity: context ", context, " must lie in [2, ", max_positions, "] (max_position_embeddings)");
  }
  if (stride < 1 || stride > context) Fail("perplexity: stride ", stride, " must lie in [1, ", context, "]");
  const Model* reference = options.reference;
  if (reference != nullptr && reference->vocab_size() != model.vocab_size()) {
    Fail("perplexity: the reference model's vocabulary (", reference->vocab_size(), ") differs from the model's (",
         model.vocab_size(), ")");
  }
  // Windows start at 0, stride, ... until one reaches the end.
  const int64_t windows = n <= context ? 1 : 1 + (n - context + stride - 1) / stride;

  PerplexityResult result;
  result.tokens = n;
  const int64_t V = model.vocab_size();
  KvCache cache(model.cache_config(), std::min(context, n), options.kv_type);
  std::vector<float> logits, ref_logits;
  std::optional<KvCache> ref_cache;
  if (reference != nullptr) ref_cache.emplace(reference->cache_config(), std::min(context, n), options.kv_type);
  double kl_sum = 0.0;
  int64_t agree = 0;
  // Welford's running mean and sum of squared deviations of the NLLs.
  double mean = 0.0, m2 = 0.0;
  int64_t scored_end = 1;  // tokens [1, scored_end) are scored
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t w = 0; w < windows; ++w) {
    const int64_t begin = w * stride, end = std::min(begin + context, n);
    const int64_t first = std::max(scored_end, begin + 1);  // first token this window scores
    model.Forward(tokens.subspan(begin, end - begin), 0, cache, LogitsMode::kAll, logits);
    if (reference != nullptr) {
      reference->Forward(tokens.subspan(begin, end - begin), 0, *ref_cache, LogitsMode::kAll, ref_logits);
    }
    for (int64_t t = first; t < end; ++t) {
      const int64_t row = t - 1 - begin;  // the position that predicts token t
      const std::span<const float> row_logits = std::span<const float>(logits).subspan(row * V, V);
      const double lse = LogSumExp(row_logits);
      const double nll = lse - static_cast<double>(row_logits[static_cast<size_t>(tokens[t])]);
      if (reference != nullptr) {
        const std::span<const float> ref_row = std::span<const float>(ref_logits).subspan(row * V, V);
        const double kl = RowKlGivenLse(ref_row, row_logits, lse);
        kl_sum += kl;
        result.max_kl = std::max(result.max_kl, kl);
        agree += std::max_element(ref_row.begin(), ref_row.end()) - ref_row.begin() ==
                 std::max_element(row_logits.begin(), row_logits.end()) - row_logits.begin();
      }
      ++result.scored;
      const double delta = nll - mean;
      mean += delta / static_cast<double>(result.scored);
      m2 += delta * (nll - mean);
    }
    scored_end = std::max(scored_end, end);
    result.windows = w + 1;
    result.mean_nll = mean;
    if (reference != nullptr && result.scored > 0) {
      result.mean_kl = kl_sum / static_cast<double>(result.scored);
      result.top1_agreement = static_cast<double>(agree) / static_cast<double>(result.scored);
    }
    result.nll_stderr =
        result.scored > 1 ? std::sqrt(m2 / static_cast<double>(result.scored - 1) / static_cast<double>(result.scored)) : 0.0;
    result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (on_window) on_window(w + 1, windows, result);
  }
  return result;
}

}  // namespace tessera
