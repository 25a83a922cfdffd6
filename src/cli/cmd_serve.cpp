// `tessera serve -m DIR [--host 127.0.0.1] [--port 8080] [--api-key KEY] [--parallel 4] [-c 4096]`:
// the OpenAI-compatible server (server/http_server.h) over one continuously batching engine
// (server/batch_engine.h). SIGTERM / SIGINT cancel the requests in flight (their streams end
// with an error event), close the listening socket and exit 0.
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <pthread.h>
#include <thread>

#include "cli/commands.h"
#include "cli/model_options.h"
#include "cli/spec_options.h"
#include "core/error.h"
#include "engine/chat_template.h"
#include "io/json_util.h"
#include "model/model.h"
#include "model/tensor_parallel.h"
#include "server/batch_engine.h"
#include "server/http_server.h"
#include "tokenizer/tokenizer.h"

namespace tessera::cli {
namespace {

struct ServeArgs {
  std::string model;
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string api_key;
  std::string model_name;
  int64_t parallel = 4;
  int64_t context = 4096;
  std::string kv_type = "f32";
  int64_t batch_tokens = 512;
  int64_t queue = 64;
  int64_t max_body_mib = 16;
  int timeout = 60;
  std::string cors;
  double grammar_timeout = 10.0;
  int64_t grammar_memory_mib = 1024;
  int64_t grammar_cache_mib = 256;
  std::string chat_template;
  float temperature = -1.0f, top_p = -1.0f, min_p = -1.0f;
  int64_t top_k = -1;
  ModelArgs model_args;
  SpecArgs spec;
  int64_t spec_rows = 8;
  CLI::Option* spec_rows_opt = nullptr;
};

void RunServe(const ServeArgs& a) {
  if (a.port < 0 || a.port > 65535) Fail("serve: --port ", a.port, " must lie in [0, 65535]");
  if (a.max_body_mib < 1) Fail("serve: --max-body ", a.max_body_mib, " MiB must be at least 1");
  if (a.timeout < 1) Fail("serve: --timeout ", a.timeout, " must be at least 1 second");
  if (!(a.grammar_timeout > 0 && a.grammar_timeout <= 3600)) {
    Fail("serve: --grammar-timeout ", a.grammar_timeout, " must lie in (0, 3600] seconds");
  }
  if (a.grammar_memory_mib < 16 || a.grammar_memory_mib > (int64_t{1} << 20)) {
    Fail("serve: --grammar-memory ", a.grammar_memory_mib, " MiB must lie in [16, 1048576]");
  }
  if (a.grammar_cache_mib < 0 || a.grammar_cache_mib > (int64_t{1} << 20)) {
    Fail("serve: --grammar-cache ", a.grammar_cache_mib, " MiB must lie in [0, 1048576]");
  }
  if (!a.cors.empty() && a.cors != "*" && a.cors.find("://") == std::string::npos) {
    Fail("serve: --cors ", Quote(a.cors), " must be * or an origin such as http://localhost:3000");
  }
  const SpecOptions spec = ParseSpecArgs(a.spec);  // before the (slow) load
  if (!a.chat_template.empty()) ChatTemplate::FromOption(a.chat_template, "");  // a bad file or name: before the load
  if (spec.method == SpecMethod::kNone && a.spec_rows_opt->count() > 0) Fail("--spec-rows needs --spec ngram");
  // Block the shutdown signals in every thread; one thread waits for them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  const ModelOptions options = ToModelOptions(a.model_args);
  const auto model = Model::Load(a.model, options);
  if (!model->load_note().empty() && (!options.tp || options.tp->rank() == 0)) {
    std::fprintf(stderr, "serve: note: %s\n", model->load_note().c_str());
  }
  BatchEngineOptions eo;
  eo.slots = a.parallel;
  eo.context = a.context;
  const int64_t max_positions = model->config().max_position_embeddings;
  if (max_positions > 0 && eo.context > max_positions) eo.context = max_positions;
  eo.kv_type = ParseKvType(a.kv_type);
  eo.token_budget = a.batch_tokens;
  eo.max_waiting = a.queue;
  eo.spec = spec;
  eo.spec_rows = a.spec_rows;
  if (options.tp && options.tp->rank() != 0) {
    // --tp: this rank runs rank 0's step plans on its shard until rank 0 stops (its SIGTERM
    // ends the job through rank 0; the signals stay blocked here).
    BatchEngine::Follow(*model, eo);
    return;
  }
  const Tokenizer tokenizer = Tokenizer::FromModelDir(model->path());
  BatchEngine engine(*model, eo);

  ServerOptions so;
  so.host = a.host;
  so.port = a.port;
  so.api_key = a.api_key;
  so.model_name = a.model_name.empty() ? std::filesystem::path(model->path()).filename().string() : a.model_name;
  so.max_body_bytes = static_cast<size_t>(a.max_body_mib) << 20;
  so.timeout_seconds = a.timeout;
  so.cors_origin = a.cors;
  so.grammar_timeout_seconds = a.grammar_timeout;
  so.grammar_memory_bytes = static_cast<size_t>(a.grammar_memory_mib) << 20;
  so.grammar_cache_bytes = static_cast<size_t>(a.grammar_cache_mib) << 20;
  so.chat_template = a.chat_template;
  so.defaults = SamplingParamsFromGenerationConfig(model->generation_config(), 0);
  if (a.temperature >= 0) so.defaults.temperature = a.temperature;
  if (a.top_p >= 0) so.defaults.top_p = a.top_p;
  if (a.top_k >= 0) so.defaults.top_k = a.top_k;
  if (a.min_p >= 0) so.defaults.min_p = a.min_p;
  ValidateSamplingParams(so.defaults);
  ApiServer server(*model, tokenizer, engine, so);
  const int port = server.Bind();
  if (!server.chat_warning().empty()) std::fprintf(stderr, "serve: warning: %s\n", server.chat_warning().c_str());
  if (a.host != "127.0.0.1" && a.host != "localhost" && a.host != "::1" && a.api_key.empty()) {
    std::fprintf(stderr, "serve: warning: listening on %s without --api-key: anyone who can reach it can use it\n",
                 a.host.c_str());
  }
  std::fprintf(stderr,
               "serve: %s on http://%s:%d (model id '%s'), %lld slots x %lld positions (KV at most %.1f MiB), "
               "step budget %lld tokens, queue %lld\n",
               model->path().c_str(), a.host.c_str(), port, so.model_name.c_str(), static_cast<long long>(eo.slots),
               static_cast<long long>(eo.context), static_cast<double>(engine.KvBytesBound()) / (1 << 20),
               static_cast<long long>(eo.token_budget), static_cast<long long>(eo.max_waiting));
  std::printf("listening on http://%s:%d\n", a.host.c_str(), port);
  std::fflush(stdout);

  std::thread waiter([&] {
    int received = 0;
    sigwait(&signals, &received);
    std::fprintf(stderr, "serve: %s: cancelling the requests in flight and stopping\n",
                 received == SIGTERM ? "SIGTERM" : "SIGINT");
    engine.Shutdown();  // in-flight replies end (with an error event) and release their threads
    server.Stop();
  });
  server.Run();
  // Run can also end without a signal (the socket failed): wake the waiter then.
  engine.Shutdown();
  pthread_kill(waiter.native_handle(), SIGTERM);
  waiter.join();
  std::fprintf(stderr, "serve: stopped\n");
}

}  // namespace

void RegisterServe(CLI::App& app) {
  auto args = std::make_shared<ServeArgs>();
  auto* cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP server with continuous batching");
  cmd->add_option("-m,--model", args->model, "Hugging Face model directory")->required();
  cmd->add_option("--host", args->host, "address to listen on (default 127.0.0.1: this machine only)");
  cmd->add_option("--port", args->port, "TCP port (0: any free port, printed on stdout)")->capture_default_str();
  cmd->add_option("--api-key", args->api_key, "require 'Authorization: Bearer KEY' on every route but /health");
  cmd->add_option("--model-name", args->model_name, "model id clients name (default: the directory's name)");
  cmd->add_option("--parallel", args->parallel, "sequences decoded together (KV slots)")->capture_default_str();
  cmd->add_option("-c,--ctx-size", args->context, "positions per sequence (prompt + reply)")->capture_default_str();
  cmd->add_option("--kv-type", args->kv_type, "KV cache element type: f32, bf16 or int8")->check(CLI::IsMember({"f32", "bf16", "int8"}));
  cmd->add_option("--batch-tokens", args->batch_tokens, "tokens per engine step (decodes first, then prompt chunks)")
      ->capture_default_str();
  cmd->add_option("--queue", args->queue, "requests that may wait for a slot (beyond that: 429)")->capture_default_str();
  cmd->add_option("--max-body", args->max_body_mib, "largest request body in MiB (beyond that: 413)")->capture_default_str();
  cmd->add_option("--timeout", args->timeout, "seconds to read a request or write a piece of a reply")->capture_default_str();
  cmd->add_option("--grammar-timeout", args->grammar_timeout,
                  "seconds a structured-output grammar may take to compile (beyond that: 400)")->capture_default_str();
  cmd->add_option("--grammar-memory", args->grammar_memory_mib, "MiB of heap one grammar compile may use (beyond that: 400)")
      ->capture_default_str();
  cmd->add_option("--grammar-cache", args->grammar_cache_mib, "MiB of compiled grammars kept for reuse")->capture_default_str();
  cmd->add_option("--chat-template", args->chat_template,
                  "chat template: a .jinja file, or a name (chatml, or a Hub template `tessera info --chat-templates` lists); "
                  "default: the model's, else ChatML");
  cmd->add_option("--cors", args->cors,
                  "answer browsers' cross-origin requests from this origin (* for any): CORS headers and preflights");
  cmd->add_option("--temp", args->temperature, "default temperature (default: generation_config.json's)");
  cmd->add_option("--top-p", args->top_p, "default top-p");
  cmd->add_option("--top-k", args->top_k, "default top-k (0: off)");
  cmd->add_option("--min-p", args->min_p, "default min-p");
  AddModelOptions(cmd, args->model_args, "fast");
  AddSpecOptions(cmd, args->spec);
  args->spec_rows_opt = cmd->add_option("--spec-rows", args->spec_rows,
                                        "--spec ngram: drafts are added while a step's decode rows stay within this")
                            ->capture_default_str();
  cmd->callback([args] { RunServe(*args); });
}

}  // namespace tessera::cli
