// TEMPORARY during parallel development: replaced by the real command.
#include "cli/commands.h"
namespace tessera::cli {
void RegisterInspect(CLI::App&) {}
}  // namespace tessera::cli
