// Perplexity of a model on a token sequence, evaluated in fixed-length windows (the strided
// method of the transformers documentation, "Perplexity of fixed-length models"):
//
//   for begin = 0, stride, 2 stride, ... while the previous window did not reach the end:
//     end = min(begin + context, n); run tokens [begin, end) from position 0 in a fresh cache;
//     score the tokens the previous window did not score, [max(previous end, begin + 1), end),
//     each from the logits of the position before it.
//
// So no token is scored twice, and every token after the first window has at least
// context - stride tokens of left context. With stride < context every token but the first is
// scored; with stride = context (disjoint windows) each window's first token has no context and
// is not scored, as in transformers.
// NLL of a token = logsumexp(logits) - logits[token], in double. Perplexity = exp(mean NLL); its
// standard error by the delta method, exp(mean) * stderr(mean NLL).
// With a reference model (the same checkpoint on the exact path, say), every scored position is
// also compared with the reference's distribution over the same windows, as llama.cpp's
// --kl-divergence: KL(reference || model) in nats (mean and max) and how often both put the same
// token first.
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "model/model.h"

namespace tessera {

struct PerplexityOptions {
  int64_t context = 0;  // window length, 2 <= context <= max_position_embeddings
  int64_t stride = 0;   // 1 <= stride <= context; 0 means context (disjoint windows)
  KvType kv_type = KvType::kF32;
  const Model* reference = nullptr;  // optional; same vocabulary
};

struct PerplexityResult {
  int64_t tokens = 0;   // of the sequence
  int64_t scored = 0;   // tokens whose NLL was taken
  int64_t windows = 0;  // forward passes
  double mean_nll = 0.0;
  double nll_stderr = 0.0;  // standard error of mean_nll (sample sd / sqrt(scored)); 0 for one token
  double seconds = 0.0;     // time in the forward passes and scoring
  // Against options.reference (zero without one):
  double mean_kl = 0.0, max_kl = 0.0;
  double top1_agreement = 0.0;  // fraction of scored positions with the same argmax
  double perplexity() const;
  double perplexity_stderr() const;
  double tokens_per_second() const { return seconds > 0 ? static_cast<double>(scored) / seconds : 0.0; }
};

// `on_window(done, total, result so far)` after each window (progress). Throws tessera::Error
// for fewer than 2 tokens or options outside the ranges above.
PerplexityResult EvaluatePerplexity(const Model& model, std::span<const int32_t> tokens,
                                    const PerplexityOptions& options,
                                    const std::function<void(int64_t, int64_t, const PerplexityResult&)>& on_window = {});

// -log softmax(logits)[target] of one row, in double.
double TokenNll(std::span<const float> logits, int32_t target);
// KL(softmax(reference) || softmax(logits)) of one row, in double (nats).
double RowKl(std::span<const float> reference, std::span<const float> logits);

}  // namespace tessera
