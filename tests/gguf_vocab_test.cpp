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

#include <cctype>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <simdjson.h>

#include "io/gguf.h"
#include "tokenizer/gguf_vocab.h"
#include "tokenizer/pipeline.h"
#include "tokenizer/pipeline_json.h"
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
  // When set, the reference is the family's tokenizer.json with this pre-tokenizer and
  // ignore_merges (the pre-tokenizer Hugging Face ships for the vocabularies of that name).
  const char* hf_pre_tokenizer = nullptr;
  bool hf_ignore_merges = false;
};

class GgufVocab : public ::testing::TestWithParam<VocabCase> {};

TEST_P(GgufVocab, IdsEqualTheHuggingFaceTokenizers) {
  const fs::path path = fs::path(::testing::TempDir()) /
                        StrCat("tessera_gguf_vocab_", ::getpid(), "_", GetParam().family, ".gguf");
  WriteVocabGguf(GetParam().family, GetParam().pre, path.string());
  const Tokenizer tok = Tokenizer::FromPath(path.string());
  fs::remove(path);
  json hf = json::parse(std::ifstream(FamilyDir(GetParam().family) + "/tokenizer.json"));
  const bool replaced = GetParam().hf_pre_tokenizer != nullptr;
  const bool normalized = !hf["normalizer"].is_null() || replaced;
  hf["normalizer"] = nullptr;
  if (replaced) {
    hf["pre_tokenizer"] = json::parse(GetParam().hf_pre_tokenizer);
    hf["model"]["ignore_merges"] = GetParam().hf_ignore_merges;
  }
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

// HF's GPT-2 pre-tokenizer (ByteLevel's own split) and StarCoder's / SmolLM2's (each digit alone,
// then ByteLevel's split), which llama.cpp's gpt-2 and smollm rows stand for.
constexpr const char* kHfGpt2 = R"({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true})";
constexpr const char* kHfSmollm =
    R"({"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": true},)"
    R"( {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}]})";

INSTANTIATE_TEST_SUITE_P(GgufVocabFamilies, GgufVocab,
                         ::testing::Values(VocabCase{"llama3", "llama-bpe"}, VocabCase{"qwen2", "qwen2"},
                                           VocabCase{"qwen3", "qwen2"}, VocabCase{"deepseek3", "deepseek-v3"},
                                           VocabCase{"llama3", "smollm", kHfSmollm}, VocabCase{"qwen2", "gpt-2", kHfGpt2}),
                         [](const ::testing::TestParamInfo<VocabCase>& info) {
                           std::string name = info.param.family;
                           if (info.param.hf_pre_tokenizer != nullptr) {
                             name += "_";
                             for (const char c : std::string(info.param.pre)) name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           }
                           return name;
                         });

// ---------------------------------------------------------------------------------------------
// The pre-tokenizer rows (issue 45): tests/data/tokenizer/pre, written by
// tools/make_pre_tokenizer_goldens.py from llama.cpp's source (llama-cpp-python 0.3.36): every
// tokenizer.ggml.pre name llama.cpp knows, grouped by rule (one distinct regex list, as
// llama.cpp documents its intent), with the rule's variants (names, ignore_merges, BOS default)
// and where `tokenizers` starts a piece when it splits 704 texts with the rule's regexes.

std::string PreDir() { return std::string(TESSERA_TEST_DATA) + "/tokenizer/pre/"; }

const json& PreIndex() {
  static const json index = json::parse(std::ifstream(PreDir() + "index.json"));
  return index;
}

json PreRule(const std::string& rule) { return json::parse(std::ifstream(PreDir() + rule + ".json")); }

// The tokenizer.json of a small byte-level GGUF vocabulary whose tokenizer.ggml.pre is `pre`
// (absent when empty), BOS id 3 and no tokenizer.ggml.add_bos_token.
json PreGgufJson(const std::string& pre) {
  const fs::path path = fs::path(::testing::TempDir()) / StrCat("tessera_gguf_pre_", ::getpid(), ".gguf");
  std::vector<std::pair<std::string, GgufValue>> meta = {
      {"general.architecture", GgufString("llama")},
      {"tokenizer.ggml.model", GgufString("gpt2")},
      {"tokenizer.ggml.tokens", GgufStrings({"a", "b", "ab", "<s>"})},
      {"tokenizer.ggml.token_type", GgufInt32s({1, 1, 1, 3})},
      {"tokenizer.ggml.merges", GgufStrings({"a b"})},
      {"tokenizer.ggml.bos_token_id", GgufUint32(3)}};
  if (!pre.empty()) meta.push_back({"tokenizer.ggml.pre", GgufString(pre)});
  WriteGguf(path.string(), meta, {});
  struct Remove {
    fs::path p;
    ~Remove() { fs::remove(p); }
  } cleanup{path};
  return GgufTokenizerJson(*GgufFile::Open(path.string()));
}

bool AddsBos(const json& tokenizer_json) {
  return tokenizer_json.at("post_processor").at("single").at(0).contains("SpecialToken");
}

std::vector<uint8_t> Base64(const std::string& text) {
  std::vector<uint8_t> out;
  uint32_t acc = 0;
  int bits = 0;
  for (const char c : text) {
    int v;
    if (c >= 'A' && c <= 'Z') v = c - 'A';
    else if (c >= 'a' && c <= 'z') v = c - 'a' + 26;
    else if (c >= '0' && c <= '9') v = c - '0' + 52;
    else if (c == '+') v = 62;
    else if (c == '/') v = 63;
    else continue;  // '=' padding
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<uint8_t>(acc >> bits));
    }
  }
  return out;
}

size_t CodePoints(std::string_view s) {
  size_t n = 0;
  for (const char c : s) n += (static_cast<unsigned char>(c) & 0xc0) != 0x80;
  return n;
}

// `text` cut before the code points of `starts`, for messages.
json Pieces(const std::string& text, const std::vector<size_t>& starts) {
  json out = json::array();
  size_t cp = 0, begin = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    const bool boundary = i == text.size() || (static_cast<unsigned char>(text[i]) & 0xc0) != 0x80;
    if (!boundary) continue;
    if (i == text.size() || (cp > 0 && std::find(starts.begin(), starts.end(), cp) != starts.end())) {
      out.push_back(text.substr(begin, i - begin));
      begin = i;
    }
    ++cp;
  }
  return out;
}

size_t ReadNameCount() {
  size_t n = 0;
  for (const json& rule_name : PreIndex().at("rules")) {
    const json rule = PreRule(rule_name);
    for (const json& v : rule.at("variants")) n += v.at("names").size();
  }
  return n;
}

TEST(GgufPreRows, EveryNameLlamaCppKnowsResolvesToItsRule) {
  size_t names = 0;
  for (const json& rule_name : PreIndex().at("rules")) {
    const json rule = PreRule(rule_name);
    const json first = PreGgufJson(rule.at("variants").at(0).at("names").at(0));
    for (const json& v : rule.at("variants")) {
      for (const json& name : v.at("names")) {
        SCOPED_TRACE(StrCat(rule_name.get<std::string>(), ": ", name.get<std::string>()));
        ++names;
        const json got = PreGgufJson(name);
        EXPECT_EQ(got.at("pre_tokenizer"), first.at("pre_tokenizer"));
        EXPECT_EQ(got.at("model").at("ignore_merges"), v.at("ignore_merges"));
        EXPECT_EQ(AddsBos(got), v.at("add_bos").get<bool>());
      }
    }
  }
  size_t refused = 0;
  for (const json& e : PreIndex().at("not_byte_level")) refused += e.at("names").size();
  EXPECT_EQ(names, ReadNameCount());
  EXPECT_GE(names + refused, 91u);  // llama-cpp-python 0.3.36
  EXPECT_GE(PreIndex().at("rules").size(), 28u);
}

TEST(GgufPreRows, NamesThatAreNotByteLevelAreRefusedWithTheReason) {
  for (const json& e : PreIndex().at("not_byte_level")) {
    for (const json& name : e.at("names")) {
      const std::string msg = ErrorOf([&] { PreGgufJson(name); });
      EXPECT_NE(msg.find(StrCat("tokenizer.ggml.pre '", name.get<std::string>(), "' is llama.cpp's BPE on raw UTF-8")),
                std::string::npos)
          << msg;
      EXPECT_NE(msg.find("not read here"), std::string::npos) << msg;
    }
  }
}

TEST(GgufPreRows, AnUnknownOrMissingNameIsAOneLineErrorNamingIt) {
  const std::string count = StrCat("(", ReadNameCount(), " of llama.cpp's names are read, e.g. ");
  std::string msg = ErrorOf([] { PreGgufJson("no-such-pre"); });
  EXPECT_NE(msg.find("tokenizer.ggml.pre 'no-such-pre' has no row here " + count), std::string::npos) << msg;
  EXPECT_NE(msg.find("src/tokenizer/gguf_vocab.cpp"), std::string::npos) << msg;
  EXPECT_LT(msg.size(), 300u) << msg;
  msg = ErrorOf([] { PreGgufJson(""); });
  EXPECT_NE(msg.find("tokenizer.ggml.pre '' has no row here " + count), std::string::npos) << msg;
}

// The distinct regex lists (file names under tests/data/tokenizer/pre).
constexpr const char* kPreRules[] = {
    "afmoe",  "bailingmoe", "bloom",   "chameleon", "deepseek3_llm", "deepseek_coder", "deepseek_llm",
    "default", "exaone_moe", "falcon", "gpt2",      "gpt4o",         "jais2",          "kimi_k2",
    "laguna", "llama3",     "minicpm5", "qwen2",    "qwen35",        "seed_coder",     "spark2_5",
    "starcoder", "superbpe", "tekken", "tiny_aya",  "ufakzeka",      "viking",         "youtu"};

TEST(GgufPreRows, TheRulesAreThoseOfTheData) {
  std::vector<std::string> want(std::begin(kPreRules), std::end(kPreRules)), got;
  for (const json& r : PreIndex().at("rules")) got.push_back(r);
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, want);
}

class GgufPreSplit : public ::testing::TestWithParam<const char*> {};

TEST_P(GgufPreSplit, PiecesEqualTokenizers) {
  const json rule = PreRule(GetParam());
  const json& texts = PreIndex().at("texts");
  const std::string name = rule.at("variants").at(0).at("names").at(0);
  const json tok = PreGgufJson(name);
  // The tokenizer loads (every regex translates and compiles) ...
  EXPECT_NO_THROW(Tokenizer::FromJson(tok.dump(), name));
  // ... and its pre-tokenizer cuts the texts where `tokenizers` does.
  const std::string pre = tok.at("pre_tokenizer").dump();
  simdjson::dom::parser parser;
  simdjson::padded_string padded(pre);
  simdjson::dom::element root;
  ASSERT_EQ(parser.parse(padded).get(root), simdjson::SUCCESS);
  PipelineJson reader(name);
  PiecePipeline pipeline;
  EXPECT_TRUE(reader.LoadPreTokenizer(root, pipeline.steps));
  const std::vector<uint8_t> bits = Base64(rule.at("starts"));
  size_t bit = 0;
  int failures = 0;
  for (const json& t : texts) {
    const std::string text = t;
    std::vector<size_t> want, got;
    const size_t n = CodePoints(text);
    for (size_t i = 0; i < n; ++i, ++bit) {
      ASSERT_LT(bit / 8, bits.size());
      if ((bits[bit / 8] >> (bit % 8)) & 1) want.push_back(i);
    }
    size_t at = 0;
    pipeline.Run(text, true, [&](std::string_view piece) {
      got.push_back(at);
      at += CodePoints(piece);
    });
    EXPECT_EQ(at, n);
    if (got != want && ++failures <= 5) {
      ADD_FAILURE() << GetParam() << ": " << json(text).dump() << "\n  tokenizers: " << Pieces(text, want).dump()
                    << "\n  tessera:    " << Pieces(text, got).dump();
    }
  }
  EXPECT_LT(bits.size() * 8 - bit, 8u);  // every bit read but the padding
  EXPECT_GE(texts.size(), 500u);
  EXPECT_EQ(failures, 0) << failures << " of " << texts.size() << " texts";
}

INSTANTIATE_TEST_SUITE_P(GgufPreRules, GgufPreSplit, ::testing::ValuesIn(kPreRules),
                         [](const ::testing::TestParamInfo<const char*>& info) { return std::string(info.param); });

}  // namespace
}  // namespace tessera
