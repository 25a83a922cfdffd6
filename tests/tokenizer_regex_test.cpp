// Pre-tokenizer regex translation (Oniguruma -> PCRE2) and the UTF-8 helpers.
//
// onig_classes.txt and split_cases.jsonl are probed from Hugging Face `tokenizers` (Oniguruma)
// by tools/make_tokenizer_golden.py.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <random>
#include <sstream>
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

std::string DataPath(const std::string& name) { return std::string(TESSERA_TEST_DATA) + "/tokenizer/" + name; }

// Every Unicode scalar value in increasing order, and the code point at each byte offset.
struct AllCodePoints {
  std::string text;
  std::vector<char32_t> at_offset;
  AllCodePoints() {
    at_offset.reserve(4500000);
    for (char32_t c = 0; c < 0x110000; ++c) {
      if (c >= 0xD800 && c < 0xE000) continue;
      const size_t before = text.size();
      utf8::Append(c, text);
      at_offset.resize(text.size(), c);
      (void)before;
    }
  }
};

// Code points matched by `pattern` (a one-character class), found as runs of (?:pattern)+.
std::vector<bool> Members(const std::string& pattern, const AllCodePoints& all) {
  const SplitRegex regex("(?:" + pattern + ")+");
  std::vector<bool> member(0x110000, false);
  size_t start = 0, begin = 0, end = 0;
  while (start < all.text.size() && regex.Find(all.text, start, begin, end)) {
    EXPECT_LT(begin, end);
    for (size_t pos = begin; pos < end;) {
      member[utf8::Next(all.text, pos)] = true;
    }
    start = end;
  }
  return member;
}

TEST(TokenizerRegex, CharacterClassesMatchOniguruma) {
  const AllCodePoints all;
  std::ifstream in(DataPath("onig_classes.txt"));
  ASSERT_TRUE(in.good());
  std::string line;
  int classes = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string name;
    fields >> name;
    std::vector<bool> expected(0x110000, false);
    std::string range;
    while (fields >> range) {
      const size_t dash = range.find('-');
      const auto lo = std::stoul(range.substr(0, dash), nullptr, 16);
      const auto hi = std::stoul(range.substr(dash + 1), nullptr, 16);
      for (auto c = lo; c <= hi; ++c) expected[c] = true;
    }
    // Each class both as an escape and inside a bracket, and negated where the translation
    // supports it.
    std::vector<std::pair<std::string, bool>> forms;  // pattern, negated
    if (name == "s") {
      forms = {{"\\s", false}, {"[\\s]", false}, {"\\S", true}, {"[^\\s]", true}};
    } else if (name[0] == 'i') {
      const std::string letter = name.substr(1);
      forms = {{"(?i:" + letter + ")", false}, {"(?i)[" + letter + "]", false}, {"(?i:[^" + letter + "])", true}};
    } else {
      forms = {{"\\p{" + name + "}", false}, {"[\\p{" + name + "}]", false}, {"\\P{" + name + "}", true},
               {"\\p{^" + name + "}", true}, {"[^\\p{" + name + "}]", true}};
    }
    for (const auto& [pattern, negated] : forms) {
      const std::vector<bool> got = Members(pattern, all);
      int mismatches = 0;
      for (char32_t c = 0; c < 0x110000; ++c) {
        if (c >= 0xD800 && c < 0xE000) continue;
        if (got[c] != (expected[c] != negated) && ++mismatches <= 5) {
          ADD_FAILURE() << pattern << ": U+" << std::hex << static_cast<uint32_t>(c) << " "
                        << (got[c] ? "matched" : "not matched");
        }
      }
      EXPECT_EQ(mismatches, 0) << pattern;
    }
    ++classes;
  }
  EXPECT_EQ(classes, 1 + 30 + 26);  // \s, 30 general categories, 26 caseless letters
}

TEST(TokenizerRegex, SplitMatchesHuggingFace) {
  std::ifstream in(DataPath("split_cases.jsonl"));
  ASSERT_TRUE(in.good());
  std::string line;
  int cases = 0;
  while (std::getline(in, line)) {
    const auto entry = nlohmann::json::parse(line);
    const std::string pattern = entry["pattern"];
    const std::string text = entry["text"];
    const SplitRegex regex(pattern);
    std::vector<std::string> pieces;
    regex.Split(text, [&](size_t begin, size_t end) { pieces.push_back(text.substr(begin, end - begin)); });
    EXPECT_EQ(pieces, entry["pieces"].get<std::vector<std::string>>())
        << "pattern " << pattern << " (PCRE2: " << regex.pcre2_pattern() << ") on " << nlohmann::json(text).dump();
    ++cases;
  }
  EXPECT_GE(cases, 30);
}

TEST(TokenizerRegex, UnsupportedConstructsAreRefused) {
  const char* patterns[] = {
      "\\w+",       "\\d",          "\\bword",   "^a",          "(?<name>x)", "\\1",
      "[[:alpha:]]", "[a&&b]",      "[]a]",      "\\p{Han}",    "\\p{Mn}",    "(?i:é)",     "(?i:ss)",
      "(?i)fi",     "(?i:\\p{L})",  "[^\\S]",    "[\\P{L}]",    "a{2}?",      "a{1,2}+",    "a{x}",
      "(",          ")",            "[abc",      "\\",          "\\x{110000}", "\\uD800",   "[z-a]",
      "(?m)a",      "\\p{L",        "a{3,1}",    "\\u12",       "(?#c)",      "\\Qa\\E",    "\\K",
      "\\p{L\n}",  "\\\xC3\xA9",
  };
  for (const char* p : patterns) {
    try {
      SplitRegex regex(p);
      ADD_FAILURE() << p << " was accepted as " << regex.pcre2_pattern();
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
      EXPECT_FALSE(msg.empty());
    }
  }
}

TEST(TokenizerRegex, TranslationOfTheO200kPattern) {
  // kO200kPattern is the Split pattern of the built-in tokenizer.json (JSON-escaped there).
  const std::string o200k(kO200kPattern);
  ASSERT_NE(EmbeddedTokenizerJson().find("\"Regex\":" + nlohmann::json(o200k).dump()), std::string::npos);
  const std::string pcre = TranslateOnigurumaPattern(o200k);
  EXPECT_NE(pcre.find("(?:\\'[\\x{53}\\x{73}\\x{17F}]|\\'[\\x{54}\\x{74}]|"), std::string::npos) << pcre;
  EXPECT_EQ(pcre.find("\\s"), std::string::npos) << pcre;  // PCRE2's \s differs (U+180E)
  const SplitRegex regex(o200k);
  std::vector<std::string> pieces;
  const std::string text = "I'M here  \r\n\tdon'ſ 123456 \xE2\x80\x94ok?!\n\n";
  regex.Split(text, [&](size_t b, size_t e) { pieces.push_back(text.substr(b, e - b)); });
  // As HF's pre_tokenize_str gives it (the tab is the optional prefix of the next word).
  EXPECT_EQ(pieces, (std::vector<std::string>{"I'M", " here", "  \r\n", "\tdon'ſ", " ", "123", "456",
                                              " \xE2\x80\x94", "ok", "?!\n\n"}));
}

std::vector<std::string> SplitPieces(const SplitRegex& regex, const std::string& text) {
  std::vector<std::string> pieces;
  regex.Split(text, [&](size_t b, size_t e) { pieces.push_back(text.substr(b, e - b)); });
  return pieces;
}

// The hand-written o200k matcher against PCRE2 with the same translated pattern: the golden
// corpus, then random strings over characters from every class the pattern distinguishes.
TEST(TokenizerRegex, O200kFastPathEqualsPcre2) {
  const SplitRegex fast(kO200kPattern);
  const SplitRegex pcre(kO200kPattern, /*allow_fast_path=*/false);
  ASSERT_TRUE(fast.has_fast_path());
  ASSERT_FALSE(pcre.has_fast_path());

  std::ifstream in(DataPath("golden.jsonl"));
  std::string line;
  int corpus = 0;
  while (std::getline(in, line)) {
    const auto entry = nlohmann::json::parse(line);
    if (entry["kind"] != "encode") continue;
    const std::string text = entry["text"];
    ASSERT_EQ(SplitPieces(fast, text), SplitPieces(pcre, text)) << nlohmann::json(text).dump();
    ++corpus;
  }
  EXPECT_GE(corpus, 300);

  const std::vector<std::string> pool = {
      "a", "z", "A", "Z", "0", "9", " ", " ", "\t", "\n", "\r", "\v", "\f", "/", "'", "'", ".", "!", "-", "_",
      "s", "S", "t", "T", "r", "R", "e", "E", "v", "V", "m", "M", "l", "L", "d", "D", "k", "x",
      "\xC5\xBF",          // ſ (caseless s)
      "\xE2\x84\xAA",      // Kelvin sign (Lu)
      "\xCA\xB0",          // ʰ Lm
      "\xE6\xBC\xA2",      // 漢 Lo
      "\xD8\xA7",          // ا Lo
      "\xCC\x81",          // U+0301 Mn
      "\xE0\xA4\xBF",      // U+093F Mc
      "\xE2\x83\x9D",      // U+20DD Me
      "\xC7\x85",          // ǅ Lt
      "\xC3\xA9", "\xC3\x89",  // é É
      "\xD9\xA3",          // ٣ Nd
      "\xE2\x85\xAB",      // Ⅻ Nl
      "\xC2\xBD",          // ½ No
      "\xC2\xA0", "\xE3\x80\x80", "\xE2\x80\xA8", "\xC2\x85", "\xE1\x9A\x80",  // spaces
      "\xE1\xA0\x8E",      // U+180E (not \s in Oniguruma)
      "\xE2\x80\x8D", "\xEF\xB8\x8F",  // ZWJ, VS16
      "\xE1\xB2\x89",      // U+1C89 Lu since Unicode 16
      "\xE0\xA2\x97",      // U+0897 Mn since Unicode 16
      "\xE2\x80\x94", "\xEF\xBC\x8C",  // — ，
      "\xF0\x9F\x98\x80",  // 😀
      "\xF0\x9D\x90\x80",  // 𝐀 Lu (astral)
      "\xF0\x9D\x9F\x8E",  // 𝟎 Nd (astral)
      "\xF0\xA0\x80\x80",  // 𠀀 Lo (astral)
      "\xF0\xB1\x8D\x90",  // U+31350 Lo since Unicode 15
      "\xF0\x9E\x93\xAC",  // U+1E4EC Mn since Unicode 15
      "\xF0\x90\xB5\x8A",  // U+10D4A letter since Unicode 16
  };
  std::mt19937 rng(3);
  for (int round = 0; round < 200000; ++round) {
    std::string text;
    for (int k = rng() % 25; k > 0; --k) text += pool[rng() % pool.size()];
    ASSERT_EQ(SplitPieces(fast, text), SplitPieces(pcre, text)) << nlohmann::json(text).dump();
  }
}

// Long runs through the whole tokenizer: linear time, no PCRE2 limits hit.
TEST(TokenizerRegex, LongRunsStayFast) {
  const Tokenizer& tok = Tokenizer::BuiltIn();
  const auto start = std::chrono::steady_clock::now();
  for (const std::string unit : {" ", "A", "a", "\xE6\xBC\xA2", "!", "\n", "1", "'s", "\xCC\x81", " a"}) {
    std::string text;
    while (text.size() < (1 << 20)) text += unit;
    const std::vector<int32_t> ids = tok.Encode(text);
    EXPECT_FALSE(ids.empty());
    EXPECT_EQ(tok.Decode(ids), text);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 60.0);
}

// Lossy conversion in pieces equals lossy conversion at once, for random byte soup.
TEST(TokenizerUtf8, StreamingLossyEqualsWhole) {
  std::mt19937 rng(11);
  const uint8_t interesting[] = {0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2,
                                 0xDF, 0xE0, 0xE1, 0xEC, 0xED, 0xEE, 0xEF, 0xF0, 0xF1, 0xF3, 0xF4, 0xF5, 0xFF};
  for (int round = 0; round < 20000; ++round) {
    std::string bytes(rng() % 12, '\0');
    for (auto& b : bytes) b = static_cast<char>(interesting[rng() % sizeof(interesting)]);
    std::string whole;
    utf8::AppendLossy(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), true, whole);
    ASSERT_EQ(utf8::FindInvalid(whole), whole.size());
    std::string streamed, pending;
    for (char b : bytes) {
      pending += b;
      const size_t used =
          utf8::AppendLossy(reinterpret_cast<const uint8_t*>(pending.data()), pending.size(), false, streamed);
      pending.erase(0, used);
      ASSERT_LE(pending.size(), 3u);
    }
    utf8::AppendLossy(reinterpret_cast<const uint8_t*>(pending.data()), pending.size(), true, streamed);
    ASSERT_EQ(streamed, whole);
    if (utf8::FindInvalid(bytes) == bytes.size()) {
      ASSERT_EQ(whole, bytes);
    }
  }
}

// Rust's from_utf8_lossy replaces maximal subparts (Unicode 3.9, Table 3-8 example).
TEST(TokenizerUtf8, MaximalSubpartReplacement) {
  const std::string bytes = "\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64";
  std::string out;
  utf8::AppendLossy(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), true, out);
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_EQ(out, "a" + r + r + r + "b" + r + "c" + r + r + "d");
  EXPECT_EQ(utf8::FindInvalid("ok\xED\xA0\x80"), 2u);  // surrogate
  EXPECT_EQ(utf8::FindInvalid("\xF4\x90\x80\x80"), 0u);  // above U+10FFFF
  EXPECT_EQ(utf8::FindInvalid("\xF4\x8F\xBF\xBF"), 4u);
}

}  // namespace
}  // namespace tessera
