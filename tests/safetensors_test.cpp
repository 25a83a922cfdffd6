// Safetensors reader and writer: round trips, interop with the reference implementation
// (fixtures written by Python safetensors 0.7.0, tools/make_io_fixtures.py), every header
// validation rule of the reference reader (ecosystem.md §4), sharded directories (gpt-oss.md §1.4)
// and a randomized-corruption run over the header parser.
#include "io/safetensors.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "io/json_util.h"
#include "test_util.h"
#include "scratch_dir.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

const std::string kData = std::string(TESSERA_TEST_DATA) + "/io";

// Byte i of a pattern tensor, as tools/make_io_fixtures.py writes it.
uint8_t PatternByte(size_t i, int seed) { return static_cast<uint8_t>((i * 7 + seed) & 0xff); }

TensorFiller PatternFiller(int seed) {
  return [seed](uint8_t* dst, size_t n) {
    for (size_t i = 0; i < n; ++i) dst[i] = PatternByte(i, seed);
  };
}

TensorFiller BytesFiller(std::vector<uint8_t> bytes) {
  return [bytes = std::move(bytes)](uint8_t* dst, size_t n) {
    ASSERT_EQ(n, bytes.size());
    if (n > 0) std::memcpy(dst, bytes.data(), n);
  };
}

std::vector<uint8_t> ReadBytes(const std::string& path) {
  const std::string s = ReadFile(path);
  return std::vector<uint8_t>(s.begin(), s.end());
}

std::vector<uint8_t> ViewBytes(const TensorView& v) { return std::vector<uint8_t>(v.data, v.data + v.nbytes()); }

// A safetensors image: length prefix, `header` padded with spaces to a multiple of 8 (unless
// `pad` is false), then `data_bytes` bytes of data.
std::vector<uint8_t> Image(const std::string& header, size_t data_bytes, bool pad = true) {
  std::string h = header;
  if (pad) h.append((8 - h.size() % 8) % 8, ' ');
  std::vector<uint8_t> out(8 + h.size() + data_bytes, 0);
  const uint64_t n = h.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(n >> (8 * i));
  std::memcpy(out.data() + 8, h.data(), h.size());
  return out;
}

// Asserts the parse fails with a one-line "<source>: ..." message containing `substring`.
void ExpectHeaderError(const std::vector<uint8_t>& image, const std::string& substring) {
  try {
    ParseSafetensorsHeader(image.data(), image.size(), "test.safetensors");
    ADD_FAILURE() << "no error; expected one containing \"" << substring << "\"";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind("test.safetensors: ", 0), 0u) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    EXPECT_NE(msg.find(substring), std::string::npos) << "message: " << msg << "\nexpected: " << substring;
  }
}

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

const char* kAllDTypeNames[] = {"BOOL", "U8",  "I8",   "U16", "I16", "U32",     "I32",     "U64",
                                "I64",  "F16", "BF16", "F32", "F64", "F8_E4M3", "F8_E5M2", "F8_E8M0"};

// ---- round trips -------------------------------------------------------------------------------

TEST(SafetensorsRoundTrip, EveryDTypeScalarAndZeroSize) {
  ScratchDir dir;
  std::vector<TensorToWrite> tensors;
  int seed = 0;
  for (const char* name : kAllDTypeNames) {
    const DType dtype = *DTypeFromName(name);
    // An odd shape, a scalar and a zero-size tensor of every type.
    tensors.push_back({StrCat("t.", name), dtype, {3, 5}, PatternFiller(++seed)});
    tensors.push_back({StrCat("scalar.", name), dtype, {}, PatternFiller(++seed)});
    tensors.push_back({StrCat("empty.", name), dtype, {4, 0, 2}, PatternFiller(++seed)});
  }
  const std::map<std::string, std::string> metadata = {{"format", "pt"}, {"note", "ünïcode \"quoted\"\n"}};
  const std::string path = dir / "model.safetensors";
  WriteSafetensors(path, tensors, metadata);

  const auto file = SafetensorsFile::Open(path);
  EXPECT_EQ(file.metadata(), metadata);
  ASSERT_EQ(file.tensors().size(), tensors.size());
  seed = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& want = tensors[i];
    const auto& got = file.tensors()[i];  // header order = write order
    ++seed;
    EXPECT_EQ(got.name, want.name);
    EXPECT_EQ(got.dtype, want.dtype);
    EXPECT_EQ(got.shape, want.shape);
    uint64_t numel = 1;
    for (const int64_t d : want.shape) numel *= static_cast<uint64_t>(d);
    EXPECT_EQ(got.numel(), numel) << want.name;
    EXPECT_EQ(got.nbytes(), numel * DTypeSize(want.dtype)) << want.name;
    const TensorView view = file.View(got);
    EXPECT_EQ(*view.file, path);
    for (size_t b = 0; b < view.nbytes(); ++b)
      ASSERT_EQ(view.data[b], PatternByte(b, seed)) << want.name << " byte " << b;
    EXPECT_EQ(file.Find(want.name), &got);
  }
  EXPECT_EQ(file.Find("absent"), nullptr);

  // The data section starts 8-aligned: the writer pads the header with spaces.
  const auto bytes = ReadBytes(path);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ((8 + n) % 8, 0u);
  EXPECT_EQ(bytes[8], '{');

  // The same file through WeightStore, as a file and as a model directory.
  for (const std::string& p : {path, dir.path().string()}) {
    const auto store = WeightStore::Open(p);
    EXPECT_EQ(store.num_tensors(), tensors.size());
    std::vector<std::string> names;
    for (const auto& t : tensors) names.push_back(t.name);
    std::sort(names.begin(), names.end());
    EXPECT_EQ(store.names(), names);
    const TensorView v = store.Get("t.BF16");
    EXPECT_EQ(v.dtype(), DType::kBF16);
    EXPECT_EQ(v.shape(), (std::vector<int64_t>{3, 5}));
    EXPECT_FALSE(store.Find("nope").has_value());
    EXPECT_NE(ErrorOf([&] { store.Get("nope"); }).find("tensor 'nope' not found"), std::string::npos);
  }
}

TEST(SafetensorsRoundTrip, EmptyFileAndNoMetadata) {
  ScratchDir dir;
  const std::string path = dir / "empty.safetensors";
  WriteSafetensors(path, {});
  const auto bytes = ReadBytes(path);
  EXPECT_EQ(bytes.size(), 16u);  // 8 + "{}" padded to 8
  const auto file = SafetensorsFile::Open(path);
  EXPECT_TRUE(file.tensors().empty());
  EXPECT_TRUE(file.metadata().empty());
}

TEST(SafetensorsRoundTrip, FillerCalledOncePerTensorInOrderWithItsSize) {
  ScratchDir dir;
  std::vector<std::pair<std::string, size_t>> calls;
  auto recorder = [&calls](std::string name) {
    return [&calls, name](uint8_t* dst, size_t n) {
      calls.emplace_back(name, n);
      std::memset(dst, 0x5a, n);
    };
  };
  WriteSafetensors(dir / "x.safetensors", {{"b", DType::kF32, {2, 3}, recorder("b")},
                                           {"a", DType::kBF16, {7}, recorder("a")},
                                           {"c", DType::kU8, {0}, recorder("c")}});
  EXPECT_EQ(calls, (std::vector<std::pair<std::string, size_t>>{{"b", 24}, {"a", 14}, {"c", 0}}));
  const auto file = SafetensorsFile::Open(dir / "x.safetensors");
  EXPECT_EQ(file.tensors()[0].name, "b");  // the given order is kept
  EXPECT_EQ(file.tensors()[0].begin, 0u);
  EXPECT_EQ(file.tensors()[1].begin, 24u);
}

TEST(SafetensorsRoundTrip, ShardedGreedyPackingAndIndex) {
  ScratchDir dir;
  // Sizes in bytes: 40, 40, 40, 200 (larger than a shard), 8, 8.
  std::vector<TensorToWrite> tensors = {
      {"l0.a", DType::kF32, {10}, PatternFiller(1)}, {"l0.b", DType::kBF16, {20}, PatternFiller(2)},
      {"l1.a", DType::kU8, {40}, PatternFiller(3)},  {"big", DType::kF64, {25}, PatternFiller(4)},
      {"s1", DType::kI64, {}, PatternFiller(5)},     {"s2", DType::kI32, {2}, PatternFiller(6)},
  };
  const auto written = WriteShardedSafetensors(dir.path().string(), tensors, 100);
  // [l0.a l0.b] = 80, l1.a would make 120 > 100; [l1.a], [big] alone, [s1 s2] = 16.
  const std::vector<std::string> want = {"model-00001-of-00004.safetensors", "model-00002-of-00004.safetensors",
                                         "model-00003-of-00004.safetensors", "model-00004-of-00004.safetensors",
                                         "model.safetensors.index.json"};
  EXPECT_EQ(written, want);
  const auto index = ParseJsonText(ReadFile(dir / "model.safetensors.index.json"), "index");
  EXPECT_EQ(index["metadata"]["total_size"], 336);
  EXPECT_EQ(index["weight_map"]["l0.b"], "model-00001-of-00004.safetensors");
  EXPECT_EQ(index["weight_map"]["l1.a"], "model-00002-of-00004.safetensors");
  EXPECT_EQ(index["weight_map"]["big"], "model-00003-of-00004.safetensors");
  EXPECT_EQ(index["weight_map"]["s2"], "model-00004-of-00004.safetensors");
  EXPECT_EQ(index["weight_map"].size(), 6u);

  const auto store = WeightStore::Open(dir.path().string());
  EXPECT_EQ(store.files().size(), 4u);
  EXPECT_EQ(store.num_tensors(), 6u);
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorView v = store.Get(tensors[i].name);
    EXPECT_EQ(v.dtype(), tensors[i].dtype);
    EXPECT_EQ(v.shape(), tensors[i].shape);
    for (size_t b = 0; b < v.nbytes(); ++b) ASSERT_EQ(v.data[b], PatternByte(b, static_cast<int>(i) + 1));
    EXPECT_NE(v.file->find(written[i < 2 ? 0 : i == 2 ? 1 : i == 3 ? 2 : 3]), std::string::npos) << *v.file;
  }
  // Every shard is tagged like HF's save_pretrained.
  EXPECT_EQ(store.files()[0]->metadata().at("format"), "pt");
}

TEST(SafetensorsRoundTrip, ShardedWritesOneFileWhenItFitsAndDropsAStaleIndex) {
  ScratchDir dir;
  std::vector<TensorToWrite> tensors = {{"a", DType::kF32, {4}, PatternFiller(1)},
                                        {"b", DType::kU8, {3}, PatternFiller(2)}};
  WriteShardedSafetensors(dir.path().string(), tensors, 8);  // 19 bytes > 8: sharded
  ASSERT_TRUE(fs::exists(dir / "model.safetensors.index.json"));
  const auto written = WriteShardedSafetensors(dir.path().string(), tensors, 19);  // fits exactly
  EXPECT_EQ(written, std::vector<std::string>{"model.safetensors"});
  EXPECT_FALSE(fs::exists(dir / "model.safetensors.index.json"));
  const auto store = WeightStore::Open(dir.path().string());
  EXPECT_EQ(store.files().size(), 1u);
  EXPECT_EQ(store.num_tensors(), 2u);
}

TEST(SafetensorsWriter, RejectsBadInputAndLeavesNothingBehind) {
  ScratchDir dir;
  const std::string path = dir / "bad.safetensors";
  auto expect = [&](const std::vector<TensorToWrite>& tensors, const std::string& substring) {
    const std::string msg = ErrorOf([&] { WriteSafetensors(path, tensors); });
    EXPECT_NE(msg.find(substring), std::string::npos) << msg;
    EXPECT_EQ(msg.rfind(path, 0), 0u) << msg;
    EXPECT_FALSE(fs::exists(path));
  };
  expect({{"a", DType::kF32, {1}, PatternFiller(0)}, {"a", DType::kF32, {1}, PatternFiller(0)}},
         "duplicate tensor name 'a'");
  expect({{"a", DType::kF32, {2, -1}, PatternFiller(0)}}, "negative dimension in shape [2, -1]");
  expect({{"a", DType::kF32, {1}, nullptr}}, "tensor 'a' has no data filler");
  expect({{"__metadata__", DType::kF32, {1}, PatternFiller(0)}}, "is reserved");
  expect({{"a", DType::kF64, {1LL << 40, 1LL << 40}, PatternFiller(0)}}, "overflows");
  expect({{std::string("bad\xff", 4), DType::kU8, {1}, PatternFiller(0)}}, "is not valid UTF-8");

  // A filler that throws aborts the write: no target and no temporary file remain.
  const std::string msg = ErrorOf([&] {
    WriteSafetensors(path, {{"a", DType::kU8, {4}, [](uint8_t*, size_t) { Fail("generator failed"); }}});
  });
  EXPECT_EQ(msg, "generator failed");
  EXPECT_FALSE(fs::exists(path));
  EXPECT_FALSE(fs::exists(path + ".tmp"));

  EXPECT_NE(
      ErrorOf([&] { WriteShardedSafetensors(dir.path().string(), {}, 0); }).find("max_shard_bytes must be positive"),
      std::string::npos);
  EXPECT_NE(
      ErrorOf([&] { WriteSafetensors((dir.path() / "no/such/dir/x.safetensors").string(), {}); }).find("cannot create"),
      std::string::npos);
}

// ---- interop with the reference implementation ----------------------------------------------

TEST(SafetensorsInterop, ReadsFilesWrittenByPythonSafetensors) {
  const auto file = SafetensorsFile::Open(kData + "/interop.safetensors");
  EXPECT_EQ(file.metadata(), (std::map<std::string, std::string>{{"format", "pt"}}));
  EXPECT_EQ(file.tensors().size(), 18u);

  auto floats = [&](const char* name) {
    const TensorInfo* info = file.Find(name);
    EXPECT_NE(info, nullptr) << name;
    std::vector<float> out;
    if (info == nullptr) return out;
    const TensorView v = file.View(*info);
    const size_t size = DTypeSize(v.dtype());
    for (uint64_t i = 0; i < v.numel(); ++i) out.push_back(ElementToF32(v.dtype(), v.data + i * size));
    return out;
  };
  EXPECT_EQ(floats("values.f32"), (std::vector<float>{1.0f, -2.5f, 3.25f, 0.0f, 1e-3f, 100.0f}));
  EXPECT_EQ(file.Find("values.f32")->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(floats("values.bf16"), (std::vector<float>{1.0f, -2.0f, 0.5f, 3.0f}));
  EXPECT_EQ(floats("values.f16"), (std::vector<float>{1.0f, -0.5f, 65504.0f}));
  EXPECT_EQ(floats("values.f8"), (std::vector<float>{1.0f, 448.0f}));
  EXPECT_EQ(floats("scalar"), (std::vector<float>{7.5f}));
  EXPECT_TRUE(file.Find("scalar")->shape.empty());
  EXPECT_EQ(file.Find("empty")->nbytes(), 0u);
  EXPECT_EQ(file.Find("empty")->shape, (std::vector<int64_t>{0, 4}));
  const TensorView i64 = file.View(*file.Find("values.i64"));
  int64_t ints[2];
  std::memcpy(ints, i64.data, 16);
  EXPECT_EQ(ints[0], -1);
  EXPECT_EQ(ints[1], int64_t{1} << 40);

  // Pattern tensors: seeds 1.. in the order the script lists them.
  const std::pair<const char*, DType> patterns[] = {{"bool", DType::kBool},
                                                    {"uint8", DType::kU8},
                                                    {"int8", DType::kI8},
                                                    {"uint16", DType::kU16},
                                                    {"int16", DType::kI16},
                                                    {"uint32", DType::kU32},
                                                    {"int32", DType::kI32},
                                                    {"uint64", DType::kU64},
                                                    {"float64", DType::kF64},
                                                    {"float8_e5m2", DType::kF8E5M2},
                                                    {"float8_e8m0fnu", DType::kF8E8M0}};
  int seed = 1;
  for (const auto& [suffix, dtype] : patterns) {
    const TensorInfo* info = file.Find(StrCat("pattern.", suffix));
    ASSERT_NE(info, nullptr) << suffix;
    EXPECT_EQ(info->dtype, dtype) << suffix;
    const TensorView v = file.View(*info);
    for (size_t b = 0; b < v.nbytes(); ++b) {
      const uint8_t want = dtype == DType::kBool ? PatternByte(b, seed) & 1 : PatternByte(b, seed);
      ASSERT_EQ(v.data[b], want) << suffix << " byte " << b;
    }
    ++seed;
  }
}

// Rewriting the fixture's tensors in its header order gives the reference writer's exact bytes:
// the same header JSON layout and padding, the same data layout.
TEST(SafetensorsInterop, WriterIsByteIdenticalToPythonSafetensors) {
  ScratchDir dir;
  const std::string fixture = kData + "/interop.safetensors";
  const auto file = SafetensorsFile::Open(fixture);
  std::vector<TensorToWrite> tensors;
  for (const auto& t : file.tensors()) {
    tensors.push_back({t.name, t.dtype, t.shape, BytesFiller(ViewBytes(file.View(t)))});
  }
  WriteSafetensors(dir / "ours.safetensors", tensors, file.metadata());
  EXPECT_EQ(ReadBytes(dir / "ours.safetensors"), ReadBytes(fixture));
}

TEST(SafetensorsInterop, ShardedDirectoryMatchesTransformersLayout) {
  ScratchDir dir;
  const std::string fixture = kData + "/sharded";
  const auto store = WeightStore::Open(fixture);
  ASSERT_EQ(store.num_tensors(), 4u);
  EXPECT_EQ(store.Get("model.embed_tokens.weight").shape(), (std::vector<int64_t>{8, 4}));
  EXPECT_EQ(store.Get("model.layers.0.mlp.experts.gate_up_proj_blocks").shape(), (std::vector<int64_t>{2, 4, 1, 16}));
  EXPECT_NE(store.Get("model.layers.0.mlp.experts.gate_up_proj_blocks").file->find("model-00002-of-00002"),
            std::string::npos);

  // Same tensors, same order, a limit that splits them where the fixture does (72 + 136 bytes).
  std::vector<TensorToWrite> tensors;
  for (const auto& name :
       {"model.embed_tokens.weight", "model.layers.0.input_layernorm.weight",
        "model.layers.0.mlp.experts.gate_up_proj_blocks", "model.layers.0.mlp.experts.gate_up_proj_scales"}) {
    const TensorView v = store.Get(name);
    tensors.push_back({name, v.dtype(), v.shape(), BytesFiller(ViewBytes(v))});
  }
  const auto written = WriteShardedSafetensors(dir.path().string(), tensors, 136);
  ASSERT_EQ(written.size(), 3u);
  for (const auto& name : written) {
    EXPECT_EQ(ReadBytes(dir / name), ReadBytes(fixture + "/" + name)) << name;
  }
}

TEST(SafetensorsInterop, SubByteAndComplexDTypesAreRejectedByName) {
  EXPECT_NE(ErrorOf([] {
              SafetensorsFile::Open(kData + "/f4.safetensors");
            }).find("f4.safetensors: tensor 'packed': unsupported sub-byte dtype 'F4'"),
            std::string::npos);
  EXPECT_NE(ErrorOf([] {
              SafetensorsFile::Open(kData + "/c64.safetensors");
            }).find("c64.safetensors: tensor 'z': unsupported dtype 'C64'"),
            std::string::npos);
}

// ---- header validation, one rule at a time (ecosystem.md §4) ---------------------------------

TEST(SafetensorsHeader, AcceptsValidHeadersWithUnpaddedAndUnknownKeys) {
  // MLX writes unpadded headers (ecosystem.md §4); unknown keys in an entry are skipped.
  const auto image = Image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":{"y":[1,[2,{}]]}},)"
                           R"("__metadata__":null,"b":{"data_offsets":[8,9],"shape":[],"dtype":"U8"}})",
                           9, /*pad=*/false);
  const auto header = ParseSafetensorsHeader(image.data(), image.size(), "ok");
  ASSERT_EQ(header.tensors.size(), 2u);
  EXPECT_EQ(header.tensors[0].name, "a");
  EXPECT_EQ(header.tensors[1].name, "b");
  EXPECT_TRUE(header.tensors[1].shape.empty());
  EXPECT_EQ(header.tensors[1].numel(), 1u);
  EXPECT_EQ(header.data_offset, image.size() - 9);
  EXPECT_TRUE(header.metadata.empty());
  // Zero-size tensors may share an offset with their neighbours.
  const auto zeros = Image(R"({"z1":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},)"
                           R"("a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                           R"("z2":{"dtype":"BF16","shape":[3,0],"data_offsets":[1,1]}})",
                           1);
  EXPECT_EQ(ParseSafetensorsHeader(zeros.data(), zeros.size(), "ok").tensors.size(), 3u);
}

TEST(SafetensorsHeader, FramingErrors) {
  ExpectHeaderError({1, 2, 3}, "file too small for a safetensors header (3 bytes)");
  {
    auto image = Image("{}", 0);
    const uint64_t n = 100'000'001;
    for (int i = 0; i < 8; ++i) image[i] = static_cast<uint8_t>(n >> (8 * i));
    ExpectHeaderError(image, "header length 100000001 exceeds the limit of 100000000 bytes");
  }
  {
    auto image = Image("{}", 0);
    image[0] = 200;  // claims 200 bytes of header in a 16-byte file
    ExpectHeaderError(image, "header length 200 runs past the end of the file (16 bytes; truncated?)");
    image[0] = 0xff;
    image[7] = 0xff;  // a huge length: no overflow in the range check
    ExpectHeaderError(image, "exceeds the limit");
  }
  ExpectHeaderError(Image(" {}", 0), "header does not start with '{'");
  ExpectHeaderError(Image("[]", 0), "header does not start with '{'");
  ExpectHeaderError(Image("", 0, false), "header does not start with '{'");
  ExpectHeaderError(Image("{", 0), "invalid header JSON");
  ExpectHeaderError(Image("{} x", 0), "invalid header JSON");
  ExpectHeaderError(Image(std::string("{}\0", 3), 0, false), "invalid header JSON: NUL byte at header offset 2");
  ExpectHeaderError(Image(std::string("{\"a\0\":1}", 8), 0), "invalid header JSON: NUL byte at header offset 3");
  ExpectHeaderError(Image("{\"a\xff\":{}}", 0), "invalid header JSON");  // not UTF-8
  ExpectHeaderError(Image("{\"a\":{\"dtype\":\"F32\",}}", 0), "invalid header JSON");
}

TEST(SafetensorsHeader, EntryErrors) {
  const std::string ok_rest = R"("shape":[2],"data_offsets":[0,8]})";
  ExpectHeaderError(Image(R"({"a":1})", 0), "tensor 'a': entry must be an object (found an integer)");
  ExpectHeaderError(Image(R"({"a":[]})", 0), "tensor 'a': entry must be an object (found an array)");
  ExpectHeaderError(Image(R"({"a":{"shape":[2],"data_offsets":[0,8]}})", 8), "tensor 'a': missing \"dtype\"");
  ExpectHeaderError(Image(R"({"a":{"dtype":"F32","data_offsets":[0,8]}})", 8), "tensor 'a': missing \"shape\"");
  ExpectHeaderError(Image(R"({"a":{"dtype":"F32","shape":[2]}})", 8), "tensor 'a': missing \"data_offsets\"");
  ExpectHeaderError(Image(R"({"a":{"dtype":4,)" + ok_rest + "}", 8),
                    "tensor 'a': dtype must be a string (found an integer)");
  ExpectHeaderError(Image(R"({"a":{"dtype":"Q4",)" + ok_rest + "}", 8), "tensor 'a': unknown dtype 'Q4'");
  ExpectHeaderError(Image(R"({"a":{"dtype":"bf16",)" + ok_rest + "}", 8), "unknown dtype 'bf16'");
  ExpectHeaderError(Image(R"({"a":{"dtype":"F6_E2M3",)" + ok_rest + "}", 8), "unsupported sub-byte dtype 'F6_E2M3'");
  ExpectHeaderError(Image(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8),
                    "tensor 'a': shape must be an array of non-negative integers (found a negative integer)");
  ExpectHeaderError(Image(R"({"a":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}})", 8),
                    "shape must be an array of non-negative integers (found a number)");
  ExpectHeaderError(Image(R"({"a":{"dtype":"F32","shape":2,"data_offsets":[0,8]}})", 8),
                    "shape must be an array of non-negative integers (found an integer)");
  ExpectHeaderError(Image(R"({"a":{"dtype":"F32","shape":[[2]],"data_offsets":[0,8]}})", 8),
                    "shape must be an array of non-negative integers (found an array)");
  ExpectHeaderError(Image(R"({"a":{"dtype":"F32","shape":[9223372036854775808],"data_offsets":[0,8]}})", 8),
                    "tensor 'a': shape dimension 9223372036854775808 is too large");
  std::string deep = "[";
  for (int i = 0; i < 65; ++i) deep += i ? ",1" : "1";
  ExpectHeaderError(Image(R"({"a":{"dtype":"U8","shape":)" + deep + R"(],"data_offsets":[0,1]}})", 1),
                    "shape has more than 64 dimensions");
  ExpectHeaderError(Image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8,8]}})", 8),
                    "data_offsets must have exactly two entries");
  ExpectHeaderError(Image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8]}})", 8),
                    "data_offsets must have exactly two entries");
  ExpectHeaderError(Image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[-1,7]}})", 8),
                    "data_offsets must be two non-negative integers (found a negative integer)");
  ExpectHeaderError(Image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":"0,8"}})", 8),
                    "data_offsets must be two non-negative integers (found a string)");
  ExpectHeaderError(Image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,1e1]}})", 8),
                    "data_offsets must be two non-negative integers (found a number)");
  ExpectHeaderError(Image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,18446744073709551616]}})", 8),
                    "data_offsets must be two non-negative integers (found a number)");
  ExpectHeaderError(Image(R"({"a":{"dtype":"F32","dtype":"F32",)" + ok_rest + "}", 8),
                    "tensor 'a': duplicate key 'dtype'");
  std::string nested = "[";
  for (int i = 0; i < 70; ++i) nested += "[";
  ExpectHeaderError(Image(R"({"a":{"x":)" + nested + "]}}", 0), "value nested too deeply");
}

TEST(SafetensorsHeader, OffsetAndCoverageErrors) {
  ExpectHeaderError(Image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 8),
                    "tensor 'a': data_offsets [8, 0] have begin > end");
  ExpectHeaderError(Image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", 4),
                    "tensor 'a': data_offsets [0, 4] hold 4 bytes but dtype F32 shape [2] needs 8");
  ExpectHeaderError(Image(R"({"a":{"dtype":"BF16","shape":[4294967296,4294967296,2],"data_offsets":[0,0]}})", 0),
                    "tensor 'a': shape [4294967296, 4294967296, 2] overflows 64-bit byte counts");
  ExpectHeaderError(Image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4),
                    "tensor 'a': data_offsets [0, 8] out of range (the data section holds 4 bytes; truncated?)");
  ExpectHeaderError(Image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                          R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                          12),
                    "tensors 'a' and 'b' overlap (data_offsets [0, 8] and [4, 12])");
  // A zero-size tensor strictly inside another one overlaps it.
  ExpectHeaderError(Image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                          R"("z":{"dtype":"F32","shape":[0],"data_offsets":[4,4]}})",
                          8),
                    "tensors 'a' and 'z' overlap");
  ExpectHeaderError(Image(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                          R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                          12),
                    "bytes [4, 8) of the data section belong to no tensor (before 'b')");
  ExpectHeaderError(Image(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8),
                    "bytes [0, 4) of the data section belong to no tensor");
  ExpectHeaderError(Image(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 6),
                    "the data section holds 6 bytes but the tensors cover 4");
  ExpectHeaderError(Image("{}", 1), "the data section holds 1 bytes but the tensors cover 0");
}

TEST(SafetensorsHeader, MetadataAndDuplicateKeyErrors) {
  const std::string a = R"("a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]})";
  {
    const auto image = Image(R"({"__metadata__":{"k":"v","format":"pt"},)" + a + "}", 1);
    const auto header = ParseSafetensorsHeader(image.data(), image.size(), "ok");
    EXPECT_EQ(header.metadata, (std::map<std::string, std::string>{{"format", "pt"}, {"k", "v"}}));
  }
  ExpectHeaderError(Image(R"({"__metadata__":{"k":1},)" + a + "}", 1),
                    "__metadata__: value of 'k' must be a string (found an integer)");
  ExpectHeaderError(Image(R"({"__metadata__":{"k":["v"]},)" + a + "}", 1),
                    "__metadata__: value of 'k' must be a string (found an array)");
  ExpectHeaderError(Image(R"({"__metadata__":"pt",)" + a + "}", 1),
                    "__metadata__ must be an object of strings (found a string)");
  ExpectHeaderError(Image(R"({"__metadata__":[],)" + a + "}", 1),
                    "__metadata__ must be an object of strings (found an array)");
  ExpectHeaderError(Image(R"({"__metadata__":{"k":"v","k":"w"},)" + a + "}", 1), "__metadata__: duplicate key 'k'");
  ExpectHeaderError(Image("{" + a + "," + a + "}", 1), "duplicate key 'a'");
  ExpectHeaderError(Image(R"({"__metadata__":{},"__metadata__":{},)" + a + "}", 1), "duplicate key '__metadata__'");
}

TEST(SafetensorsHeader, UntrustedNamesStayOnOneLine) {
  ExpectHeaderError(Image("{\"line1\\nline2\\u0000\":{\"dtype\":\"Q\",\"shape\":[],\"data_offsets\":[0,1]}}", 1),
                    "tensor 'line1\\x0aline2\\x00': unknown dtype 'Q'");
  std::string long_name(500, 'n');
  ExpectHeaderError(Image("{\"" + long_name + "\":1}", 0), "...': entry must be an object");
}

// ---- files and directories ------------------------------------------------------------------

TEST(SafetensorsFiles, TruncatedFilesOnDisk) {
  ScratchDir dir;
  const auto bytes = ReadBytes(kData + "/interop.safetensors");
  // Every cut point: inside the length, inside the header, inside the data.
  for (size_t cut = 0; cut < bytes.size(); cut += 7) {
    const std::string path = dir / "cut.safetensors";
    WriteFile(path, bytes.data(), cut);
    const std::string msg = ErrorOf([&] { SafetensorsFile::Open(path); });
    EXPECT_EQ(msg.rfind(path + ": ", 0), 0u) << msg;
  }
  EXPECT_NE(ErrorOf([&] { SafetensorsFile::Open(dir / "absent.safetensors"); }).find("cannot open"), std::string::npos);
  EXPECT_NE(ErrorOf([&] { SafetensorsFile::Open(dir.path().string()); }).find("not a regular file"), std::string::npos);
}

// Copies the Python-written sharded fixture into a scratch directory for editing.
void CopyShardedFixture(const fs::path& to) {
  fs::create_directories(to);
  for (const auto& entry : fs::directory_iterator(kData + "/sharded")) {
    fs::copy_file(entry.path(), to / entry.path().filename());
  }
}

TEST(WeightStore, DirectoryErrors) {
  ScratchDir dir;
  EXPECT_NE(ErrorOf([&] { WeightStore::Open(dir / "missing"); }).find("missing: no such file or directory"),
            std::string::npos);
  EXPECT_NE(ErrorOf([&] {
              WeightStore::Open(dir.path().string());
            }).find("neither model.safetensors nor model.safetensors.index.json found"),
            std::string::npos);
}

TEST(WeightStore, ShardedIndexErrors) {
  ScratchDir dir;
  const fs::path model = dir.path() / "model";
  const std::string index = (model / "model.safetensors.index.json").string();
  auto edit_index = [&](const std::function<void(nlohmann::json&)>& edit) {
    fs::remove_all(model);
    CopyShardedFixture(model);
    auto j = ParseJsonText(ReadFile(index), index);
    edit(j);
    WriteText(index, j.dump(2));
  };
  auto expect = [&](const std::string& substring) {
    const std::string msg = ErrorOf([&] { WeightStore::Open(model.string()); });
    EXPECT_NE(msg.find(substring), std::string::npos) << msg;
  };

  // A missing shard: the message names the index and the shard.
  edit_index([](nlohmann::json&) {});
  fs::remove(model / "model-00002-of-00002.safetensors");
  expect(index + ": shard 'model-00002-of-00002.safetensors' is missing");

  // A tensor in the index but not in its shard.
  edit_index([](nlohmann::json& j) { j["weight_map"]["lm_head.weight"] = "model-00001-of-00002.safetensors"; });
  expect("model-00001-of-00002.safetensors: tensor 'lm_head.weight' listed in " + index +
         " is missing from this shard");

  // A tensor in a shard but not in the index.
  edit_index([](nlohmann::json& j) { j["weight_map"].erase("model.layers.0.input_layernorm.weight"); });
  expect("model-00001-of-00002.safetensors: tensor 'model.layers.0.input_layernorm.weight' is not listed in " + index);

  // The index assigns a tensor to the wrong shard.
  edit_index([](nlohmann::json& j) {
    j["weight_map"]["model.layers.0.input_layernorm.weight"] = "model-00002-of-00002.safetensors";
  });
  expect("model-00001-of-00002.safetensors: tensor 'model.layers.0.input_layernorm.weight' is in this shard, but " +
         index + " assigns it to 'model-00002-of-00002.safetensors'");

  edit_index([](nlohmann::json& j) { j.erase("weight_map"); });
  expect("weight_map: missing");
  edit_index([](nlohmann::json& j) { j["weight_map"] = nlohmann::json::array(); });
  expect("weight_map: must be an object");
  edit_index([](nlohmann::json& j) { j["weight_map"] = nlohmann::json::object(); });
  expect("weight_map: empty");
  edit_index([](nlohmann::json& j) { j["weight_map"]["model.embed_tokens.weight"] = 3; });
  expect("shard of tensor 'model.embed_tokens.weight' must be a string");
  edit_index(
      [](nlohmann::json& j) { j["weight_map"]["model.embed_tokens.weight"] = "../model-00001-of-00002.safetensors"; });
  expect("shard name '../model-00001-of-00002.safetensors' is not a file inside the model directory");
  edit_index([](nlohmann::json& j) { j["weight_map"]["model.embed_tokens.weight"] = "/etc/passwd"; });
  expect("is not a file inside the model directory");
  edit_index([](nlohmann::json& j) { j = nlohmann::json::array(); });
  expect("top-level JSON value must be an object");
  edit_index([](nlohmann::json&) {});
  WriteText(index, "{\"weight_map\": {\"a\": ");
  expect(index + ": invalid JSON");
  WriteText(index, R"({"weight_map": {"a": "x", "a": "y"}})");
  expect(index + ": invalid JSON: duplicate key 'a'");
}

TEST(WeightStore, DuplicateTensorAcrossShards) {
  ScratchDir dir;
  // Two shards that both hold "x"; the index assigns it to the first.
  WriteSafetensors(dir / "s0.safetensors", {{"x", DType::kU8, {1}, PatternFiller(1)}});
  WriteSafetensors(dir / "s1.safetensors",
                   {{"x", DType::kU8, {1}, PatternFiller(2)}, {"y", DType::kU8, {1}, PatternFiller(3)}});
  WriteText(dir / "model.safetensors.index.json", R"({"weight_map": {"x": "s0.safetensors", "y": "s1.safetensors"}})");
  const std::string msg = ErrorOf([&] { WeightStore::Open(dir.path().string()); });
  EXPECT_NE(msg.find("s1.safetensors: tensor 'x' is in this shard, but"), std::string::npos) << msg;
  EXPECT_NE(msg.find("assigns it to 's0.safetensors'"), std::string::npos) << msg;
}

// A Hugging Face hub cache: models--org--name/{refs/main, snapshots/<rev>/ -> ../../blobs/...}.
TEST(WeightStore, HubCacheSnapshotsWithSymlinks) {
  ScratchDir dir;
  const fs::path repo = dir.path() / "models--openai--tiny";
  const std::string rev = "0123456789abcdef0123456789abcdef01234567";
  fs::create_directories(repo / "blobs");
  fs::create_directories(repo / "refs");
  fs::create_directories(repo / "snapshots" / rev);
  for (const auto& entry : fs::directory_iterator(kData + "/sharded")) {
    const fs::path blob = repo / "blobs" / StrCat("blob_", entry.path().filename().string());
    fs::copy_file(entry.path(), blob);
    fs::create_symlink(fs::path("../../blobs") / blob.filename(), repo / "snapshots" / rev / entry.path().filename());
  }
  WriteText((repo / "refs" / "main").string(), rev + "\n");

  for (const fs::path& p : {repo / "snapshots" / rev, repo}) {
    const auto store = WeightStore::Open(p.string());
    EXPECT_EQ(store.num_tensors(), 4u) << p;
    EXPECT_EQ(store.Get("model.layers.0.input_layernorm.weight").nbytes(), 8u);
  }
  WriteText((repo / "refs" / "main").string(), "feedface\n");
  EXPECT_NE(ErrorOf([&] {
              WeightStore::Open(repo.string());
            }).find("refs/main names revision feedface but snapshots/feedface does not exist"),
            std::string::npos);
  WriteText((repo / "refs" / "main").string(), "../../etc\n");
  EXPECT_NE(ErrorOf([&] { WeightStore::Open(repo.string()); }).find("malformed revision"), std::string::npos);
}

// ---- randomized corruption of the header parser ---------------------------------------------

// Checks what a successful parse promises: tensors tile the data section exactly and every byte
// range agrees with its dtype and shape.
void CheckParsedInvariants(const SafetensorsHeader& h, size_t image_size) {
  ASSERT_LE(h.data_offset, image_size);
  const uint64_t data_size = image_size - h.data_offset;
  uint64_t total = 0;
  for (const auto& t : h.tensors) {
    ASSERT_LE(t.begin, t.end);
    ASSERT_LE(t.end, data_size);
    ASSERT_EQ(t.nbytes(), t.numel() * DTypeSize(t.dtype));
    total += t.nbytes();
  }
  ASSERT_EQ(total, data_size);
}

TEST(SafetensorsFuzz, RandomlyCorruptedHeadersFailCleanlyOrParseConsistently) {
  const auto fixture = ReadBytes(kData + "/interop.safetensors");
  const auto small = Image(R"({"__metadata__":{"a":"b"},"w":{"dtype":"BF16","shape":[2,2],"data_offsets":[0,8]},)"
                           R"("s":{"dtype":"U8","shape":[],"data_offsets":[8,9]}})",
                           9);
  const std::vector<std::vector<uint8_t>> seeds = {fixture, small};
  const char* fragments[] = {"{",
                             "}",
                             "[",
                             "]",
                             ",",
                             ":",
                             "\"",
                             "null",
                             "true",
                             "-1",
                             "0",
                             "1e400",
                             "18446744073709551616",
                             "\"F4\"",
                             "\"__metadata__\"",
                             "\\u0000",
                             "\\ud800",
                             "\xff",
                             "\xc3\xa9",
                             "[0,0]",
                             "{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[0,1]}",
                             " ",
                             "9"};
  const uint64_t seed = std::random_device{}();
  std::mt19937_64 rng(seed);
  SCOPED_TRACE(StrCat("random seed ", seed));
  auto uniform = [&](size_t n) { return static_cast<size_t>(rng() % n); };

  const auto start = std::chrono::steady_clock::now();
  size_t parsed = 0, rejected = 0;
  constexpr int kIterations = 30000;
  for (int iter = 0; iter < kIterations; ++iter) {
    std::vector<uint8_t> img = seeds[uniform(seeds.size())];
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | img[i];
    const int mutations = 1 + static_cast<int>(uniform(4));
    for (int m = 0; m < mutations; ++m) {
      const size_t header_end = std::min<size_t>(img.size(), 8 + n);
      switch (uniform(7)) {
        case 0:  // flip a bit in the header
          if (header_end > 8) img[8 + uniform(header_end - 8)] ^= static_cast<uint8_t>(1u << uniform(8));
          break;
        case 1:  // random byte anywhere
          img[uniform(img.size())] = static_cast<uint8_t>(rng());
          break;
        case 2:  // truncate
          img.resize(uniform(img.size() + 1));
          break;
        case 3: {  // edit a number in the header: replace a digit or insert digits
          std::vector<size_t> digits;
          for (size_t i = 8; i < header_end; ++i) {
            if (img[i] >= '0' && img[i] <= '9') digits.push_back(i);
          }
          if (digits.empty()) break;
          const size_t at = digits[uniform(digits.size())];
          if (uniform(2)) {
            img[at] = static_cast<uint8_t>('0' + uniform(10));
          } else {
            const std::string ins = std::to_string(rng() % 100000);
            img.insert(img.begin() + static_cast<std::ptrdiff_t>(at), ins.begin(), ins.end());
            n += ins.size();  // keep the length field consistent half of the time
            if (uniform(2)) {
              for (int i = 0; i < 8; ++i) img[i] = static_cast<uint8_t>(n >> (8 * i));
            }
          }
          break;
        }
        case 4: {  // splice a JSON fragment into the header, fixing up the length
          const std::string frag = fragments[uniform(std::size(fragments))];
          const size_t at = 8 + uniform(header_end > 8 ? header_end - 8 + 1 : 1);
          if (at > img.size()) break;
          img.insert(img.begin() + static_cast<std::ptrdiff_t>(at), frag.begin(), frag.end());
          n += frag.size();
          for (int i = 0; i < 8; ++i) img[i] = static_cast<uint8_t>(n >> (8 * i));
          break;
        }
        case 5: {  // delete a span of the header, fixing up the length
          if (header_end <= 9) break;
          const size_t at = 8 + uniform(header_end - 8);
          const size_t len = std::min<size_t>(1 + uniform(16), header_end - at);
          img.erase(img.begin() + static_cast<std::ptrdiff_t>(at), img.begin() + static_cast<std::ptrdiff_t>(at + len));
          n -= len;
          for (int i = 0; i < 8; ++i) img[i] = static_cast<uint8_t>(n >> (8 * i));
          break;
        }
        case 6:  // corrupt the length field
          if (img.size() >= 8) img[uniform(8)] = static_cast<uint8_t>(rng());
          break;
      }
      if (img.size() < 8) break;
      n = 0;
      for (int i = 7; i >= 0; --i) n = (n << 8) | img[i];
    }
    // An exactly sized heap copy, so that a read past the end is caught by sanitizer builds.
    std::vector<uint8_t> exact(img.begin(), img.end());
    try {
      const auto header = ParseSafetensorsHeader(exact.data(), exact.size(), "fuzz");
      CheckParsedInvariants(header, exact.size());
      ++parsed;
    } catch (const Error& e) {
      const std::string msg = e.what();
      ASSERT_EQ(msg.rfind("fuzz: ", 0), 0u) << msg;
      ASSERT_EQ(msg.find('\n'), std::string::npos) << msg;
      ASSERT_LT(msg.size(), 1000u) << msg;
      ++rejected;
    }
    if (HasFatalFailure()) return;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 30.0);
  // Both outcomes occur: the mutations are neither all harmless nor all fatal.
  EXPECT_GT(parsed, 0u);
  EXPECT_GT(rejected, static_cast<size_t>(kIterations) / 2);
}

// Wholly random headers behind a valid length prefix.
TEST(SafetensorsFuzz, RandomBytesAfterABrace) {
  std::mt19937 rng(12345);
  for (int iter = 0; iter < 5000; ++iter) {
    const size_t len = 1 + rng() % 64;
    std::string header = "{";
    for (size_t i = 1; i < len; ++i)
      header.push_back(static_cast<char>(rng() % 2 ? "{}[]\":,0123456789-eE.tnuls"[rng() % 26] : rng()));
    const auto image = Image(header, rng() % 16, rng() % 2);
    try {
      CheckParsedInvariants(ParseSafetensorsHeader(image.data(), image.size(), "rand"), image.size());
    } catch (const Error& e) {
      ASSERT_EQ(std::string(e.what()).rfind("rand: ", 0), 0u) << e.what();
    }
  }
}

}  // namespace
}  // namespace tessera
