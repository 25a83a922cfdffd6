// A generation session: one sequence, its KV cache, and the prefill -> sample -> decode loop.
//
// The session remembers which tokens its cache holds. Generate() takes the whole token sequence
// the model should see (for a chat: the full rendered conversation) and reuses the longest
// common prefix already in the cache, rolling the cache back when the new sequence diverges
// (falling back to a full prefill when a sliding-window ring cannot roll back that far).
//
// With speculation (SpecOptions, engine/speculative.h) each decode step feeds the last emitted
// token plus up to k drafts from the n-gram index of the history (prompt + generated tokens) in
// one forward pass, emits the verified run, and rolls the cache back over the rejected drafts.
// The emitted tokens are the ones plain decoding emits: the same greedy tokens, and with
// sampling the same tokens for the same seed (one draw per emitted token in both cases).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "engine/sampler.h"
#include "engine/speculative.h"
#include "model/model.h"

namespace tessera {

struct GenerationTimings {
  int64_t prompt_tokens = 0;     // tokens of the sequence passed in
  int64_t prefilled_tokens = 0;  // of those, the ones actually run (the rest were cached)
  int64_t generated_tokens = 0;
  double prefill_ms = 0.0;
  double decode_ms = 0.0;  // from the first sampled token to the last
  double prefill_tok_s() const { return prefill_ms > 0 ? prefilled_tokens * 1e3 / prefill_ms : 0.0; }
  // Decode steps run: every generated token but the last needs one forward pass.
  double decode_tok_s() const {
    return decode_ms > 0 && generated_tokens > 1 ? (generated_tokens - 1) * 1e3 / decode_ms : 0.0;
  }
};

struct GenerationResult {
  std::vector<int32_t> tokens;  // generated ids, a final stop token included
  StopCondition::Reason reason = StopCondition::Reason::kNone;
  GenerationTimings timings;
  SpecStats spec;  // all zero without speculation
};

class Generator {
 public:
  // `context`: the most positions the sequence may reach (prompt + generated).
  Generator(const Model& model, int64_t context, KvType kv_type);

  // Runs `prompt` then samples until `stop` says so. `on_token` sees each generated id as soon
  // as it is sampled; returning false ends generation (reason stays kNone unless the token was a
  // stop token or hit the limit). Throws tessera::Error when prompt + max_new_tokens (or the
  // prompt alone, with no limit) exceeds the context, for invalid `spec` options, or when
  // spec.k exceeds the positions the KV cache can roll back (KvCache::rollback()).
  GenerationResult Generate(std::span<const int32_t> prompt, Sampler& sampler, StopCondition& stop,
                            const std::function<bool(int32_t)>& on_token = {}, const SpecOptions& spec = {});

  // Throws Generate's one-line error when a prompt of `prompt_tokens` plus `max_new_tokens`
  // (negative: no limit) cannot fit the context; Generate checks this first.
  void RequireFits(int64_t prompt_tokens, int64_t max_new_tokens) const;

  // The tokens whose keys and values the cache holds (prompt and generated tokens so far).
  const std::vector<int32_t>& cached_tokens() const { return cached_; }
  int64_t context() const { return cache_.context(); }
  const KvCache& cache() const { return cache_; }
  void Reset();

 private:
  // model_.Forward into logits_; when it throws, cached_ is cut to what the cache still holds.
  void Forward(std::span<const int32_t> tokens, int64_t start, LogitsMode mode);

  const Model& model_;
  KvCache cache_;
  std::vector<int32_t> cached_;
  std::vector<float> logits_;
};

}  // namespace tessera
