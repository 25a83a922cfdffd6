#include "engine/generator.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"

namespace tessera {
namespace {

double MillisSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

Generator::Generator(const GptOssModel& model, int64_t context, KvType kv_type)
    : model_(model), cache_(model.config(), context, kv_type) {
  if (context > model.config().max_position_embeddings) {
    Fail("context size ", context, " exceeds the model's max_position_embeddings ",
         model.config().max_position_embeddings);
  }
}

void Generator::Reset() {
  cache_.Truncate(0);
  cached_.clear();
}

GenerationResult Generator::Generate(std::span<const int32_t> prompt, Sampler& sampler, StopCondition& stop,
                                     const std::function<bool(int32_t)>& on_token) {
  const int64_t P = static_cast<int64_t>(prompt.size());
  if (P == 0) Fail("the prompt is empty");
  const int64_t limit = stop.max_new_tokens();
  if (P > cache_.context() || (limit >= 0 && P + limit > cache_.context() + 1)) {
    Fail("prompt of ", P, " tokens", limit >= 0 ? StrCat(" plus ", limit, " new tokens") : std::string(),
         " exceeds the context size ", cache_.context(), " (raise it with -c)");
  }
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
  model_.Forward(prompt.subspan(keep), keep, cache_, LogitsMode::kLast, logits_);
  cached_.insert(cached_.end(), prompt.begin() + keep, prompt.end());
  result.timings.prefilled_tokens = P - keep;
  result.timings.prefill_ms = MillisSince(t0);

  t0 = std::chrono::steady_clock::now();
  while (!stop.done()) {
    const int32_t token = sampler.Sample(logits_);
    result.tokens.push_back(token);
    const bool finished = stop.Accept(token);
    const bool keep_going = on_token ? on_token(token) : true;
    if (finished || !keep_going) break;
    const int64_t pos = static_cast<int64_t>(cached_.size());
    if (pos >= cache_.context()) break;  // only reachable without a token limit
    const int32_t step[1] = {token};
    model_.Forward(step, pos, cache_, LogitsMode::kLast, logits_);
    cached_.push_back(token);
  }
  result.timings.decode_ms = MillisSince(t0);
  result.timings.generated_tokens = static_cast<int64_t>(result.tokens.size());
  result.reason = stop.reason();
  return result;
}

}  // namespace tessera
