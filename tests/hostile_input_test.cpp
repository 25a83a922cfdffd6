// Hostile input that used to crash or hang the process (issue 13, points 2 and 8): JSON nested far
// deeper than any model file (a recursive parser overflows the stack), and files that are not
// regular files (a FIFO blocks open() until a writer appears). Every JSON reader goes through the
// one bounded reader of io/json_util.h and fails with one line naming the file.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/mapped_file.h"
#include "io/config.h"
#include "io/json_util.h"
#include "io/safetensors.h"
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

}  // namespace
}  // namespace tessera
