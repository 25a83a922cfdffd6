// GGUF reading and writing (gguf.h). The reader walks the header with a bounds-checked cursor:
// nothing is allocated or indexed from a stored count before the count has been checked against
// the bytes that remain.
#include "io/gguf.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

#include "core/error.h"
#include "core/temp_file.h"
#include "io/json_util.h"

namespace tessera {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr uint64_t kMaxString = uint64_t{64} << 20;  // a chat template is tens of KB; no value is near this
constexpr uint64_t kMaxName = 65536;                 // keys and tensor names
constexpr uint32_t kMaxDims = 4;                     // GGML_MAX_DIMS
// Budgets of the header (issue 44). The counts are also checked against the bytes left, but each
// entry read costs more memory than its bytes in the file (a uint8 array element becomes a
// uint64, a 13-byte key-value a ~100-byte entry), so they get fixed caps as well, far above what
// converters write: ~50 keys, ~2,000 tensors (DeepSeek-V3), arrays of <= ~500k entries (the
// token list and merges of a 262k vocabulary).
constexpr uint64_t kMaxMetadata = 65536;
constexpr uint64_t kMaxTensors = uint64_t{1} << 20;
constexpr uint64_t kMaxArray = uint64_t{1} << 22;
// magic, version, tensor count, metadata count: the smallest file there is.
constexpr size_t kFixedHeaderBytes = 24;

// ggml.h ggml_type and ggml.c's type traits: block size and bytes per block.
constexpr std::array kGgmlTypes = {
    GgmlTypeInfo{0, "f32", 1, 4},          GgmlTypeInfo{1, "f16", 1, 2},         GgmlTypeInfo{2, "q4_0", 32, 18},
    GgmlTypeInfo{3, "q4_1", 32, 20},       GgmlTypeInfo{6, "q5_0", 32, 22},      GgmlTypeInfo{7, "q5_1", 32, 24},
    GgmlTypeInfo{8, "q8_0", 32, 34},       GgmlTypeInfo{9, "q8_1", 32, 36},      GgmlTypeInfo{10, "q2_K", 256, 84},
    GgmlTypeInfo{11, "q3_K", 256, 110},    GgmlTypeInfo{12, "q4_K", 256, 144},   GgmlTypeInfo{13, "q5_K", 256, 176},
    GgmlTypeInfo{14, "q6_K", 256, 210},    GgmlTypeInfo{15, "q8_K", 256, 292},   GgmlTypeInfo{16, "iq2_xxs", 256, 66},
    GgmlTypeInfo{17, "iq2_xs", 256, 74},   GgmlTypeInfo{18, "iq3_xxs", 256, 98}, GgmlTypeInfo{19, "iq1_s", 256, 50},
    GgmlTypeInfo{20, "iq4_nl", 32, 18},    GgmlTypeInfo{21, "iq3_s", 256, 110},  GgmlTypeInfo{22, "iq2_s", 256, 82},
    GgmlTypeInfo{23, "iq4_xs", 256, 136},  GgmlTypeInfo{24, "i8", 1, 1},         GgmlTypeInfo{25, "i16", 1, 2},
    GgmlTypeInfo{26, "i32", 1, 4},         GgmlTypeInfo{27, "i64", 1, 8},        GgmlTypeInfo{28, "f64", 1, 8},
    GgmlTypeInfo{29, "iq1_m", 256, 56},    GgmlTypeInfo{30, "bf16", 1, 2},       GgmlTypeInfo{34, "tq1_0", 256, 54},
    GgmlTypeInfo{35, "tq2_0", 256, 66},    GgmlTypeInfo{39, "mxfp4", 32, 17},
};

// Smallest encoding of one array element of `type` in the file (for count checks).
uint64_t MinBytes(GgufType type) {
  switch (type) {
    case GgufType::kUint8: case GgufType::kInt8: case GgufType::kBool: return 1;
    case GgufType::kUint16: case GgufType::kInt16: return 2;
    case GgufType::kUint32: case GgufType::kInt32: case GgufType::kFloat32: return 4;
    case GgufType::kUint64: case GgufType::kInt64: case GgufType::kFloat64: case GgufType::kString: return 8;
    case GgufType::kArray: return 12;
  }
  return 1;
}

bool KnownType(uint32_t type) { return type <= static_cast<uint32_t>(GgufType::kFloat64); }

// Reads little-endian values from [data, data + size), failing with "<source>: <what>: ..." when
// a read would run past the end.
class Cursor {
 public:
  Cursor(const uint8_t* data, size_t size, const std::string& source) : data_(data), size_(size), source_(source) {}

  size_t pos() const { return pos_; }
  uint64_t remaining() const { return size_ - pos_; }

  template <typename T>
  T Read(std::string_view what) {
    if (remaining() < sizeof(T)) {
      Fail(source_, ": ", what, ": the file ends at byte ", size_, " (truncated?)");
    }
    T value;
    std::memcpy(&value, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return value;
  }

  std::string ReadString(std::string_view what, uint64_t max_len) {
    const uint64_t len = Read<uint64_t>(what);
    if (len > remaining()) Fail(source_, ": ", what, ": string length ", len, " runs past the end of the file");
    if (len > max_len) Fail(source_, ": ", what, ": string length ", len, " exceeds the limit of ", max_len, " bytes");
    std::string out(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(len));
    pos_ += static_cast<size_t>(len);
    return out;
  }

  // A count of elements at least `min_bytes` each: must fit in what remains, and be at most
  // `max_count` (checked second, so a count past the file is reported as such).
  uint64_t ReadCount(std::string_view what, uint64_t min_bytes, uint64_t max_count) {
    const uint64_t count = Read<uint64_t>(what);
    if (min_bytes > 0 && count > remaining() / min_bytes) {
      Fail(source_, ": ", what, ": count ", count, " needs more bytes than the file has left (", remaining(), ")");
    }
    if (count > max_count) Fail(source_, ": ", what, ": count ", count, " exceeds the limit of ", max_count);
    return count;
  }

 private:
  const uint8_t* data_;
  size_t size_, pos_ = 0;
  const std::string& source_;
};

template <typename Int>
uint64_t ReadUnsigned(Cursor& in, std::string_view what) {
  return static_cast<uint64_t>(in.Read<Int>(what));
}
template <typename Int>
int64_t ReadSigned(Cursor& in, std::string_view what) {
  return static_cast<int64_t>(in.Read<Int>(what));
}

bool ReadBool(Cursor& in, const std::string& source, std::string_view what) {
  const uint8_t byte = in.Read<uint8_t>(what);
  if (byte > 1) Fail(source, ": ", what, ": a bool holds ", int{byte}, " (0 or 1 only)");
  return byte == 1;
}

// One scalar of `type` (not an array) into `out`.
void ReadScalar(Cursor& in, GgufType type, const std::string& source, std::string_view what, GgufValue& out) {
  switch (type) {
    case GgufType::kUint8: out.value = ReadUnsigned<uint8_t>(in, what); return;
    case GgufType::kUint16: out.value = ReadUnsigned<uint16_t>(in, what); return;
    case GgufType::kUint32: out.value = ReadUnsigned<uint32_t>(in, what); return;
    case GgufType::kUint64: out.value = ReadUnsigned<uint64_t>(in, what); return;
    case GgufType::kInt8: out.value = ReadSigned<int8_t>(in, what); return;
    case GgufType::kInt16: out.value = ReadSigned<int16_t>(in, what); return;
    case GgufType::kInt32: out.value = ReadSigned<int32_t>(in, what); return;
    case GgufType::kInt64: out.value = ReadSigned<int64_t>(in, what); return;
    case GgufType::kFloat32: out.value = static_cast<double>(in.Read<float>(what)); return;
    case GgufType::kFloat64: out.value = in.Read<double>(what); return;
    case GgufType::kBool: out.value = ReadBool(in, source, what); return;
    case GgufType::kString: out.value = in.ReadString(what, kMaxString); return;
    case GgufType::kArray: break;
  }
  TESSERA_CHECK(false);
}

template <typename Vector, typename Element>
Vector ReadElements(Cursor& in, uint64_t count, Element (*read)(Cursor&, std::string_view), std::string_view what) {
  Vector out;
  out.reserve(static_cast<size_t>(count));
  for (uint64_t i = 0; i < count; ++i) out.push_back(read(in, what));
  return out;
}

double ReadF32(Cursor& in, std::string_view what) { return static_cast<double>(in.Read<float>(what)); }
double ReadF64(Cursor& in, std::string_view what) { return in.Read<double>(what); }

GgufValue ReadValue(Cursor& in, const std::string& source, const std::string& key) {
  const std::string what = StrCat("metadata ", Quote(key));
  const uint32_t type_id = in.Read<uint32_t>(what);
  if (!KnownType(type_id)) Fail(source, ": ", what, ": value type ", type_id, " is not a GGUF type (0-12)");
  GgufValue value;
  value.type = static_cast<GgufType>(type_id);
  if (value.type != GgufType::kArray) {
    ReadScalar(in, value.type, source, what, value);
    return value;
  }
  const uint32_t element_id = in.Read<uint32_t>(what);
  if (!KnownType(element_id)) Fail(source, ": ", what, ": array element type ", element_id, " is not a GGUF type (0-12)");
  value.element = static_cast<GgufType>(element_id);
  if (value.element == GgufType::kArray) Fail(source, ": ", what, ": arrays of arrays are not supported");
  const uint64_t count = in.ReadCount(what, MinBytes(value.element), kMaxArray);
  switch (value.element) {
    case GgufType::kUint8: value.value = ReadElements<std::vector<uint64_t>>(in, count, ReadUnsigned<uint8_t>, what); break;
    case GgufType::kUint16: value.value = ReadElements<std::vector<uint64_t>>(in, count, ReadUnsigned<uint16_t>, what); break;
    case GgufType::kUint32: value.value = ReadElements<std::vector<uint64_t>>(in, count, ReadUnsigned<uint32_t>, what); break;
    case GgufType::kUint64: value.value = ReadElements<std::vector<uint64_t>>(in, count, ReadUnsigned<uint64_t>, what); break;
    case GgufType::kInt8: value.value = ReadElements<std::vector<int64_t>>(in, count, ReadSigned<int8_t>, what); break;
    case GgufType::kInt16: value.value = ReadElements<std::vector<int64_t>>(in, count, ReadSigned<int16_t>, what); break;
    case GgufType::kInt32: value.value = ReadElements<std::vector<int64_t>>(in, count, ReadSigned<int32_t>, what); break;
    case GgufType::kInt64: value.value = ReadElements<std::vector<int64_t>>(in, count, ReadSigned<int64_t>, what); break;
    case GgufType::kFloat32: value.value = ReadElements<std::vector<double>>(in, count, ReadF32, what); break;
    case GgufType::kFloat64: value.value = ReadElements<std::vector<double>>(in, count, ReadF64, what); break;
    case GgufType::kBool: {
      std::vector<bool> bools;
      bools.reserve(static_cast<size_t>(count));
      for (uint64_t i = 0; i < count; ++i) bools.push_back(ReadBool(in, source, what));
      value.value = std::move(bools);
      break;
    }
    case GgufType::kString: {
      std::vector<std::string> strings;
      strings.reserve(static_cast<size_t>(count));
      for (uint64_t i = 0; i < count; ++i) strings.push_back(in.ReadString(what, kMaxString));
      value.value = std::move(strings);
      break;
    }
    case GgufType::kArray: break;
  }
  return value;
}

bool MulOverflows(uint64_t a, uint64_t b, uint64_t& out) { return __builtin_mul_overflow(a, b, &out); }

}  // namespace

std::string_view GgufTypeName(GgufType type) {
  static constexpr std::array<std::string_view, 13> kNames = {"uint8", "int8",  "uint16", "int16", "uint32", "int32", "float32",
                                                               "bool",  "string", "array", "uint64", "int64", "float64"};
  const auto i = static_cast<size_t>(type);
  return i < kNames.size() ? kNames[i] : "unknown";
}

size_t GgufValue::size() const {
  if (type != GgufType::kArray) return 0;
  return std::visit(
      [](const auto& v) -> size_t {
        if constexpr (requires { v.size(); } && !std::is_same_v<std::decay_t<decltype(v)>, std::string>) {
          return v.size();
        } else {
          return 0;
        }
      },
      value);
}

const GgmlTypeInfo* FindGgmlType(uint32_t id) {
  for (const GgmlTypeInfo& t : kGgmlTypes) {
    if (t.id == id) return &t;
  }
  return nullptr;
}

const GgmlTypeInfo& GgmlType(std::string_view name) {
  for (const GgmlTypeInfo& t : kGgmlTypes) {
    if (t.name == name) return t;
  }
  Fail("unknown ggml type ", Quote(name));
}

uint64_t GgufTensorInfo::numel() const {
  uint64_t n = 1;
  for (uint64_t d : ne) n *= d;
  return n;
}

std::vector<int64_t> GgufTensorInfo::shape() const {
  std::vector<int64_t> out;
  for (auto it = ne.rbegin(); it != ne.rend(); ++it) out.push_back(static_cast<int64_t>(*it));
  return out;
}

bool LooksLikeGguf(const uint8_t* data, size_t size) {
  uint32_t magic = 0;
  if (size < 4) return false;
  std::memcpy(&magic, data, 4);
  return magic == kMagic;
}

GgufHeader ParseGgufHeader(const uint8_t* data, size_t size, const std::string& source) {
  Cursor in(data, size, source);
  // A file too short for the fixed header is named as truncated when what it has is a GGUF
  // start (an empty file included), rather than by the first field that runs out.
  uint32_t magic = kMagic;
  if (size > 0) std::memcpy(&magic, data, std::min<size_t>(size, 4));  // the bytes present; the rest stay 'GGUF'
  if (magic != kMagic) Fail(source, ": not a GGUF file (the first four bytes are not 'GGUF')");
  if (size < kFixedHeaderBytes) {
    Fail(source, ": truncated GGUF file: ", size, " bytes, a header needs at least ", kFixedHeaderBytes);
  }
  in.Read<uint32_t>("magic");
  GgufHeader header;
  header.version = in.Read<uint32_t>("version");
  if (header.version == 1) Fail(source, ": GGUF version 1 is not supported (re-convert with a current llama.cpp)");
  if ((header.version & 0xffff) == 0 && header.version != 0) {
    Fail(source, ": a big-endian GGUF file (version field ", header.version, "); only little-endian files are read");
  }
  if (header.version < 2 || header.version > 3) Fail(source, ": GGUF version ", header.version, " is not supported (2 and 3 are)");
  // The smallest tensor info is 8 (name length) + 4 + 8 + 4 + 8 bytes, the smallest KV 8 + 4 + 1.
  const uint64_t tensor_count = in.ReadCount("tensor count", 32, kMaxTensors);
  const uint64_t kv_count = in.ReadCount("metadata count", 13, kMaxMetadata);

  std::unordered_map<std::string, size_t> seen;
  header.metadata.reserve(static_cast<size_t>(kv_count));
  for (uint64_t i = 0; i < kv_count; ++i) {
    std::string key = in.ReadString(StrCat("metadata key ", i), kMaxName);
    if (key.empty()) Fail(source, ": metadata key ", i, " is empty");
    GgufValue value = ReadValue(in, source, key);
    if (!seen.emplace(key, i).second) Fail(source, ": metadata key ", Quote(key), " appears twice");
    header.metadata.emplace_back(std::move(key), std::move(value));
  }
  if (auto it = seen.find("general.alignment"); it != seen.end()) {
    const GgufValue& v = header.metadata[it->second].second;
    if (v.type != GgufType::kUint32) {
      Fail(source, ": metadata 'general.alignment' is a ", GgufTypeName(v.type), " (a uint32 is required)");
    }
    const uint64_t alignment = std::get<uint64_t>(v.value);
    if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
      Fail(source, ": metadata 'general.alignment' is ", alignment, " (a power of two is required)");
    }
    header.alignment = static_cast<uint32_t>(alignment);
  }

  std::unordered_map<std::string, size_t> names;
  header.tensors.reserve(static_cast<size_t>(tensor_count));
  for (uint64_t i = 0; i < tensor_count; ++i) {
    GgufTensorInfo t;
    t.name = in.ReadString(StrCat("tensor ", i, " name"), kMaxName);
    const std::string what = StrCat("tensor ", i, " (", Quote(t.name), ")");
    const uint32_t dims = in.Read<uint32_t>(what);
    if (dims == 0 || dims > kMaxDims) Fail(source, ": ", what, ": ", dims, " dimensions (1 to ", kMaxDims, " allowed)");
    uint64_t numel = 1;
    for (uint32_t d = 0; d < dims; ++d) {
      const uint64_t ne = in.Read<uint64_t>(what);
      if (ne == 0 || ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        Fail(source, ": ", what, ": dimension ", d, " is ", ne);
      }
      if (MulOverflows(numel, ne, numel) || numel > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        Fail(source, ": ", what, ": the element count overflows");
      }
      t.ne.push_back(ne);
    }
    const uint32_t type_id = in.Read<uint32_t>(what);
    t.type = FindGgmlType(type_id);
    if (t.type == nullptr) Fail(source, ": ", what, ": type id ", type_id, " is not a ggml type this reader knows");
    if (t.ne[0] % t.type->block_size != 0) {
      Fail(source, ": ", what, ": row length ", t.ne[0], " is not a multiple of ", t.type->name, "'s block of ",
           t.type->block_size);
    }
    if (MulOverflows(numel / t.type->block_size, t.type->block_bytes, t.nbytes)) {
      Fail(source, ": ", what, ": the byte size overflows");
    }
    t.offset = in.Read<uint64_t>(what);
    if (!names.emplace(t.name, i).second) Fail(source, ": tensor name ", Quote(t.name), " appears twice");
    header.tensors.push_back(std::move(t));
  }

  const uint64_t header_end = in.pos();
  header.data_offset = (header_end + header.alignment - 1) / header.alignment * header.alignment;
  const uint64_t data_size = header.data_offset <= size ? size - header.data_offset : 0;
  if (!header.tensors.empty() && header.data_offset > size) {
    Fail(source, ": the data section would start at byte ", header.data_offset, ", past the end of the file (", size, ")");
  }
  std::vector<const GgufTensorInfo*> by_offset;
  for (const GgufTensorInfo& t : header.tensors) {
    const std::string what = StrCat("tensor ", Quote(t.name));
    if (t.offset % header.alignment != 0) {
      Fail(source, ": ", what, ": offset ", t.offset, " is not a multiple of the alignment ", header.alignment);
    }
    if (t.offset > data_size || t.nbytes > data_size - t.offset) {
      Fail(source, ": ", what, ": bytes [", t.offset, ", ", t.offset + t.nbytes, ") of the data section run past its end (",
           data_size, " bytes; truncated?)");
    }
    by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    if (by_offset[i - 1]->offset + by_offset[i - 1]->nbytes > by_offset[i]->offset) {
      Fail(source, ": tensors ", Quote(by_offset[i - 1]->name), " and ", Quote(by_offset[i]->name), " overlap");
    }
  }
  return header;
}

bool IsGgufPath(const std::string& path) {
  // A file named *.gguf is a GGUF file whatever it holds, so an empty, short or damaged one is
  // reported by the GGUF reader ("x.gguf: truncated GGUF file: ...") rather than taken for a
  // model directory ("x.gguf/config.json: Not a directory"). Anything but a directory counts,
  // so that a FIFO is refused by MappedFile as not a regular file.
  std::error_code ec;
  if (path.ends_with(".gguf") && std::filesystem::exists(path, ec) && !std::filesystem::is_directory(path, ec)) {
    return true;
  }
  try {
    const MappedFile file(path);
    return LooksLikeGguf(file.data(), file.size());
  } catch (const Error&) {
    return false;
  }
}

std::unique_ptr<GgufFile> GgufFile::Open(const std::string& path) {
  auto out = std::unique_ptr<GgufFile>(new GgufFile());
  out->file_ = MappedFile(path);
  out->header_ = ParseGgufHeader(out->file_.data(), out->file_.size(), path);
  for (size_t i = 0; i < out->header_.metadata.size(); ++i) out->metadata_index_.emplace(out->header_.metadata[i].first, i);
  for (size_t i = 0; i < out->header_.tensors.size(); ++i) out->tensor_index_.emplace(out->header_.tensors[i].name, i);
  return out;
}

const GgufValue* GgufFile::Find(std::string_view key) const {
  const auto it = metadata_index_.find(std::string(key));
  return it == metadata_index_.end() ? nullptr : &header_.metadata[it->second].second;
}

const GgufTensorInfo* GgufFile::FindTensor(std::string_view name) const {
  const auto it = tensor_index_.find(std::string(name));
  return it == tensor_index_.end() ? nullptr : &header_.tensors[it->second];
}

const GgufValue& GgufFile::Get(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) Fail(path(), ": metadata ", Quote(key), " is missing");
  return *v;
}

std::string GgufFile::GetString(std::string_view key) const {
  const GgufValue& v = Get(key);
  if (v.type != GgufType::kString) Fail(path(), ": metadata ", Quote(key), " is a ", GgufTypeName(v.type), ", not a string");
  return std::get<std::string>(v.value);
}

uint64_t GgufFile::GetUint(std::string_view key) const {
  const GgufValue& v = Get(key);
  if (const auto* u = std::get_if<uint64_t>(&v.value); u != nullptr && v.type != GgufType::kArray) return *u;
  if (const auto* s = std::get_if<int64_t>(&v.value); s != nullptr && v.type != GgufType::kArray) {
    if (*s >= 0) return static_cast<uint64_t>(*s);
    Fail(path(), ": metadata ", Quote(key), " is ", *s, " (a count must not be negative)");
  }
  Fail(path(), ": metadata ", Quote(key), " is a ", GgufTypeName(v.type), ", not an integer");
}

double GgufFile::GetFloat(std::string_view key) const {
  const GgufValue& v = Get(key);
  if (v.type != GgufType::kFloat32 && v.type != GgufType::kFloat64) {
    Fail(path(), ": metadata ", Quote(key), " is a ", GgufTypeName(v.type), ", not a float");
  }
  // Every reader wants a number: a NaN would otherwise reach a config as JSON null, i.e. as an
  // absent key that quietly takes its default (issue 44).
  const double value = std::get<double>(v.value);
  if (!std::isfinite(value)) Fail(path(), ": metadata ", Quote(key), " is ", value, " (a finite number is required)");
  return value;
}

bool GgufFile::GetBool(std::string_view key) const {
  const GgufValue& v = Get(key);
  if (v.type != GgufType::kBool) Fail(path(), ": metadata ", Quote(key), " is a ", GgufTypeName(v.type), ", not a bool");
  return std::get<bool>(v.value);
}

const std::vector<std::string>& GgufFile::GetStrings(std::string_view key) const {
  const GgufValue& v = Get(key);
  if (v.type != GgufType::kArray || v.element != GgufType::kString) {
    Fail(path(), ": metadata ", Quote(key), " is not an array of strings");
  }
  return std::get<std::vector<std::string>>(v.value);
}

// ---- writing ---------------------------------------------------------------------------------

namespace {

class Writer {
 public:
  template <typename T>
  void Put(T value) {
    const auto* p = reinterpret_cast<const char*>(&value);
    bytes_.append(p, sizeof(T));
  }
  void PutString(std::string_view s) {
    Put<uint64_t>(s.size());
    bytes_.append(s);
  }
  void PutScalar(GgufType type, const GgufValue& v, size_t index) {
    auto integer = [&]() -> uint64_t {
      if (v.type == GgufType::kArray) {
        if (const auto* u = std::get_if<std::vector<uint64_t>>(&v.value)) return (*u)[index];
        return static_cast<uint64_t>(std::get<std::vector<int64_t>>(v.value)[index]);
      }
      if (const auto* u = std::get_if<uint64_t>(&v.value)) return *u;
      return static_cast<uint64_t>(std::get<int64_t>(v.value));
    };
    auto real = [&]() { return v.type == GgufType::kArray ? std::get<std::vector<double>>(v.value)[index] : std::get<double>(v.value); };
    switch (type) {
      case GgufType::kUint8: case GgufType::kInt8: Put<uint8_t>(static_cast<uint8_t>(integer())); return;
      case GgufType::kUint16: case GgufType::kInt16: Put<uint16_t>(static_cast<uint16_t>(integer())); return;
      case GgufType::kUint32: case GgufType::kInt32: Put<uint32_t>(static_cast<uint32_t>(integer())); return;
      case GgufType::kUint64: case GgufType::kInt64: Put<uint64_t>(integer()); return;
      case GgufType::kFloat32: Put<float>(static_cast<float>(real())); return;
      case GgufType::kFloat64: Put<double>(real()); return;
      case GgufType::kBool:
        Put<uint8_t>(v.type == GgufType::kArray ? std::get<std::vector<bool>>(v.value)[index] : std::get<bool>(v.value));
        return;
      case GgufType::kString:
        PutString(v.type == GgufType::kArray ? std::get<std::vector<std::string>>(v.value)[index] : std::get<std::string>(v.value));
        return;
      case GgufType::kArray: break;
    }
    TESSERA_CHECK(false);
  }
  void Pad(uint64_t alignment) {
    while (bytes_.size() % alignment != 0) bytes_.push_back('\0');
  }
  std::string& bytes() { return bytes_; }

 private:
  std::string bytes_;
};

}  // namespace

void WriteGguf(const std::string& path, const std::vector<std::pair<std::string, GgufValue>>& metadata,
               const std::vector<GgufTensorToWrite>& tensors) {
  uint64_t alignment = 32;
  for (const auto& [key, value] : metadata) {
    if (key == "general.alignment") alignment = std::get<uint64_t>(value.value);
  }
  Writer out;
  out.Put<uint32_t>(kMagic);
  out.Put<uint32_t>(3);
  out.Put<uint64_t>(tensors.size());
  out.Put<uint64_t>(metadata.size());
  for (const auto& [key, value] : metadata) {
    out.PutString(key);
    out.Put<uint32_t>(static_cast<uint32_t>(value.type));
    if (value.type != GgufType::kArray) {
      out.PutScalar(value.type, value, 0);
      continue;
    }
    out.Put<uint32_t>(static_cast<uint32_t>(value.element));
    out.Put<uint64_t>(value.size());
    for (size_t i = 0; i < value.size(); ++i) out.PutScalar(value.element, value, i);
  }
  uint64_t offset = 0;
  for (const GgufTensorToWrite& t : tensors) {
    const GgmlTypeInfo* type = FindGgmlType(t.type);
    if (type == nullptr) Fail(path, ": tensor ", Quote(t.name), ": unknown ggml type id ", t.type);
    uint64_t numel = 1;
    for (uint64_t d : t.ne) numel *= d;
    if (t.ne.empty() || t.ne[0] % type->block_size != 0 || numel / type->block_size * type->block_bytes != t.bytes.size()) {
      Fail(path, ": tensor ", Quote(t.name), ": ", t.bytes.size(), " bytes do not match its ", type->name, " shape");
    }
    out.PutString(t.name);
    out.Put<uint32_t>(static_cast<uint32_t>(t.ne.size()));
    for (uint64_t d : t.ne) out.Put<uint64_t>(d);
    out.Put<uint32_t>(t.type);
    out.Put<uint64_t>(offset);
    offset = (offset + t.bytes.size() + alignment - 1) / alignment * alignment;
  }
  out.Pad(alignment);
  for (const GgufTensorToWrite& t : tensors) {
    out.bytes().append(t.bytes);
    out.Pad(alignment);
  }
  WriteFile(path, out.bytes());
}

GgufValue GgufString(std::string s) { return GgufValue{GgufType::kString, GgufType::kUint8, std::move(s)}; }
GgufValue GgufUint32(uint32_t v) { return GgufValue{GgufType::kUint32, GgufType::kUint8, uint64_t{v}}; }
GgufValue GgufUint64(uint64_t v) { return GgufValue{GgufType::kUint64, GgufType::kUint8, v}; }
GgufValue GgufInt32(int32_t v) { return GgufValue{GgufType::kInt32, GgufType::kUint8, int64_t{v}}; }
GgufValue GgufFloat32(float v) { return GgufValue{GgufType::kFloat32, GgufType::kUint8, static_cast<double>(v)}; }
GgufValue GgufBool(bool v) { return GgufValue{GgufType::kBool, GgufType::kUint8, v}; }
GgufValue GgufStrings(std::vector<std::string> v) { return GgufValue{GgufType::kArray, GgufType::kString, std::move(v)}; }
GgufValue GgufInt32s(std::vector<int64_t> v) { return GgufValue{GgufType::kArray, GgufType::kInt32, std::move(v)}; }
GgufValue GgufFloat32s(std::vector<double> v) { return GgufValue{GgufType::kArray, GgufType::kFloat32, std::move(v)}; }

}  // namespace tessera
