// Tokenizers from GGUF metadata (issue 30 point 3; tokenizer/gguf_vocab.h) against Hugging Face:
// each byte-level family test tokenizer (tests/data/tokenizer/families, whose golden.jsonl holds
// `tokenizers`' ids) is written as llama.cpp's converter writes a gpt2 vocabulary
// (TextModel.get_vocab_base: one token per id, the vocabulary's byte-level spelling or the added
// token's text; added tokens CONTROL when special, USER_DEFINED otherwise; the merges as
// "left right"; tokenizer.ggml.pre naming the pre-tokenizer), and the file's tokenizer must give
// the golden ids for every text. A GGUF records no normalizer and llama.cpp applies none: for the
// Qwen families (NFC in tokenizer.json) the reference is their tokenizer.json without it, read
// by tessera's tokenizer.json loader (itself held to the goldens by tokenizer_families_test). The same files against llama.cpp's own tokenizer are
// tools/compare_gguf_tokenizers.py's (docs/ACCURACY.md).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/gguf.h"
#include "tokenizer/tokenizer.h"
#include "test_util.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string FamilyDir(const std::string& name) { return std::string(TESSERA_TEST_DATA) + "/tokenizer/families/" + name; }

// A vocab-only GGUF of the family's tokenizer.json, as convert_hf_to_gguf.py --vocab-only writes it.
void WriteVocabGguf(const std::string& family, const std::string& pre, const std::string& path) {
  const json tok = json::parse(std::ifstream(FamilyDir(family) + "/tokenizer.json"));
  std::vector<std::string> tokens;
  std::vector<int64_t> types;
  auto put = [&](size_t id, const std::string& text, int64_t type) {
    if (tokens.size() <= id) tokens.resize(id + 1, ""), types.resize(id + 1, 5);  // holes: UNUSED
    tokens[id] = text;
    types[id] = type;
  };
  for (const auto& [text, id] : tok.at("model").at("vocab").items()) put(id.get<size_t>(), text, 1);  // NORMAL
  for (const json& added : tok.at("added_tokens")) {
    put(added.at("id").get<size_t>(), added.at("content"), added.value("special", false) ? 3 : 4);
  }
  for (size_t id = 0; id < tokens.size(); ++id) {
    if (tokens[id].empty()) tokens[id] = "[PAD" + std::to_string(id) + "]";
  }
  std::vector<std::string> merges;
  for (const json& m : tok.at("model").at("merges")) {
    merges.push_back(m.is_string() ? m.get<std::string>() : m[0].get<std::string>() + " " + m[1].get<std::string>());
  }
  WriteGguf(path,
            {{"general.architecture", GgufString("llama")},
             {"tokenizer.ggml.model", GgufString("gpt2")},
             {"tokenizer.ggml.pre", GgufString(pre)},
             {"tokenizer.ggml.tokens", GgufStrings(tokens)},
             {"tokenizer.ggml.token_type", GgufInt32s(types)},
             {"tokenizer.ggml.merges", GgufStrings(merges)},
             {"tokenizer.ggml.add_bos_token", GgufBool(false)}},
            {});
}

struct VocabCase {
  const char* family;
  const char* pre;
};

class GgufVocab : public ::testing::TestWithParam<VocabCase> {};

TEST_P(GgufVocab, IdsEqualTheHuggingFaceTokenizers) {
  const fs::path path = fs::path(::testing::TempDir()) /
                        StrCat("tessera_gguf_vocab_", ::getpid(), "_", GetParam().family, ".gguf");
  WriteVocabGguf(GetParam().family, GetParam().pre, path.string());
  const Tokenizer tok = Tokenizer::FromPath(path.string());
  fs::remove(path);
  json hf = json::parse(std::ifstream(FamilyDir(GetParam().family) + "/tokenizer.json"));
  const bool normalized = !hf["normalizer"].is_null();
  hf["normalizer"] = nullptr;
  const Tokenizer reference = Tokenizer::FromJson(hf.dump(), "tokenizer.json without its normalizer");
  std::ifstream in(FamilyDir(GetParam().family) + "/golden.jsonl");
  std::string line;
  int texts = 0, failures = 0;
  while (std::getline(in, line)) {
    const json e = json::parse(line);
    if (e.at("kind") != "encode") continue;
    ++texts;
    const std::string text = e.at("text");
    const std::vector<int32_t> golden = e.value("plain_ids", e.at("ids")).get<std::vector<int32_t>>();
    const std::vector<int32_t> want = normalized ? reference.Encode(text) : golden;
    if (!normalized) {
      EXPECT_EQ(reference.Encode(text), golden) << text;
    }
    if (tok.Encode(text) != want && ++failures <= 5) {
      ADD_FAILURE() << GetParam().family << ": " << e.at("text").dump();
    }
  }
  EXPECT_GE(texts, 300);
  EXPECT_EQ(failures, 0) << failures << " of " << texts << " texts";
}

INSTANTIATE_TEST_SUITE_P(Families, GgufVocab,
                         ::testing::Values(VocabCase{"llama3", "llama-bpe"}, VocabCase{"qwen2", "qwen2"},
                                           VocabCase{"qwen3", "qwen2"}, VocabCase{"deepseek3", "deepseek-v3"}),
                         [](const ::testing::TestParamInfo<VocabCase>& info) { return std::string(info.param.family); });

}  // namespace
}  // namespace tessera
