#include "core/fail_point.h"

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <mutex>
#include <string>

#include "core/error.h"

namespace tessera {
namespace {

struct ArmedPoint {
  std::string name;
  int64_t countdown = 0;  // 0: disarmed
  FailAction action = FailAction::kThrow;
};

std::mutex g_mutex;
ArmedPoint g_point;               // guarded by g_mutex
std::atomic<bool> g_armed{false};  // g_point.countdown > 0, or the environment not yet read
std::once_flag g_env_once;

void ReadEnvironment() {
  const char* spec = std::getenv("TESSERA_FAIL_POINT");
  if (spec == nullptr || *spec == '\0') return;
  // NAME:N[:ACTION]; anything malformed is a usage error of the test that set it.
  const std::string text = spec;
  const size_t colon = text.find(':');
  const size_t colon2 = colon == std::string::npos ? std::string::npos : text.find(':', colon + 1);
  char* end = nullptr;
  const std::string count = colon == std::string::npos ? "" : text.substr(colon + 1, colon2 - colon - 1);
  const long long n = std::strtoll(count.c_str(), &end, 10);
  const std::string action = colon2 == std::string::npos ? "throw" : text.substr(colon2 + 1);
  if (colon == 0 || count.empty() || *end != '\0' || n < 1 || (action != "throw" && action != "sigint")) {
    Fail("TESSERA_FAIL_POINT: expected NAME:N[:throw|sigint] with N >= 1 (got '", text, "')");
  }
  g_point = {text.substr(0, colon), n, action == "sigint" ? FailAction::kSigint : FailAction::kThrow};
}

struct EnvReader {
  EnvReader() {
    // Checked lazily at the first FailPoint() so that a malformed variable is reported there.
    g_armed.store(std::getenv("TESSERA_FAIL_POINT") != nullptr, std::memory_order_relaxed);
  }
} g_env_reader;

}  // namespace

void ArmFailPoint(std::string_view name, int64_t countdown, FailAction action) {
  std::call_once(g_env_once, [] {});  // code arming overrides the environment
  std::lock_guard<std::mutex> lock(g_mutex);
  g_point = {std::string(name), countdown, action};
  g_armed.store(countdown > 0, std::memory_order_relaxed);
}

void DisarmFailPoint() { ArmFailPoint("", 0); }

namespace detail {

bool FailPointsMayBeArmed() { return g_armed.load(std::memory_order_relaxed); }

void CheckArmedFailPoint(const char* name) {
  FailAction action;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    std::call_once(g_env_once, ReadEnvironment);
    if (g_point.countdown <= 0) {
      g_armed.store(false, std::memory_order_relaxed);
      return;
    }
    if (g_point.name != name || --g_point.countdown > 0) return;
    action = g_point.action;
    g_armed.store(false, std::memory_order_relaxed);
  }
  if (action == FailAction::kSigint) {
    std::raise(SIGINT);
    return;
  }
  Fail("fail point '", name, "'");
}

}  // namespace detail
}  // namespace tessera
