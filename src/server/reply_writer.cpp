#include "server/reply_writer.h"

#include <ctime>

#include "core/error.h"
#include "server/http_transport.h"

namespace tessera {
namespace {

using json = ApiJson;

constexpr auto kPoll = std::chrono::milliseconds(50);  // how often a waiting reply checks its client
constexpr auto kProbeEvery = std::chrono::seconds(1);  // a half-closed client: bytes it ignores

std::string SseEvent(const json& data) { return "data: " + DumpJson(data) + "\n\n"; }

const char* FinishName(FinishReason reason, bool stopped_by_string, bool calls) {
  if (reason == FinishReason::kLength && !stopped_by_string) return "length";
  return calls ? "tool_calls" : "stop";
}

}  // namespace

ReplyWriter::ReplyWriter(const ChatFormat& format, bool chat, CompletionRequest request, std::vector<Choice> choices,
                         std::string id, std::string model_name)
    : format_(format),
      chat_(chat),
      request_(std::move(request)),
      choices_(std::move(choices)),
      id_(std::move(id)),
      model_name_(std::move(model_name)),
      created_(static_cast<int64_t>(std::time(nullptr))) {}

void ReplyWriter::CancelAll() {
  for (Choice& c : choices_) c.handle->Cancel();
}

json ReplyWriter::Base(const char* object) const {
  return json{{"id", id_}, {"object", object}, {"created", created_}, {"model", model_name_},
              {"system_fingerprint", "tessera"}};
}

json ReplyWriter::Usage() const {
  // The prompt is counted once (OpenAI's usage for n > 1); completion tokens of every choice.
  const RequestHandle& first = *choices_.front().handle;
  int64_t generated = 0;
  for (const Choice& c : choices_) generated += c.handle->generated_tokens();
  return json{{"prompt_tokens", first.prompt_tokens()},
              {"completion_tokens", generated},
              {"total_tokens", first.prompt_tokens() + generated},
              {"prompt_tokens_details", {{"cached_tokens", first.cached_tokens()}}}};
}

std::string ReplyWriter::Chunk(size_t index, const ReplyParser::Piece& piece, const json* logprobs,
                               const json& finish) const {
  json c = Base(chat_ ? "chat.completion.chunk" : "text_completion");
  json choice = {{"index", index}, {"logprobs", logprobs ? *logprobs : json(nullptr)}, {"finish_reason", finish}};
  if (chat_) {
    json delta = json::object();
    if (!piece.reasoning.empty()) delta["reasoning_content"] = delta["reasoning"] = piece.reasoning;
    if (!piece.content.empty()) delta["content"] = piece.content;
    if (!piece.calls.empty()) {
      json calls = json::array();
      for (const ToolCallDelta& d : piece.calls) calls.push_back(ToolCallDeltaJson(d, id_));
      delta["tool_calls"] = calls;
    }
    choice["delta"] = delta;
  } else {
    choice["text"] = piece.content;
  }
  c["choices"] = json::array({choice});
  if (request_.include_usage) c["usage"] = nullptr;
  return SseEvent(c);
}

bool ReplyWriter::Write(const std::string& text) {
  if (!sink_->write(text.data(), text.size())) {
    CancelAll();  // the client is gone
    return false;
  }
  return true;
}

bool ReplyWriter::ClientStillThere() {
  if (!sink_->is_writable()) return false;
  const ConnectionState* connection = ConnectionState::Current();
  if (connection && connection->PeerHungUp()) {
    const auto now = std::chrono::steady_clock::now();
    if (now - last_probe_ >= kProbeEvery) {
      last_probe_ = now;
      return Write(request_.stream ? ": waiting\n\n" : " ");
    }
  }
  return true;
}

bool ReplyWriter::Drain(size_t index, std::vector<TokenEvent>& events) {
  Choice& choice = choices_[index];
  ReplyState& state = *choice.state;
  const Tokenizer& tokenizer = format_.tokenizer();
  for (const TokenEvent& e : events) {
    if (state.stopped()) break;  // the engine drops the request at its next step
    json lp;
    const bool with_lp = request_.top_logprobs >= 0;
    if (with_lp) lp = state.LogprobsEntry(tokenizer, e, chat_, request_.top_logprobs);
    const ReplyParser::Piece piece = state.Add(e.token);
    if (state.stopped()) choice.handle->Cancel();  // a stop string
    if (request_.stream && (!piece.empty() || with_lp)) {
      if (!Write(Chunk(index, piece, with_lp ? &lp : nullptr, nullptr))) return false;
    }
  }
  return true;
}

bool ReplyWriter::Run(httplib::DataSink& sink) {
  sink_ = &sink;
  if (request_.stream && chat_) {
    for (size_t i = 0; i < choices_.size(); ++i) {
      json first = Base("chat.completion.chunk");
      first["choices"] = json::array(
          {{{"index", i}, {"delta", {{"role", "assistant"}, {"content", ""}}}, {"logprobs", nullptr}, {"finish_reason", nullptr}}});
      if (request_.include_usage) first["usage"] = nullptr;
      if (!Write(SseEvent(first))) return false;
    }
  }
  std::vector<const char*> finish(choices_.size(), nullptr);
  std::vector<TokenEvent> events;
  for (size_t open = choices_.size(); open > 0;) {
    bool progress = false;
    for (size_t i = 0; i < choices_.size(); ++i) {
      Choice& c = choices_[i];
      if (c.ended) continue;
      // The engine pushes a request's last events before it marks it done: done() read before
      // an empty look means nothing more can come.
      const bool was_done = c.handle->done();
      events.clear();
      const bool got = c.handle->Wait(events, std::chrono::milliseconds(0));
      if (got) {
        progress = true;
        if (!Drain(i, events)) return false;
      }
      if (!was_done || (got && !c.state->stopped())) continue;
      const FinishReason reason = c.handle->finish_reason();
      if (reason == FinishReason::kError || (reason == FinishReason::kCancelled && !c.state->stopped())) {
        CancelAll();
        const std::string message = reason == FinishReason::kError
                                        ? StrCat("generation failed: ", c.handle->error())
                                        : std::string("the request was cancelled (the server is shutting down)");
        const json err = ApiError(500, message).Body();
        Write(request_.stream ? SseEvent(err) + "data: [DONE]\n\n" : DumpJson(err));
        sink.done();
        return true;
      }
      const ReplyParser::Piece tail = c.state->Finish();
      finish[i] = FinishName(reason, c.state->stopped(), !c.state->calls().empty());
      if (request_.stream) {
        if (!tail.empty() && !Write(Chunk(i, tail, nullptr, nullptr))) return false;
        if (!Write(Chunk(i, {}, nullptr, finish[i]))) return false;
      }
      c.ended = true;
      --open;
      progress = true;
    }
    if (open == 0 || progress) continue;
    // Nothing new: wait on the first open choice, watching the client.
    for (size_t i = 0; i < choices_.size(); ++i) {
      if (choices_[i].ended) continue;
      events.clear();
      if (choices_[i].handle->Wait(events, kPoll)) {
        if (!Drain(i, events)) return false;
      } else if (!choices_[i].handle->done() && !ClientStillThere()) {
        CancelAll();  // the client went away while waiting (queued, prefilling, decoding)
        return false;
      }
      break;
    }
  }
  if (request_.stream) {
    if (request_.include_usage) {
      json u = Base(chat_ ? "chat.completion.chunk" : "text_completion");
      u["choices"] = json::array();
      u["usage"] = Usage();
      if (!Write(SseEvent(u))) return false;
    }
    if (!Write("data: [DONE]\n\n")) return false;
  } else {
    json out = Base(chat_ ? "chat.completion" : "text_completion");
    json list = json::array();
    for (size_t i = 0; i < choices_.size(); ++i) {
      const ReplyState& state = *choices_[i].state;
      json choice = {{"index", i}, {"finish_reason", finish[i]}};
      if (chat_) {
        json message = {{"role", "assistant"}, {"content", state.content()}, {"refusal", nullptr}};
        if (!state.calls().empty()) {
          json calls = json::array();
          for (size_t k = 0; k < state.calls().size(); ++k) calls.push_back(ToolCallJson(state.calls()[k], k, id_));
          message["tool_calls"] = calls;
          if (state.content().empty()) message["content"] = nullptr;
        }
        if (!state.reasoning().empty()) message["reasoning_content"] = message["reasoning"] = state.reasoning();
        choice["message"] = message;
        choice["logprobs"] = request_.top_logprobs >= 0 ? json{{"content", state.chat_logprobs()}} : json(nullptr);
      } else {
        choice["text"] = state.content();
        choice["logprobs"] = request_.top_logprobs >= 0 ? state.completion_logprobs() : json(nullptr);
      }
      list.push_back(choice);
    }
    out["choices"] = list;
    out["usage"] = Usage();
    if (!Write(DumpJson(out))) return false;
  }
  sink.done();
  return true;
}

}  // namespace tessera
