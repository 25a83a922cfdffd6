// The continuous-batching engine (server/batch_engine.h): every reply equals the one Generator
// gives the same request alone (greedy and seeded sampling, prompts prefilled in chunks beside
// running decodes), cancellation frees the slot, a full queue refuses, bad requests are one-line
// errors, and a slot's cached prefix is reused. serving.md §7.
#include "server/batch_engine.h"

#include <gtest/gtest.h>

#include "collect_tokens.h"

#include <chrono>
#include <thread>

#include "core/error.h"
#include "engine/generator.h"
#include "tokenizer/tokenizer.h"

namespace tessera {
namespace {

const std::string kLlama = std::string(TESSERA_SOURCE_DIR) + "/models/tiny-llama";

std::vector<int32_t> Collect(RequestHandle& handle) { return CollectTokens(handle); }

struct Case {
  std::string text;
  float temperature;
  uint64_t seed;
  int64_t max_tokens;
};

TEST(BatchEngine, RepliesEqualTheSameRequestsRunAlone) {
  const auto model = Model::Load(kLlama);
  const Tokenizer tokenizer = Tokenizer::FromModelDir(kLlama);
  const std::vector<int32_t> eos = {static_cast<int32_t>(model->config().eos_token_ids.at(0))};
  const std::vector<Case> cases = {{"Once upon a time", 0.0f, 1, 24},
                                   {"The little dog ran to the park and", 0.8f, 7, 30},
                                   {"A", 1.0f, 3, 17},
                                   {"She said that the weather was going to be cold, so she took her coat and", 0.7f, 11, 20},
                                   {"Tom", 0.0f, 5, 9},
                                   {"In the morning the birds sang", 1.2f, 2, 26}};
  BatchEngineOptions options;
  options.slots = 3;         // fewer slots than requests: some wait, then reuse a freed slot
  options.context = 256;
  options.token_budget = 7;  // prompts arrive in chunks beside running decodes
  BatchEngine engine(*model, options);
  std::vector<std::shared_ptr<RequestHandle>> handles;
  for (const Case& c : cases) {
    EngineRequest r;
    r.prompt = tokenizer.EncodeWithTemplate(c.text);
    r.sampling.temperature = c.temperature;
    r.sampling.seed = c.seed;
    r.max_tokens = c.max_tokens;
    r.stop_tokens = eos;
    handles.push_back(engine.Submit(r));
    ASSERT_NE(handles.back(), nullptr);
  }
  Generator solo(*model, options.context, KvType::kF32);
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].text);
    const std::vector<int32_t> batched = Collect(*handles[i]);
    SamplingParams p;
    p.temperature = cases[i].temperature;
    p.seed = cases[i].seed;
    Sampler sampler(p);
    StopCondition stop(eos, cases[i].max_tokens);
    solo.Reset();
    const GenerationResult alone = solo.Generate(tokenizer.EncodeWithTemplate(cases[i].text), sampler, stop);
    EXPECT_EQ(batched, alone.tokens);
    EXPECT_EQ(handles[i]->finish_reason(),
              alone.reason == StopCondition::Reason::kStopToken ? FinishReason::kStop : FinishReason::kLength);
    EXPECT_EQ(handles[i]->generated_tokens(), static_cast<int64_t>(alone.tokens.size()));
  }
  const BatchEngineStats s = engine.stats();
  EXPECT_EQ(s.running, 0);
  EXPECT_EQ(s.waiting, 0);
  EXPECT_EQ(s.requests_finished, static_cast<int64_t>(cases.size()));
  // Batching happened: fewer steps than tokens run one sequence at a time would need.
  EXPECT_LT(s.steps, s.decode_tokens_run + s.prefill_tokens_run);
}

// --spec ngram per sequence: the same tokens as plain decoding (greedy and seeded sampling), with
// drafts verified and some confirmed on prompts that repeat themselves; the decode-only steps
// are counted with the bytes they had to read.
TEST(BatchEngine, SpecNgramKeepsEveryReplyAndConfirmsDrafts) {
  const auto model = Model::Load(kLlama);
  const Tokenizer tokenizer = Tokenizer::FromModelDir(kLlama);
  const std::vector<int32_t> eos = {static_cast<int32_t>(model->config().eos_token_ids.at(0))};
  const std::string code = "def add(a, b):\n    return a + b\n\n\ndef add(a, b):\n    return a + b\n\n\ndef add(";
  const std::vector<Case> cases = {{code, 0.0f, 1, 40},
                                   {"for i in range(10):\n    print(i)\nfor i in range(10):\n    print(", 0.0f, 2, 33},
                                   {code + "a, b):\n    return", 0.9f, 3, 36},
                                   {"import os\nimport sys\nimport os\nimport", 0.7f, 4, 25}};
  auto run = [&](bool spec, BatchEngineStats* stats) {
    BatchEngineOptions options;
    options.slots = 4;
    options.context = 256;
    options.token_budget = 64;
    if (spec) {
      options.spec.method = SpecMethod::kNgram;
      options.spec.k = 4;
      options.spec_rows = 10;
    }
    BatchEngine engine(*model, options);
    std::vector<std::shared_ptr<RequestHandle>> handles;
    for (const Case& c : cases) {
      EngineRequest r;
      r.prompt = tokenizer.EncodeWithTemplate(c.text);
      r.sampling.temperature = c.temperature;
      r.sampling.seed = c.seed;
      r.max_tokens = c.max_tokens;
      r.stop_tokens = eos;
      handles.push_back(engine.Submit(r));
    }
    std::vector<std::vector<int32_t>> replies;
    for (auto& h : handles) replies.push_back(Collect(*h));
    if (stats) *stats = engine.stats();
    return replies;
  };
  BatchEngineStats with_spec;
  const auto plain = run(false, nullptr);
  const auto speculative = run(true, &with_spec);
  for (size_t i = 0; i < cases.size(); ++i) EXPECT_EQ(speculative[i], plain[i]) << cases[i].text;
  EXPECT_GT(with_spec.spec_drafted, 0);
  EXPECT_GT(with_spec.spec_accepted, 0);
  EXPECT_LE(with_spec.spec_accepted, with_spec.spec_drafted);
  int64_t generated = 0;
  for (const auto& r : plain) generated += static_cast<int64_t>(r.size());
  EXPECT_EQ(with_spec.generated_tokens, generated);
  EXPECT_LT(with_spec.steps, generated);  // confirmed drafts saved steps
  EXPECT_GT(with_spec.decode_steps, 0);
  EXPECT_GT(with_spec.decode_step_bytes, 0.0);
  EXPECT_EQ(with_spec.decode_step_experts, 0.0);  // a dense model
}

TEST(BatchEngine, CancelFreesTheSlotAndAFullQueueRefuses) {
  const auto model = Model::Load(kLlama);
  BatchEngineOptions options;
  options.slots = 1;
  options.context = 512;
  options.max_waiting = 1;
  BatchEngine engine(*model, options);
  EngineRequest r;
  r.prompt = {1, 2, 3, 4};
  r.sampling.temperature = 0.0f;
  auto first = engine.Submit(r);
  ASSERT_NE(first, nullptr);
  std::vector<TokenEvent> events;
  while (events.empty()) first->Wait(events, std::chrono::milliseconds(50));  // running now
  auto second = engine.Submit(r);  // waits for the slot
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(engine.Submit(r), nullptr) << "a third request must be refused: one slot, one queue place";
  EXPECT_EQ(engine.stats().requests_rejected, 1);
  first->Cancel();
  second->Cancel();
  Collect(*first);
  Collect(*second);
  EXPECT_EQ(first->finish_reason(), FinishReason::kCancelled);
  EXPECT_EQ(second->finish_reason(), FinishReason::kCancelled);
  const BatchEngineStats s = engine.stats();
  EXPECT_EQ(s.running, 0);
  EXPECT_EQ(s.waiting, 0);
  EXPECT_EQ(s.kv_positions, 0);
  EXPECT_EQ(s.requests_cancelled, 2);
  // The slot serves again.
  r.max_tokens = 3;
  auto third = engine.Submit(r);
  ASSERT_NE(third, nullptr);
  EXPECT_EQ(Collect(*third).size(), 3u);
  EXPECT_EQ(third->finish_reason(), FinishReason::kLength);
}

// Issue 44: a prefill whose client has gone stops within the pass (between layers), not at
// the end of its step; its slot is released with nothing cached, and the engine serves on.
TEST(BatchEngine, CancelStopsALongPrefillWithinItsPass) {
  const auto model = Model::Load(kLlama);
  BatchEngineOptions options;
  options.slots = 1;
  options.context = 2048;        // the model's max_position_embeddings
  options.token_budget = 2048;  // the whole prompt in one pass
  BatchEngine engine(*model, options);
  auto prompt = [&](int32_t salt) {
    EngineRequest r;
    for (int32_t i = 0; i < 2000; ++i) r.prompt.push_back(3 + (i * 7 + salt) % 1000);
    r.sampling.temperature = 0.0f;
    r.max_tokens = 1;
    return r;
  };
  const auto t0 = std::chrono::steady_clock::now();
  auto full = engine.Submit(prompt(1));
  Collect(*full);
  const double full_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(full->finish_reason(), FinishReason::kLength);

  auto gone = engine.Submit(prompt(2));  // another prompt: no cached prefix to reuse
  std::this_thread::sleep_for(std::chrono::duration<double>(full_seconds / 4));
  const auto cancelled_at = std::chrono::steady_clock::now();
  gone->Cancel();
  Collect(*gone);
  const double after = std::chrono::duration<double>(std::chrono::steady_clock::now() - cancelled_at).count();
  EXPECT_EQ(gone->finish_reason(), FinishReason::kCancelled);
  // The pass has 4 layers, two stop checks each: the rest of the pass would take ~3/4 of it.
  EXPECT_LT(after, full_seconds / 2) << "a full prefill took " << full_seconds << " s";
  EXPECT_EQ(engine.stats().kv_positions, 0);
  // The engine serves on, and the same request gives what it gave before.
  auto again = engine.Submit(prompt(1));
  const std::vector<int32_t> first = Collect(*again);
  EXPECT_EQ(again->finish_reason(), FinishReason::kLength);
  EXPECT_EQ(first.size(), 1u);
}

TEST(BatchEngine, ReusesASlotsCachedPrefixAndShutsDownCleanly) {
  const auto model = Model::Load(kLlama);
  BatchEngineOptions options;
  options.slots = 2;
  options.context = 256;
  BatchEngine engine(*model, options);
  EngineRequest r;
  r.prompt = {5, 6, 7, 8, 9, 10, 11, 12};
  r.sampling.temperature = 0.0f;
  r.max_tokens = 4;
  auto a = engine.Submit(r);
  const std::vector<int32_t> reply = Collect(*a);
  EXPECT_EQ(a->cached_tokens(), 0);
  // The follow-up turn: the old prompt, the reply, and more.
  EngineRequest follow = r;
  follow.prompt.insert(follow.prompt.end(), reply.begin(), reply.end());
  follow.prompt.push_back(13);
  auto b = engine.Submit(follow);
  const std::vector<int32_t> second = Collect(*b);
  // The last reply token was never fed back, so the cache holds prompt + reply - 1 positions.
  EXPECT_EQ(b->cached_tokens(), static_cast<int64_t>(r.prompt.size() + reply.size() - 1));
  Generator solo(*model, options.context, KvType::kF32);
  Sampler greedy(r.sampling);
  StopCondition stop({}, 4);
  EXPECT_EQ(second, solo.Generate(follow.prompt, greedy, stop).tokens);
  EXPECT_EQ(engine.stats().cached_prompt_tokens, b->cached_tokens());
  // Shutdown cancels what is still running.
  EngineRequest endless = r;
  endless.max_tokens = -1;
  auto c = engine.Submit(endless);
  std::vector<TokenEvent> events;
  while (events.empty()) c->Wait(events, std::chrono::milliseconds(50));
  engine.Shutdown();
  EXPECT_TRUE(c->done());
  EXPECT_EQ(c->finish_reason(), FinishReason::kCancelled);
  EXPECT_EQ(engine.Submit(r), nullptr);
}

// n > 1 choices (one prompt, seeds s, s+1, ...): the first prefills the prompt, the others wait
// for it and copy its rows (KvCache::CopyPrefixFrom), running only their last prompt token;
// each reply is still the one it gets alone. A later request with the same prefix copies it from
// a running sequence too.
TEST(BatchEngine, ChoicesShareThePromptsCache) {
  const auto model = Model::Load(kLlama);
  const Tokenizer tokenizer = Tokenizer::FromModelDir(kLlama);
  BatchEngineOptions options;
  options.slots = 4;
  options.context = 256;
  options.token_budget = 9;  // the prompt takes several steps
  BatchEngine engine(*model, options);
  EngineRequest r;
  r.prompt = tokenizer.EncodeWithTemplate("The little dog ran to the park and saw a big red ball under the old tree");
  const int64_t P = static_cast<int64_t>(r.prompt.size());
  ASSERT_GT(P, 2 * options.token_budget);
  r.sampling.temperature = 0.9f;
  r.max_tokens = 40;
  std::vector<std::shared_ptr<RequestHandle>> handles;
  for (uint64_t i = 0; i < 3; ++i) {
    EngineRequest choice = r;
    choice.sampling.seed = 40 + i;
    handles.push_back(engine.Submit(choice));
    ASSERT_NE(handles.back(), nullptr);
  }
  // The follow-up shares the prompt and then goes its own way.
  EngineRequest other = r;
  other.prompt.insert(other.prompt.end(), {21, 22, 23});
  other.sampling.seed = 9;
  std::vector<TokenEvent> events;
  while (events.empty()) handles[0]->Wait(events, std::chrono::milliseconds(50));
  handles.push_back(engine.Submit(other));
  ASSERT_NE(handles.back(), nullptr);
  Generator solo(*model, options.context, KvType::kF32);
  for (size_t i = 0; i < handles.size(); ++i) {
    SCOPED_TRACE(i);
    std::vector<int32_t> reply;
    if (i == 0) {
      for (const TokenEvent& e : events) reply.push_back(e.token);
    }
    const std::vector<int32_t> rest = Collect(*handles[i]);
    reply.insert(reply.end(), rest.begin(), rest.end());
    SamplingParams p = r.sampling;
    p.seed = i < 3 ? 40 + i : 9;
    Sampler sampler(p);
    StopCondition stop({}, r.max_tokens);
    solo.Reset();
    EXPECT_EQ(reply, solo.Generate(i < 3 ? r.prompt : other.prompt, sampler, stop).tokens);
    EXPECT_EQ(handles[i]->cached_tokens(), i == 0 ? 0 : i < 3 ? P - 1 : P);
  }
  const BatchEngineStats s = engine.stats();
  EXPECT_EQ(s.cached_prompt_tokens, 2 * (P - 1) + P);
  EXPECT_EQ(s.prefill_tokens_run, P + 2 + 3);  // the prompt once, each copy's last token, 3 of `other`
}

TEST(BatchEngine, BadRequestsAreOneLineErrors) {
  const auto model = Model::Load(kLlama);
  BatchEngineOptions options;
  options.slots = 1;
  options.context = 16;
  BatchEngine engine(*model, options);
  auto error_of = [&](EngineRequest r) {
    try {
      engine.Submit(std::move(r));
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error_of({}), "the prompt is empty");
  EngineRequest long_prompt;
  long_prompt.prompt.assign(16, 1);
  EXPECT_NE(error_of(long_prompt).find("the prompt has 16 tokens; the context of 16 leaves no room"), std::string::npos);
  EngineRequest bad_id;
  bad_id.prompt = {1, static_cast<int32_t>(model->config().vocab_size)};
  EXPECT_NE(error_of(bad_id).find("lies outside the vocabulary"), std::string::npos);
  EngineRequest bad_sampling;
  bad_sampling.prompt = {1};
  bad_sampling.sampling.top_p = 2.0f;
  EXPECT_NE(error_of(bad_sampling).find("top_p"), std::string::npos);
  EXPECT_THROW(BatchEngine(*model, BatchEngineOptions{.slots = 0}), Error);
}

}  // namespace
}  // namespace tessera
