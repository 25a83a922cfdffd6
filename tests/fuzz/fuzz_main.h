// What every fuzz target in tests/fuzz/ shares (issue 44 point 6):
//   - the outcome rule: tessera::Error (a clean one-line refusal) is a valid answer to any input,
//     so Guarded() swallows it; any other exception escapes and ends the process (std::terminate
//     names its type and message), which libFuzzer records as a crash like a sanitizer report;
//   - Split(): one input cut into several files at a separator line, so that one mutated buffer
//     can describe a directory (config.json + generation_config.json, an index and its shards);
//   - ScratchDir: a per-process directory for the files a loader needs on disk, emptied before
//     each input and removed at exit;
//   - main() of the ordinary build (without TESSERA_LIBFUZZER): a replayer of corpus files and
//     directories (every regular file inside, in name order), the suite's fuzz.<target>_corpus test.
// Include it in exactly one translation unit per target, which defines LLVMFuzzerTestOneInput.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace tessera::fuzz {

// Seed files mark the boundaries between their parts with this line (chosen so that no real
// JSON, GGUF or safetensors text holds it by chance).
inline constexpr std::string_view kSeparator = "\n#---8<---#\n";

// `input` cut at each kSeparator, at most `max_parts` parts (the last keeps any further
// separators). Always at least one part.
inline std::vector<std::string_view> Split(std::string_view input, size_t max_parts) {
  std::vector<std::string_view> parts;
  while (parts.size() + 1 < max_parts) {
    const size_t at = input.find(kSeparator);
    if (at == std::string_view::npos) break;
    parts.push_back(input.substr(0, at));
    input.remove_prefix(at + kSeparator.size());
  }
  parts.push_back(input);
  return parts;
}

// Runs `body`; a tessera::Error is the refusal the loaders promise for bad input, so it counts as
// handled. Returns whether `body` finished without one. With TESSERA_FUZZ_VERBOSE set, each
// refusal is printed (to see which seeds get past which stage when replaying a corpus).
template <typename F>
bool Guarded(F&& body) {
  try {
    body();
    return true;
  } catch (const Error& e) {
    static const bool verbose = std::getenv("TESSERA_FUZZ_VERBOSE") != nullptr;
    if (verbose) std::fprintf(stderr, "  refused: %s\n", e.what());
    return false;
  }
}

// <temp>/tessera_fuzz_<target>_<pid>: the loaders under test read paths, not buffers.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& target)
      : path_(std::filesystem::temp_directory_path() /
              ("tessera_fuzz_" + target + "_" + std::to_string(::getpid()))) {
    Clear();
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  // Empties the directory (creating it if needed), so that no file of an earlier input remains.
  void Clear() const {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
    std::filesystem::create_directories(path_);
  }
  // Writes `bytes` to `name` inside the directory and returns its path.
  std::string Write(const std::string& name, std::string_view bytes) const {
    const std::string path = (path_ / name).string();
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) {
      std::fprintf(stderr, "fuzz: cannot write %s\n", path.c_str());
      std::abort();  // the harness's own failure, not a finding in the code under test
    }
    return path;
  }
  std::string str() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace tessera::fuzz

#ifndef TESSERA_LIBFUZZER
namespace tessera::fuzz {

inline std::string ReadInput(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "fuzz: cannot read %s\n", path.c_str());
    std::exit(2);
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace tessera::fuzz

// Replays inputs: <target> FILE_OR_DIRECTORY... (a directory: every regular file under it, in
// path order). Prints how many, so that an empty corpus directory is visible in the test log.
int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  std::vector<fs::path> inputs;
  for (int i = 1; i < argc; ++i) {
    const fs::path arg(argv[i]);
    std::error_code ec;
    if (fs::is_directory(arg, ec)) {
      std::vector<fs::path> files;
      for (const auto& entry : fs::recursive_directory_iterator(arg)) {
        if (entry.is_regular_file()) files.push_back(entry.path());
      }
      std::sort(files.begin(), files.end());
      inputs.insert(inputs.end(), files.begin(), files.end());
    } else {
      inputs.push_back(arg);
    }
  }
  const std::string name = fs::path(argv[0]).filename().string();
  for (const fs::path& input : inputs) {
    const std::string bytes = tessera::fuzz::ReadInput(input);
    std::fprintf(stderr, "%s: %s\n", name.c_str(), input.c_str());
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }
  std::printf("%s: replayed %zu input(s), no crash\n", name.c_str(), inputs.size());
  // An empty list is a misconfigured test (a corpus directory that moved), not a pass.
  return inputs.empty() ? 1 : 0;
}
#endif
