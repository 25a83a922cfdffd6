// tessera: command-line entry point.
//
// Exit codes: 0 success, 1 internal failure (unexpected exception), 2 bad input or usage.
#include <clocale>
#include <cstdio>
#include <exception>
#include <new>

#include "cli/commands.h"
#include "core/error.h"
#include "core/thread_pool.h"

int main(int argc, char** argv) {
  std::setlocale(LC_ALL, "C");
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
  tessera::cli::RegisterLogits(app);
  tessera::cli::RegisterGenerate(app);
  tessera::cli::RegisterBench(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
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
