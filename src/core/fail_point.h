// Fail points: named places where a test makes the engine fail on purpose (an error partway
// through a forward pass, a signal partway through writing a checkpoint), to check that what it
// leaves behind is consistent. A point does nothing unless armed; the unarmed check is one
// relaxed atomic load.
//
// Armed from code (ArmFailPoint) or, for command-line tests, by the environment variable
// TESSERA_FAIL_POINT=NAME:N[:ACTION], read once at the first check: the N-th pass (1 = the first)
// through point NAME throws tessera::Error "fail point 'NAME'" (ACTION "throw", the default) or
// raises SIGINT (ACTION "sigint").
#pragma once

#include <cstdint>
#include <string_view>

namespace tessera {

enum class FailAction { kThrow, kSigint };

// The `countdown`-th pass from now through `name` (1 = the next) fails with `action`; one point
// is armed at a time (arming replaces the previous one).
void ArmFailPoint(std::string_view name, int64_t countdown, FailAction action = FailAction::kThrow);
void DisarmFailPoint();

namespace detail {
void CheckArmedFailPoint(const char* name);
bool FailPointsMayBeArmed();
}  // namespace detail

// Fails as armed, or returns.
inline void FailPoint(const char* name) {
  if (detail::FailPointsMayBeArmed()) detail::CheckArmedFailPoint(name);
}

}  // namespace tessera
