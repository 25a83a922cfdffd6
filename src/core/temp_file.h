// A file written under a temporary name and renamed into place only when complete, so that a
// reader never sees a half-written file under the final name.
//
// The temporary name is the final one plus ".tmp". It is removed when the TempFile is destroyed
// without Commit() (an error), and also when the process is interrupted by SIGINT, SIGTERM or
// SIGHUP while it exists: the first TempFile installs handlers that unlink every live temporary
// file and then let the signal end the process as it would have (exit status 128 + signal).
// A writer killed outright (SIGKILL, power loss) still leaves NAME.tmp behind; writers treat such
// files in their output directory as theirs to remove (io/output_dir.h).
#pragma once

#include <cstddef>
#include <string>

namespace tessera {

class TempFile {
 public:
  // Creates (truncates) `path`.tmp for writing. Throws tessera::Error naming it on failure.
  explicit TempFile(const std::string& path);
  ~TempFile();
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  void Write(const void* data, size_t size);
  // fsync, close and rename over `path`. Throws tessera::Error on failure (the temporary file
  // is then removed by the destructor).
  void Commit();

 private:
  std::string path_, tmp_;
  int fd_ = -1;
  int slot_ = -1;  // index in the interrupt-cleanup registry, or -1
  bool committed_ = false;
};

// The suffix of temporary files.
inline constexpr const char* kTempSuffix = ".tmp";

}  // namespace tessera
