// The body of one /v1/chat/completions or /v1/completions reply, written as the engine produces
// tokens: one chunk per token piece when streaming (SSE), else one JSON object at the end; with
// n > 1, one choice per engine request, each with its own index.
//
// It runs inside httplib's content provider on the connection's thread, so it can watch the
// client: a client that goes away cancels every choice. A client that only shut down its sending
// side (a half-close after a complete request) looks the same to a read, so while nothing is
// written the writer probes it once a second with bytes the reply's format ignores (a space
// before the JSON object, an SSE comment line); only a failed write ends the reply.
#pragma once

#include <httplib.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "server/batch_engine.h"
#include "server/openai_api.h"

namespace tessera {

struct Choice {
  std::shared_ptr<RequestHandle> handle;
  std::shared_ptr<ReplyState> state;
  bool ended = false;  // its finish chunk (or its part of the reply) is written
};

class ReplyWriter {
 public:
  ReplyWriter(const ChatFormat& format, bool chat, CompletionRequest request, std::vector<Choice> choices,
              std::string id, std::string model_name);
  bool streaming() const { return request_.stream; }
  // Writes the whole reply into `sink`; false when the client went away (every choice is then
  // cancelled).
  bool Run(httplib::DataSink& sink);
  void CancelAll();

 private:
  ApiJson Base(const char* object) const;
  ApiJson Usage() const;
  std::string Chunk(size_t index, const ReplyParser::Piece& piece, const ApiJson* logprobs, const ApiJson& finish) const;
  // Moves choice `index`'s new tokens into the reply; true when it has finished.
  bool Drain(size_t index, std::vector<TokenEvent>& events);
  bool Write(const std::string& text);
  bool ClientStillThere();

  const ChatFormat& format_;
  bool chat_;
  CompletionRequest request_;
  std::vector<Choice> choices_;
  std::string id_, model_name_;
  int64_t created_;
  httplib::DataSink* sink_ = nullptr;
  std::chrono::steady_clock::time_point last_probe_{};
};

}  // namespace tessera
