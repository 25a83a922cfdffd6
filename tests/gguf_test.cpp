// The GGUF reader and writer (io/gguf.h): round trips of every metadata type and of tensors of
// several ggml types; hostile files (truncated anywhere, counts past the file, type ids past the
// table, overflowing dimensions, misaligned or overlapping offsets, 1 GB strings, bad alignment,
// duplicates, version 1 and big-endian files) each a one-line error; random corruption of a valid
// header either parses consistently or fails cleanly. Layout: ggml's docs/gguf.md as summarised in
// io/gguf.h.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "core/error.h"
#include "io/gguf.h"
#include "io/gguf_config.h"
#include "io/npy.h"
#include "io/ggml_quants.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

// Raw little-endian bytes, for files the writer would never produce.
struct Raw {
  std::string bytes;
  template <typename T>
  Raw& Put(T v) {
    bytes.append(reinterpret_cast<const char*>(&v), sizeof(T));
    return *this;
  }
  Raw& Str(std::string_view s) {
    Put<uint64_t>(s.size());
    bytes.append(s);
    return *this;
  }
  Raw& Header(uint32_t version, uint64_t tensors, uint64_t kvs) {
    return Put<uint32_t>(0x46554747).Put<uint32_t>(version).Put<uint64_t>(tensors).Put<uint64_t>(kvs);
  }
  Raw& Pad(size_t alignment) {
    while (bytes.size() % alignment != 0) bytes.push_back('\0');
    return *this;
  }
};

std::string ParseError(const std::string& bytes) {
  try {
    ParseGgufHeader(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "f.gguf");
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    return message;
  }
  return "";
}

// One f32 tensor [2, 32] at offset 0 after a single metadata key.
Raw ValidFile() {
  Raw r;
  r.Header(3, 1, 1).Str("general.architecture").Put<uint32_t>(8).Str("llama");
  r.Str("w").Put<uint32_t>(2).Put<uint64_t>(32).Put<uint64_t>(2).Put<uint32_t>(0).Put<uint64_t>(0);
  r.Pad(32);
  r.bytes.append(2 * 32 * 4, '\1');
  return r;
}

class GgufTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("tessera_gguf_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

TEST_F(GgufTest, RoundTripsEveryMetadataTypeAndTensors) {
  std::vector<std::pair<std::string, GgufValue>> metadata = {
      {"general.architecture", GgufString("llama")},
      {"general.alignment", GgufUint32(64)},
      {"u8", GgufValue{GgufType::kUint8, GgufType::kUint8, uint64_t{200}}},
      {"i8", GgufValue{GgufType::kInt8, GgufType::kUint8, int64_t{-100}}},
      {"u16", GgufValue{GgufType::kUint16, GgufType::kUint8, uint64_t{65000}}},
      {"i16", GgufValue{GgufType::kInt16, GgufType::kUint8, int64_t{-32000}}},
      {"u32", GgufUint32(4000000000u)},
      {"i32", GgufInt32(-2000000000)},
      {"u64", GgufUint64(uint64_t{1} << 60)},
      {"i64", GgufValue{GgufType::kInt64, GgufType::kUint8, int64_t{-(int64_t{1} << 60)}}},
      {"f32", GgufFloat32(0.125f)},
      {"f64", GgufValue{GgufType::kFloat64, GgufType::kUint8, 1e300}},
      {"flag", GgufBool(true)},
      {"tokens", GgufStrings({"<s>", "", "h\xc3\xa9llo"})},
      {"types", GgufInt32s({1, -2, 3})},
      {"scores", GgufFloat32s({0.5, -1.25})},
      {"bools", GgufValue{GgufType::kArray, GgufType::kBool, std::vector<bool>{true, false}}},
  };
  std::string f32(3 * 32 * 4, '\0'), q8(2 * 34, '\0'), q4k(144, '\0');
  for (size_t i = 0; i < f32.size(); ++i) f32[i] = static_cast<char>(i * 7);
  for (size_t i = 0; i < q8.size(); ++i) q8[i] = static_cast<char>(i * 3 + 1);
  for (size_t i = 0; i < q4k.size(); ++i) q4k[i] = static_cast<char>(i);
  const std::vector<GgufTensorToWrite> tensors = {
      {"token_embd.weight", {32, 3}, 0, f32},
      {"blk.0.attn_q.weight", {64}, GgmlType("q8_0").id, q8},
      {"blk.0.ffn_down.weight", {256, 1, 1}, GgmlType("q4_K").id, q4k},
  };
  WriteGguf(Path("m.gguf"), metadata, tensors);
  ASSERT_TRUE(IsGgufPath(Path("m.gguf")));
  const auto file = GgufFile::Open(Path("m.gguf"));
  EXPECT_EQ(file->version(), 3u);
  EXPECT_EQ(file->alignment(), 64u);
  EXPECT_EQ(file->GetString("general.architecture"), "llama");
  EXPECT_EQ(file->GetUint("u8"), 200u);
  EXPECT_EQ(std::get<int64_t>(file->Find("i8")->value), -100);
  EXPECT_EQ(file->GetUint("u16"), 65000u);
  EXPECT_EQ(std::get<int64_t>(file->Find("i16")->value), -32000);
  EXPECT_EQ(file->GetUint("u32"), 4000000000u);
  EXPECT_EQ(std::get<int64_t>(file->Find("i32")->value), -2000000000);
  EXPECT_EQ(file->GetUint("u64"), uint64_t{1} << 60);
  EXPECT_EQ(std::get<int64_t>(file->Find("i64")->value), -(int64_t{1} << 60));
  EXPECT_EQ(file->GetFloat("f32"), 0.125);
  EXPECT_EQ(file->GetFloat("f64"), 1e300);
  EXPECT_TRUE(file->GetBool("flag"));
  EXPECT_EQ(file->GetStrings("tokens"), (std::vector<std::string>{"<s>", "", "h\xc3\xa9llo"}));
  EXPECT_EQ(std::get<std::vector<int64_t>>(file->Find("types")->value), (std::vector<int64_t>{1, -2, 3}));
  EXPECT_EQ(std::get<std::vector<double>>(file->Find("scores")->value), (std::vector<double>{0.5, -1.25}));
  EXPECT_EQ(std::get<std::vector<bool>>(file->Find("bools")->value), (std::vector<bool>{true, false}));
  EXPECT_EQ(file->Find("tokens")->size(), 3u);
  ASSERT_EQ(file->tensors().size(), 3u);
  for (const GgufTensorToWrite& want : tensors) {
    const GgufTensorInfo* t = file->FindTensor(want.name);
    ASSERT_NE(t, nullptr) << want.name;
    EXPECT_EQ(t->ne, want.ne);
    EXPECT_EQ(t->type->id, want.type);
    EXPECT_EQ(t->nbytes, want.bytes.size());
    EXPECT_EQ(t->offset % 64, 0u);
    EXPECT_EQ(std::memcmp(file->Data(*t), want.bytes.data(), want.bytes.size()), 0) << want.name;
  }
  EXPECT_EQ(file->FindTensor("token_embd.weight")->shape(), (std::vector<int64_t>{3, 32}));
  // Writing back what was read gives the same bytes.
  std::vector<GgufTensorToWrite> again;
  for (const GgufTensorInfo& t : file->tensors()) {
    again.push_back({t.name, t.ne, t.type->id, std::string(reinterpret_cast<const char*>(file->Data(t)), t.nbytes)});
  }
  WriteGguf(Path("again.gguf"), file->metadata(), again);
  EXPECT_EQ(ReadFile(Path("again.gguf")), ReadFile(Path("m.gguf")));
}

TEST_F(GgufTest, TypedGettersNameTheKey) {
  WriteGguf(Path("m.gguf"), {{"a", GgufString("x")}, {"n", GgufInt32(-1)}}, {});
  const auto file = GgufFile::Open(Path("m.gguf"));
  EXPECT_THROW(
      {
        try {
          file->GetUint("a");
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("metadata 'a' is a string, not an integer"), std::string::npos) << e.what();
          throw;
        }
      },
      Error);
  EXPECT_THROW(file->GetUint("n"), Error);   // negative
  EXPECT_THROW(file->GetString("b"), Error);  // missing
  EXPECT_THROW(file->GetStrings("a"), Error);
  EXPECT_FALSE(IsGgufPath(Path("missing.gguf")));
}

TEST(GgufHeader, AcceptsTheValidFileAndVersion2) {
  EXPECT_EQ(ParseError(ValidFile().bytes), "");
  Raw v2 = ValidFile();
  v2.bytes[4] = 2;
  EXPECT_EQ(ParseError(v2.bytes), "");
}

TEST(GgufHeader, TruncatedAnywhereIsAOneLineError) {
  const std::string full = ValidFile().bytes;
  for (size_t n = 0; n < full.size(); ++n) {
    const std::string message = ParseError(full.substr(0, n));
    EXPECT_NE(message, "") << "truncated to " << n << " bytes parsed";
    EXPECT_EQ(message.rfind("f.gguf: ", 0), 0u) << message;
  }
}

TEST(GgufHeader, HostileFieldsAreNamed) {
  struct Case {
    const char* what;
    std::string bytes;
    const char* expect;
  };
  std::vector<Case> cases;
  cases.push_back({"magic", Raw().Put<uint32_t>(0x46554748).Put<uint32_t>(3).bytes, "not a GGUF file"});
  cases.push_back({"version 1", Raw().Header(1, 0, 0).bytes, "version 1 is not supported"});
  cases.push_back({"big-endian", Raw().Put<uint32_t>(0x46554747).Put<uint32_t>(0x03000000).Put<uint64_t>(0).Put<uint64_t>(0).bytes,
                   "big-endian"});
  cases.push_back({"version 4", Raw().Header(4, 0, 0).bytes, "version 4 is not supported"});
  cases.push_back({"tensor count", Raw().Header(3, uint64_t{1} << 62, 0).bytes, "tensor count: count 4611686018427387904"});
  cases.push_back({"kv count", Raw().Header(3, 0, 1000).bytes, "metadata count: count 1000"});
  cases.push_back({"1 GB string", Raw().Header(3, 0, 1).Str("k").Put<uint32_t>(8).Put<uint64_t>(uint64_t{1} << 30).bytes,
                   "string length 1073741824 runs past the end"});
  {
    Raw big;
    big.Header(3, 0, 1).Str("k").Put<uint32_t>(8).Put<uint64_t>(uint64_t{65} << 20);
    big.bytes.append(size_t{65} << 20, 'a');
    cases.push_back({"65 MB string", big.bytes, "exceeds the limit"});
  }
  cases.push_back({"value type", Raw().Header(3, 0, 1).Str("k").Put<uint32_t>(13).Put<uint64_t>(0).bytes, "value type 13 is not a GGUF type"});
  // Budgets (issue 44): counts that fit the file but would each cost far more memory than their
  // bytes (a uint8 element read as a uint64, a 13-byte key-value as a ~100-byte entry).
  {
    Raw many_keys = Raw().Header(3, 0, 65537);
    many_keys.bytes.append(65537 * 13, '\0');
    cases.push_back({"metadata budget", many_keys.bytes, "metadata count: count 65537 exceeds the limit of 65536"});
    Raw long_array = Raw().Header(3, 0, 1).Str("k").Put<uint32_t>(9).Put<uint32_t>(0).Put<uint64_t>((uint64_t{1} << 22) + 1);
    long_array.bytes.append((size_t{1} << 22) + 1, '\0');
    cases.push_back({"array budget", long_array.bytes, "metadata 'k': count 4194305 exceeds the limit of 4194304"});
  }
  cases.push_back({"3 bytes", std::string("GGU"), "truncated GGUF file: 3 bytes, a header needs at least 24"});
  cases.push_back({"empty", std::string(), "truncated GGUF file: 0 bytes, a header needs at least 24"});
  cases.push_back({"array count", Raw().Header(3, 0, 1).Str("k").Put<uint32_t>(9).Put<uint32_t>(4).Put<uint64_t>(1000).bytes,
                   "count 1000 needs more bytes"});
  cases.push_back({"nested array", Raw().Header(3, 0, 1).Str("k").Put<uint32_t>(9).Put<uint32_t>(9).Put<uint64_t>(0).bytes,
                   "arrays of arrays"});
  cases.push_back({"bool", Raw().Header(3, 0, 1).Str("k").Put<uint32_t>(7).Put<uint8_t>(2).bytes, "a bool holds 2"});
  cases.push_back({"empty key", Raw().Header(3, 0, 1).Str("").Put<uint32_t>(4).Put<uint32_t>(1).bytes, "metadata key 0 is empty"});
  cases.push_back({"duplicate key",
                   Raw().Header(3, 0, 2).Str("k").Put<uint32_t>(4).Put<uint32_t>(1).Str("k").Put<uint32_t>(4).Put<uint32_t>(2).bytes,
                   "metadata key 'k' appears twice"});
  cases.push_back({"alignment type", Raw().Header(3, 0, 1).Str("general.alignment").Put<uint32_t>(10).Put<uint64_t>(32).bytes,
                   "'general.alignment' is a uint64"});
  cases.push_back({"alignment value", Raw().Header(3, 0, 1).Str("general.alignment").Put<uint32_t>(4).Put<uint32_t>(24).bytes,
                   "'general.alignment' is 24"});
  auto tensor = [](uint32_t dims, std::vector<uint64_t> ne, uint32_t type, uint64_t offset, size_t data) {
    Raw r;
    r.Header(3, 1, 0).Str("t").Put<uint32_t>(dims);
    for (uint64_t d : ne) r.Put<uint64_t>(d);
    r.Put<uint32_t>(type).Put<uint64_t>(offset).Pad(32);
    r.bytes.append(data, '\0');
    return r.bytes;
  };
  cases.push_back({"dims 0", tensor(0, {}, 0, 0, 64), "0 dimensions"});
  cases.push_back({"dims 5", tensor(5, {1, 1, 1, 1, 1}, 0, 0, 64), "5 dimensions"});
  cases.push_back({"zero dim", tensor(2, {4, 0}, 0, 0, 64), "dimension 1 is 0"});
  cases.push_back({"overflow", tensor(4, {uint64_t{1} << 20, uint64_t{1} << 20, uint64_t{1} << 20, 16}, 0, 0, 64), "element count overflows"});
  cases.push_back({"byte overflow", tensor(2, {uint64_t{1} << 40, uint64_t{1} << 22}, 0, 0, 64), "byte size overflows"});
  cases.push_back({"type id", tensor(1, {32}, 99, 0, 128), "type id 99 is not a ggml type"});
  cases.push_back({"retired type id", tensor(1, {32}, 4, 0, 128), "type id 4 is not a ggml type"});
  cases.push_back({"block", tensor(1, {33}, 8, 0, 128), "row length 33 is not a multiple of q8_0's block of 32"});
  cases.push_back({"misaligned", tensor(1, {4}, 0, 8, 64), "offset 8 is not a multiple of the alignment 32"});
  cases.push_back({"past the end", tensor(1, {64}, 0, 0, 128), "run past its end"});
  cases.push_back({"offset past the end", tensor(1, {4}, 0, uint64_t{1} << 63, 64), "run past its end"});
  // Two f32 tensors of `values` each, at offsets 0 and 32.
  auto two = [](const char* second_name, uint64_t values) {
    Raw r;
    r.Header(3, 2, 0);
    r.Str("a").Put<uint32_t>(1).Put<uint64_t>(values).Put<uint32_t>(0).Put<uint64_t>(0);
    r.Str(second_name).Put<uint32_t>(1).Put<uint64_t>(values).Put<uint32_t>(0).Put<uint64_t>(32);
    r.Pad(32);
    r.bytes.append(128, '\0');
    return r.bytes;
  };
  cases.push_back({"overlap", two("b", 16), "tensors 'a' and 'b' overlap"});
  cases.push_back({"duplicate tensor", two("a", 8), "tensor name 'a' appears twice"});
  {
    Raw r;
    r.Header(3, 1, 0).Str(std::string("a\nb\x01", 4)).Put<uint32_t>(7);
    r.bytes.append(64, '\0');
    cases.push_back({"untrusted name", r.bytes, "tensor 0 ('a\\x0ab\\x01'): 7 dimensions"});
  }
  for (const Case& c : cases) {
    const std::string message = ParseError(c.bytes);
    EXPECT_NE(message.find(c.expect), std::string::npos) << c.what << ": " << message;
  }
}

// A file written by llama.cpp's own gguf-py (tools/make_gguf_fixtures.py): every metadata value
// type and array kind, fourteen tensors of ggml types from f32 to q6_K; what gguf-py's reader
// found is in expected.json. io/ggml_quants.h's dequantization of every tensor equals
// gguf-py's (the .npy files) value for value.
TEST(GgufInterop, ReadsFilesWrittenByGgufPy) {
  const std::string dir = std::string(TESSERA_TEST_DATA) + "/gguf/";
  const auto file = GgufFile::Open(dir + "fixture.gguf");
  const nlohmann::json expected = nlohmann::json::parse(ReadFile(dir + "expected.json"));
  EXPECT_EQ(file->GetString("general.architecture"), "llama");
  for (const auto& [key, want] : expected["metadata"].items()) {
    SCOPED_TRACE(key);
    const GgufValue* got = file->Find(key);
    ASSERT_NE(got, nullptr);
    const std::string type = want["type"];
    EXPECT_EQ(GgufTypeName(got->type), type);
    if (type == "array") {
      EXPECT_EQ(GgufTypeName(got->element), want["element"].get<std::string>());
      ASSERT_EQ(got->size(), want["value"].size());
      for (size_t i = 0; i < got->size(); ++i) {
        const nlohmann::json& w = want["value"][i];
        if (w.is_string()) EXPECT_EQ(std::get<std::vector<std::string>>(got->value)[i], w.get<std::string>());
        else if (w.is_boolean()) EXPECT_EQ(std::get<std::vector<bool>>(got->value)[i], w.get<bool>());
        else if (w.is_number_float()) EXPECT_EQ(std::get<std::vector<double>>(got->value)[i], w.get<double>());
        else if (const auto* u = std::get_if<std::vector<uint64_t>>(&got->value)) EXPECT_EQ((*u)[i], w.get<uint64_t>());
        else EXPECT_EQ(std::get<std::vector<int64_t>>(got->value)[i], w.get<int64_t>());
      }
    } else if (type == "string") {
      EXPECT_EQ(std::get<std::string>(got->value), want["value"].get<std::string>());
    } else if (type == "bool") {
      EXPECT_EQ(std::get<bool>(got->value), want["value"].get<bool>());
    } else if (type == "float32") {
      EXPECT_EQ(std::get<double>(got->value), static_cast<double>(want["value"].get<float>()));
    } else if (type == "float64") {
      EXPECT_EQ(std::get<double>(got->value), want["value"].get<double>());
    } else if (type.front() == 'u') {
      EXPECT_EQ(std::get<uint64_t>(got->value), want["value"].get<uint64_t>());
    } else {
      EXPECT_EQ(std::get<int64_t>(got->value), want["value"].get<int64_t>());
    }
  }
  ASSERT_EQ(file->tensors().size(), expected["tensors"].size());
  for (size_t i = 0; i < file->tensors().size(); ++i) {
    const GgufTensorInfo& t = file->tensors()[i];
    const nlohmann::json& want = expected["tensors"][i];
    SCOPED_TRACE(t.name);
    EXPECT_EQ(t.name, want["name"].get<std::string>());
    EXPECT_EQ(t.type->id, want["type"].get<uint32_t>());
    EXPECT_EQ(t.ne, want["ne"].get<std::vector<uint64_t>>());
    EXPECT_EQ(t.offset, want["offset"].get<uint64_t>());
    EXPECT_EQ(t.nbytes, want["nbytes"].get<uint64_t>());
    const NpyArray ref = ReadNpyF32(dir + t.name + ".npy");
    EXPECT_EQ(ref.shape, t.shape());
    std::vector<float> got(ref.data.size(), -1.0f);
    ASSERT_TRUE(DequantizeGgmlRow(t.type->id, file->Data(t), got.data(), got.size()));
    for (size_t j = 0; j < got.size(); ++j) ASSERT_EQ(got[j], ref.data[j]) << j;
  }
}

// The config of GGUF metadata as llama.cpp's converter wrote it for the shipped tiny-llama and
// tiny-gpt-oss (`inspect` of build/llama_cpp/*.gguf, tools/compare_llama_cpp.py) equals their
// config.json where both speak; an unknown architecture and a missing key are named.
TEST_F(GgufTest, ConfigFromMetadataMatchesTheShippedModels) {
  auto common = [](const std::string& arch, uint32_t ff, float theta) {
    return std::vector<std::pair<std::string, GgufValue>>{
        {"general.architecture", GgufString(arch)}, {arch + ".block_count", GgufUint32(4)},
        {arch + ".context_length", GgufUint32(arch == "llama" ? 2048 : 4096)},
        {arch + ".embedding_length", GgufUint32(256)}, {arch + ".feed_forward_length", GgufUint32(ff)},
        {arch + ".attention.head_count", GgufUint32(8)}, {arch + ".attention.head_count_kv", GgufUint32(2)},
        {arch + ".rope.freq_base", GgufFloat32(theta)}, {arch + ".attention.layer_norm_rms_epsilon", GgufFloat32(1e-5f)},
        {arch + ".attention.key_length", GgufUint32(32)}, {arch + ".attention.value_length", GgufUint32(32)},
        {"tokenizer.ggml.tokens", GgufStrings(std::vector<std::string>(4096, "t"))},
        {"tokenizer.ggml.bos_token_id", GgufUint32(0)}, {"tokenizer.ggml.eos_token_id", GgufUint32(0)}};
  };
  const std::string f32_embed(4096 * 256 * 4, '\0');
  WriteGguf(Path("llama.gguf"), common("llama", 768, 500000.0f), {{"token_embd.weight", {256, 4096}, 0, f32_embed}});
  auto oss = common("gpt-oss", 256, 150000.0f);
  for (auto kv : std::vector<std::pair<std::string, GgufValue>>{
           {"gpt-oss.expert_count", GgufUint32(8)}, {"gpt-oss.expert_used_count", GgufUint32(2)},
           {"gpt-oss.attention.sliding_window", GgufUint32(64)}, {"gpt-oss.expert_feed_forward_length", GgufUint32(256)},
           {"gpt-oss.rope.scaling.type", GgufString("yarn")}, {"gpt-oss.rope.scaling.factor", GgufFloat32(4.0f)},
           {"gpt-oss.rope.scaling.original_context_length", GgufUint32(1024)}}) {
    oss.push_back(kv);
  }
  WriteGguf(Path("oss.gguf"), oss,
            {{"token_embd.weight", {256, 4096}, 0, f32_embed}, {"output.weight", {256, 4096}, 0, f32_embed}});
  for (const auto& [gguf, dir] : {std::pair{"llama.gguf", "tiny-llama"}, std::pair{"oss.gguf", "tiny-gpt-oss"}}) {
    SCOPED_TRACE(dir);
    const ModelConfig got = GgufModelConfig(*GgufFile::Open(Path(gguf)));
    const ModelConfig want = LoadModelConfig(std::string(TESSERA_SOURCE_DIR) + "/models/" + dir);
    EXPECT_EQ(got.model_type, want.model_type);
    EXPECT_EQ(got.architectures, want.architectures);
    EXPECT_EQ(got.vocab_size, want.vocab_size);
    EXPECT_EQ(got.hidden_size, want.hidden_size);
    EXPECT_EQ(got.intermediate_size, want.intermediate_size);
    EXPECT_EQ(got.num_hidden_layers, want.num_hidden_layers);
    EXPECT_EQ(got.num_attention_heads, want.num_attention_heads);
    EXPECT_EQ(got.num_key_value_heads, want.num_key_value_heads);
    EXPECT_EQ(got.head_dim, want.head_dim);
    EXPECT_EQ(got.max_position_embeddings, want.max_position_embeddings);
    EXPECT_EQ(got.rms_norm_eps, want.rms_norm_eps);
    EXPECT_EQ(got.rope_theta, want.rope_theta);
    EXPECT_EQ(got.tie_word_embeddings, want.tie_word_embeddings);
    EXPECT_EQ(got.attention_bias, want.attention_bias);
    EXPECT_EQ(got.num_local_experts, want.num_local_experts);
    EXPECT_EQ(got.num_experts_per_tok, want.num_experts_per_tok);
    EXPECT_EQ(got.sliding_window, want.sliding_window);
    EXPECT_EQ(got.swiglu_limit, want.swiglu_limit);
    EXPECT_EQ(got.layer_types, want.layer_types);
    ASSERT_EQ(got.rope_scaling.has_value(), want.rope_scaling.has_value());
    if (want.rope_scaling) {
      EXPECT_EQ(got.rope_scaling->rope_type, want.rope_scaling->rope_type);
      EXPECT_EQ(got.rope_scaling->factor, want.rope_scaling->factor);
      EXPECT_EQ(got.rope_scaling->original_max_position_embeddings, want.rope_scaling->original_max_position_embeddings);
      EXPECT_EQ(got.rope_scaling->beta_fast, want.rope_scaling->beta_fast);
      EXPECT_EQ(got.rope_scaling->beta_slow, want.rope_scaling->beta_slow);
      EXPECT_EQ(got.rope_scaling->truncate, want.rope_scaling->truncate);
    }
  }
  WriteGguf(Path("bert.gguf"), {{"general.architecture", GgufString("bert")}}, {});
  EXPECT_THROW(GgufModelConfig(*GgufFile::Open(Path("bert.gguf"))), Error);
  auto missing = common("qwen3", 768, 1e6f);
  missing.erase(missing.begin() + 1);  // qwen3.block_count
  WriteGguf(Path("q.gguf"), missing, {});
  try {
    GgufModelConfig(*GgufFile::Open(Path("q.gguf")));
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("metadata 'qwen3.block_count' is missing"), std::string::npos) << e.what();
  }
}

// Random byte, u32 and u64 corruption of a valid file's header (the data section is not read):
// each parse either succeeds with every tensor inside the data section or throws a one-line
// tessera::Error; both outcomes occur.
TEST(GgufFuzz, RandomlyCorruptedHeadersFailCleanlyOrParseConsistently) {
  std::vector<std::pair<std::string, GgufValue>> metadata = {
      {"general.architecture", GgufString("qwen3")}, {"qwen3.block_count", GgufUint32(2)},
      {"tokenizer.ggml.tokens", GgufStrings({"a", "b", "c"})}, {"tokenizer.ggml.scores", GgufFloat32s({0, 1, 2})}};
  const fs::path path = fs::path(::testing::TempDir()) / ("tessera_gguf_fuzz_" + std::to_string(::getpid()) + ".gguf");
  WriteGguf(path.string(), metadata,
            {{"a", {32, 2}, 0, std::string(256, '\0')}, {"b", {32}, GgmlType("q8_0").id, std::string(34, '\0')}});
  const std::string valid = ReadFile(path.string());
  fs::remove(path);
  const size_t header_bytes = valid.size() - 320;  // the data section: 256 + 34 bytes padded to 320
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("random seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  int parsed = 0, failed = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::string bytes = valid;
    const int mutations = 1 + static_cast<int>(rng() % 3);
    for (int m = 0; m < mutations; ++m) {
      const size_t at = rng() % header_bytes;
      switch (rng() % 3) {
        case 0: bytes[at] = static_cast<char>(rng()); break;
        case 1: {
          const uint32_t v = static_cast<uint32_t>(rng() % 2 ? rng() : rng() % 64);
          std::memcpy(&bytes[std::min(at, bytes.size() - 4)], &v, 4);
          break;
        }
        default: {
          const uint64_t v = rng() % 2 ? rng() : rng() % 4096;
          std::memcpy(&bytes[std::min(at, bytes.size() - 8)], &v, 8);
        }
      }
    }
    try {
      const GgufHeader h = ParseGgufHeader(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "f.gguf");
      for (const GgufTensorInfo& t : h.tensors) {
        ASSERT_LE(h.data_offset + t.offset + t.nbytes, bytes.size()) << t.name;
        ASSERT_EQ(t.offset % h.alignment, 0u);
      }
      ++parsed;
    } catch (const Error& e) {
      ASSERT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
      ++failed;
    }
  }
  EXPECT_GT(parsed, 0);
  EXPECT_GT(failed, 0);
}

}  // namespace
}  // namespace tessera
