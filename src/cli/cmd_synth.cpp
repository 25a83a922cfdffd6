// TEMPORARY during parallel development: replaced by the real command.
#include "cli/commands.h"
namespace tessera::cli {
void RegisterSynth(CLI::App&) {}
}  // namespace tessera::cli
