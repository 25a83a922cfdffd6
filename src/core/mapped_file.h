// Read-only memory map of a whole file. Weights are used in place from the map (no copy), so
// the page cache holds the only copy of a checkpoint.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tessera {

class MappedFile {
 public:
  MappedFile() = default;
  // Throws tessera::Error naming the path when the file cannot be opened or mapped.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  void Reset();
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// Drops this process's pages of [p, p + n) inside a MappedFile's map (only the pages wholly
// inside the range, so neighbouring tensors keep theirs). Used once a tensor has been repacked
// into its own buffer, so the model does not keep two resident copies; reading the range again
// later would fault the file's bytes back in, unchanged.
void ReleaseMappedRange(const void* p, size_t n);

// Reads a whole file into a string; throws tessera::Error naming the path on failure.
std::string ReadFile(const std::string& path);
// Writes `size` bytes atomically (temporary file + rename); throws on failure.
void WriteFile(const std::string& path, const void* data, size_t size);
inline void WriteFile(const std::string& path, const std::string& text) {
  WriteFile(path, text.data(), text.size());
}

}  // namespace tessera
