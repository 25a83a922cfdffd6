// Helpers shared by the test files.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "core/error.h"

namespace tessera {

// Runs f, which must throw tessera::Error with a one-line message; returns the message (empty,
// with a test failure, when nothing was thrown).
template <typename F>
std::string ErrorOf(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    return msg;
  }
  ADD_FAILURE() << "no error thrown";
  return "";
}

}  // namespace tessera
