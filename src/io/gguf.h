// GGUF, llama.cpp's single-file model format (versions 2 and 3), read in place from a memory map,
// and written for tests and conversions.
//
// File layout (little-endian):
//   u32 magic "GGUF", u32 version, u64 tensor_count, u64 metadata_kv_count,
//   metadata_kv_count x { string key, u32 value_type, value },
//   tensor_count x { string name, u32 n_dims (1..4), u64 ne[n_dims] (ne[0] varies fastest),
//                    u32 ggml_type, u64 offset (relative to the data section) },
//   zero padding to `general.alignment` (a u32 power of two, default 32), then the data section.
// A string is u64 length + UTF-8 bytes (no terminator); an array is u32 element type + u64 count +
// the elements (arrays of arrays are not used by any writer and are refused).
//
// Every count, length, dimension and offset is checked before it is used: strings, arrays and the
// key and tensor counts may not run past the file nor be larger than a fixed limit, element counts may not overflow, type
// ids must name a ggml type whose block size divides ne[0], tensors must lie aligned inside the
// data section without overlapping. A malformed file gives a one-line tessera::Error naming the
// file and the field ("<path>: tensor 3 ('blk.0.attn_q.weight'): offset 96 is not a multiple of
// the alignment 32").
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "core/mapped_file.h"

namespace tessera {

// GGUF metadata value types (the numbers stored in files).
enum class GgufType : uint32_t {
  kUint8 = 0, kInt8 = 1, kUint16 = 2, kInt16 = 3, kUint32 = 4, kInt32 = 5, kFloat32 = 6, kBool = 7,
  kString = 8, kArray = 9, kUint64 = 10, kInt64 = 11, kFloat64 = 12,
};
std::string_view GgufTypeName(GgufType type);

// One metadata value. Integers of every width are held as int64 / uint64 (their stored type kept
// in `type` so a writer can reproduce it); arrays hold one vector of their element kind.
struct GgufValue {
  GgufType type = GgufType::kUint32;
  GgufType element = GgufType::kUint8;  // arrays only
  std::variant<uint64_t, int64_t, double, bool, std::string, std::vector<uint64_t>, std::vector<int64_t>,
               std::vector<double>, std::vector<bool>, std::vector<std::string>>
      value;
  // Array length (0 for a scalar).
  size_t size() const;
};

// ggml tensor types (the numbers stored in files; ggml.h ggml_type). Ids that ggml has retired
// (4, 5, 31-33, 36-38) are not in the table.
struct GgmlTypeInfo {
  uint32_t id;
  std::string_view name;  // ggml_type_name: "q4_K", "bf16", ...
  uint32_t block_size;    // values per block
  uint32_t block_bytes;   // bytes per block
};
// nullptr for an id ggml does not define.
const GgmlTypeInfo* FindGgmlType(uint32_t id);
const GgmlTypeInfo& GgmlType(std::string_view name);  // by name; throws for an unknown one

struct GgufTensorInfo {
  std::string name;
  std::vector<uint64_t> ne;  // ggml order: ne[0] is the row length
  const GgmlTypeInfo* type = nullptr;
  uint64_t offset = 0;  // relative to the data section
  uint64_t nbytes = 0;

  uint64_t numel() const;
  // Hugging Face order (outermost first): ne reversed.
  std::vector<int64_t> shape() const;
};

struct GgufHeader {
  uint32_t version = 0;
  uint32_t alignment = 32;
  uint64_t data_offset = 0;  // where the data section starts in the file
  std::vector<std::pair<std::string, GgufValue>> metadata;  // file order
  std::vector<GgufTensorInfo> tensors;                      // file order
};

// Parses and validates a GGUF image of `size` bytes. `source` names the file in errors.
GgufHeader ParseGgufHeader(const uint8_t* data, size_t size, const std::string& source);

// True when `data` starts with the GGUF magic (a file to read with GgufFile, not safetensors).
bool LooksLikeGguf(const uint8_t* data, size_t size);
// True for an existing non-directory named *.gguf (whatever it holds: the reader then names what
// is wrong with it), else by the file's first four bytes; false if unreadable.
bool IsGgufPath(const std::string& path);

class GgufFile {
 public:
  // Maps and validates; throws tessera::Error naming the path and the problem.
  static std::unique_ptr<GgufFile> Open(const std::string& path);

  const std::string& path() const { return file_.path(); }
  uint32_t version() const { return header_.version; }
  uint32_t alignment() const { return header_.alignment; }
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return header_.metadata; }
  const std::vector<GgufTensorInfo>& tensors() const { return header_.tensors; }
  uint64_t file_size() const { return file_.size(); }

  const GgufValue* Find(std::string_view key) const;
  const GgufTensorInfo* FindTensor(std::string_view name) const;
  const uint8_t* Data(const GgufTensorInfo& tensor) const { return file_.data() + header_.data_offset + tensor.offset; }

  // Typed metadata access; a missing key or a value of another kind is a one-line error naming
  // the key. Integer getters accept any integer type whose value fits.
  std::string GetString(std::string_view key) const;
  uint64_t GetUint(std::string_view key) const;
  double GetFloat(std::string_view key) const;  // float32 / float64, finite (NaN and inf are refused)
  bool GetBool(std::string_view key) const;
  const std::vector<std::string>& GetStrings(std::string_view key) const;

 private:
  const GgufValue& Get(std::string_view key) const;
  MappedFile file_;
  GgufHeader header_;
  std::unordered_map<std::string, size_t> metadata_index_, tensor_index_;
};

// ---- writing ---------------------------------------------------------------------------------

struct GgufTensorToWrite {
  std::string name;
  std::vector<uint64_t> ne;  // ggml order
  uint32_t type = 0;         // ggml type id
  std::string bytes;         // exactly the tensor's size
};

// Writes a GGUF v3 file atomically (temporary file + rename), tensors in the order given, each
// at the next multiple of the alignment (metadata `general.alignment` if present, else 32).
// Throws tessera::Error for invalid input (a size that does not match the type and shape).
void WriteGguf(const std::string& path, const std::vector<std::pair<std::string, GgufValue>>& metadata,
               const std::vector<GgufTensorToWrite>& tensors);

// Convenience constructors for metadata values.
GgufValue GgufString(std::string s);
GgufValue GgufUint32(uint32_t v);
GgufValue GgufUint64(uint64_t v);
GgufValue GgufInt32(int32_t v);
GgufValue GgufFloat32(float v);
GgufValue GgufBool(bool v);
GgufValue GgufStrings(std::vector<std::string> v);
GgufValue GgufInt32s(std::vector<int64_t> v);
GgufValue GgufFloat32s(std::vector<double> v);

}  // namespace tessera
