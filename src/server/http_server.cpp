#include "server/http_server.h"

#include <httplib.h>

#include <chrono>
#include <ctime>
#include <map>
#include <mutex>
#include <random>

#include "core/error.h"
#include "server/chat_page.h"
#include "tokenizer/utf8.h"

namespace tessera {

using json = ApiJson;

// Counters of the HTTP side (the engine keeps its own).
struct ApiServer::Metrics {
  std::mutex mutex;
  std::map<std::pair<std::string, int>, int64_t> requests;  // (route, status) -> count
  void Count(const std::string& route, int status) {
    std::lock_guard<std::mutex> lock(mutex);
    ++requests[{route, status}];
  }
};

namespace {

constexpr auto kPoll = std::chrono::milliseconds(50);  // how often a waiting reply checks its client

void SendError(httplib::Response& res, const ApiError& e) {
  res.status = e.status();
  res.set_content(e.Body().dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
  if (e.status() == 429) res.set_header("Retry-After", "1");
}

// Constant-time comparison of the presented key with the configured one.
bool SameKey(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i % std::max<size_t>(b.size(), 1)]);
  return diff == 0;
}

std::string SseEvent(const json& data) { return "data: " + data.dump() + "\n\n"; }

const char* FinishName(FinishReason reason, bool stopped_by_string) {
  if (stopped_by_string) return "stop";
  return reason == FinishReason::kLength ? "length" : "stop";
}

}  // namespace

ApiServer::ApiServer(const Model& model, const Tokenizer& tokenizer, BatchEngine& engine, ServerOptions options)
    : engine_(engine),
      options_(std::move(options)),
      format_(model, tokenizer),
      http_(std::make_unique<httplib::Server>()),
      metrics_(std::make_unique<Metrics>()) {
  // Every slot and every queued request may hold a pool thread for its whole reply; a few more
  // serve /health, /metrics and the requests that are refused.
  const size_t threads = static_cast<size_t>(engine.options().slots + engine.options().max_waiting + 4);
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http_->set_payload_max_length(options_.max_body_bytes);
  http_->set_read_timeout(options_.timeout_seconds, 0);
  http_->set_write_timeout(options_.timeout_seconds, 0);
  http_->set_keep_alive_timeout(5);
  Routes();
}

ApiServer::~ApiServer() = default;

int ApiServer::Bind() {
  if (options_.port == 0) {
    const int port = http_->bind_to_any_port(options_.host);
    if (port <= 0) Fail("serve: cannot listen on ", options_.host);
    return port;
  }
  if (!http_->bind_to_port(options_.host, options_.port)) {
    Fail("serve: cannot listen on ", options_.host, ":", options_.port, " (in use, or not an address of this host)");
  }
  return options_.port;
}

void ApiServer::Run() { http_->listen_after_bind(); }
void ApiServer::Stop() { http_->stop(); }

void ApiServer::Routes() {
  httplib::Server& http = *http_;
  // Authentication before routing: every route but /health.
  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
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
    std::string message = StrCat("HTTP ", res.status);
    if (res.status == 404) message = StrCat("no route ", req.method, " ", req.path);
    if (res.status == 413) {
      // httplib caps form-encoded bodies (curl -d without a Content-Type) at 8 KiB.
      message = req.get_header_value("Content-Type") == "application/x-www-form-urlencoded"
                    ? "the form-encoded request body is larger than 8 KiB; send it as Content-Type: application/json"
                    : "the request body is larger than the server accepts (--max-body)";
    }
    if (res.status == 405) message = StrCat("method ", req.method, " is not allowed on ", req.path);
    res.set_content(ApiError(res.status, message).Body().dump(), "application/json");
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
    res.set_content(json{{"status", "ok"}}.dump(), "application/json");
    metrics_->Count("/health", 200);
  });
  auto models = [this](const httplib::Request& req, httplib::Response& res) {
    const json list = {{"object", "list"},
                       {"data",
                        {{{"id", options_.model_name},
                          {"object", "model"},
                          {"created", static_cast<int64_t>(std::time(nullptr))},
                          {"owned_by", "tessera"},
                          {"max_model_len", engine_.context()}}}}};
    res.set_content(list.dump(), "application/json");
    metrics_->Count(req.path, 200);
  };
  http.Get("/v1/models", models);
  http.Get("/models", models);
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
      std::shared_ptr<RequestHandle> handle;
      try {
        if (const size_t bad = utf8::FindInvalid(req.body); bad != req.body.size()) {
          throw ApiError(400, StrCat("the request body is not valid UTF-8 (byte ", bad, ")"));
        }
        json body;
        try {
          body = json::parse(req.body);  // ordered: tool schemas keep their key order
        } catch (const json::exception& e) {
          throw ApiError(400, StrCat("the request body is not valid JSON: ", e.what()));
        }
        request = ParseCompletionRequest(body, chat, format_, options_.defaults);
        if (!request.model.empty() && request.model != options_.model_name) {
          throw ApiError(404, StrCat("model '", request.model, "' is not served here; this server serves '",
                                     options_.model_name, "'"),
                         "model", "model_not_found");
        }
        if (!request.seeded) request.sampling.seed = std::random_device{}() ^ (uint64_t{std::random_device{}()} << 32);
        EngineRequest er;
        er.prompt = request.prompt;
        er.sampling = request.sampling;
        er.max_tokens = request.max_tokens;
        er.stop_tokens = chat ? format_.chat_stop_tokens() : format_.text_stop_tokens();
        er.top_logprobs = request.top_logprobs;
        try {
          handle = engine_.Submit(std::move(er));
        } catch (const Error& e) {
          const bool context = std::string(e.what()).find("context") != std::string::npos;
          throw ApiError(400, e.what(), chat ? "messages" : "prompt", context ? "context_length_exceeded" : "");
        }
        if (!handle) throw ApiError(429, "the server is busy: every slot is running and the queue is full; retry later");
      } catch (const ApiError& e) {
        SendError(res, e);
        metrics_->Count(route, e.status());
        return;
      }
      metrics_->Count(route, 200);

      const std::string id = StrCat(chat ? "chatcmpl-" : "cmpl-", std::hex, next_id_.fetch_add(1), std::dec,
                                    std::random_device{}() % 100000);
      const int64_t created = static_cast<int64_t>(std::time(nullptr));
      const std::string model_name = options_.model_name;
      const std::string fingerprint = "tessera";
      auto state = std::make_shared<ReplyState>(format_, chat, chat ? format_.chat_stop_tokens() : format_.text_stop_tokens(),
                                                request.stop, request.tools);
      auto provider = [this, handle, request, id, created, model_name, fingerprint, state, chat](
                          size_t, httplib::DataSink& sink) {
        const Tokenizer& tokenizer = format_.tokenizer();
        auto base = [&](const char* object) {
          return json{{"id", id}, {"object", object}, {"created", created}, {"model", model_name},
                      {"system_fingerprint", fingerprint}};
        };
        auto usage = [&] {
          const int64_t prompt = handle->prompt_tokens(), generated = handle->generated_tokens();
          return json{{"prompt_tokens", prompt},
                      {"completion_tokens", generated},
                      {"total_tokens", prompt + generated},
                      {"prompt_tokens_details", {{"cached_tokens", handle->cached_tokens()}}}};
        };
        auto write = [&](const std::string& text) {
          if (!sink.write(text.data(), text.size())) {
            handle->Cancel();  // the client is gone
            return false;
          }
          return true;
        };
        // Streaming: one chunk per token that produced text (or carries logprobs).
        auto chunk = [&](const ReplyParser::Piece& piece, const json* logprobs, const json& finish) {
          json c = base(chat ? "chat.completion.chunk" : "text_completion");
          json choice = {{"index", 0}, {"logprobs", logprobs ? *logprobs : json(nullptr)}, {"finish_reason", finish}};
          if (chat) {
            json delta = json::object();
            if (!piece.reasoning.empty()) delta["reasoning_content"] = delta["reasoning"] = piece.reasoning;
            if (!piece.content.empty()) delta["content"] = piece.content;
            if (!piece.calls.empty()) {
              json calls = json::array();
              for (const ToolCallDelta& d : piece.calls) calls.push_back(ToolCallDeltaJson(d, id));
              delta["tool_calls"] = calls;
            }
            choice["delta"] = delta;
          } else {
            choice["text"] = piece.content;
          }
          c["choices"] = json::array({choice});
          if (request.include_usage) c["usage"] = nullptr;
          return SseEvent(c);
        };
        if (request.stream && chat) {
          json first = base("chat.completion.chunk");
          first["choices"] = json::array(
              {{{"index", 0}, {"delta", {{"role", "assistant"}, {"content", ""}}}, {"logprobs", nullptr}, {"finish_reason", nullptr}}});
          if (request.include_usage) first["usage"] = nullptr;
          if (!write(SseEvent(first))) return false;
        }
        std::vector<TokenEvent> events;
        for (;;) {
          events.clear();
          // Wait returns false only with no event pending. The engine pushes a request's last
          // events before it marks it done, so after done one more look collects any that came
          // in between.
          if (!handle->Wait(events, kPoll)) {
            if (handle->done() && !handle->Wait(events, std::chrono::milliseconds(0))) break;
            if (events.empty()) {
              if (!sink.is_writable()) {
                handle->Cancel();  // the client went away while waiting (queued, prefilling, decoding)
                return false;
              }
              continue;
            }
          }
          for (const TokenEvent& e : events) {
            json lp;
            const bool with_lp = request.top_logprobs >= 0 && !state->stopped();
            if (with_lp) lp = state->LogprobsEntry(tokenizer, e, chat, request.top_logprobs);
            ReplyParser::Piece piece = state->Add(e.token);
            if (state->stopped()) handle->Cancel();  // a stop string: the engine drops it next step
            if (request.stream && (!piece.empty() || with_lp)) {
              if (!write(chunk(piece, with_lp ? &lp : nullptr, nullptr))) return false;
            }
          }
          if (state->stopped()) break;
        }
        // Wait for the engine to let go (a stop string cancels it at the next step).
        while (!handle->done()) {
          std::vector<TokenEvent> rest;
          handle->Wait(rest, kPoll);
        }
        if (handle->finish_reason() == FinishReason::kError ||
            (handle->finish_reason() == FinishReason::kCancelled && !state->stopped())) {
          const std::string message = handle->finish_reason() == FinishReason::kError
                                          ? StrCat("generation failed: ", handle->error())
                                          : std::string("the request was cancelled (the server is shutting down)");
          const json err = ApiError(500, message).Body();
          write(request.stream ? SseEvent(err) + "data: [DONE]\n\n" : err.dump());
          sink.done();
          return true;
        }
        ReplyParser::Piece tail = state->Finish();
        const char* finish = FinishName(handle->finish_reason(), state->stopped());
        if (!state->calls().empty() && std::string(finish) == "stop") finish = "tool_calls";
        if (request.stream) {
          if (!tail.empty() && !write(chunk(tail, nullptr, nullptr))) return false;
          if (!write(chunk({}, nullptr, finish))) return false;
          if (request.include_usage) {
            json u = base(chat ? "chat.completion.chunk" : "text_completion");
            u["choices"] = json::array();
            u["usage"] = usage();
            if (!write(SseEvent(u))) return false;
          }
          if (!write("data: [DONE]\n\n")) return false;
        } else {
          json out = base(chat ? "chat.completion" : "text_completion");
          json choice = {{"index", 0}, {"finish_reason", finish}};
          if (chat) {
            json message = {{"role", "assistant"}, {"content", state->content()}, {"refusal", nullptr}};
            if (!state->calls().empty()) {
              json calls = json::array();
              for (size_t i = 0; i < state->calls().size(); ++i) calls.push_back(ToolCallJson(state->calls()[i], i, id));
              message["tool_calls"] = calls;
              if (state->content().empty()) message["content"] = nullptr;
            }
            if (!state->reasoning().empty()) message["reasoning_content"] = message["reasoning"] = state->reasoning();
            choice["message"] = message;
            choice["logprobs"] = request.top_logprobs >= 0 ? json{{"content", state->chat_logprobs()}} : json(nullptr);
          } else {
            choice["text"] = state->content();
            choice["logprobs"] = request.top_logprobs >= 0 ? state->completion_logprobs() : json(nullptr);
          }
          out["choices"] = json::array({choice});
          out["usage"] = usage();
          if (!write(out.dump())) return false;
        }
        sink.done();
        return true;
      };
      res.set_chunked_content_provider(request.stream ? "text/event-stream" : "application/json", provider,
                                       [handle](bool) { handle->Cancel(); });
      if (request.stream) res.set_header("Cache-Control", "no-cache");
    };
  };
  http.Post("/v1/chat/completions", completions(true));
  http.Post("/v1/completions", completions(false));
}

}  // namespace tessera
