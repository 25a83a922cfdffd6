// tessera: command-line entry point.
//
// Exit codes: 0 success, 1 internal failure (unexpected exception), 2 bad input or usage.
#include <malloc.h>

#include <algorithm>
#include <clocale>
#include <cstdio>
#include <exception>
#include <new>
#include <string>

#include "cli/commands.h"
#include "core/error.h"
#include "core/thread_pool.h"

int main(int argc, char** argv) {
  std::setlocale(LC_ALL, "C");
  // Activation buffers of a forward pass (tens of MB at a long prefill) are allocated and freed
  // per layer; glibc would return them to the kernel on free and take page faults (zeroed pages)
  // on every reuse, about 5 % of a 512-token prefill. Keep up to 1 GiB of freed heap instead, and
  // serve requests below 256 MiB from the heap; larger ones (the repacked weights) are mapped.
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  CLI::App app{"tessera: fast, exact LLM inference on CPUs (gpt-oss from Hugging Face directories)",
               "tessera"};
  app.set_version_flag("--version", "tessera " TESSERA_VERSION);
  app.require_subcommand(1);
  app.fallthrough();  // global options (-t) may follow the subcommand

  int threads = 0;
  app.add_option("-t,--threads", threads, "worker threads for all kernels (default: CPUs available)")
      ->envname("TESSERA_THREADS")
      ->check(CLI::Range(1, 4096));
  app.parse_complete_callback([&] {
    if (threads > 0) tessera::SetGlobalThreadCount(threads);
  });

  tessera::cli::RegisterInfo(app);
  tessera::cli::RegisterTokenize(app);
  tessera::cli::RegisterInspect(app);
  tessera::cli::RegisterSynth(app);
  tessera::cli::RegisterQuantize(app);
  tessera::cli::RegisterSparsify(app);
  tessera::cli::RegisterLogits(app);
  tessera::cli::RegisterPerplexity(app);
  tessera::cli::RegisterGenerate(app);
  tessera::cli::RegisterBench(app);
  tessera::cli::RegisterServe(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // The same one-line form as every other error (CLI11's own print is two lines).
    std::string message = e.what();
    std::replace_if(message.begin(), message.end(), [](char c) { return c == '\n' || c == '\r'; }, ' ');
    std::fprintf(stderr, "tessera: error: %s (see --help)\n", message.c_str());
    return 2;
  } catch (const tessera::Error& e) {
    std::fprintf(stderr, "tessera: error: %s\n", e.what());
    return 2;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "tessera: error: out of memory\n");
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tessera: internal error: %s\n", e.what());
    return 1;
  }
  return 0;
}
