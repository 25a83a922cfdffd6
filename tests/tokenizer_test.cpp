// Tokenizer: exact agreement with Hugging Face `tokenizers` on the o200k_harmony tokenizer.json
// of gpt-oss. The golden files in tests/data/tokenizer/ come from tools/make_tokenizer_golden.py
// (tokenizers version recorded in their meta lines).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/mapped_file.h"
#include "tokenizer/embedded_assets.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"
#include "harmony_goldens.h"

namespace tessera {
namespace {

using Ids = std::vector<int32_t>;

std::vector<nlohmann::json> ReadJsonLines(const std::string& name) {
  std::ifstream in(std::string(TESSERA_TEST_DATA) + "/tokenizer/" + name);
  EXPECT_TRUE(in.good()) << name;
  std::vector<nlohmann::json> lines;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) lines.push_back(nlohmann::json::parse(line));
  }
  return lines;
}

const Tokenizer& O200k() { return Tokenizer::BuiltIn(); }

bool IsValidUtf8(const std::string& s) { return utf8::FindInvalid(s) == s.size(); }

// Decodes ids one at a time; every piece must be valid UTF-8.
std::string StreamDecode(const Tokenizer& tok, const Ids& ids) {
  IncrementalDecoder decoder(tok);
  std::string text;
  for (int32_t id : ids) {
    const std::string piece = decoder.Add(id);
    EXPECT_TRUE(IsValidUtf8(piece));
    EXPECT_LE(decoder.pending(), 3u);
    text += piece;
  }
  const std::string rest = decoder.Flush();
  EXPECT_TRUE(IsValidUtf8(rest));
  EXPECT_EQ(decoder.pending(), 0u);
  return text + rest;
}

TEST(Tokenizer, GoldenCorpusMatchesHuggingFace) {
  const auto lines = ReadJsonLines("golden.jsonl");
  ASSERT_FALSE(lines.empty());
  ASSERT_EQ(lines[0]["kind"], "meta");
  int encode_cases = 0, decode_cases = 0, failures = 0;
  std::set<std::string> categories;
  for (size_t i = 1; i < lines.size(); ++i) {
    const auto& entry = lines[i];
    const Ids ids = entry["ids"].get<Ids>();
    if (entry["kind"] == "encode") {
      const std::string text = entry["text"];
      ++encode_cases;
      categories.insert(entry["category"].get<std::string>());
      const Ids got = O200k().Encode(text);
      if (got != ids) {
        ++failures;
        ADD_FAILURE() << "line " << i + 1 << " (" << entry["category"] << "): ids differ for "
                      << nlohmann::json(text).dump();
      }
      EXPECT_EQ(O200k().Decode(ids), text) << "line " << i + 1;
      EXPECT_EQ(StreamDecode(O200k(), ids), text) << "line " << i + 1;
      if (entry.contains("ordinary_ids")) {
        EXPECT_EQ(O200k().EncodeOrdinary(text), entry["ordinary_ids"].get<Ids>()) << "line " << i + 1;
      }
    } else {
      ASSERT_EQ(entry["kind"], "decode");
      ++decode_cases;
      const std::string expected = entry["text"];
      EXPECT_EQ(O200k().Decode(ids), expected) << "line " << i + 1;
      EXPECT_EQ(StreamDecode(O200k(), ids), expected) << "line " << i + 1;
    }
  }
  EXPECT_EQ(failures, 0);
  EXPECT_GE(encode_cases, 300);
  EXPECT_EQ(encode_cases, lines[0]["encode_cases"].get<int>());
  EXPECT_EQ(decode_cases, lines[0]["decode_cases"].get<int>());
  for (const char* c : {"prose", "code", "numbers", "cjk", "rtl", "indic", "emoji", "combining", "whitespace",
                        "crlf", "contractions", "special", "harmony", "long", "random", "unicode16"}) {
    EXPECT_TRUE(categories.count(c)) << c;
  }
}

// /work/shared/reference/gpt-oss.md §4.3 (a): openai/harmony test-data/test_simple_convo.txt.
TEST(Tokenizer, HarmonySimpleConversationRendering) {
  const std::string text(golden::kSimpleConversationText);
  const Ids& expected = golden::kSimpleConversationIds;
  ASSERT_EQ(expected.size(), 64u);
  EXPECT_EQ(O200k().Encode(text), expected);
  EXPECT_EQ(O200k().Decode(expected), text);
}

// /work/shared/reference/gpt-oss.md §4.3 (b): HF chat template, date pinned to 2025-06-28.
TEST(Tokenizer, HarmonyChatTemplateRendering) {
  const std::string text(golden::kChatTemplateText);
  const Ids& expected = golden::kChatTemplateIds;
  ASSERT_EQ(expected.size(), 81u);
  EXPECT_EQ(O200k().Encode(text), expected);
  EXPECT_EQ(O200k().Decode(expected), text);
}

// Special-token table and handy ids of gpt-oss.md §4.1.
TEST(Tokenizer, SpecialTokenLookup) {
  const Tokenizer& tok = O200k();
  EXPECT_EQ(tok.vocab_size(), 200019);
  EXPECT_EQ(tok.TokenId("<|startoftext|>"), 199998);
  EXPECT_EQ(tok.TokenId("<|endoftext|>"), 199999);
  EXPECT_EQ(tok.TokenId("<|return|>"), 200002);
  EXPECT_EQ(tok.TokenId("<|constrain|>"), 200003);
  EXPECT_EQ(tok.TokenId("<|channel|>"), 200005);
  EXPECT_EQ(tok.TokenId("<|start|>"), 200006);
  EXPECT_EQ(tok.TokenId("<|end|>"), 200007);
  EXPECT_EQ(tok.TokenId("<|message|>"), 200008);
  EXPECT_EQ(tok.TokenId("<|call|>"), 200012);
  EXPECT_EQ(tok.TokenId("<|endofprompt|>"), 200018);
  EXPECT_EQ(tok.RequireTokenId("system"), 17360);
  EXPECT_EQ(tok.RequireTokenId("user"), 1428);
  EXPECT_EQ(tok.RequireTokenId("assistant"), 173781);
  EXPECT_EQ(tok.RequireTokenId("Hello"), 13225);
  EXPECT_EQ(tok.TokenId("\xC4\xA0user"), tok.Encode(" user").at(0));  // "Ġuser"
  EXPECT_FALSE(tok.TokenId("<|nonexistent|>").has_value());
  EXPECT_FALSE(tok.TokenId(" user").has_value());  // raw space is not a byte-level spelling
  EXPECT_THROW(tok.RequireTokenId("<|nonexistent|>"), Error);
  EXPECT_TRUE(tok.IsSpecial(200006));
  EXPECT_FALSE(tok.IsSpecial(13225));
  EXPECT_TRUE(tok.Contains(0));
  EXPECT_TRUE(tok.Contains(200018));
  EXPECT_FALSE(tok.Contains(200019));
  EXPECT_FALSE(tok.Contains(-1));
  EXPECT_EQ(tok.TokenBytes(13225), "Hello");
  EXPECT_EQ(tok.TokenBytes(200006), "<|start|>");
  EXPECT_EQ(tok.Encode("commentary"), (Ids{12606, 815}));
}

TEST(Tokenizer, BadInputIsAClearError) {
  const Tokenizer& tok = O200k();
  try {
    tok.Decode(Ids{13225, 200019});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("200019"), std::string::npos) << e.what();
  }
  EXPECT_THROW(tok.Decode(Ids{-5}), Error);
  EXPECT_THROW(tok.TokenBytes(1 << 30), Error);
  IncrementalDecoder decoder(tok);
  EXPECT_EQ(decoder.Add(tok.Encode("\xE2\x82\xAC")[0]), "\xE2\x82\xAC");
  EXPECT_THROW(decoder.Add(999999), Error);
  for (const std::string& bad : {std::string("abc\xFF"), std::string("\xC3"), std::string("a\xED\xA0\x80z"),
                                std::string("\xC0\xAF")}) {
    EXPECT_THROW(tok.Encode(bad), Error);
  }
  EXPECT_TRUE(tok.Encode("").empty());
  EXPECT_EQ(tok.Decode(Ids{}), "");
}

TEST(Tokenizer, IncrementalDecoderHoldsBackSplitCharacters) {
  const Tokenizer& tok = O200k();
  // Single-byte tokens for the three bytes of U+20AC, found through their byte-level spelling.
  const int32_t e2 = tok.RequireTokenId("\xC3\xA2");   // 'â' = byte 0xE2
  const int32_t x82 = tok.RequireTokenId("\xC4\xA4");  // byte 0x82 maps to U+0124
  const int32_t xac = tok.RequireTokenId("\xC2\xAC");  // '¬' = byte 0xAC
  ASSERT_EQ(tok.TokenBytes(e2), "\xE2");
  ASSERT_EQ(tok.TokenBytes(x82), "\x82");
  ASSERT_EQ(tok.TokenBytes(xac), "\xAC");
  IncrementalDecoder decoder(tok);
  EXPECT_EQ(decoder.Add(e2), "");
  EXPECT_EQ(decoder.Add(x82), "");
  EXPECT_EQ(decoder.pending(), 2u);
  EXPECT_EQ(decoder.Add(xac), "\xE2\x82\xAC");
  // A special token in the middle of a sequence: the held bytes become U+FFFD first.
  EXPECT_EQ(decoder.Add(e2), "");
  EXPECT_EQ(decoder.Add(200006), "\xEF\xBF\xBD<|start|>");
  EXPECT_EQ(decoder.Add(e2), "");
  EXPECT_EQ(decoder.Flush(), "\xEF\xBF\xBD");
  EXPECT_EQ(decoder.Flush(), "");
}

// Random id sequences (mostly pieces of multi-byte characters): streaming must equal Decode.
TEST(Tokenizer, IncrementalDecoderMatchesDecodeOnRandomIds) {
  const Tokenizer& tok = O200k();
  std::vector<int32_t> fragments;  // tokens whose bytes are not a complete UTF-8 string
  for (int32_t id = 0; id < 199998; ++id) {
    if (!IsValidUtf8(std::string(tok.TokenBytes(id)))) fragments.push_back(id);
  }
  ASSERT_GT(fragments.size(), 100u);
  std::mt19937 rng(7);
  for (int round = 0; round < 2000; ++round) {
    Ids ids(1 + rng() % 12);
    for (auto& id : ids) {
      const uint32_t r = rng() % 10;
      id = r < 7 ? fragments[rng() % fragments.size()] : r < 9 ? static_cast<int32_t>(rng() % 199998) : 200006;
    }
    const std::string full = tok.Decode(ids);
    ASSERT_TRUE(IsValidUtf8(full));
    ASSERT_EQ(StreamDecode(tok, ids), full);
  }
}

// Encode is const and thread-safe: concurrent calls give the single-threaded results.
TEST(Tokenizer, ConcurrentEncodeMatchesSerial) {
  std::vector<std::string> texts;
  for (const auto& entry : ReadJsonLines("golden.jsonl")) {
    if (entry["kind"] == "encode") texts.push_back(entry["text"]);
  }
  std::vector<Ids> expected;
  for (const auto& t : texts) expected.push_back(O200k().Encode(t));
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int w = 0; w < 4; ++w) {
    threads.emplace_back([&, w] {
      for (int round = 0; round < 3; ++round) {
        for (size_t i = w; i < texts.size(); i += 2) mismatches[w] += O200k().Encode(texts[i]) != expected[i];
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(mismatches, std::vector<int>(4, 0));
}

// The same file through every loading path.
TEST(Tokenizer, LoadsFromFileDirectoryAndJson) {
  const std::string dir = testing::TempDir() + "/tessera_tokenizer_dir";
  std::filesystem::create_directories(dir);
  WriteFile(dir + "/tokenizer.json", EmbeddedTokenizerJson());
  const std::string text = "Hello <|start|>wörld 🙂 2025-06-28";
  const Ids expected = O200k().Encode(text);
  EXPECT_EQ(Tokenizer::FromModelDir(dir).Encode(text), expected);
  EXPECT_EQ(Tokenizer::FromPath(dir).Encode(text), expected);
  const Tokenizer from_file = Tokenizer::FromPath(dir + "/tokenizer.json");
  EXPECT_EQ(from_file.Encode(text), expected);
  EXPECT_EQ(from_file.source(), dir + "/tokenizer.json");
  std::filesystem::remove(dir + "/tokenizer.json");
  try {
    Tokenizer::FromPath(dir);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(dir), std::string::npos) << e.what();
  }
  EXPECT_THROW(Tokenizer::FromPath(dir + "/missing.json"), Error);
  std::filesystem::remove_all(dir);
}

// Offset of the bracket closing the array or object that opens at json[open].
size_t MatchingBracket(const std::string& json, size_t open) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = open; i < json.size(); ++i) {
    const char c = json[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      ++depth;
    } else if ((c == ']' || c == '}') && --depth == 0) {
      return i;
    }
  }
  ADD_FAILURE() << "unbalanced JSON";
  return json.size();
}

// Inserts extra entries at the end of the top-level "added_tokens" array of a tokenizer.json
// (the 12 MB file is edited as text: re-serializing it with nlohmann would take seconds).
std::string SpliceAddedTokens(const std::string& json, const nlohmann::json& extra) {
  const size_t key = json.find("\"added_tokens\"");
  EXPECT_NE(key, std::string::npos);
  const size_t close = MatchingBracket(json, json.find('[', key));
  std::string items;
  for (const auto& e : extra) {
    items += ',';
    items += e.dump();
  }
  return json.substr(0, close) + items + json.substr(close);
}

// Replaces the object value of top-level `key`.
std::string ReplaceObject(const std::string& json, const std::string& key, const nlohmann::json& value) {
  const size_t at = json.find("\"" + key + "\"");
  EXPECT_NE(at, std::string::npos);
  const size_t open = json.find('{', at);
  const size_t close = MatchingBracket(json, open);
  return json.substr(0, open) + value.dump() + json.substr(close + 1);
}

// GPT-2's pre-tokenizer (ByteLevel with use_regex, not the o200k Split) over the same vocabulary.
TEST(Tokenizer, ByteLevelRegexPreTokenizerMatchesHuggingFace) {
  const auto lines = ReadJsonLines("golden_bytelevel.jsonl");
  ASSERT_GT(lines.size(), 200u);
  const Tokenizer tok = Tokenizer::FromJson(
      ReplaceObject(EmbeddedTokenizerJson(), "pre_tokenizer", lines[0]["pre_tokenizer"]), "bytelevel.json");
  int failures = 0;
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::string text = lines[i]["text"];
    if (tok.Encode(text) != lines[i]["ids"].get<Ids>()) {
      ++failures;
      ADD_FAILURE() << "ids differ for " << nlohmann::json(text).dump();
    }
  }
  EXPECT_EQ(failures, 0);
  // Different pieces than o200k: GPT-2 splits digits into runs and contractions off words.
  EXPECT_NE(tok.Encode("it's 12345"), O200k().Encode("it's 12345"));
}

// HF added-token semantics beyond o200k_harmony's own tokens (golden_extra.jsonl).
TEST(Tokenizer, ExtraAddedTokensMatchHuggingFace) {
  const auto lines = ReadJsonLines("golden_extra.jsonl");
  ASSERT_GT(lines.size(), 10u);
  const Tokenizer tok =
      Tokenizer::FromJson(SpliceAddedTokens(EmbeddedTokenizerJson(), lines[0]["added_tokens"]), "extra");
  for (const auto& t : lines[0]["added_tokens"]) {
    EXPECT_EQ(tok.TokenId(t["content"].get<std::string>()), t["id"].get<int32_t>());
  }
  for (size_t i = 1; i < lines.size(); ++i) {
    const auto& entry = lines[i];
    const Ids ids = entry["ids"].get<Ids>();
    if (entry["kind"] == "encode") {
      const std::string text = entry["text"];
      EXPECT_EQ(tok.Encode(text), ids) << nlohmann::json(text).dump();
      EXPECT_EQ(tok.EncodeOrdinary(text), entry["ordinary_ids"].get<Ids>()) << nlohmann::json(text).dump();
      EXPECT_EQ(tok.Decode(ids), entry["decoded"].get<std::string>());
    } else {
      EXPECT_EQ(tok.Decode(ids), entry["text"].get<std::string>());
      EXPECT_EQ(StreamDecode(tok, ids), entry["text"].get<std::string>());
    }
  }
}

// tokenizers renumbers added tokens on load; a file whose ids disagree is refused.
TEST(Tokenizer, AddedTokenIdsMustBeTheOnesHuggingFaceAssigns) {
  nlohmann::json wrong = nlohmann::json::array();
  wrong.push_back({{"id", 200100}, {"content", "<|gap|>"}, {"special", true}, {"normalized", false}});
  try {
    Tokenizer::FromJson(SpliceAddedTokens(EmbeddedTokenizerJson(), wrong), "gap.json");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("gap.json: added_tokens[21].id"), std::string::npos) << msg;
    EXPECT_NE(msg.find("200019"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace tessera
