#include "server/http_server.h"

#include <httplib.h>

#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <ctime>
#include <map>
#include <mutex>
#include <random>
#include <set>

#include "core/error.h"
#include "io/json_util.h"
#include "server/chat_page.h"
#include "server/http_transport.h"
#include "server/reply_writer.h"
#include "tokenizer/utf8.h"

namespace tessera {

using json = ApiJson;

// Counters of the HTTP side (the engine keeps its own).
struct ApiServer::Metrics {
  std::mutex mutex;
  std::map<std::pair<std::string, int>, int64_t> requests;  // (route, status) -> count
  // Paths outside the served routes count as "other": a client must not grow the table.
  void Count(const std::string& route, int status) {
    static const std::set<std::string> kRoutes = {"/v1/chat/completions", "/v1/completions", "/v1/models", "/models",
                                                  "/v1/models/{id}", "/health", "/metrics", "/"};
    std::lock_guard<std::mutex> lock(mutex);
    ++requests[{kRoutes.count(route) ? route : std::string("other"), status}];
  }
};

namespace {

void SendError(httplib::Response& res, const ApiError& e) {
  res.status = e.status();
  res.set_content(DumpJson(e.Body()), "application/json");
  if (e.status() == 429) res.set_header("Retry-After", "1");
}

// Constant-time comparison of the presented key with the configured one.
bool SameKey(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i % std::max<size_t>(b.size(), 1)]);
  return diff == 0;
}

}  // namespace

// Completion replies between their handler and cpp-httplib's release of their content provider
// (after the last write, or when the connection fails).
struct ApiServer::InFlight {
  std::mutex mutex;
  std::condition_variable idle;
  int64_t replies = 0;

  void Begin() {
    std::lock_guard<std::mutex> lock(mutex);
    ++replies;
  }
  void End() {
    std::lock_guard<std::mutex> lock(mutex);
    if (--replies == 0) idle.notify_all();
  }
};

ApiServer::ApiServer(const Model& model, const Tokenizer& tokenizer, BatchEngine& engine, ServerOptions options)
    : engine_(engine),
      options_(std::move(options)),
      format_(model, tokenizer, options.chat_template),
      http_(std::make_unique<HttpTransport>()),
      metrics_(std::make_unique<Metrics>()),
      in_flight_(std::make_shared<InFlight>()) {
  // Every slot and every queued request may hold a pool thread for its whole reply; a few more
  // serve /health, /metrics and the requests that are refused.
  const size_t threads = static_cast<size_t>(engine.options().slots + engine.options().max_waiting + 4);
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http_->set_payload_max_length(options_.max_body_bytes);
  http_->set_read_timeout(options_.timeout_seconds, 0);
  http_->set_write_timeout(options_.timeout_seconds, 0);
  http_->set_keep_alive_timeout(5);
  // The listening socket is ours alone: SO_REUSEADDR (a restart binds while old connections sit
  // in TIME_WAIT) but not httplib's default SO_REUSEPORT, with which a second server on the same
  // port would bind too and the kernel would split the connections (and their API keys)
  // between the two.
  http_->set_socket_options([](socket_t sock) {
    const int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  Routes();
}

ApiServer::~ApiServer() = default;

int ApiServer::Bind() {
  if (options_.port == 0) {
    const int port = http_->bind_to_any_port(options_.host);
    if (port <= 0) Fail("serve: cannot listen on ", options_.host);
    http_->SetBacklog(Backlog());
    return port;
  }
  errno = 0;
  if (!http_->bind_to_port(options_.host, options_.port)) {
    if (errno == EADDRINUSE) Fail("serve: cannot listen on ", options_.host, ":", options_.port, ": the port is in use");
    Fail("serve: cannot listen on ", options_.host, ":", options_.port, " (in use, or not an address of this host)");
  }
  http_->SetBacklog(Backlog());
  return options_.port;
}

// A burst of connections waits in the kernel's accept queue only until the accept loop hands
// each to the pool, but it must not overflow before that: every slot and every queued request
// may arrive at once, plus the control routes.
int ApiServer::Backlog() const {
  const int64_t wanted = 2 * (engine_.options().slots + engine_.options().max_waiting) + 64;
  return static_cast<int>(std::min<int64_t>(wanted, 4096));
}

void ApiServer::Run() { http_->listen_after_bind(); }
void ApiServer::Stop(double drain_seconds) {
  {
    std::unique_lock<std::mutex> lock(in_flight_->mutex);
    in_flight_->idle.wait_for(lock, std::chrono::duration<double>(drain_seconds), [&] { return in_flight_->replies == 0; });
  }
  http_->stop();
}
std::string ApiServer::ProcessBytes(std::string_view raw) { return http_->ProcessBytes(raw); }

std::shared_ptr<const CompiledConstraint> ApiServer::CompileGrammar(const CompletionRequest& request) {
  if (const GrammarVocabulary* vocabulary = format_.grammar_vocabulary()) {
    vocabulary->SetCacheBytes(options_.grammar_cache_bytes);
  }
  CompileLimits limits;
  limits.isolate = true;
  limits.seconds = options_.grammar_timeout_seconds;
  limits.memory_bytes = options_.grammar_memory_bytes;
  // Stop at once for a client that has gone (a socket's hang-up; never in ProcessBytes, which
  // has no socket) and for a server that is stopping.
  const ConnectionState* connection = ConnectionState::Current();
  limits.cancelled = [this, connection] {
    return engine_.stopping() || (connection && connection->fd >= 0 && connection->PeerHungUp());
  };
  try {
    return request.build_grammar(limits);
  } catch (const GrammarCompileStopped& e) {
    if (e.reason() == GrammarCompileStopped::kCancelled) {
      if (engine_.stopping()) throw ApiError(503, "the server is shutting down");
      // The client has gone: nobody reads this; the connection closes after it.
      throw ApiError(400, "the request was cancelled: the client closed its connection");
    }
    throw ApiError(400, e.what(), request.grammar_param,
                   e.reason() == GrammarCompileStopped::kDeadline ? "grammar_timeout" : "grammar_too_large");
  }
}

void ApiServer::Routes() {
  httplib::Server& http = *http_;
  // Before routing (and before a body is read): framing, CORS, then authentication on every
  // route but /health.
  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (const std::string why = FramingError(req); !why.empty()) {
      SendError(res, ApiError(400, why));
      ConnectionState::CloseAfterReply(req);
      metrics_->Count(req.path, 400);
      return httplib::Server::HandlerResponse::Handled;
    }
    if (!req.has_header("Content-Length") && !req.has_header("Transfer-Encoding")) {
      // RFC 9112 §6.3: a request with neither header has no body. httplib would read one until
      // the connection closes (a 408 after the read timeout); its reader is told it is empty.
      // (Its Request is a local of process_request: the write is defined, as in CloseAfterReply.)
      const_cast<httplib::Request&>(req).headers.emplace("Content-Length", "0");
    }
    const std::string origin = req.get_header_value("Origin");
    const bool cors = !options_.cors_origin.empty() && !origin.empty() &&
                      (options_.cors_origin == "*" || origin == options_.cors_origin);
    if (cors) {
      res.set_header("Access-Control-Allow-Origin", options_.cors_origin == "*" ? "*" : origin);
      res.set_header("Vary", "Origin");
    }
    if (req.method == "OPTIONS") {
      // A CORS preflight carries no credentials; it is answered before authentication.
      if (cors) {
        res.status = 204;
        res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
        res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type");
        res.set_header("Access-Control-Max-Age", "600");
      } else {
        SendError(res, ApiError(405, origin.empty() ? StrCat("method OPTIONS is not allowed on ", req.path)
                                                    : StrCat("cross-origin requests from ", Quote(origin),
                                                             " are not allowed (serve --cors ORIGIN)")));
      }
      return httplib::Server::HandlerResponse::Handled;
    }
    if (options_.api_key.empty() || req.path == "/health") return httplib::Server::HandlerResponse::Unhandled;
    const std::string auth = req.get_header_value("Authorization");
    const std::string prefix = "Bearer ";
    if (auth.rfind(prefix, 0) == 0 && SameKey(auth.substr(prefix.size()), options_.api_key)) {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    SendError(res, ApiError(401, auth.empty() ? "this server needs an API key: Authorization: Bearer <key>"
                                              : "invalid API key",
                            "", "invalid_api_key"));
    metrics_->Count(req.path, 401);
    return httplib::Server::HandlerResponse::Handled;
  });
  // Statuses httplib sets by itself (404 unknown route, 413 body too large, 400 bad request
  // line) get the OpenAI error object too.
  http.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    // httplib's own refusals: what is left of the request on the connection cannot be trusted
    // (a body half read, a bad request line), so the connection closes after the reply.
    ConnectionState* connection = ConnectionState::Current();
    ConnectionState::CloseAfterReply(req);
    if (res.status == 400 && connection && connection->read_timed_out) res.status = 408;
    std::string message = StrCat("HTTP ", res.status);
    if (res.status == 408) message = "the request was not received in time (its body is shorter than its Content-Length?)";
    if (res.status == 404) message = StrCat("no route ", req.method, " ", Quote(req.path));
    if (res.status == 413) {
      // httplib caps form-encoded bodies (curl -d without a Content-Type) at 8 KiB.
      message = req.get_header_value("Content-Type") == "application/x-www-form-urlencoded"
                    ? "the form-encoded request body is larger than 8 KiB; send it as Content-Type: application/json"
                    : "the request body is larger than the server accepts (--max-body)";
    }
    if (res.status == 405) message = StrCat("method ", req.method, " is not allowed on ", req.path);
    res.set_content(DumpJson(ApiError(res.status, message).Body()), "application/json");
  });
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string message = "internal error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      message = StrCat("internal error: ", e.what());
    } catch (...) {
    }
    SendError(res, ApiError(500, message));
  });

  http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(DumpJson(json{{"status", "ok"}}), "application/json");
    metrics_->Count("/health", 200);
  });
  auto model_object = [this] {
    return json{{"id", options_.model_name},
                {"object", "model"},
                {"created", static_cast<int64_t>(std::time(nullptr))},
                {"owned_by", "tessera"},
                {"max_model_len", engine_.context()}};
  };
  auto models = [this, model_object](const httplib::Request& req, httplib::Response& res) {
    res.set_content(DumpJson(json{{"object", "list"}, {"data", json::array({model_object()})}}), "application/json");
    metrics_->Count(req.path, 200);
  };
  http.Get("/v1/models", models);
  http.Get("/models", models);
  // The openai client's models.retrieve(id); ids may hold '/' (org/name).
  http.Get(R"(/v1/models/(.+))", [this, model_object](const httplib::Request& req, httplib::Response& res) {
    const std::string id = req.matches[1];
    if (id != options_.model_name) {
      SendError(res, ApiError(404, StrCat("model ", Quote(id), " is not served here; this server serves ",
                                          Quote(options_.model_name)), "model", "model_not_found"));
      metrics_->Count("/v1/models/{id}", 404);
      return;
    }
    res.set_content(DumpJson(model_object()), "application/json");
    metrics_->Count("/v1/models/{id}", 200);
  });
  // The rest of the OpenAI API: a clear refusal instead of "no route".
  for (const char* route : {"/v1/embeddings", "/v1/responses", "/v1/audio/(.*)", "/v1/images/(.*)", "/v1/moderations",
                            "/v1/files(.*)", "/v1/batches(.*)", "/v1/fine_tuning/(.*)"}) {
    http.Post(route, [this](const httplib::Request& req, httplib::Response& res) {
      SendError(res, ApiError(404, StrCat(req.path, " is not served: tessera serve runs a text generation model and "
                                          "serves /v1/chat/completions, /v1/completions and /v1/models"),
                              "", "unsupported_endpoint"));
      metrics_->Count(req.path, 404);
    });
  }
  http.Get("/", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(std::string(kChatPageHtml), "text/html; charset=utf-8");
    metrics_->Count("/", 200);
  });

  http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    const BatchEngineStats s = engine_.stats();
    std::string out;
    auto metric = [&](const char* name, const char* type, const char* help, double value) {
      out += StrCat("# HELP tessera:", name, " ", help, "\n# TYPE tessera:", name, " ", type, "\ntessera:", name, " ",
                    value, "\n");
    };
    metric("num_requests_running", "gauge", "Sequences in the running batch.", static_cast<double>(s.running));
    metric("num_requests_waiting", "gauge", "Requests waiting for a slot.", static_cast<double>(s.waiting));
    metric("kv_cache_usage_ratio", "gauge", "Positions held by running sequences over slots x context.",
           s.kv_capacity ? static_cast<double>(s.kv_positions) / static_cast<double>(s.kv_capacity) : 0.0);
    metric("kv_cache_bytes", "gauge", "Bytes the slots' KV caches hold.", static_cast<double>(s.kv_bytes));
    metric("kv_cache_bytes_bound", "gauge", "Most bytes the KV caches can hold (slots x context).",
           static_cast<double>(s.kv_bytes_bound));
    metric("prompt_tokens_total", "counter", "Prompt tokens of admitted requests.", static_cast<double>(s.prompt_tokens));
    metric("prompt_tokens_cached_total", "counter", "Prompt tokens served from a slot's cache.",
           static_cast<double>(s.cached_prompt_tokens));
    metric("generation_tokens_total", "counter", "Tokens generated.", static_cast<double>(s.generated_tokens));
    metric("request_success_total", "counter", "Requests that finished.", static_cast<double>(s.requests_finished));
    metric("request_cancelled_total", "counter", "Requests cancelled (client gone, stop string, shutdown).",
           static_cast<double>(s.requests_cancelled));
    metric("request_failed_total", "counter", "Requests the engine failed.", static_cast<double>(s.requests_failed));
    metric("request_rejected_total", "counter", "Requests refused because the queue was full.",
           static_cast<double>(s.requests_rejected));
    metric("engine_steps_total", "counter", "Batched forward passes.", static_cast<double>(s.steps));
    metric("prompt_tokens_per_second", "gauge", "Prefill tokens per second of step time, since start.",
           s.prefill_seconds > 0 ? static_cast<double>(s.prefill_tokens_run) / s.prefill_seconds : 0.0);
    metric("decode_tokens_per_second", "gauge", "Decode tokens per second of step time, since start.",
           s.decode_seconds > 0 ? static_cast<double>(s.decode_tokens_run) / s.decode_seconds : 0.0);
    metric("decode_steps_total", "counter", "Steps that only decoded (no prompt chunk).", static_cast<double>(s.decode_steps));
    metric("decode_step_seconds_total", "counter", "Time of the decode-only steps.", s.decode_step_seconds);
    metric("decode_step_bytes_total", "counter",
           "Bytes the decode-only steps had to read (weights once per step, the distinct experts routed to, KV rows).",
           s.decode_step_bytes);
    metric("decode_step_experts_per_layer_total", "counter",
           "Distinct experts per MoE layer of the decode-only steps, summed (0 for dense models).", s.decode_step_experts);
    metric("spec_decode_num_draft_tokens_total", "counter", "--spec ngram: drafted tokens verified.",
           static_cast<double>(s.spec_drafted));
    metric("spec_decode_num_accepted_tokens_total", "counter", "--spec ngram: drafted tokens the model confirmed.",
           static_cast<double>(s.spec_accepted));
    {
      std::lock_guard<std::mutex> lock(metrics_->mutex);
      out += "# HELP tessera:http_requests_total HTTP requests by route and status.\n"
             "# TYPE tessera:http_requests_total counter\n";
      for (const auto& [key, count] : metrics_->requests) {
        out += StrCat("tessera:http_requests_total{handler=\"", key.first, "\",status=\"", key.second, "\"} ", count, "\n");
      }
    }
    res.set_content(out, "text/plain; version=0.0.4");
  });

  auto completions = [this](bool chat) {
    return [this, chat](const httplib::Request& req, httplib::Response& res) {
      const std::string route = chat ? "/v1/chat/completions" : "/v1/completions";
      CompletionRequest request;
      std::vector<Choice> choices;
      try {
        if (const size_t bad = utf8::FindInvalid(req.body); bad != req.body.size()) {
          throw ApiError(400, StrCat("the request body is not valid UTF-8 (byte ", bad, ")"));
        }
        json body;
        try {
          // The one bounded parser: size and nesting limits (io/json_util.h); ordered, so that
          // tool schemas keep their key order.
          body = ParseOrderedJsonText(req.body, "request body", {options_.max_body_bytes, kMaxJsonDepth});
        } catch (const Error& e) {
          std::string why = e.what();
          if (const size_t at = why.find("invalid JSON: "); at != std::string::npos) why = why.substr(at + 14);
          throw ApiError(400, StrCat("the request body is not valid JSON: ", why));
        }
        request = ParseCompletionRequest(body, chat, format_, options_.defaults);
        if (!request.model.empty() && request.model != options_.model_name) {
          throw ApiError(404, StrCat("model '", request.model, "' is not served here; this server serves '",
                                     options_.model_name, "'"),
                         "model", "model_not_found");
        }
        // The cheap refusals come before the grammar's compile: the prompt must leave room for
        // a reply (BatchEngine::Submit checks it again).
        if (static_cast<int64_t>(request.prompt.size()) >= engine_.context()) {
          throw ApiError(400, StrCat("the prompt has ", request.prompt.size(), " tokens; the context of ", engine_.context(),
                                     " leaves no room for a reply (at most ", engine_.context() - 1, " prompt tokens)"),
                         chat ? "messages" : "prompt", "context_length_exceeded");
        }
        std::shared_ptr<const CompiledConstraint> grammar;
        if (request.build_grammar) grammar = CompileGrammar(request);
        if (!request.seeded) request.sampling.seed = std::random_device{}() ^ (uint64_t{std::random_device{}()} << 32);
        const std::vector<int32_t>& stops = chat ? format_.chat_stop_tokens() : format_.text_stop_tokens();
        for (int64_t i = 0; i < request.n; ++i) {
          EngineRequest er;
          er.prompt = request.prompt;
          er.sampling = request.sampling;
          er.sampling.seed = request.sampling.seed + static_cast<uint64_t>(i);  // choice i: its own draw
          er.max_tokens = request.max_tokens;
          er.stop_tokens = stops;
          er.top_logprobs = request.top_logprobs;
          er.logit_bias = request.logit_bias;
          er.grammar = grammar;
          std::shared_ptr<RequestHandle> handle;
          try {
            handle = engine_.Submit(std::move(er));
          } catch (const Error& e) {
            const bool context = std::string(e.what()).find("context") != std::string::npos;
            throw ApiError(400, e.what(), chat ? "messages" : "prompt", context ? "context_length_exceeded" : "");
          }
          if (!handle) {
            for (Choice& c : choices) c.handle->Cancel();
            throw ApiError(429, "the server is busy: every slot is running and the queue is full; retry later");
          }
          choices.push_back({handle, std::make_shared<ReplyState>(format_, chat, stops, request.stop, request.tools)});
        }
      } catch (const ApiError& e) {
        SendError(res, e);
        metrics_->Count(route, e.status());
        return;
      }
      metrics_->Count(route, 200);

      auto reply = std::make_shared<ReplyWriter>(
          format_, chat, std::move(request), std::move(choices),
          StrCat(chat ? "chatcmpl-" : "cmpl-", std::hex, next_id_.fetch_add(1), std::dec, std::random_device{}() % 100000),
          options_.model_name);
      auto provider = [reply](size_t, httplib::DataSink& sink) { return reply->Run(sink); };
      in_flight_->Begin();
      auto release = [reply, in_flight = in_flight_](bool) {
        reply->CancelAll();
        in_flight->End();
      };
      const char* type = reply->streaming() ? "text/event-stream" : "application/json";
      if (req.version == "HTTP/1.0") {
        // No chunked encoding for HTTP/1.0 clients (RFC 9112 §7.1): the reply ends where the
        // connection closes.
        res.set_content_provider(type, provider, release);
        ConnectionState::CloseAfterReply(req);
      } else {
        res.set_chunked_content_provider(type, provider, release);
      }
      if (reply->streaming()) res.set_header("Cache-Control", "no-cache");
    };
  };
  http.Post("/v1/chat/completions", completions(true));
  http.Post("/v1/completions", completions(false));
}

}  // namespace tessera
