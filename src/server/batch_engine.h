// Continuous batching (serving.md §7): one engine thread owns the model and runs every admitted
// sequence forward together, one Model::ForwardBatch per step, so each weight matrix is read
// once per step however many sequences are running.
//
// Per step, in this order (vLLM v1's scheduler, §7.1):
//   1. requests cancelled since the last step (client gone, stop string seen, shutdown) leave
//      and their slot is free again at once;
//   2. waiting requests are admitted first come first served while a slot is free; a slot keeps
//      the tokens its cache holds, and a new request takes the free slot sharing the longest
//      prefix with its prompt (llama-server's prompt cache, §7.3): those positions are not run
//      again (reported as cached_tokens); a longer prefix held by a running sequence is copied
//      from its cache, and a request waits for a running prefill of its prefix (n > 1 choices);
//   3. the batch: one token for every sequence that is decoding, then prompt chunks of the
//      sequences still prefilling, oldest first, while the step's token budget lasts;
//   4. one ForwardBatch; every sequence whose prompt is complete samples its next token with its
//      own Sampler (its own seed), and stops on its stop tokens, its token limit or the end of
//      its context. With --spec ngram a decoding sequence may feed drafts after its last token;
//      it then emits the accepted ones and the target's token, and the rejected positions are
//      rolled back from its cache.
// Each sequence gets bit for bit the tokens it would get alone (the kernels are batch-invariant,
// model.h ForwardBatch), so batching changes no reply.
//
// KV memory: `slots` caches of `context` positions each, allocated as sequences grow; the bound
// is slots x context x the model's KV bytes per position (KvBytesBound). A full waiting queue
// (max_waiting) refuses new requests (the server answers 429).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engine/grammar.h"
#include "engine/sampler.h"
#include "engine/speculative.h"
#include "model/model.h"

namespace tessera {

struct BatchEngineOptions {
  int64_t slots = 4;            // sequences running at once
  int64_t context = 4096;       // positions per sequence (prompt + reply)
  KvType kv_type = KvType::kF32;
  int64_t token_budget = 512;   // tokens per step (decode tokens first, then prompt chunks)
  int64_t max_waiting = 64;     // queued requests beyond the running ones
  // --spec ngram per sequence: each decoding sequence may add drafts copied from its own history
  // (engine/ngram.h) and verify them in the same step (engine/speculative.h: the tokens are the
  // ones plain decoding gives, for greedy and for seeded sampling alike). Drafts are added only
  // while the step's decode rows stay within spec_rows: a decode step reads every weight once
  // whatever its rows, so extra rows are nearly free while the kernels are bound by the reads
  // (few rows) and cost compute once they are not. Each sequence's SpecController picks k from
  // its own acceptance and the byte-model cost (DecodeByteModel), not from step times, which
  // belong to the whole batch.
  SpecOptions spec{};
  int64_t spec_rows = 8;
};

struct EngineRequest {
  std::vector<int32_t> prompt;
  SamplingParams sampling;
  int64_t max_tokens = -1;         // < 0: until a stop token or the end of the context
  std::vector<int32_t> stop_tokens;
  int top_logprobs = -1;           // < 0: no log-probabilities; else that many alternatives (0 .. 20)
  // Added to these tokens' logits before sampling (OpenAI's logit_bias); log-probabilities stay
  // those of the model's own distribution.
  std::vector<std::pair<int32_t, float>> logit_bias;
  // Structured outputs: the grammar every sampled token must follow (engine/grammar.h); its
  // mask is applied after logit_bias, before the sampler's filters. nullptr: unconstrained.
  std::shared_ptr<const CompiledConstraint> grammar;
};

enum class FinishReason { kNone, kStop, kLength, kCancelled, kError };

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0.0f;
};

// One sampled token. Log-probabilities are of the model's distribution before temperature and
// filters (the raw log-softmax, as vLLM reports by default).
struct TokenEvent {
  int32_t token = 0;
  TokenLogprob chosen;
  std::vector<TokenLogprob> top;
};

// What the HTTP side holds of a submitted request; shared with the engine thread.
class RequestHandle {
 public:
  // Moves the tokens produced since the last call into `out` and returns true, waiting up to
  // `timeout` for some; false when there were none yet. done() tells whether more can come.
  bool Wait(std::vector<TokenEvent>& out, std::chrono::milliseconds timeout);
  bool done() const;
  FinishReason finish_reason() const;
  std::string error() const;  // the engine's one-line message when finish_reason() is kError
  // Usage: prompt tokens, the ones served from a slot's cache, generated tokens.
  int64_t prompt_tokens() const { return prompt_tokens_; }
  int64_t cached_tokens() const;
  int64_t generated_tokens() const;
  // Asks the engine to drop the request at its next step (idempotent; a no-op once done).
  void Cancel();
  double queue_seconds() const;  // from Submit to admission (0 while waiting)

 private:
  friend class BatchEngine;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<TokenEvent> events_;
  bool done_ = false;
  FinishReason reason_ = FinishReason::kNone;
  std::string error_;
  int64_t prompt_tokens_ = 0, cached_tokens_ = 0, generated_ = 0;
  double queue_seconds_ = 0.0;
  std::atomic<bool> cancelled_{false};
};

struct BatchEngineStats {
  int64_t running = 0, waiting = 0, slots = 0;
  int64_t kv_positions = 0, kv_capacity = 0;  // positions held in the slots' caches / slots x context
  uint64_t kv_bytes = 0, kv_bytes_bound = 0;
  int64_t requests_finished = 0, requests_cancelled = 0, requests_failed = 0, requests_rejected = 0;
  int64_t prompt_tokens = 0, cached_prompt_tokens = 0, generated_tokens = 0;
  int64_t steps = 0;
  double prefill_seconds = 0.0, decode_seconds = 0.0;  // step time split by the tokens it ran
  int64_t prefill_tokens_run = 0, decode_tokens_run = 0;
  // Steps that only decoded (no prompt chunk): their count, time, the bytes they had to read
  // (engine/speculative.h's DecodeByteModel with the distinct experts the model counted, plus
  // each sequence's KV rows) and the distinct experts per MoE layer, summed. Over a measured
  // read bandwidth, bytes / seconds is the fraction of the roofline the steps ran at.
  int64_t decode_steps = 0;
  double decode_step_seconds = 0.0, decode_step_bytes = 0.0, decode_step_experts = 0.0;
  int64_t spec_drafted = 0, spec_accepted = 0;  // --spec ngram: drafts verified / confirmed
};

class BatchEngine {
 public:
  // Starts the engine thread. Throws tessera::Error for options out of range.
  BatchEngine(const Model& model, const BatchEngineOptions& options);
  ~BatchEngine();  // Shutdown()
  BatchEngine(const BatchEngine&) = delete;
  BatchEngine& operator=(const BatchEngine&) = delete;

  // Queues a request. Throws tessera::Error (one line) for an empty prompt, a prompt that does
  // not leave room for one reply token in the context, an id outside the vocabulary or invalid
  // sampling; returns nullptr when the waiting queue is full or the engine is shutting down.
  std::shared_ptr<RequestHandle> Submit(EngineRequest request);

  // Cancels everything queued or running, waits for the engine thread and ends it.
  void Shutdown();
  // Shutdown has begun: work done for a request now (a grammar compile) is wasted.
  bool stopping() const { return stopping_.load(); }

  // Tensor parallelism (`serve --tp P`): rank 0 runs the BatchEngine (and the HTTP server) and
  // broadcasts each step's plan before its forward pass: the cache truncations since the last
  // plan (prefix reuse on admission, rejected drafts) and every sequence's slot, start position,
  // logits mode and tokens. The other ranks call Follow, which keeps the same slots on their
  // shards of the model and runs the same ForwardBatch for each plan, until rank 0's engine
  // shuts down (a stop plan). Sampling happens on rank 0 only.
  static void Follow(const Model& model, const BatchEngineOptions& options);

  BatchEngineStats stats() const;
  const BatchEngineOptions& options() const { return options_; }
  int64_t context() const { return options_.context; }
  // slots x context x KV bytes per position: the most the caches can hold.
  uint64_t KvBytesBound() const;

 private:
  struct Sequence;
  struct Slot;
  void Loop();
  void Step(std::unique_lock<std::mutex>& lock);
  void Admit();
  void Finish(Sequence& seq, FinishReason reason, const std::string& error = {});
  void UpdateGauges();

  const Model& model_;
  DecodeByteModel bytes_;  // what a decode step must read (for the roofline stats)
  std::vector<double> spec_cost_;  // c(0..k) of one more row per draft: options or the byte model
  std::shared_ptr<TensorParallelGroup> tp_;  // with --tp > 1: the group the plans go to
  // For the next plan: (slot, length, -1) truncations and (slot, length, source slot) copies.
  std::vector<int64_t> cache_ops_;
  void Truncate(Slot& slot, int64_t length);
  void CopyPrefix(Slot& slot, const Slot& source, int64_t length);
  bool share_prefixes_ = true;  // false for length-dependent ropes (KvCache::CopyPrefixFrom)
  void BroadcastPlan(const std::vector<ForwardSequence>& batch, const std::vector<Sequence*>& members);
  BatchEngineOptions options_;
  std::vector<std::unique_ptr<Slot>> slots_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Sequence>> waiting_;
  std::vector<std::unique_ptr<Sequence>> running_;
  BatchEngineStats stats_;
  std::atomic<bool> stopping_{false};  // set under mutex_ (the engine waits on cv_); read anywhere
  std::thread thread_;
};

}  // namespace tessera
