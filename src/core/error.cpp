#include "core/error.h"

#include <cstdio>
#include <cstdlib>

namespace tessera {

void CheckFailed(const char* file, int line, const char* condition) {
  std::fprintf(stderr, "tessera: internal error: %s:%d: check failed: %s\n", file, line, condition);
  std::abort();
}

}  // namespace tessera
