// Randomized corruption of tokenizer.json and of pre-tokenizer regexes: every input must either
// load (and then tokenize without crashing) or throw tessera::Error with a one-line message that
// names the file. Bounded to a few seconds; fixed seeds keep failures reproducible.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/embedded_assets.h"
#include "tokenizer/split_regex.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace tessera {
namespace {

using nlohmann::json;

// GPT-2 byte-level spelling of one byte.
std::string ByteChar(int b) {
  const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
  int code = b;
  if (!printable) {
    code = 0x100;
    for (int x = 0; x < b; ++x) {
      const bool p = (x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE && x <= 0xFF);
      if (!p) ++code;
    }
  }
  std::string out;
  utf8::Append(static_cast<char32_t>(code), out);
  return out;
}

std::string Spell(const std::string& bytes) {
  std::string out;
  for (unsigned char b : bytes) out += ByteChar(b);
  return out;
}

// A small but complete o200k-style tokenizer.json: 256 byte tokens, a few merges, two added
// tokens, the o200k Split regex.
json MiniTokenizer() {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[ByteChar(b)] = b;
  json merges = json::array();
  int next = 256;
  for (const auto& [left, right] : std::vector<std::pair<std::string, std::string>>{
           {"t", "h"}, {"th", "e"}, {" ", "the"}, {"i", "n"}, {"in", "g"}, {" ", "t"}, {"e", "r"}, {"h", "e"}}) {
    const std::string merged = Spell(left + right);
    if (!vocab.contains(merged)) vocab[merged] = next++;
    merges.push_back(json::array({Spell(left), Spell(right)}));
  }
  json added = json::array();
  for (const char* content : {"<|start|>", "<|end|>"}) {
    added.push_back({{"id", next++}, {"content", content}, {"single_word", false}, {"lstrip", false},
                     {"rstrip", false}, {"normalized", false}, {"special", true}});
  }
  const std::string o200k(kO200kPattern);
  return json{
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         json::array(
             {{{"type", "Split"}, {"pattern", {{"Regex", o200k}}}, {"behavior", "Isolated"}, {"invert", false}},
              {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", false}}})}}},
      {"post_processor",
       {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", false}, {"use_regex", true}}},
      {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}},
      {"model",
       {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr}, {"fuse_unk", false}, {"byte_fallback", false}, {"ignore_merges", true},
        {"vocab", vocab}, {"merges", merges}}}};
}

// Loads `text`; returns true if it loaded. Any failure must be a one-line tessera::Error.
bool TryLoadAndUse(const std::string& text, std::mt19937& rng) {
  try {
    const Tokenizer tok = Tokenizer::FromJson(text, "corrupt.json");
    const std::string sample = "the thing <|start|> h\xC3\xA9llo \xF0\x9F\x98\x80 it's\r\n  42";
    const std::vector<int32_t> ids = tok.Encode(sample);
    const std::string decoded = tok.Decode(ids);
    EXPECT_EQ(utf8::FindInvalid(decoded), decoded.size());
    tok.EncodeOrdinary(sample);
    std::vector<int32_t> random_ids(8);
    for (auto& id : random_ids) id = static_cast<int32_t>(rng() % (tok.vocab_size() + 4)) - 2;
    try {
      tok.Decode(random_ids);
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    }
    return true;
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind("corrupt.json: ", 0), 0u) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    return false;
  }
}

json RandomValue(std::mt19937& rng) {
  switch (rng() % 9) {
    case 0: return nullptr;
    case 1: return rng() % 2 == 0;
    case 2: return static_cast<int64_t>(rng() % 300) - 5;
    case 3: return int64_t{1} << (20 + rng() % 43);
    case 4: return 0.5;
    case 5: return std::string("Ġ");
    case 6: return std::string("<|start|>");
    case 7: return json::array();
    default: return json::object();
  }
}

// Picks a random node below `node` and mutates it (or its parent's entry).
void Mutate(json& node, std::mt19937& rng, int depth = 0) {
  const bool container = node.is_object() || node.is_array();
  if (!container || node.empty()) {
    node = RandomValue(rng);
    return;
  }
  const size_t index = rng() % node.size();
  auto it = node.begin();
  std::advance(it, index);
  const uint32_t action = rng() % 10;
  if (depth > 0 && action == 0) {
    node.erase(it);  // delete a key or element
  } else if (action == 1) {
    *it = RandomValue(rng);
  } else if (action == 2 && node.is_array()) {
    node.push_back(*it);  // duplicate element (duplicate merge, duplicate added token)
  } else if (action == 3 && node.is_object() && node.size() > 1) {
    auto other = node.begin();
    std::advance(other, rng() % node.size());
    *it = *other;  // e.g. two vocab entries with one id
  } else {
    Mutate(*it, rng, depth + 1);
  }
}

TEST(TokenizerCorruption, MiniTokenizerLoadsAndWorks) {
  const Tokenizer tok = Tokenizer::FromJson(MiniTokenizer().dump(), "mini.json");
  // " the" is one merged token, "<|start|>" an added one.
  const std::vector<int32_t> ids = tok.Encode("the<|start|> the");
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(tok.TokenBytes(ids[0]), "the");
  EXPECT_EQ(tok.TokenBytes(ids[1]), "<|start|>");
  EXPECT_EQ(tok.TokenBytes(ids[2]), " the");
  EXPECT_EQ(tok.Decode(tok.Encode("héllo wörld")), "héllo wörld");
}

TEST(TokenizerCorruption, RandomCorruptionsOfASmallTokenizerJson) {
  const json base = MiniTokenizer();
  const std::string text = base.dump();
  std::mt19937 rng(2024);
  int loaded = 0, rejected = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int round = 0; round < 3000; ++round) {
    std::string corrupt;
    switch (round % 3) {
      case 0:  // truncation
        corrupt = text.substr(0, rng() % text.size());
        break;
      case 1: {  // random byte flips
        corrupt = text;
        for (int k = 1 + rng() % 4; k > 0; --k) corrupt[rng() % corrupt.size()] = static_cast<char>(rng() % 256);
        break;
      }
      default: {  // structural: wrong types, missing keys, duplicates
        json j = base;
        for (int k = 1 + rng() % 2; k > 0; --k) Mutate(j, rng);
        corrupt = j.dump();
        break;
      }
    }
    (TryLoadAndUse(corrupt, rng) ? loaded : rejected)++;
  }
  EXPECT_GT(rejected, 1000);
  EXPECT_GT(loaded, 10);  // harmless mutations (e.g. a flipped byte inside a token) still load
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 60.0);
}

// Targeted corruptions with the expected message.
TEST(TokenizerCorruption, SpecificProblemsAreNamed) {
  struct Case {
    const char* what;
    std::function<void(json&)> mutate;
    const char* expect;  // substring of the message
  };
  const std::vector<Case> cases = {
      {"no model", [](json& j) { j.erase("model"); }, "model: is missing"},
      {"model type", [](json& j) { j["model"]["type"] = "WordPiece"; }, "model.type: \"WordPiece\" is not supported"},
      {"vocab type", [](json& j) { j["model"]["vocab"] = json::array(); }, "model.vocab: expected an object"},
      {"no merges", [](json& j) { j["model"].erase("merges"); }, "model.merges: is missing"},
      {"unknown merge token", [](json& j) { j["model"]["merges"].push_back(json::array({"q", "zz"})); },
       "token \"zz\" is not in the vocabulary"},
      {"merge result missing", [](json& j) { j["model"]["merges"].push_back(json::array({"q", "q"})); },
       "merged token \"qq\" is not in the vocabulary"},
      {"bad merge string", [](json& j) { j["model"]["merges"].push_back("a b c"); },
       "is not two tokens separated by one space"},
      {"duplicate id", [](json& j) { j["model"]["vocab"]["a"] = 98; }, "id 98 is used by two tokens"},
      {"negative id", [](json& j) { j["model"]["vocab"]["a"] = -1; }, "token id -1 is outside"},
      {"string id", [](json& j) { j["model"]["vocab"]["a"] = "97"; }, "expected an integer token id"},
      {"not byte-level", [](json& j) { j["model"]["vocab"]["a b"] = 1000; }, "not spelled in byte-level characters"},
      {"normalizer", [](json& j) { j["normalizer"] = {{"type", "NFKC"}}; }, "normalizer: type \"NFKC\" is not supported"},
      {"normalizer in sequence",
       [](json& j) {
         j["normalizer"] = {{"type", "Sequence"}, {"normalizers", json::array({{{"type", "NFC"}}, {{"type", "Lowercase"}}})}};
       },
       "normalizer.normalizers[1]: type \"Lowercase\" is not supported"},
      {"replace pattern", [](json& j) { j["normalizer"] = {{"type", "Replace"}, {"pattern", {{"Glob", "*"}}}, {"content", ""}}; },
       "normalizer.pattern: expected {\"String\": ...} or {\"Regex\": ...}"},
      {"post-processor", [](json& j) { j["post_processor"] = {{"type", "RobertaProcessing"}}; },
       "post_processor: type \"RobertaProcessing\" is not supported"},
      {"template special missing",
       [](json& j) {
         j["post_processor"] = {{"type", "TemplateProcessing"},
                                {"single", json::array({{{"SpecialToken", {{"id", "<x>"}, {"type_id", 0}}}},
                                                        {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
                                {"special_tokens", json::object()}};
       },
       "post_processor.special_tokens[\"<x>\"]: is missing"},
      {"template without $A",
       [](json& j) {
         j["post_processor"] = {{"type", "TemplateProcessing"}, {"single", json::array()}, {"special_tokens", json::object()}};
       },
       "post_processor.single: has no $A"},
      {"pre-tokenizer", [](json& j) { j["pre_tokenizer"]["pretokenizers"][0] = {{"type", "Whitespace"}}; },
       "pre_tokenizer.pretokenizers[0]: type \"Whitespace\" is not supported"},
      {"after ByteLevel", [](json& j) { j["pre_tokenizer"]["pretokenizers"].push_back({{"type", "Digits"}}); },
       "pre_tokenizer.pretokenizers[2]: nothing may follow the ByteLevel pre-tokenizer"},
      {"metaspace scheme",
       [](json& j) { j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "_"}, {"prepend_scheme", "twice"}}; },
       "pre_tokenizer.prepend_scheme: \"twice\" is not one of always, first, never"},
      {"strip content", [](json& j) { j["decoder"] = {{"type", "Strip"}, {"content", "ab"}, {"start", 1}, {"stop", 0}}; },
       "decoder.content: must be one character"},
      {"byte fallback on byte-level", [](json& j) { j["model"]["byte_fallback"] = true; },
       "model.byte_fallback: is not supported with a byte-level pre-tokenizer"},
      {"unk token missing",
       [](json& j) {
         j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "_"}, {"prepend_scheme", "always"}};
         j["model"]["unk_token"] = "<unk>";
       },
       "model.unk_token: \"<unk>\" is not in the vocabulary"},
      {"truncation", [](json& j) { j["truncation"] = {{"max_length", 5}}; }, "truncation: is not supported"},
      {"decoder", [](json& j) { j["decoder"] = {{"type", "WordPiece"}}; }, "decoder: type \"WordPiece\""},
      {"decoder in sequence",
       [](json& j) { j["decoder"] = {{"type", "Sequence"}, {"decoders", json::array({{{"type", "Fuse"}}, {{"type", "CTC"}}})}}; },
       "decoder.decoders[1]: type \"CTC\""},
      {"behavior", [](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Removed"; },
       "behavior: \"Removed\" is not supported"},
      {"regex", [](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\w+"; },
       "unsupported regex construct \\w"},
      {"lstrip", [](json& j) { j["added_tokens"][0]["lstrip"] = 1; }, "added_tokens[0].lstrip: expected true or false"},
      {"added id", [](json& j) { j["added_tokens"][1]["id"] = 5000; }, "added_tokens[1].id: 5000"},
      {"added dup", [](json& j) { j["added_tokens"].push_back(j["added_tokens"][0]); }, "appears twice"},
      {"dropout", [](json& j) { j["model"]["dropout"] = 0.1; }, "model.dropout: is not supported"},
      {"top level", [](json& j) { j = json::array(); }, "top level: expected an object"},
  };
  for (const Case& c : cases) {
    json j = MiniTokenizer();
    c.mutate(j);
    try {
      Tokenizer::FromJson(j.dump(), "mini.json");
      ADD_FAILURE() << c.what << ": loaded";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg.rfind("mini.json: ", 0), 0u) << c.what << ": " << msg;
      EXPECT_NE(msg.find(c.expect), std::string::npos) << c.what << ": " << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
  }
  EXPECT_THROW(Tokenizer::FromJson("", "empty.json"), Error);
  EXPECT_THROW(Tokenizer::FromJson("{\"model\": ", "cut.json"), Error);
}

// Truncations, byte flips and letter swaps of the real 12 MB file. Random bytes mostly break
// the JSON or its UTF-8 (rejected by the parser); swapping one ASCII letter for another keeps
// both valid and reaches the vocabulary, merge and regex checks.
TEST(TokenizerCorruption, RandomCorruptionsOfO200kHarmony) {
  const std::string& text = EmbeddedTokenizerJson();
  std::mt19937 rng(99);
  int loaded = 0;
  for (int round = 0; round < 12; ++round) {
    std::string corrupt;
    if (round % 3 == 0) {
      corrupt = text.substr(0, rng() % text.size());
    } else if (round % 3 == 1) {
      corrupt = text;
      for (int k = 0; k < 3; ++k) corrupt[rng() % corrupt.size()] = static_cast<char>(rng() % 256);
    } else {
      corrupt = text;
      for (int k = 0; k < 3;) {
        char& c = corrupt[rng() % corrupt.size()];
        if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') {
          c = static_cast<char>('a' + rng() % 26);
          ++k;
        }
      }
    }
    loaded += TryLoadAndUse(corrupt, rng);
  }
  EXPECT_LT(loaded, 12);
}

// Random patterns from regex fragments: compile or Error, then split random text safely.
TEST(TokenizerCorruption, RandomRegexes) {
  const std::vector<std::string> fragments = {
      "a",  "b",   "\\s", "\\S", "\\p{L}", "\\p{Lu}", "[",   "]",   "[^", "-",  "(",    ")",   "(?:", "(?i:",
      "(?=", "(?!", "(?<=", "|",  "*",     "+",       "?",   "{2}", "{1,3}", "{,2}", ".", "\\", "x",  "'",
      "\\x41", "é", "\\r", "\\n", "(?i)",  "{",       "}",   "\\p{", "^",   "$",  "\\d", "s",   "t",   "😀"};
  const std::vector<std::string> texts = {"", "abc", "A b\tc\n", "'s'S x", "éé😀 12", "aaaaaaaaaaaaaa!", "sSſ st"};
  std::mt19937 rng(5);
  int compiled = 0;
  for (int round = 0; round < 5000; ++round) {
    std::string pattern;
    for (int k = 1 + rng() % 8; k > 0; --k) pattern += fragments[rng() % fragments.size()];
    try {
      const SplitRegex regex(pattern);
      ++compiled;
      for (const std::string& text : texts) {
        size_t covered = 0;
        regex.Split(text, [&](size_t b, size_t e) {
          EXPECT_EQ(b, covered) << pattern;
          EXPECT_LT(b, e);
          covered = e;
        });
        EXPECT_EQ(covered, text.size()) << pattern;
      }
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    }
  }
  EXPECT_GT(compiled, 500);
}

}  // namespace
}  // namespace tessera
