// NumPy .npy files (format version 1.0/2.0) holding little-endian float32 arrays: what
// `tessera logits --out` writes and what the golden tests read (tools/ writes them with numpy).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessera {

struct NpyArray {
  std::vector<int64_t> shape;
  std::vector<float> data;  // C order
};

// Reads a C-order '<f4' array; anything else is a tessera::Error naming the file.
NpyArray ReadNpyF32(const std::string& path);
// Writes `data` (product of `shape` elements, C order) as a version 1.0 '<f4' file.
void WriteNpyF32(const std::string& path, const std::vector<int64_t>& shape, const float* data);

}  // namespace tessera
