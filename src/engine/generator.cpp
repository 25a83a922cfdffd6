#include "engine/generator.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "core/error.h"

namespace tessera {
namespace {

double MillisSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

// The cache checks the context against max_position_embeddings and allocates only as the
// sequence grows.
Generator::Generator(const Model& model, int64_t context, KvType kv_type)
    : model_(model), cache_(model.cache_config(), context, kv_type) {}

void Generator::Forward(std::span<const int32_t> tokens, int64_t start, LogitsMode mode) {
  try {
    model_.Forward(tokens, start, cache_, mode, logits_);
  } catch (...) {
    // The cache may now hold fewer positions (KvCache::AbortAppend); remember only those.
    if (static_cast<int64_t>(cached_.size()) > cache_.length()) cached_.resize(cache_.length());
    throw;
  }
}

void Generator::RequireFits(int64_t prompt_tokens, int64_t max_new_tokens) const {
  // The last generated token is never fed back, hence context + 1.
  if (prompt_tokens > cache_.context() || (max_new_tokens >= 0 && prompt_tokens + max_new_tokens > cache_.context() + 1)) {
    Fail("prompt of ", prompt_tokens, " tokens",
         max_new_tokens >= 0 ? StrCat(" plus ", max_new_tokens, " new tokens") : std::string(),
         " exceeds the context size ", cache_.context(), " (raise it with -c)");
  }
}

void Generator::Reset() {
  cache_.Truncate(0);
  cached_.clear();
}

GenerationResult Generator::Generate(std::span<const int32_t> prompt, Sampler& sampler, StopCondition& stop,
                                     const std::function<bool(int32_t)>& on_token, const SpecOptions& spec) {
  const int64_t P = static_cast<int64_t>(prompt.size());
  if (P == 0) Fail("the prompt is empty");
  const int64_t limit = stop.max_new_tokens();
  RequireFits(P, limit);
  const bool speculate = spec.method != SpecMethod::kNone;
  TensorParallelGroup* tp = model_.options().tp && model_.options().tp->size() > 1 ? model_.options().tp.get() : nullptr;
  if (speculate) {
    ValidateSpecOptions(spec);
    // A step rolls back at most k positions (the rejected drafts); a sliding ring keeps only
    // window + rollback() slots.
    if (spec.k > cache_.rollback()) {
      Fail("speculation drafts up to ", spec.k, " tokens but the KV cache can roll back only ", cache_.rollback(),
           " positions (lower k)");
    }
  }
  // Room for what this request can reach, reserved before any work (a one-line error naming the
  // bytes when it cannot fit); the cache keeps growing on demand without a limit.
  cache_.Reserve(limit >= 0 ? std::min(cache_.context(), P + limit) : P);
  GenerationResult result;
  result.timings.prompt_tokens = P;

  // Reuse the cached prefix; at least the last prompt token is run, to get its logits.
  int64_t keep = 0;
  const int64_t common_limit = std::min<int64_t>(P - 1, static_cast<int64_t>(cached_.size()));
  while (keep < common_limit && cached_[keep] == prompt[keep]) ++keep;
  try {
    cache_.Truncate(keep);
  } catch (const Error&) {
    keep = 0;  // a sliding ring no longer holds what `keep` needs: start over
    cache_.Truncate(0);
  }
  cached_.resize(keep);

  auto t0 = std::chrono::steady_clock::now();
  Forward(prompt.subspan(keep), keep, LogitsMode::kLast);
  cached_.insert(cached_.end(), prompt.begin() + keep, prompt.end());
  result.timings.prefilled_tokens = P - keep;
  result.timings.prefill_ms = MillisSince(t0);

  // The n-gram index sees the whole history: the prompt, then every emitted token.
  std::optional<NgramIndex> index;
  std::optional<SpecController> controller;
  if (speculate) {
    index.emplace(spec.min_n, spec.max_n);
    index->Append(prompt);
    const bool fixed = !spec.cost.empty();
    controller.emplace(spec.k, spec.adaptive,
                       fixed ? spec.cost : ByteCostRatios(DecodeBytesOf(model_.config(), model_.options()), spec.k),
                       fixed);
  }
  int32_t next = -1;  // the last emitted token: not yet in the cache
  auto emit = [&](int32_t token) {
    next = token;
    result.tokens.push_back(token);
    if (index) index->Append(token);
    const bool finished = stop.Accept(token);
    const bool keep_going = on_token ? on_token(token) : true;
    return !finished && keep_going;
  };

  t0 = std::chrono::steady_clock::now();
  bool going = !stop.done() && emit(sampler.Sample(logits_));
  std::vector<int32_t> drafts, feed;
  const int64_t V = model_.vocab_size();
  while (going) {
    const int64_t pos = static_cast<int64_t>(cached_.size());  // where `next` goes
    if (pos >= cache_.context()) break;  // only reachable without a token limit
    const auto step_t0 = std::chrono::steady_clock::now();
    drafts.clear();
    if (speculate) {
      // More drafts than tokens still allowed could never be emitted; Propose also keeps the
      // step inside the context (pos + 1 + k <= context).
      const int64_t room = limit >= 0 ? limit - stop.generated() - 1 : spec.k;
      index->Propose(std::min(spec.k, room), cache_.context(), drafts);
      int64_t chosen = controller->Choose(static_cast<int64_t>(drafts.size()));
      // Every rank of a tensor-parallel job times its own steps; they must still run the same
      // forward, so rank 0's choice (from the same drafts on every rank) is the job's.
      if (tp != nullptr) chosen = tp->BroadcastFromFirst(chosen);
      drafts.resize(static_cast<size_t>(chosen));
    }
    const int64_t k = static_cast<int64_t>(drafts.size());
    feed.assign(1, next);
    feed.insert(feed.end(), drafts.begin(), drafts.end());
    Forward(feed, pos, LogitsMode::kAll);  // rows [k + 1, V]
    const VerifyResult v = VerifyDrafts(
        drafts, [&](int64_t row) { return sampler.Sample(std::span<const float>(logits_).subspan(row * V, V)); },
        [&](int32_t token) { return going = emit(token); });
    // Keep `next` and the confirmed drafts: the positions of the tokens emitted before the last.
    if (v.emitted < k + 1) cache_.Truncate(pos + v.emitted);
    cached_.insert(cached_.end(), feed.begin(), feed.begin() + v.emitted);
    if (speculate) {
      SpecStats& st = result.spec;
      ++st.decode_steps;
      if (k > 0) {
        ++st.verify_steps;
        st.proposed += k;
        st.accepted += v.accepted;
      }
      controller->RecordTime(k, MillisSince(step_t0) * 1e-3);
      if (k > 0 && going) controller->RecordOutcome(k, v.accepted);
    }
  }
  result.timings.decode_ms = MillisSince(t0);
  result.timings.generated_tokens = static_cast<int64_t>(result.tokens.size());
  result.reason = stop.reason();
  return result;
}

}  // namespace tessera
