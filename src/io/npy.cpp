#include "io/npy.h"

#include <cstring>
#include <regex>

#include "core/error.h"
#include "core/mapped_file.h"

namespace tessera {

NpyArray ReadNpyF32(const std::string& path) {
  const std::string bytes = ReadFile(path);
  if (bytes.size() < 10 || std::memcmp(bytes.data(), "\x93NUMPY", 6) != 0) Fail(path, ": not a .npy file");
  const int major = static_cast<uint8_t>(bytes[6]);
  size_t header_len = 0, offset = 0;
  if (major == 1) {
    header_len = static_cast<uint8_t>(bytes[8]) | (static_cast<size_t>(static_cast<uint8_t>(bytes[9])) << 8);
    offset = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) Fail(path, ": truncated .npy header");
    for (int i = 0; i < 4; ++i) header_len |= static_cast<size_t>(static_cast<uint8_t>(bytes[8 + i])) << (8 * i);
    offset = 12;
  } else {
    Fail(path, ": unsupported .npy version ", major);
  }
  if (offset + header_len > bytes.size()) Fail(path, ": truncated .npy header");
  const std::string header = bytes.substr(offset, header_len);
  std::smatch m;
  if (!std::regex_search(header, m, std::regex(R"('descr':\s*'([^']*)')")) || m[1] != "<f4") {
    Fail(path, ": expected a little-endian float32 array ('<f4')");
  }
  if (!std::regex_search(header, m, std::regex(R"('fortran_order':\s*(True|False))")) || m[1] != "False") {
    Fail(path, ": expected C order");
  }
  if (!std::regex_search(header, m, std::regex(R"('shape':\s*\(([^)]*)\))"))) Fail(path, ": no shape in header");
  NpyArray out;
  const std::string dims = m[1];
  int64_t count = 1;
  const std::regex number(R"(\d+)");
  for (std::sregex_iterator it(dims.begin(), dims.end(), number), end; it != end; ++it) {
    const int64_t d = std::stoll(it->str());
    out.shape.push_back(d);
    count *= d;
  }
  const size_t data_offset = offset + header_len;
  if (bytes.size() - data_offset != static_cast<size_t>(count) * 4) {
    Fail(path, ": data size ", bytes.size() - data_offset, " does not match shape (", count, " floats)");
  }
  out.data.resize(count);
  std::memcpy(out.data.data(), bytes.data() + data_offset, count * 4);
  return out;
}

void WriteNpyF32(const std::string& path, const std::vector<int64_t>& shape, const float* data) {
  std::string dims;
  int64_t count = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    dims += (i ? ", " : "") + std::to_string(shape[i]);
    count *= shape[i];
  }
  if (shape.size() == 1) dims += ",";  // numpy writes (n,) for one dimension, (a, b) otherwise
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  // Pad with spaces so that magic + length + header + '\n' is a multiple of 64 (numpy's rule).
  const size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  out.append(reinterpret_cast<const char*>(data), count * 4);
  WriteFile(path, out);
}

}  // namespace tessera
