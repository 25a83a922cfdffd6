// Fuzz target of `tessera serve`'s request path (issue 27 point 3): raw bytes of one connection go
// through httplib's request parser, the framing checks and routes (server/http_transport.h), the
// JSON entry point, the request mapping, the chat renderers (harmony, tool declarations as
// TypeScript), structured-output grammars and, for requests that get that far, the batched
// engine on the shipped tiny gpt-oss (a context of 192 positions keeps each input short).
//
// Built two ways:
//   - with clang's libFuzzer (scripts/fuzz.sh, CMake option TESSERA_FUZZ): coverage-guided,
//     with AddressSanitizer and UBSan; the suite runs it for 45 s from tests/fuzz/corpus/request;
//   - in the ordinary build without libFuzzer: fuzz_main.h's main() replays the corpus files
//     given on the command line (a regression test of the seeds and of anything a fuzz run once
//     found).
// A crash, a sanitizer report, or a reply that is not an HTTP response fails the run.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "fuzz_main.h"
#include "model/model.h"
#include "server/batch_engine.h"
#include "server/http_server.h"
#include "tokenizer/tokenizer.h"

namespace {

struct Harness {
  std::unique_ptr<tessera::Model> model;
  tessera::Tokenizer tokenizer;
  std::unique_ptr<tessera::BatchEngine> engine;
  std::unique_ptr<tessera::ApiServer> server;

  Harness()
      : model(tessera::Model::Load(TESSERA_SOURCE_DIR "/models/tiny-gpt-oss")),
        tokenizer(tessera::Tokenizer::FromModelDir(model->path())) {
    tessera::BatchEngineOptions options;
    options.slots = 2;
    options.context = 192;
    options.max_waiting = 4;
    engine = std::make_unique<tessera::BatchEngine>(*model, options);
    tessera::ServerOptions server_options;
    server_options.model_name = "tiny-gpt-oss";
    server_options.max_body_bytes = 1 << 20;
    server_options.timeout_seconds = 1;
    server_options.cors_origin = "http://fuzz.example";
    server = std::make_unique<tessera::ApiServer>(*model, tokenizer, *engine, server_options);
  }
};

Harness& Shared() {
  static Harness* harness = [] {
    auto* h = new Harness();  // lives for the whole process
    // At exit the engine thread must stop before the static thread pool it uses is destroyed.
    std::atexit([] { Shared().engine->Shutdown(); });
    return h;
  }();
  return *harness;
}

void Check(const std::string& output) {
  // Every input that holds a request line gets an answer that is an HTTP response.
  if (!output.empty() && output.rfind("HTTP/1.1 ", 0) != 0) {
    std::fprintf(stderr, "request_fuzzer: the reply is not an HTTP response: %.200s\n", output.c_str());
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  Check(Shared().server->ProcessBytes(input));
  return 0;
}
