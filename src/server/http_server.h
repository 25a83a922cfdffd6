// `tessera serve`'s HTTP side: the OpenAI-compatible routes over cpp-httplib (Debian 12's
// libcpp-httplib-dev 0.11.4), in front of one BatchEngine.
//
// Why cpp-httplib rather than Boost.Beast (serving.md §9): it is a maintained library in Debian
// with a chunked content provider that is exactly an SSE writer, and its DataSink::is_writable
// (select + a one-byte peek) tells that a client has gone while the provider waits for the next
// token. What it costs: one pool thread per open request, so the pool is sized for every slot
// and every queued request plus the control routes; and 0.11.4 has no
// Request::is_connection_closed, so non-streaming replies are written through a content provider
// too, which polls the same way. Beast would need the accept loop, parsing, keep-alive and
// timeouts written here.
//
// Routes: POST /v1/chat/completions, POST /v1/completions, GET /v1/models (and /models),
// GET /v1/models/{id}, GET /health, GET /metrics (Prometheus text), GET / (the chat page); the
// routes of the OpenAI API that are not served here (embeddings, audio, images, ...) answer 404
// saying so. With an API key every route but /health (and CORS preflights) needs
// `Authorization: Bearer <key>` (compared in constant time). Errors are the OpenAI error object;
// after a stream has begun they are a `data: {"error": …}` event followed by `data: [DONE]`.
// Connections, framing and timeouts: server/http_transport.h.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "engine/sampler.h"
#include "model/model.h"
#include "server/batch_engine.h"
#include "server/openai_api.h"
#include "tokenizer/tokenizer.h"

namespace tessera {

class HttpTransport;

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;              // 0: any free port (Bind returns it)
  std::string api_key;          // empty: no authentication
  std::string model_name;       // the id /v1/models lists and requests must name (or omit)
  size_t max_body_bytes = 16u << 20;
  int timeout_seconds = 60;     // reading a request, writing one piece of a reply
  std::string cors_origin;      // empty: no CORS headers; "*" or one origin: answered to browsers
  SamplingParams defaults;      // used where a request gives no value
  // Structured outputs: each grammar compiles in a child process within this deadline and heap
  // (engine/grammar.h CompileLimits), cancelled when its client leaves or the server stops;
  // compiled grammars are cached up to grammar_cache_bytes.
  double grammar_timeout_seconds = 10.0;
  size_t grammar_memory_bytes = size_t{1} << 30;
  size_t grammar_cache_bytes = size_t{256} << 20;
  std::string chat_template;    // --chat-template FILE|NAME; "" is the model's (ChatTemplate::FromOption)
};

class ApiServer {
 public:
  ApiServer(const Model& model, const Tokenizer& tokenizer, BatchEngine& engine, ServerOptions options);
  ~ApiServer();
  // Binds the listening socket; returns the port. Throws tessera::Error when it cannot.
  int Bind();
  // Serves until Stop() (from any thread). Stop lets the replies in flight finish writing first
  // (at most `drain_seconds`): after BatchEngine::Shutdown they end at once with an error event
  // and [DONE], which cpp-httplib's chunked writer would cut off once the listener is closed.
  void Run();
  void Stop(double drain_seconds = 5.0);
  // One connection's bytes through the parser and routes, without a socket (the fuzz target and
  // tests): what the server would have written back.
  std::string ProcessBytes(std::string_view raw);
  // The chat format's warning for the operator (ChatFormat::warning), printed once bound.
  const std::string& chat_warning() const { return format_.warning(); }

 private:
  void Routes();
  int Backlog() const;
  // The request's grammar, compiled within the server's limits (ApiError when they stop it).
  std::shared_ptr<const CompiledConstraint> CompileGrammar(const CompletionRequest& request);
  struct Metrics;
  struct InFlight;

  BatchEngine& engine_;
  ServerOptions options_;
  ChatFormat format_;
  std::unique_ptr<HttpTransport> http_;
  std::unique_ptr<Metrics> metrics_;
  std::shared_ptr<InFlight> in_flight_;  // shared with the replies' release callbacks
  std::atomic<uint64_t> next_id_{1};
};

}  // namespace tessera
