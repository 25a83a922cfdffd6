#include "io/output_dir.h"

#include <sys/statvfs.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "core/temp_file.h"

namespace tessera {

namespace fs = std::filesystem;

void OutputDirPlan::Apply() const {
  std::error_code ec;
  for (const std::string& p : stale) {
    if (!fs::remove(p, ec) || ec) Fail(p, ": cannot remove: ", ec.message());
  }
  if (!exists) {
    fs::create_directories(dir, ec);
    if (ec) Fail(dir, ": cannot create directory: ", ec.message());
  }
}

OutputDirPlan PlanOutputDir(const std::string& dir, bool overwrite,
                            const std::function<bool(const std::string& name)>& owned) {
  OutputDirPlan plan;
  plan.dir = dir;
  std::error_code ec;
  if (!fs::exists(dir, ec)) return plan;
  plan.exists = true;
  if (!fs::is_directory(dir, ec)) Fail(dir, ": exists and is not a directory");
  bool empty = true;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const bool regular = entry.is_regular_file();
    // NAME.tmp of a file the command owns: what an interrupted earlier run left; always removed,
    // and it does not make the directory count as non-empty.
    const bool leftover = regular && name.size() > std::strlen(kTempSuffix) && name.ends_with(kTempSuffix) &&
                          owned(name.substr(0, name.size() - std::strlen(kTempSuffix)));
    if (!leftover) empty = false;
    if (regular && (leftover || owned(name))) {
      plan.stale.push_back(entry.path().string());
      plan.stale_bytes += entry.file_size(ec);
    }
  }
  if (ec) Fail(dir, ": cannot list directory: ", ec.message());
  if (!empty && !overwrite) Fail(dir, ": directory is not empty (use --force to replace its model files)");
  return plan;
}

std::string FormatGB(uint64_t bytes) { return StrCat(std::round(bytes / 1e7) / 100.0, " GB"); }

void RequireDiskSpace(const std::string& dir, uint64_t needed, uint64_t reclaimable, std::string_view what) {
  fs::path probe = fs::absolute(dir);
  std::error_code ec;
  while (!fs::exists(probe, ec) && probe.has_parent_path() && probe != probe.parent_path()) {
    probe = probe.parent_path();
  }
  struct statvfs st;
  if (statvfs(probe.c_str(), &st) != 0) Fail(dir, ": cannot query free disk space: ", std::strerror(errno));
  const uint64_t available = static_cast<uint64_t>(st.f_bavail) * st.f_frsize + reclaimable;
  if (available < needed) {
    Fail(dir, ": not enough disk space: ", what, " needs ", FormatGB(needed), ", ", FormatGB(available),
         " available");
  }
}

}  // namespace tessera
