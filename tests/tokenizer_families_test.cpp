// Tokenizers of the dense families (Llama 3, Mistral, Qwen2/2.5, Qwen3) and component variants:
// exact agreement with Hugging Face `tokenizers` on tests/data/tokenizer/families/*/golden.jsonl,
// made by tools/make_family_tokenizers.py from small tokenizers built with each family's
// pipeline JSON (normalizers, pre-tokenizers, post-processors, decoders, byte_fallback,
// added-token flags).
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/pipeline.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace tessera {
namespace {

using Ids = std::vector<int32_t>;
using json = nlohmann::json;

std::string FamilyDir(const std::string& name) { return std::string(TESSERA_TEST_DATA) + "/tokenizer/families/" + name; }

std::vector<json> ReadGolden(const std::string& name) {
  std::ifstream in(FamilyDir(name) + "/golden.jsonl");
  EXPECT_TRUE(in.good()) << name;
  std::vector<json> lines;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) lines.push_back(json::parse(line));
  }
  return lines;
}

std::string Quote(const std::string& s) { return json(s).dump(); }

struct Tally {
  int encode = 0, decode = 0, failures = 0;
};

// Compares one golden file; reports at most a few mismatches per kind in detail.
Tally CheckFamily(const std::string& name) {
  const Tokenizer tok = Tokenizer::FromModelDir(FamilyDir(name));
  const auto lines = ReadGolden(name);
  Tally t;
  if (lines.empty() || lines[0]["kind"] != "meta") {
    ADD_FAILURE() << name << ": no meta line";
    return t;
  }
  int reported = 0;
  const auto fail = [&](size_t line, const std::string& what, const std::string& detail) {
    ++t.failures;
    if (++reported <= 8) ADD_FAILURE() << name << " line " << line + 1 << ": " << what << " " << detail;
  };
  for (size_t i = 1; i < lines.size(); ++i) {
    const json& e = lines[i];
    const Ids ids = e["ids"].get<Ids>();
    if (e["kind"] == "encode") {
      ++t.encode;
      const std::string text = e["text"];
      const Ids plain = e.contains("plain_ids") ? e["plain_ids"].get<Ids>() : ids;
      const Ids ordinary = e.contains("ordinary_ids") ? e["ordinary_ids"].get<Ids>() : plain;
      const std::string decoded = e.contains("decoded") ? e["decoded"].get<std::string>() : text;
      const std::string decoded_skip = e.contains("decoded_skip") ? e["decoded_skip"].get<std::string>() : decoded;
      if (tok.EncodeWithTemplate(text) != ids) fail(i, "EncodeWithTemplate", Quote(text));
      if (tok.Encode(text) != plain) fail(i, "Encode", Quote(text));
      if (tok.EncodeOrdinary(text) != ordinary) fail(i, "EncodeOrdinary", Quote(text));
      if (tok.Decode(ids) != decoded) fail(i, "Decode", Quote(decoded) + " got " + Quote(tok.Decode(ids)));
      if (tok.Decode(ids, true) != decoded_skip) {
        fail(i, "Decode(skip)", Quote(decoded_skip) + " got " + Quote(tok.Decode(ids, true)));
      }
    } else {
      ++t.decode;
      const std::string text = e["text"], text_skip = e["text_skip"];
      if (tok.Decode(ids) != text) fail(i, "Decode", Quote(text) + " got " + Quote(tok.Decode(ids)));
      if (tok.Decode(ids, true) != text_skip) fail(i, "Decode(skip)", Quote(text_skip) + " got " + Quote(tok.Decode(ids, true)));
    }
  }
  EXPECT_EQ(t.encode, lines[0]["encode_cases"].get<int>()) << name;
  EXPECT_EQ(t.decode, lines[0]["decode_cases"].get<int>()) << name;
  return t;
}

class FamilyGolden : public ::testing::TestWithParam<const char*> {};

TEST_P(FamilyGolden, MatchesHuggingFace) {
  const Tally t = CheckFamily(GetParam());
  EXPECT_GE(t.encode, 300);
  EXPECT_GE(t.decode, 100);
  EXPECT_EQ(t.failures, 0) << GetParam() << ": " << t.failures << " mismatches over " << t.encode << " texts and "
                           << t.decode << " id sequences";
}

INSTANTIATE_TEST_SUITE_P(Tokenizer, FamilyGolden,
                         ::testing::Values("llama3", "qwen2", "qwen3", "mistral", "mistral_legacy", "flags", "misc",
                                           "misc_bytelevel", "deepseek3"));

TEST(TokenizerFamilies, TemplatesAndSpecialTokens) {
  const Tokenizer llama = Tokenizer::FromModelDir(FamilyDir("llama3"));
  const int32_t bos = llama.RequireTokenId("<|begin_of_text|>");
  EXPECT_EQ(llama.EncodeWithTemplate(""), Ids{bos});
  EXPECT_TRUE(llama.Encode("").empty());
  EXPECT_TRUE(llama.IsSpecial(bos));

  const Tokenizer mistral = Tokenizer::FromModelDir(FamilyDir("mistral"));
  EXPECT_EQ(mistral.RequireTokenId("<s>"), 1);
  EXPECT_EQ(mistral.EncodeWithTemplate("")[0], 1);
  // Byte tokens are plain vocabulary entries, spelled in UTF-8 (not byte-level characters).
  EXPECT_TRUE(mistral.TokenId("<0x0A>").has_value());
  EXPECT_EQ(mistral.TokenBytes(*mistral.TokenId("<0x0A>")), "\n");
  // Metaspace "first": no "▁" after a leading added token.
  const Ids inst_hello = mistral.Encode("[INST]Hello");
  const Ids spaced = mistral.Encode("[INST] Hello");
  EXPECT_NE(inst_hello, spaced);

  const Tokenizer qwen = Tokenizer::FromModelDir(FamilyDir("qwen3"));
  // NFC before pre-tokenization: decomposed and composed forms encode alike.
  EXPECT_EQ(qwen.Encode("cafe\u0301"), qwen.Encode("caf\u00e9"));
  EXPECT_EQ(llama.Encode("cafe\u0301") == llama.Encode("caf\u00e9"), false);
  // Non-special added tokens survive skip_special_tokens.
  const Ids think = qwen.Encode("<think>x</think><|im_end|>");
  EXPECT_EQ(qwen.Decode(think, true), "<think>x</think>");
  EXPECT_FALSE(qwen.IsSpecial(qwen.RequireTokenId("<think>")));
}

json RandomValue(std::mt19937& rng) {
  switch (rng() % 10) {
    case 0: return nullptr;
    case 1: return rng() % 2 == 0;
    case 2: return static_cast<int64_t>(rng() % 300) - 5;
    case 3: return int64_t{1} << (20 + rng() % 43);
    case 4: return "\u2581";
    case 5: return "<s>";
    case 6: return "Sequence";
    case 7: return json::array();
    case 8: return "";
    default: return json::object();
  }
}

void Mutate(json& node, std::mt19937& rng) {
  if (!(node.is_object() || node.is_array()) || node.empty() || rng() % 5 == 0) {
    node = RandomValue(rng);
    return;
  }
  auto it = node.begin();
  std::advance(it, rng() % node.size());
  if (rng() % 6 == 0) {
    node.erase(it);
  } else {
    Mutate(*it, rng);
  }
}

// Structural corruptions of the pipeline sections of every family file: each either loads
// and tokenizes (valid UTF-8 out) or fails with a one-line error naming the file.
TEST(TokenizerFamilies, CorruptPipelinesAreRejectedOrWork) {
  std::mt19937 rng(77);
  int loaded = 0, rejected = 0;
  const char* sections[] = {"normalizer", "pre_tokenizer", "post_processor", "decoder", "added_tokens", "model"};
  for (const char* name : {"llama3", "qwen3", "mistral", "mistral_legacy", "flags", "misc", "misc_bytelevel"}) {
    std::ifstream in(FamilyDir(name) + "/tokenizer.json");
    const json base = json::parse(in);
    for (int round = 0; round < 150; ++round) {
      json j = base;
      const char* section = sections[rng() % 6];
      if (j[section].is_null()) {
        j[section] = RandomValue(rng);
      } else {
        Mutate(j[section], rng);
      }
      try {
        const Tokenizer tok = Tokenizer::FromJson(j.dump(), "corrupt.json");
        const std::string sample = "<s>[INST] h\u00e9llo  \u2581x 123 \xF0\x9F\x98\x80 caf\u00e9 <|im_end|>\n";
        for (const Ids& ids : {tok.EncodeWithTemplate(sample), tok.EncodeOrdinary(sample)}) {
          try {
            const std::string text = tok.Decode(ids, rng() % 2 == 0);
            EXPECT_EQ(utf8::FindInvalid(text), text.size());
          } catch (const Error& e) {  // a template id with no token
            EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
          }
        }
        ++loaded;
      } catch (const Error& e) {
        const std::string msg = e.what();
        EXPECT_EQ(msg.rfind("corrupt.json: ", 0), 0u) << msg;
        EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
        ++rejected;
      }
    }
  }
  EXPECT_GT(rejected, 200);
  EXPECT_GT(loaded, 50);
}

// Streaming: exact for ByteLevel decoders; with Mistral's decoder every piece is still valid
// UTF-8 and the text differs from Decode only by whole-text effects (see tokenizer.h).
TEST(TokenizerFamilies, StreamingDecode) {
  for (const char* name : {"llama3", "qwen2", "qwen3", "mistral"}) {
    const Tokenizer tok = Tokenizer::FromModelDir(FamilyDir(name));
    const bool exact = std::string(name) != "mistral";
    for (const json& e : ReadGolden(name)) {
      if (e["kind"] != "encode") continue;
      const Ids ids = e["ids"].get<Ids>();
      IncrementalDecoder stream(tok);
      std::string text;
      for (int32_t id : ids) {
        const std::string piece = stream.Add(id);
        ASSERT_EQ(utf8::FindInvalid(piece), piece.size()) << name;
        text += piece;
      }
      text += stream.Flush();
      if (exact) {
        EXPECT_EQ(text, tok.Decode(ids)) << name << " " << Quote(e["text"]);
      }
    }
  }
}

// One tokenizer shared by several threads gives the single-thread ids (the general pipeline,
// NFC and the regexes keep no shared mutable state).
TEST(TokenizerFamilies, ConcurrentEncodeAgrees) {
  for (const char* name : {"mistral", "qwen3", "flags"}) {
    const Tokenizer tok = Tokenizer::FromModelDir(FamilyDir(name));
    std::vector<std::string> texts;
    for (const json& e : ReadGolden(name)) {
      if (e["kind"] == "encode") texts.push_back(e["text"]);
    }
    std::vector<Ids> expected;
    for (const std::string& t : texts) expected.push_back(tok.EncodeWithTemplate(t));
    std::vector<int> mismatches(4, 0);
    std::vector<std::thread> threads;
    for (int k = 0; k < 4; ++k) {
      threads.emplace_back([&, k] {
        for (size_t i = k; i < texts.size() * 2; i += 3) {
          const size_t j = i % texts.size();
          if (tok.EncodeWithTemplate(texts[j]) != expected[j]) ++mismatches[k];
        }
      });
    }
    for (auto& t : threads) t.join();
    for (int m : mismatches) EXPECT_EQ(m, 0) << name;
  }
}

TEST(TokenizerFamilies, ComponentEdgeCases) {
  // u8::from_str_radix rules, as HF's ByteFallback decoder.
  EXPECT_EQ(ByteFallbackValue("<0x0A>"), 0x0A);
  EXPECT_EQ(ByteFallbackValue("<0xfe>"), 0xFE);
  EXPECT_EQ(ByteFallbackValue("<0x+A>"), 0x0A);
  EXPECT_EQ(ByteFallbackValue("<0xG0>"), -1);
  EXPECT_EQ(ByteFallbackValue("<0x0A"), -1);
  Decoder d;
  Decoder::Step fallback{};
  fallback.kind = Decoder::Step::Kind::kByteFallback;
  d.steps.push_back(fallback);
  // A valid run becomes its text, an invalid one one U+FFFD per byte.
  EXPECT_EQ(d.Decode({"<0xC3>", "<0xA9>", "x"}), "\u00e9x");
  EXPECT_EQ(d.Decode({"<0xE2>", "<0x82>", "x", "<0xFF>"}), "\uFFFD\uFFFDx\uFFFD");
  Decoder::Step strip{};
  strip.kind = Decoder::Step::Kind::kStrip;
  strip.content = " ";
  strip.start = 1;
  strip.stop = 1;
  d.steps = {strip};
  EXPECT_EQ(d.Decode({"  a ", " ", "b"}), " ab");  // HF panics on " "; empty here
  Decoder::Step meta{};
  meta.kind = Decoder::Step::Kind::kMetaspace;
  meta.replacement = U'\u2581';
  meta.strip_first = true;
  d.steps = {meta};
  EXPECT_EQ(d.Decode({"\u2581a\u2581b", "\u2581c"}), "ab c");  // every "▁" of the first token goes
  EXPECT_EQ(ReplaceAll("a  b", nullptr, " ", "\u2581"), "a\u2581\u2581b");
  EXPECT_TRUE(IsRustWhitespace(U'\u3000'));
  EXPECT_FALSE(IsRustWhitespace(U'\u200B'));
  EXPECT_TRUE(IsRustNumeric(U'\u0663'));
  EXPECT_TRUE(IsRustWordChar(U'_'));
  EXPECT_FALSE(IsRustWordChar(U'-'));
}

}  // namespace
}  // namespace tessera
