// Error policy.
//
// User and environment errors (missing file, corrupt header, bad JSON, wrong shape, unknown
// option) are thrown as tessera::Error with a one-line message that names the file or object and
// the problem; the CLI prints it and exits with code 2. Kernels and thread-pool workers never
// throw: they run on inputs that were validated before they were called.
//
// Programmer errors (a broken invariant) use TESSERA_CHECK, which aborts with file and line.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace tessera {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Concatenates the arguments with operator<< (gcc 12 has no std::format).
template <typename... Args>
std::string StrCat(Args&&... args) {
  std::ostringstream out;
  (out << ... << std::forward<Args>(args));
  return out.str();
}

template <typename... Args>
[[noreturn]] void Fail(Args&&... args) {
  throw Error(StrCat(std::forward<Args>(args)...));
}

[[noreturn]] void CheckFailed(const char* file, int line, const char* condition);

}  // namespace tessera

#define TESSERA_CHECK(condition)                                              \
  do {                                                                        \
    if (!(condition)) ::tessera::CheckFailed(__FILE__, __LINE__, #condition); \
  } while (0)
