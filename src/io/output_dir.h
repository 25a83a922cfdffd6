// Preparing a directory that a command writes a model into (`tessera synth`, `tessera quantize`):
// checks first, changes nothing until Apply, so a refused command leaves the directory as it was.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace tessera {

struct OutputDirPlan {
  std::string dir;
  bool exists = false;
  std::vector<std::string> stale;  // files the command owns there, removed by Apply
  uint64_t stale_bytes = 0;        // the space they free

  // Removes the stale files and creates the directory when it does not exist.
  void Apply() const;
};

// `dir` must not exist, or be a directory that is empty or (with `overwrite`) whose regular files
// named by `owned(file name)` the command replaces. Temporary files an interrupted run left
// (NAME.tmp for an owned NAME, core/temp_file.h) are always stale and do not count as content.
// Throws tessera::Error naming `dir` otherwise.
OutputDirPlan PlanOutputDir(const std::string& dir, bool overwrite,
                            const std::function<bool(const std::string& name)>& owned);

// Throws unless the file system that will hold `dir` (its nearest existing ancestor) has
// `needed` bytes free, counting `reclaimable` bytes that will be freed first. `what` names the
// output in the message ("the model", "the quantized model").
void RequireDiskSpace(const std::string& dir, uint64_t needed, uint64_t reclaimable, std::string_view what);

// "13.76 GB"
std::string FormatGB(uint64_t bytes);

}  // namespace tessera
