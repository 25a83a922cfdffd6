// Hostile input that used to crash or hang the process (issue 13, points 2 and 8): JSON nested far
// deeper than any model file (a recursive parser overflows the stack), and files that are not
// regular files (a FIFO blocks open() until a writer appears). Every JSON reader goes through the
// one bounded reader of io/json_util.h and fails with one line naming the file.
// Hostile model files (issue 44, the file findings): counts far past any model (2^40 layers,
// experts, heads, vocabulary, context) refused by name before anything is sized by them, in
// bounded memory; a layer count that disagrees with the tensors; non-finite metadata; a
// vocabulary token that is not UTF-8; empty and 3-byte .gguf files.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/mapped_file.h"
#include "io/config.h"
#include "io/gguf.h"
#include "io/json_util.h"
#include "io/safetensors.h"
#include "model/model.h"
#include "scratch_dir.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

std::string DeepObjects(int depth) {
  std::string s;
  for (int i = 0; i < depth; ++i) s += "{\"a\":";
  s += "1";
  s.append(depth, '}');
  return s;
}

std::string DeepArrays(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }

bool NamesTheDepth(const std::string& msg) { return msg.find("nested deeper than 128 levels") != std::string::npos; }

TEST(BoundedJson, NestingIsCountedOutsideStringsOnly) {
  // Brackets inside strings, escaped quotes and backslashes do not count.
  const std::string text = R"({"k": "[[[[{{{{ \" [[[ \\", "v": [[1]]})";
  EXPECT_NO_THROW(CheckJsonNesting(text, "s.json", 3));
  EXPECT_TRUE(NamesTheDepth(ErrorOf([] { CheckJsonNesting(DeepArrays(129), "a.json"); })));
  EXPECT_NO_THROW(CheckJsonNesting(DeepArrays(128), "a.json"));
  EXPECT_NO_THROW(ParseJsonText(DeepArrays(128), "a.json"));
}

TEST(BoundedJson, EveryReaderRefusesDeepNestingWithOneLine) {
  for (const std::string& deep : {DeepObjects(100000), DeepArrays(100000)}) {
    const std::string config = "{\"model_type\": \"gpt_oss\", \"deep\": " + deep + "}";
    std::string msg = ErrorOf([&] { ParseModelConfig(config, "config.json"); });
    EXPECT_TRUE(NamesTheDepth(msg)) << msg;
    EXPECT_EQ(msg.rfind("config.json: ", 0), 0u) << msg;
    msg = ErrorOf([&] { ParseGenerationConfig("{\"x\": " + deep + "}", "generation_config.json"); });
    EXPECT_TRUE(NamesTheDepth(msg)) << msg;
    msg = ErrorOf([&] { Tokenizer::FromJson("{\"model\": " + deep + "}", "tokenizer.json"); });
    EXPECT_TRUE(NamesTheDepth(msg)) << msg;
    // A safetensors header whose metadata value nests deeply.
    const std::string header = "{\"__metadata__\": " + deep + "}";
    std::vector<uint8_t> image(8 + header.size());
    for (int i = 0; i < 8; ++i) image[i] = static_cast<uint8_t>(header.size() >> (8 * i));
    std::memcpy(image.data() + 8, header.data(), header.size());
    msg = ErrorOf([&] { ParseSafetensorsHeader(image.data(), image.size(), "m.safetensors"); });
    EXPECT_NE(msg.find("m.safetensors: "), std::string::npos) << msg;
  }
}

class SpecialFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tessera_special_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

// A FIFO (no writer: opening it for reading would block forever) and a directory named like the
// file are refused at once by every reader.
TEST_F(SpecialFiles, NonRegularFilesAreRefusedWithoutBlocking) {
  const std::string fifo = (dir_ / "config.json").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& msg : {ErrorOf([&] { LoadModelConfig(dir_.string()); }),
                                 ErrorOf([&] { ReadBoundedFile(fifo, 1 << 20); }), ErrorOf([&] { ReadFile(fifo); }),
                                 ErrorOf([&] { Tokenizer::FromFile(fifo); })}) {
    EXPECT_NE(msg.find("not a regular file"), std::string::npos) << msg;
  }
  fs::create_directories(dir_ / "tokenizer.json");
  const std::string msg = ErrorOf([&] { Tokenizer::FromFile((dir_ / "tokenizer.json").string()); });
  EXPECT_NE(msg.find("not a regular file"), std::string::npos) << msg;
}

// ---- hostile model files (issue 44) ------------------------------------------------------------

// Runs f in a forked child whose address space may grow by at most `budget` bytes past its size
// at the fork (RLIMIT_AS), so that a regression allocating without bound ends in std::bad_alloc
// in the child rather than exhausting the machine. Returns the one-line tessera::Error f threw,
// or "<no error>", "<bad_alloc>", "<child died>".
std::string ErrorInBoundedChild(const std::function<void()>& f, size_t budget = size_t{512} << 20) {
  int fds[2];
  if (::pipe(fds) != 0) return "<pipe failed>";
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    std::string result;
    size_t vm_kb = 0;
    std::ifstream status("/proc/self/status");
    for (std::string line; std::getline(status, line);) {
      if (line.rfind("VmSize:", 0) == 0) vm_kb = std::stoul(line.substr(7));
    }
    const rlimit limit{vm_kb * 1024 + budget, vm_kb * 1024 + budget};
    ::setrlimit(RLIMIT_AS, &limit);
    try {
      f();
      result = "<no error>";
    } catch (const Error& e) {
      result = e.what();
    } catch (const std::bad_alloc&) {
      result = "<bad_alloc>";
    }
    const ssize_t written = ::write(fds[1], result.data(), result.size());
    ::_exit(written == static_cast<ssize_t>(result.size()) ? 0 : 1);
  }
  ::close(fds[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof(buf))) > 0;) out.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return "<child died>";
  return out;
}

using Metadata = std::vector<std::pair<std::string, GgufValue>>;

// The metadata llama.cpp's converter writes for gpt-oss-20b (io/gguf_config.cpp's rows), with
// `key` replaced by `value` (or added).
Metadata GptOssMetadata(const std::string& key = "", const GgufValue& value = {}) {
  Metadata m = {{"general.architecture", GgufString("gpt-oss")},
                {"gpt-oss.block_count", GgufUint32(24)},
                {"gpt-oss.context_length", GgufUint32(131072)},
                {"gpt-oss.embedding_length", GgufUint32(2880)},
                {"gpt-oss.feed_forward_length", GgufUint32(2880)},
                {"gpt-oss.attention.head_count", GgufUint32(64)},
                {"gpt-oss.attention.head_count_kv", GgufUint32(8)},
                {"gpt-oss.attention.key_length", GgufUint32(64)},
                {"gpt-oss.attention.layer_norm_rms_epsilon", GgufFloat32(1e-5f)},
                {"gpt-oss.rope.freq_base", GgufFloat32(150000.0f)},
                {"gpt-oss.attention.sliding_window", GgufUint32(128)},
                {"gpt-oss.expert_count", GgufUint32(32)},
                {"gpt-oss.expert_used_count", GgufUint32(4)},
                {"gpt-oss.rope.scaling.type", GgufString("yarn")},
                {"gpt-oss.rope.scaling.factor", GgufFloat32(32.0f)},
                {"gpt-oss.rope.scaling.original_context_length", GgufUint32(4096)},
                {"gpt-oss.vocab_size", GgufUint32(201088)}};
  if (key.empty()) return m;
  for (auto& [k, v] : m) {
    if (k == key) {
      v = value;
      return m;
    }
  }
  m.emplace_back(key, value);
  return m;
}

// The 288-byte file of issue 44 (here a few bytes longer: all of gpt-oss's keys): 2^40 layers.
// Every command read it to the end of memory (inspect included): the per-layer list of layer
// types was built before the layer count was checked. Now one line, at once, in a small budget.
TEST(HostileModelFiles, TwoToTheFortyLayersAreRefusedBeforeAnyPerLayerList) {
  const ScratchDir dir;
  const std::string path = dir / "layers.gguf";
  WriteGguf(path, GptOssMetadata("gpt-oss.block_count", GgufUint64(uint64_t{1} << 40)), {});
  EXPECT_LT(std::filesystem::file_size(path), 1024u);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(ErrorInBoundedChild([&] { LoadModelConfig(path); }),
            path + ": metadata 'gpt-oss.block_count' is 1099511627776, more than the limit of 1024");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 5.0);
}

// The sibling counts: each named with its limit, also in bounded memory.
TEST(HostileModelFiles, HugeGgufCountsAreRefusedByName) {
  const ScratchDir dir;
  const uint64_t huge = uint64_t{1} << 40;
  const std::pair<const char*, const char*> cases[] = {
      {"gpt-oss.expert_count", "more than the limit of 4096"},
      {"gpt-oss.expert_used_count", "more than the limit of 4096"},
      {"gpt-oss.attention.head_count", "more than the limit of 4096"},
      {"gpt-oss.attention.head_count_kv", "more than the limit of 4096"},
      {"gpt-oss.vocab_size", "more than the limit of 16777216"},
      {"gpt-oss.context_length", "more than the limit of 67108864"},
      {"gpt-oss.embedding_length", "more than the limit of 1048576"},
      {"gpt-oss.attention.sliding_window", "more than the limit of 67108864"},
  };
  for (const auto& [key, limit] : cases) {
    SCOPED_TRACE(key);
    const std::string path = dir / (std::string(key) + ".gguf");
    WriteGguf(path, GptOssMetadata(key, GgufUint64(huge)), {});
    EXPECT_EQ(ErrorInBoundedChild([&] { LoadModelConfig(path); }),
              StrCat(path, ": metadata '", key, "' is ", huge, ", ", limit));
  }
}

// The same budgets for config.json (io/model_limits.h).
TEST(HostileModelFiles, HugeConfigJsonCountsAreRefusedByName) {
  const std::string base = ReadFile(std::string(TESSERA_TEST_DATA) + "/gpt_oss_20b_config.json");
  const std::pair<const char*, const char*> cases[] = {
      {"num_hidden_layers", "must be at most 1024"},
      {"num_local_experts", "must be at most 4096"},
      {"num_attention_heads", "must be at most 4096"},
      {"num_key_value_heads", "must be at most 4096"},
      {"vocab_size", "must be at most 16777216"},
      {"max_position_embeddings", "must be at most 67108864"},
      {"hidden_size", "must be at most 1048576"},
      {"intermediate_size", "must be at most 1048576"},
      {"head_dim", "must be at most 1048576"},
  };
  for (const auto& [key, limit] : cases) {
    nlohmann::json config = nlohmann::json::parse(base);
    config[key] = uint64_t{1} << 40;
    EXPECT_EQ(ErrorInBoundedChild([&] { ParseModelConfig(config.dump(), "config.json"); }),
              StrCat("config.json: ", key, ": ", limit, ", got 1099511627776"));
  }
  nlohmann::json config = nlohmann::json::parse(base);
  config["layer_types"] = std::vector<std::string>(2000, "full_attention");
  EXPECT_EQ(ErrorInBoundedChild([&] { ParseModelConfig(config.dump(), "config.json"); }),
            "config.json: layer_types: has 2000 entries, more than the limit of 1024 layers");
}

// A config.json inside every budget can still describe far more tensors than its weights hold:
// 1024 layers of 4096 experts listed 12.6 million tensor specs and as many problems (7 GB, 75 s)
// before saying that tensors were missing. The counts are checked against the stored tensors
// first, by every reader (loading here; inspect and the converters call the same check).
TEST(HostileModelFiles, ConfigCountsBeyondTheStoredTensorsAreRefusedFirst) {
  const ScratchDir dir;
  const std::string llama = std::string(TESSERA_SOURCE_DIR) + "/models/tiny-llama";
  nlohmann::json config = nlohmann::json::parse(ReadFile(llama + "/config.json"));
  config.update({{"model_type", "qwen3_moe"}, {"architectures", {"Qwen3MoeForCausalLM"}}, {"num_hidden_layers", 1024},
                 {"num_experts", 4096}, {"num_experts_per_tok", 8}, {"moe_intermediate_size", 64},
                 {"norm_topk_prob", true}});
  WriteFile(dir / "config.json", config.dump());
  std::filesystem::create_symlink(llama + "/model.safetensors", dir / "model.safetensors");
  const size_t stored = WeightStore::Open(dir.str()).num_tensors();
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(ErrorInBoundedChild([&] { Model::Load(dir.str()); }),
            StrCat(dir / "config.json", ": num_hidden_layers 1024 with 4096 experts needs more tensors than the ", stored,
                   " of ", dir.str(), " (the config does not describe these weights)"));
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 5.0);
}

// A layer count is checked against the tensors the file holds: none may lie past it, and a
// complete file must hold its last layer.
TEST(HostileModelFiles, LayerCountMustAgreeWithTheTensors) {
  const ScratchDir dir;
  auto write = [&](const std::string& name, uint32_t layers, std::vector<int> blocks) {
    std::vector<GgufTensorToWrite> tensors;
    for (int b : blocks) tensors.push_back({StrCat("blk.", b, ".attn_norm.weight"), {32}, 0, std::string(128, '\0')});
    Metadata m = GptOssMetadata("gpt-oss.block_count", GgufUint32(layers));
    WriteGguf(dir / name, m, tensors);
    return dir / name;
  };
  const std::string few = write("few.gguf", 4, {0, 1});
  EXPECT_EQ(ErrorOf([&] { LoadModelConfig(few); }),
            few + ": metadata 'gpt-oss.block_count' declares 4 layers, but the tensors stop at layer 1");
  const std::string past = write("past.gguf", 2, {0, 1, 5});
  EXPECT_EQ(ErrorOf([&] { LoadModelConfig(past); }),
            past + ": tensor 'blk.5.attn_norm.weight' lies past the 2 layers of metadata 'gpt-oss.block_count'");
  EXPECT_NO_THROW(LoadModelConfig(write("agree.gguf", 2, {0, 1})));
}

// A NaN or infinite float in the metadata is refused by name: a NaN became JSON null on the
// way to the config, i.e. an absent key, and rms_norm_eps silently took its default.
TEST(HostileModelFiles, NonFiniteMetadataIsRefused) {
  const ScratchDir dir;
  const std::pair<const char*, float> cases[] = {
      {"gpt-oss.attention.layer_norm_rms_epsilon", std::numeric_limits<float>::quiet_NaN()},
      {"gpt-oss.attention.layer_norm_rms_epsilon", std::numeric_limits<float>::infinity()},
      {"gpt-oss.rope.freq_base", -std::numeric_limits<float>::infinity()},
  };
  for (const auto& [key, value] : cases) {
    const std::string path = dir / "f.gguf";
    WriteGguf(path, GptOssMetadata(key, GgufFloat32(value)), {});
    EXPECT_EQ(ErrorOf([&] { LoadModelConfig(path); }),
              StrCat(path, ": metadata '", key, "' is ", static_cast<double>(value), " (a finite number is required)"));
  }
  // JSON has no NaN or infinity; an overflowing number is invalid JSON, named with the file.
  EXPECT_EQ(ErrorOf([] { ParseGenerationConfig(R"({"temperature": 1e999})", "generation_config.json"); }),
            "generation_config.json: invalid JSON: number overflow parsing '1e999'");
  EXPECT_EQ(ErrorOf([] { ParseModelConfig(R"({"rms_norm_eps": -1e400})", "config.json"); }),
            "config.json: invalid JSON: number overflow parsing '-1e400'");
  EXPECT_NE(ErrorOf([] { ParseGenerationConfig(R"({"top_p": NaN})", "generation_config.json"); })
                .find("generation_config.json: invalid JSON"),
            std::string::npos);
}

// A vocabulary token (or merge) that is not UTF-8: one line naming the file and the token's index
// (it was nlohmann's "type_error.316" from deep inside, as an internal error with no file named).
TEST(HostileModelFiles, NonUtf8VocabularyTokenIsNamed) {
  const ScratchDir dir;
  const std::string path = dir / "vocab.gguf";
  auto write = [&](std::vector<std::string> tokens, std::vector<std::string> merges) {
    WriteGguf(path,
              {{"general.architecture", GgufString("llama")}, {"tokenizer.ggml.model", GgufString("gpt2")},
               {"tokenizer.ggml.pre", GgufString("llama-bpe")}, {"tokenizer.ggml.tokens", GgufStrings(tokens)},
               {"tokenizer.ggml.merges", GgufStrings(merges)}},
              {});
  };
  write({"a", "b", "ab"}, {"a b"});
  EXPECT_EQ(Tokenizer::FromPath(path).Encode("ab"), std::vector<int32_t>({2}));
  write({"a", "b", "ab", "c\xff" "d"}, {"a b"});
  EXPECT_EQ(ErrorOf([&] { Tokenizer::FromPath(path); }),
            path + ": token 3 of 'tokenizer.ggml.tokens' is not valid UTF-8 (byte 1 of 'c\\xffd')");
  write({"a", "b", "ab"}, {"a b", "\xc0\xaf b"});  // an overlong '/'
  EXPECT_EQ(ErrorOf([&] { Tokenizer::FromPath(path); }),
            path + ": merge 1 of 'tokenizer.ggml.merges' is not valid UTF-8 (byte 0 of '\\xc0\\xaf b')");
}

// An empty or 3-byte .gguf file is a truncated GGUF file to every reader (it was looked for as a
// directory: "x.gguf/config.json: Not a directory"); another non-directory is read as GGUF too.
TEST(HostileModelFiles, ShortGgufFilesAreNamedAsTruncated) {
  const ScratchDir dir;
  for (const std::string& bytes : {std::string(), std::string("GGU")}) {
    const std::string path = dir / "x.gguf";
    WriteFile(path, bytes);
    const std::string want = StrCat(path, ": truncated GGUF file: ", bytes.size(), " bytes, a header needs at least 24");
    EXPECT_EQ(ErrorOf([&] { LoadModelConfig(path); }), want);
    EXPECT_EQ(ErrorOf([&] { WeightStore::Open(path); }), want);
    EXPECT_EQ(ErrorOf([&] { Tokenizer::FromPath(path); }), want);
  }
  const std::string other = dir / "model.bin";
  WriteFile(other, std::string("not a model"));
  EXPECT_EQ(ErrorOf([&] { LoadModelConfig(other); }),
            other + ": not a GGUF file (the first four bytes are not 'GGUF')");
}

}  // namespace
}  // namespace tessera
