// A directory for one test's files, removed with everything in it when the object goes.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>  // mkdtemp

#include <algorithm>
#include <filesystem>
#include <string>
#include <system_error>

#include "core/error.h"

namespace tessera {

// <temp>/tessera_<suite>_<test>[_<tag>]_XXXXXX: named after the running test (or "suite" outside
// one, as in SetUpTestSuite) so a leftover says where it came from, and made unique by mkdtemp,
// so parallel ctest processes and several objects in one test never share a directory.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& tag = "") {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = "tessera_";
    name += info ? std::string(info->test_suite_name()) + "_" + info->name() : std::string("suite");
    if (!tag.empty()) name += "_" + tag;
    std::replace(name.begin(), name.end(), '/', '_');  // parameterized names are "Name/param"
    std::string pattern = (std::filesystem::temp_directory_path() / (name + "_XXXXXX")).string();
    TESSERA_CHECK(mkdtemp(pattern.data()) != nullptr);
    path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::string str() const { return path_.string(); }
  // The path of `name` inside the directory, as the string loaders and writers take.
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace tessera
