#include "io/model_dir.h"

#include <filesystem>

#include "core/error.h"
#include "io/json_util.h"

namespace tessera {

std::string ResolveModelDir(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path dir(path);
  if (!fs::is_directory(dir, ec) || fs::exists(dir / "config.json", ec)) return path;
  const fs::path ref = dir / "refs" / "main";
  if (!fs::is_regular_file(ref, ec) || !fs::is_directory(dir / "snapshots", ec)) return path;

  // refs/main holds a commit hash (40 hex digits) and possibly a trailing newline.
  std::string rev = ReadBoundedFile(ref.string(), 256);
  while (!rev.empty() && (rev.back() == '\n' || rev.back() == '\r' || rev.back() == ' ')) rev.pop_back();
  if (rev.empty()) Fail(ref.string(), ": empty revision");
  for (const char c : rev) {
    const bool ok =
        (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' || c == '_' || c == '.';
    if (!ok || rev == "." || rev == "..") Fail(ref.string(), ": malformed revision ", Quote(rev));
  }
  const fs::path snapshot = dir / "snapshots" / rev;
  if (!fs::is_directory(snapshot, ec)) {
    Fail(path, ": refs/main names revision ", rev, " but snapshots/", rev, " does not exist");
  }
  return snapshot.string();
}

}  // namespace tessera
