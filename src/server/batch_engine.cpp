#include "server/batch_engine.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"
#include "parallel/communicator.h"
#include "model/tensor_parallel.h"

namespace tessera {

// ---- RequestHandle ------------------------------------------------------------------------------

bool RequestHandle::Wait(std::vector<TokenEvent>& out, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait_for(lock, timeout, [&] { return !events_.empty() || done_; });
  if (events_.empty()) return false;
  for (TokenEvent& e : events_) out.push_back(std::move(e));
  events_.clear();
  return true;
}
bool RequestHandle::done() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return done_;
}
FinishReason RequestHandle::finish_reason() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return reason_;
}
std::string RequestHandle::error() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return error_;
}
int64_t RequestHandle::cached_tokens() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return cached_tokens_;
}
int64_t RequestHandle::generated_tokens() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return generated_;
}
double RequestHandle::queue_seconds() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return queue_seconds_;
}
void RequestHandle::Cancel() { cancelled_.store(true); }

// ---- engine state -------------------------------------------------------------------------------

struct BatchEngine::Slot {
  KvCache cache;
  std::vector<int32_t> cached;  // the tokens whose keys and values the cache holds
  bool busy = false;
  int64_t index = 0;            // in slots_ (the plans name slots by it)
  Slot(const ModelConfig& config, int64_t context, KvType type) : cache(config, context, type) {}
};

struct BatchEngine::Sequence {
  std::shared_ptr<RequestHandle> handle;
  EngineRequest request;
  Sampler sampler;
  std::chrono::steady_clock::time_point submitted;
  Slot* slot = nullptr;
  std::vector<int32_t> tokens;  // prompt, then the generated ids
  int64_t computed = 0;         // positions of `tokens` in the slot's cache
  int64_t generated = 0;
  std::vector<float> logits;
  // --spec ngram
  std::unique_ptr<NgramIndex> ngram;       // the history drafts are copied from
  std::unique_ptr<SpecController> spec;    // the draft length per step
  std::vector<int32_t> feed;               // a decode step's input: the last token, then drafts
  std::unique_ptr<GrammarState> grammar;   // structured outputs: where the reply is in its grammar
  std::vector<float> shaped;               // a logits row plus logit_bias and the grammar's mask
  Sequence(std::shared_ptr<RequestHandle> h, EngineRequest r)
      : handle(std::move(h)), request(std::move(r)), sampler(request.sampling), tokens(request.prompt) {
    if (request.grammar) grammar = std::make_unique<GrammarState>(request.grammar);
  }
  int64_t prompt_size() const { return static_cast<int64_t>(request.prompt.size()); }
};

namespace {

// The raw log-softmax of `logits` at `chosen` and its `top` largest entries (ties: lower id).
void Logprobs(std::span<const float> logits, int32_t chosen, int top, TokenEvent& event) {
  float max = -INFINITY;
  for (float v : logits) max = std::max(max, v);
  double sum = 0.0;
  for (float v : logits) sum += std::exp(static_cast<double>(v) - max);
  const double log_sum = std::log(sum) + max;
  event.chosen = {chosen, static_cast<float>(logits[chosen] - log_sum)};
  if (top <= 0) return;
  std::vector<int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  const size_t n = std::min<size_t>(static_cast<size_t>(top), ids.size());
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n), ids.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  for (size_t i = 0; i < n; ++i) event.top.push_back({ids[i], static_cast<float>(logits[ids[i]] - log_sum)});
}

// Plans (BatchEngine::Follow): {kPlanStop}, or {kPlanStep, ops, (slot, length, source) x ops, entries,
// (slot, start, mode, tokens, ids...) x entries}.
constexpr int64_t kPlanStop = 0, kPlanStep = 1;

int64_t CommonPrefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b, int64_t limit) {
  int64_t n = 0;
  const int64_t end = std::min<int64_t>({limit, static_cast<int64_t>(a.size()), static_cast<int64_t>(b.size())});
  while (n < end && a[n] == b[n]) ++n;
  return n;
}

}  // namespace

BatchEngine::BatchEngine(const Model& model, const BatchEngineOptions& options)
    : model_(model), bytes_(DecodeBytesOf(model.config(), model.options())), options_(options) {
  if (options.slots < 1 || options.slots > 1024) Fail("serve: --parallel ", options.slots, " must lie in [1, 1024]");
  if (options.context < 2) Fail("serve: the context ", options.context, " must be at least 2");
  if (options.token_budget < 1) Fail("serve: the step token budget ", options.token_budget, " must be at least 1");
  if (options.max_waiting < 0) Fail("serve: the queue length ", options.max_waiting, " must not be negative");
  if (options.spec.method != SpecMethod::kNone) {
    ValidateSpecOptions(options.spec);
    if (options.spec_rows < 1) Fail("serve: --spec-rows ", options.spec_rows, " must be at least 1");
    spec_cost_ = options.spec.cost.empty() ? ByteCostRatios(bytes_, options.spec.k) : options.spec.cost;
  }
  for (int64_t i = 0; i < options.slots; ++i) {
    slots_.push_back(std::make_unique<Slot>(model.cache_config(), options.context, options.kv_type));
    slots_.back()->index = i;
  }
  if (model.options().tp && model.options().tp->size() > 1) {
    if (model.options().tp->rank() != 0) Fail("serve: the batch engine runs on rank 0; other ranks follow it");
    if (!MpiAllowsOtherThreads()) {
      Fail("serve --tp: the MPI library does not allow MPI calls from the engine thread (needs MPI_THREAD_SERIALIZED)");
    }
    tp_ = model.options().tp;
  }
  // Copied rows equal computed ones unless the rope's frequencies depend on the sequence's history.
  share_prefixes_ = !model.rope().length_dependent();
  stats_.slots = options.slots;
  stats_.kv_capacity = options.slots * options.context;
  stats_.kv_bytes_bound = KvBytesBound();
  thread_ = std::thread([this] { Loop(); });
}

BatchEngine::~BatchEngine() { Shutdown(); }

uint64_t BatchEngine::KvBytesBound() const {
  return KvCache::BytesFor(model_.cache_config(), options_.context, options_.kv_type) *
         static_cast<uint64_t>(options_.slots);
}

std::shared_ptr<RequestHandle> BatchEngine::Submit(EngineRequest request) {
  const int64_t P = static_cast<int64_t>(request.prompt.size());
  if (P == 0) Fail("the prompt is empty");
  if (P >= options_.context) {
    Fail("the prompt has ", P, " tokens; the context of ", options_.context,
         " leaves no room for a reply (at most ", options_.context - 1, " prompt tokens)");
  }
  const int64_t vocab = model_.config().vocab_size;
  for (int32_t id : request.prompt) {
    if (id < 0 || id >= vocab) Fail("token id ", id, " lies outside the vocabulary [0, ", vocab, ")");
  }
  for (int32_t id : request.stop_tokens) {
    if (id < 0 || id >= vocab) Fail("stop token id ", id, " lies outside the vocabulary [0, ", vocab, ")");
  }
  if (request.top_logprobs > 20) Fail("top_logprobs ", request.top_logprobs, " exceeds 20");
  for (const auto& [id, bias] : request.logit_bias) {
    if (id < 0 || id >= vocab) Fail("logit_bias token id ", id, " lies outside the vocabulary [0, ", vocab, ")");
    if (!std::isfinite(bias)) Fail("logit_bias of token ", id, " is not finite");
  }
  auto handle = std::make_shared<RequestHandle>();
  handle->prompt_tokens_ = P;
  if (request.max_tokens == 0) {
    // Nothing to generate: the reply is empty (the prompt was still checked).
    handle->done_ = true;
    handle->reason_ = FinishReason::kLength;
    return handle;
  }
  auto seq = std::make_unique<Sequence>(handle, std::move(request));  // validates the sampling
  seq->submitted = std::chrono::steady_clock::now();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_ || static_cast<int64_t>(waiting_.size()) >= options_.max_waiting + std::max<int64_t>(
                                                                 0, options_.slots - static_cast<int64_t>(running_.size()))) {
      ++stats_.requests_rejected;
      return nullptr;
    }
    waiting_.push_back(std::move(seq));
  }
  cv_.notify_all();
  return handle;
}

void BatchEngine::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

BatchEngineStats BatchEngine::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

// Called with mutex_ held.
void BatchEngine::Finish(Sequence& seq, FinishReason reason, const std::string& error) {
  if (seq.slot) {
    seq.slot->busy = false;  // keeps its cached tokens for a later prompt with the same prefix
    seq.slot = nullptr;
  }
  switch (reason) {
    case FinishReason::kCancelled: ++stats_.requests_cancelled; break;
    case FinishReason::kError: ++stats_.requests_failed; break;
    default: ++stats_.requests_finished;
  }
  {
    std::lock_guard<std::mutex> lock(seq.handle->mutex_);
    seq.handle->done_ = true;
    seq.handle->reason_ = reason;
    seq.handle->error_ = error;
  }
  seq.handle->cv_.notify_all();
}

// Called with mutex_ held: waiting requests into free slots, first come first served. A request
// whose prompt starts with positions that a running sequence holds in its cache copies them
// (KvCache::CopyPrefixFrom) instead of running them again; one whose prefix a running sequence
// is still prefilling (the n choices of one request, or requests with the same long system
// prompt) waits for it, and the requests behind it may go first meanwhile.
void BatchEngine::Admit() {
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    Sequence& seq = **it;
    const int64_t limit = seq.prompt_size() - 1;  // the last prompt token runs to give logits
    Slot* best = nullptr;
    int64_t best_keep = -1;
    for (const auto& slot : slots_) {
      if (slot->busy) continue;
      const int64_t keep = CommonPrefix(slot->cached, seq.tokens, limit);
      if (keep > best_keep) best = slot.get(), best_keep = keep;
    }
    if (!best) return;
    Slot* source = nullptr;
    int64_t shared = best_keep, pending = 0;
    if (share_prefixes_) {
      for (const auto& other : running_) {
        const int64_t held = CommonPrefix(other->slot->cached, seq.tokens, limit);
        if (held > shared) source = other->slot, shared = held;
        if (other->computed < other->prompt_size()) {
          pending = std::max(pending, CommonPrefix(other->request.prompt, seq.tokens, limit));
        }
      }
    }
    if (pending > shared) {
      ++it;  // held until that prefill has reached the shared prefix
      continue;
    }
    std::unique_ptr<Sequence> owned = std::move(*it);
    it = waiting_.erase(it);
    try {
      try {
        Truncate(*best, best_keep);
      } catch (const Error&) {
        best_keep = 0;  // a sliding ring no longer holds that prefix: start over
        Truncate(*best, 0);
      }
      best->cached.resize(static_cast<size_t>(best_keep));
      if (source && shared > best_keep) {
        try {
          CopyPrefix(*best, *source, shared);
          best->cached.assign(source->cached.begin(), source->cached.begin() + shared);
          best_keep = shared;
        } catch (const Error&) {
          // The source's rings moved on (or no memory for the rows): run the prefix instead.
        }
      }
      const int64_t max_tokens = owned->request.max_tokens;
      best->cache.Reserve(max_tokens >= 0 ? std::min(options_.context, owned->prompt_size() + max_tokens)
                                          : owned->prompt_size());
    } catch (const Error& e) {
      Finish(*owned, FinishReason::kError, e.what());
      continue;
    }
    if (options_.spec.method == SpecMethod::kNgram) {
      owned->ngram = std::make_unique<NgramIndex>(options_.spec.min_n, options_.spec.max_n);
      owned->ngram->Append(owned->request.prompt);
      owned->spec = std::make_unique<SpecController>(options_.spec.k, options_.spec.adaptive, spec_cost_, true);
    }
    best->busy = true;
    owned->slot = best;
    owned->computed = best_keep;
    stats_.prompt_tokens += owned->prompt_size();
    stats_.cached_prompt_tokens += best_keep;
    {
      std::lock_guard<std::mutex> lock(owned->handle->mutex_);
      owned->handle->cached_tokens_ = best_keep;
      owned->handle->queue_seconds_ =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - owned->submitted).count();
    }
    running_.push_back(std::move(owned));
  }
}

void BatchEngine::Loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || !waiting_.empty() || !running_.empty(); });
    if (stopping_) {
      for (auto& seq : running_) Finish(*seq, FinishReason::kCancelled);
      for (auto& seq : waiting_) Finish(*seq, FinishReason::kCancelled);
      running_.clear();
      waiting_.clear();
      UpdateGauges();
      if (tp_) {
        std::vector<int64_t> stop = {kPlanStop};
        tp_->BroadcastFromFirst(stop);  // the followers return
      }
      return;
    }
    Step(lock);
  }
}

// Called with mutex_ held; releases it around the forward pass.
void BatchEngine::Step(std::unique_lock<std::mutex>& lock) {
  // 1. Cancelled requests leave.
  auto cancelled = [](const std::unique_ptr<Sequence>& s) { return s->handle->cancelled_.load(); };
  for (auto& seq : running_) {
    if (cancelled(seq)) Finish(*seq, FinishReason::kCancelled);
  }
  std::erase_if(running_, cancelled);
  for (auto& seq : waiting_) {
    if (cancelled(seq)) Finish(*seq, FinishReason::kCancelled);
  }
  std::erase_if(waiting_, cancelled);
  // 2. Admission.
  Admit();
  UpdateGauges();
  if (running_.empty()) return;

  // 3. The batch: decodes first (each with its drafts, while spare rows last), then prompt
  // chunks within the budget.
  std::vector<ForwardSequence> batch;
  std::vector<Sequence*> members;
  std::vector<int64_t> fed;
  int64_t budget = options_.token_budget, decode_tokens = 0, decode_rows = 0, prefill_tokens = 0;
  for (auto& seq : running_) decode_tokens += seq->computed >= seq->prompt_size();
  int64_t spare_rows = options_.spec_rows - decode_tokens;
  std::vector<int32_t> drafts;
  for (auto& seq : running_) {
    if (seq->computed < seq->prompt_size()) continue;
    // Decoding: the last sampled token at the next position, then any drafts after it.
    seq->feed.assign(1, seq->tokens.back());
    if (seq->ngram && spare_rows > 0 && budget > 1) {
      int64_t room = std::min({options_.spec.k, spare_rows, budget - 1});
      if (seq->request.max_tokens >= 0) room = std::min(room, seq->request.max_tokens - seq->generated - 1);
      if (room > 0) {
        seq->ngram->Propose(room, options_.context, drafts);
        const int64_t k = seq->spec->Choose(static_cast<int64_t>(drafts.size()));
        seq->feed.insert(seq->feed.end(), drafts.begin(), drafts.begin() + k);
        spare_rows -= k;
      }
    }
    const int64_t rows = static_cast<int64_t>(seq->feed.size());
    batch.push_back({seq->feed, seq->computed, &seq->slot->cache, rows > 1 ? LogitsMode::kAll : LogitsMode::kLast,
                     &seq->logits});
    members.push_back(seq.get());
    fed.push_back(rows);
    budget -= rows;
    decode_rows += rows;
  }
  const size_t decoders = members.size();
  for (auto& seq : running_) {
    if (seq->computed >= seq->prompt_size() || budget <= 0) continue;
    const int64_t chunk = std::min(budget, seq->prompt_size() - seq->computed);
    const bool last = seq->computed + chunk == seq->prompt_size();
    batch.push_back({std::span<const int32_t>(seq->tokens).subspan(static_cast<size_t>(seq->computed),
                                                                    static_cast<size_t>(chunk)),
                     seq->computed, &seq->slot->cache, last ? LogitsMode::kLast : LogitsMode::kNone, &seq->logits});
    members.push_back(seq.get());
    fed.push_back(chunk);
    budget -= chunk;
    prefill_tokens += chunk;
  }
  if (batch.empty()) return;

  // 4. The forward pass, without the lock (Submit and stats go on meanwhile).
  lock.unlock();
  const auto t0 = std::chrono::steady_clock::now();
  if (tp_) BroadcastPlan(batch, members);
  std::vector<std::vector<TokenEvent>> sampled(members.size());
  std::vector<FinishReason> ends(members.size(), FinishReason::kNone);
  std::vector<std::string> errors(members.size());
  std::vector<int64_t> accepted(members.size(), 0);
  std::string failure;
  bool abandoned = false;
  // A pass whose every member has been cancelled (its clients gone: typically a long prompt
  // chunk), or during shutdown, stops at the next layer instead of running to its end.
  const auto all_cancelled = [this, &members] {
    return stopping_.load() || std::all_of(members.begin(), members.end(), [](const Sequence* s) { return s->handle->cancelled_.load(); });
  };
  try {
    model_.ForwardBatch(batch, all_cancelled);
  } catch (const ForwardCancelled& e) {
    failure = e.what();
    abandoned = true;
  } catch (const Error& e) {
    failure = e.what();
  } catch (const std::exception& e) {
    failure = StrCat("internal error: ", e.what());
  }
  const int64_t vocab = model_.vocab_size();
  for (size_t i = 0; i < members.size(); ++i) {
    Sequence& seq = *members[i];
    if (!failure.empty()) {
      // The pass failed: every member ends, and its slot remembers only what its cache still
      // holds (KvCache::AbortAppend).
      ends[i] = abandoned ? FinishReason::kCancelled : FinishReason::kError;
      errors[i] = abandoned ? std::string() : failure;
      seq.slot->cached.resize(std::min(seq.slot->cached.size(), static_cast<size_t>(seq.slot->cache.length())));
      continue;
    }
    const int64_t start = seq.computed;
    if (i >= decoders) {
      seq.computed += fed[i];
      seq.slot->cached.insert(seq.slot->cached.end(), seq.tokens.begin() + start, seq.tokens.begin() + seq.computed);
      if (seq.computed < seq.prompt_size()) continue;  // prompt not complete yet
    }
    try {
      // Row r of the logits is the distribution after feed[0..r]; the drafts are feed[1..].
      const std::span<const int32_t> step_drafts =
          i < decoders ? std::span<const int32_t>(seq.feed).subspan(1) : std::span<const int32_t>();
      TokenEvent pending;
      auto target = [&](int64_t row) {
        const std::span<const float> logits =
            std::span<const float>(seq.logits).subspan(static_cast<size_t>(row * vocab), static_cast<size_t>(vocab));
        pending = TokenEvent{};
        if (seq.request.logit_bias.empty() && !seq.grammar) {
          pending.token = seq.sampler.Sample(logits);
        } else {
          seq.shaped.assign(logits.begin(), logits.end());
          for (const auto& [id, bias] : seq.request.logit_bias) seq.shaped[static_cast<size_t>(id)] += bias;
          if (seq.grammar) seq.grammar->Mask(seq.shaped);
          pending.token = seq.sampler.Sample(seq.shaped);
        }
        if (seq.request.top_logprobs >= 0) Logprobs(logits, pending.token, seq.request.top_logprobs, pending);
        return pending.token;
      };
      auto emit = [&](int32_t token) {
        if (seq.grammar && !seq.grammar->Accept(token)) Fail("the grammar refused sampled token ", token);
        seq.tokens.push_back(token);
        if (seq.ngram) seq.ngram->Append(token);
        ++seq.generated;
        sampled[i].push_back(std::move(pending));
        const auto& stops = seq.request.stop_tokens;
        if (std::find(stops.begin(), stops.end(), token) != stops.end() || (seq.grammar && seq.grammar->Finished())) {
          ends[i] = FinishReason::kStop;
        } else if ((seq.request.max_tokens >= 0 && seq.generated >= seq.request.max_tokens) ||
                   static_cast<int64_t>(seq.tokens.size()) > options_.context) {
          ends[i] = FinishReason::kLength;  // the next token would not fit the context
        }
        return ends[i] == FinishReason::kNone;
      };
      const VerifyResult verified = VerifyDrafts(step_drafts, target, emit);
      if (i < decoders) {
        // Of the fed rows, the last token and the accepted drafts stay; the rest is rolled back.
        const int64_t keep = verified.emitted;
        if (keep < fed[i]) Truncate(*seq.slot, start + keep);
        seq.slot->cached.insert(seq.slot->cached.end(), seq.feed.begin(), seq.feed.begin() + keep);
        seq.computed = start + keep;
        accepted[i] = verified.accepted;
        if (!step_drafts.empty() && ends[i] == FinishReason::kNone) {
          seq.spec->RecordOutcome(static_cast<int64_t>(step_drafts.size()), verified.accepted);
        }
      }
    } catch (const Error& e) {
      ends[i] = FinishReason::kError;  // e.g. NaN logits: this sequence only
      errors[i] = e.what();
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  double step_bytes = 0.0, experts = 0.0;
  if (prefill_tokens == 0 && failure.empty()) {
    experts = model_.last_forward_experts_per_layer();
    step_bytes = bytes_.Bytes(decode_rows, experts);
    for (const ForwardSequence& s : batch) {
      step_bytes += model_.DecodeBytes(s.start, options_.kv_type) - model_.DecodeBytes(s.start);
    }
  }
  lock.lock();

  if (prefill_tokens == 0 && failure.empty()) {
    ++stats_.decode_steps;
    stats_.decode_step_seconds += seconds;
    stats_.decode_step_bytes += step_bytes;
    stats_.decode_step_experts += experts;
  }
  ++stats_.steps;
  const double total = static_cast<double>(decode_rows + prefill_tokens);
  stats_.decode_seconds += seconds * static_cast<double>(decode_rows) / total;
  stats_.prefill_seconds += seconds * static_cast<double>(prefill_tokens) / total;
  stats_.prefill_tokens_run += prefill_tokens;
  for (size_t i = 0; i < members.size(); ++i) {
    Sequence& seq = *members[i];
    if (i < decoders) {
      stats_.decode_tokens_run += static_cast<int64_t>(sampled[i].size());
      stats_.spec_drafted += fed[i] - 1;
      stats_.spec_accepted += accepted[i];
    }
    if (!sampled[i].empty()) {
      stats_.generated_tokens += static_cast<int64_t>(sampled[i].size());
      {
        std::lock_guard<std::mutex> hl(seq.handle->mutex_);
        for (TokenEvent& e : sampled[i]) seq.handle->events_.push_back(std::move(e));
        seq.handle->generated_ = seq.generated;
      }
      seq.handle->cv_.notify_all();
    }
    if (ends[i] != FinishReason::kNone) Finish(seq, ends[i], errors[i]);
  }
  std::erase_if(running_, [](const std::unique_ptr<Sequence>& s) { return s->slot == nullptr; });
  UpdateGauges();
}

// On the engine thread: cache truncations and prefix copies, repeated by the followers with the
// next plan.
void BatchEngine::Truncate(Slot& slot, int64_t length) {
  slot.cache.Truncate(length);
  if (tp_) cache_ops_.insert(cache_ops_.end(), {slot.index, length, -1});
}
void BatchEngine::CopyPrefix(Slot& slot, const Slot& source, int64_t length) {
  slot.cache.CopyPrefixFrom(source.cache, length);
  if (tp_) cache_ops_.insert(cache_ops_.end(), {slot.index, length, source.index});
}

void BatchEngine::BroadcastPlan(const std::vector<ForwardSequence>& batch, const std::vector<Sequence*>& members) {
  std::vector<int64_t> plan = {kPlanStep, static_cast<int64_t>(cache_ops_.size() / 3)};
  plan.insert(plan.end(), cache_ops_.begin(), cache_ops_.end());
  cache_ops_.clear();
  plan.push_back(static_cast<int64_t>(batch.size()));
  for (size_t i = 0; i < batch.size(); ++i) {
    const ForwardSequence& s = batch[i];
    plan.insert(plan.end(), {members[i]->slot->index, s.start, static_cast<int64_t>(s.mode),
                             static_cast<int64_t>(s.tokens.size())});
    plan.insert(plan.end(), s.tokens.begin(), s.tokens.end());
  }
  tp_->BroadcastFromFirst(plan);
}

void BatchEngine::Follow(const Model& model, const BatchEngineOptions& options) {
  TensorParallelGroup* tp = model.options().tp.get();
  if (!tp || tp->rank() == 0) Fail("serve: BatchEngine::Follow is for the ranks after the first of a --tp job");
  std::vector<std::unique_ptr<KvCache>> caches;
  for (int64_t i = 0; i < options.slots; ++i) {
    caches.push_back(std::make_unique<KvCache>(model.cache_config(), options.context, options.kv_type));
  }
  std::vector<int64_t> plan;
  std::vector<std::vector<int32_t>> tokens;
  std::vector<std::vector<float>> logits;
  for (;;) {
    tp->BroadcastFromFirst(plan);
    if (plan.empty() || plan[0] != kPlanStep) return;
    size_t at = 1;
    auto next = [&] {
      if (at >= plan.size()) Fail("serve: a truncated step plan from rank 0");
      return plan[at++];
    };
    auto slot_of = [&](int64_t slot) -> KvCache& {
      if (slot < 0 || slot >= options.slots) Fail("serve: rank 0's plan names slot ", slot);
      return *caches[static_cast<size_t>(slot)];
    };
    for (int64_t ops = next(); ops > 0; --ops) {
      KvCache& cache = slot_of(next());
      const int64_t length = next(), source = next();
      if (source < 0) {
        cache.Truncate(length);
      } else {
        cache.CopyPrefixFrom(slot_of(source), length);  // rank 0's copy succeeded on the same caches
      }
    }
    const int64_t entries = next();
    tokens.resize(static_cast<size_t>(entries));
    logits.resize(static_cast<size_t>(entries));
    std::vector<ForwardSequence> batch;
    for (int64_t e = 0; e < entries; ++e) {
      KvCache& cache = slot_of(next());
      const int64_t start = next();
      const auto mode = static_cast<LogitsMode>(next());
      std::vector<int32_t>& ids = tokens[static_cast<size_t>(e)];
      ids.resize(static_cast<size_t>(next()));
      for (int32_t& id : ids) id = static_cast<int32_t>(next());
      batch.push_back({ids, start, &cache, mode, &logits[static_cast<size_t>(e)]});
    }
    try {
      model.ForwardBatch(batch);
    } catch (const Error&) {
      // Rank 0 runs the same pass on the same inputs and fails the same requests.
    }
  }
}

// Called with mutex_ held.
void BatchEngine::UpdateGauges() {
  stats_.running = static_cast<int64_t>(running_.size());
  stats_.waiting = static_cast<int64_t>(waiting_.size());
  int64_t positions = 0;
  uint64_t bytes = 0;
  for (const auto& slot : slots_) {
    if (slot->busy) positions += slot->cache.length();
    bytes += slot->cache.bytes();
  }
  stats_.kv_positions = positions;
  stats_.kv_bytes = bytes;
}

}  // namespace tessera
