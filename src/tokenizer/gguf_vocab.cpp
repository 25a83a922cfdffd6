// GGUF tokenizer metadata as tokenizer.json (gguf_vocab.h).
#include "tokenizer/gguf_vocab.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "core/error.h"
#include "io/json_util.h"
#include "tokenizer/utf8.h"

namespace tessera {
namespace {

using nlohmann::json;

// One row per pre-tokenizer rule of llama.cpp (llama-vocab.cpp as vendored in llama-cpp-python
// 0.3.36: the tokenizer.ggml.pre name -> LLAMA_VOCAB_PRE_TYPE_* chain of llama_vocab::impl::load
// and the regex_exprs of each type in the llm_tokenizer_bpe constructor), with every name that
// shares it. The regexes are those of the Hugging Face tokenizer.json that llama.cpp's adaptation
// stands for (a Sequence of Isolated splits, applied in order, as llama.cpp's regex_exprs are), in
// tokenizer.json's (Oniguruma) syntax, which split_regex.h translates for PCRE2:
//   - where llama.cpp quotes the "original regex from tokenizer.json", the original;
//   - llama.cpp's std::regex spelling of the contractions, (?:'[sS]|'[tT]|...), as the
//     (?i:'s|'t|...) of every original it quotes (its llama3 / qwen2 splitters serve both alike;
//     they differ only on U+017F after an apostrophe, which Oniguruma folds into s);
//   - llama.cpp's case trick ((?=[\p{L}])([^a-z]))* as the classes it stands for;
//   - constructs split_regex.h does not take (\d, \b, \p{Han}, class intersection &&, llama.cpp's
//     \p{AFMoE_digits}) written out with the same meaning; each such row says so.
// Rows differ also in what load() sets beside the type: whole words looked up in the vocabulary
// before merging (ignore_merges) and the BOS default. Types whose vocabulary is not byte-level
// (llama.cpp's byte_encode = false) are listed with the reason they are not read here.
// tests/gguf_vocab_test.cpp checks every name and the splits of every row against
// tests/data/tokenizer/pre (tools/make_pre_tokenizer_goldens.py: `tokenizers` on the regexes that
// script reads from llama.cpp's source itself, on 704 texts).
struct PreRow {
  std::array<std::string_view, 20> names;
  std::array<std::string_view, 6> regexes;
  bool ignore_merges;  // whole words looked up in the vocabulary before merging
  bool add_bos;        // llama.cpp's default when tokenizer.ggml.add_bos_token is absent
  std::string_view not_read = {};  // why a known name is refused (not byte-level)
};

// GPT-2's split, which llama.cpp writes without GPT-2's final "|\s+" (the same pieces: text no
// alternative matches is a piece of its own either way).
constexpr std::string_view kGpt2Regex = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
constexpr std::string_view kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kJais2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|)"
    R"(\s{512}(?!\S)|\s{256}(?!\S)|\s{128}(?!\S)|\s{64}(?!\S)|\s{32}(?!\S)|\s{16}(?!\S)|\s{8}(?!\S)|\s{4}(?!\S)|)"
    R"(\s{1,2}(?!\S)|\s{1})";
constexpr std::string_view kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen35Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kSeedCoderRegex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen2's without the contractions, so that Turkish apostrophe suffixes stay attached.
constexpr std::string_view kUfakzekaRegex =
    R"([^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// The original's possessive ?+ and ++, which llama.cpp makes greedy (the same matches here).
constexpr std::string_view kBailingRegex =
    R"('(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)";
// Words joined by single spaces are one piece.
constexpr std::string_view kExaoneMoeRegex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]?|)"
    R"(\s*[\r\n]|\s+(?!\S)|\s+)";
constexpr std::string_view kMinicpm5Regexes[] = {
    R"(\p{N}{1,3})",
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"};
constexpr std::string_view kGpt4oRegex =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kTekkenRegex =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// tiny_aya: the original "\d{1,3}(?=(?:\d{3})*\b)" (digits grouped by three from the right, only
// in a run that ends a word), then GPT-4o's split. Oniguruma's \d is \p{Nd}; after a digit \b
// means that no word character follows, and Oniguruma's \w is \p{L}, \p{M}, \p{Nd}, \p{Nl},
// \p{Pc}, the Latin-1 digits and fractions ²³¹¼½¾ and the circled / squared / negative Latin
// letters (probed from tokenizers 0.22.2: exactly these code points). llama.cpp runs its afmoe
// splitter here instead (any run of \p{N}, word end or not; its own comment there notes it may differ).
constexpr std::string_view kTinyAyaRegexes[] = {
    R"(\p{Nd}{1,3}(?=(?:\p{Nd}{3})*(?![\p{L}\p{M}\p{Nd}\p{Nl}\p{Pc}\x{B2}\x{B3}\x{B9}\x{BC}-\x{BE}\x{24B6}-\x{24E9})"
    R"(\x{1F130}-\x{1F149}\x{1F150}-\x{1F169}\x{1F170}-\x{1F189}])))",
    kGpt4oRegex};
// youtu: Korean, CJK punctuation, Bopomofo and CJK/kana runs first, then GPT-4o's split with
// single digits. The llama.cpp regex has no quoted original; its \p{Lu}.. classes are kept
// (llama.cpp's own matching reads each of them as every letter, so case is lost there).
constexpr std::string_view kYoutuRegexes[] = {
    "[\uac00-\ud7a3\u3131-\u318e]+|[\uff01\u2026\u201c\u201d\u2018\u2019\u2014\uff1a\uff1b\uff0c\u3001-\u303f"
    "\ufe30-\ufe4f]+|[\u3105-\u312f]+|[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)"};
// kimi-k2: llama.cpp's trigger "\p{Han}+" stands for the K2 regex of tokenization_kimi.py that
// unicode.cpp's splitter implements (quoted there):
//   [\p{Han}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+
//   [\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// with the script Han as Oniguruma's ranges (tokenizers 0.22.2, Unicode 16) and each class
// intersection X&&[^\p{Han}] as (?:(?![Han])X).
#define TESSERA_HAN                                                                                            \
  R"(\x{2E80}-\x{2E99}\x{2E9B}-\x{2EF3}\x{2F00}-\x{2FD5}\x{3005}\x{3007}\x{3021}-\x{3029}\x{3038}-\x{303B})" \
  R"(\x{3400}-\x{4DBF}\x{4E00}-\x{9FFF}\x{F900}-\x{FA6D}\x{FA70}-\x{FAD9}\x{16FE2}-\x{16FE3})"              \
  R"(\x{16FF0}-\x{16FF1}\x{20000}-\x{2A6DF}\x{2A700}-\x{2B739}\x{2B740}-\x{2B81D}\x{2B820}-\x{2CEA1})"      \
  R"(\x{2CEB0}-\x{2EBE0}\x{2EBF0}-\x{2EE5D}\x{2F800}-\x{2FA1D}\x{30000}-\x{3134A}\x{31350}-\x{323AF})"
#define TESSERA_NOT_HAN(cls) "(?:(?![" TESSERA_HAN "])" cls ")"
constexpr std::string_view kKimiRegex =
    "[" TESSERA_HAN "]+|"
    R"([^\r\n\p{L}\p{N}]?)" TESSERA_NOT_HAN(R"([\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}])") "*"
    TESSERA_NOT_HAN(R"([\p{Ll}\p{Lm}\p{Lo}\p{M}])") R"(+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|)"
    R"([^\r\n\p{L}\p{N}]?)" TESSERA_NOT_HAN(R"([\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}])") "+"
    TESSERA_NOT_HAN(R"([\p{Ll}\p{Lm}\p{Lo}\p{M}])") R"(*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|)"
    R"(\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
#undef TESSERA_NOT_HAN
#undef TESSERA_HAN

// llama.cpp's regex lists of the DeepSeek pre-tokenizers (llama-vocab.cpp): V3 / R1 (the
// tokenizer.json's three splits), DeepSeek LLM / V2 (its Digits step as \p{N}+) and Coder.
constexpr std::string_view kDeepseek3Regexes[] = {
    "\\p{N}{1,3}",
    "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| "
    "?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"};
constexpr std::string_view kDeepseekLlmRegexes[] = {
    "[\r\n]",
    "\\s?[A-Za-z\u00b5\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u01ba\u01bc-\u01bf\u01c4-\u0293\u0295-\u02af\u0370-\u0373"
    "\u0376\u0377\u037b-\u037d\u037f\u0386\u0388-\u038a\u038c\u038e-\u03a1\u03a3-\u03f5\u03f7-\u0481"
    "\u048a-\u052f\u0531-\u0556\u10a0-\u10c5\u13a0-\u13f5\u13f8-\u13fd\u1c90-\u1cba\u1cbd-\u1cbf\u1d00-\u1d2b"
    "\u1d6b-\u1d77\u1d79-\u1d9a\u1e00-\u1f15\u1f18-\u1f1d\u1f20-\u1f45\u1f48-\u1f4d\u1f50-\u1f57\u1f59\u1f5b"
    "\u1f5d\u1f5f-\u1f7d\u1f80-\u1fb4\u1fb6-\u1fbc\u1fbe\u1fc2-\u1fc4\u1fc6-\u1fcc\u1fd0-\u1fd3\u1fd6-\u1fdb"
    "\u1fe0-\u1fec\u1ff2-\u1ff4\u1ff6-\u1ffc\u2102\u2107\u210a-\u2113\u2115\u2119-\u211d\u2124\u2126\u2128"
    "\u212a-\u212d\u212f-\u2134\u2139\u213c-\u213f\u2145-\u2149\u214e\u2183\u2184\u2c00-\u2c7b\u2c7e-\u2ce4"
    "\u2ceb-\u2cee\u2cf2\u2cf3\ua640-\ua66d\ua680-\ua69b\ua722-\ua76f\ua771-\ua787\ua78b-\ua78e\uab70-\uabbf"
    "\ufb00-\ufb06\ufb13-\ufb17\uff21-\uff3a\uff41-\uff5a\U00010400-\U0001044f\U000104b0-\U000104d3"
    "\U000104d8-\U000104fb\U00010c80-\U00010cb2\U00010cc0-\U00010cf2\U000118a0-\U000118df\U0001e900-\U0001e943]+",
    "\\s?[!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002]+",
    "\\s+$",
    "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+",
    "\\p{N}+"};
constexpr std::string_view kDeepseekCoderRegexes[] = {
    "[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+", "\\p{N}"};
// spark2_5: DeepSeek V3's with line breaks alone, then every digit alone.
constexpr std::string_view kSpark25Regexes[] = {
    "\\p{N}{1,3}",
    "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| "
    "?[\\p{P}\\p{S}]+|[\r\n]|\\s+(?!\\S)|\\s+",
    "\\p{N}"};
// afmoe: llama.cpp's "\p{AFMoE_digits}" is a splitter of its own (unicode.cpp) that cuts each run
// of \p{N} into groups of three from the right, written here as a regex; then CJK and other
// Asian scripts (the range U+8C48..U+FAFF stands as llama.cpp has it: its source spells the
// range start as U+8C48, the canonical decomposition of U+F900, which adds Yi, Hangul and private
// use to the class), then DeepSeek V3's main split.
constexpr std::string_view kAfmoeRegexes[] = {
    R"(\p{N}{1,3}(?=(?:\p{N}{3})*(?!\p{N})))",
    "[\u4e00-\u9fff\u3400-\u4dbf\u8c48-\ufaff\u3040-\u309f\u30a0-\u30ff\uff65-\uff9f\u2f00-\u2fdf\u0e40-\u0e7f"
    "\u0e80-\u0eff\u1780-\u17ff\u1000-\u109f\uaa60-\uaa7f\ua9e0-\ua9ff\uac00-\ud7af\u1100-\u11ff]+",
    kDeepseek3Regexes[2]};
constexpr std::string_view kDefaultRegexes[] = {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2Regex, R"(\p{N}+)", "[0-9][0-9][0-9]"};
constexpr std::string_view kFalconRegexes[] = {R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2Regex, "[0-9][0-9][0-9]"};
constexpr std::string_view kStarcoderRegexes[] = {R"(\p{N})", kGpt2Regex};
constexpr std::string_view kChameleonRegexes[] = {
    "<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", R"(([\t\n]|    |  ))", R"(\p{N})",
    R"([\p{P}!-/:-@\[-`{-~])", kGpt2Regex};
constexpr std::string_view kLagunaRegexes[] = {R"([^\n]+|[\n]+)", kQwen2Regex};
constexpr std::string_view kBloomRegex = " ?[^(\\s|.,!?\u2026\u3002\uff0c\u3001\u0964\u06d4\u060c)]+";
constexpr std::string_view kVikingRegexes[] = {kBloomRegex, R"(\p{N})"};
// superbpe: no split between words (superword tokens), only digits: runs of \p{N}, then the
// original "(?=(\d{3})+(?!\d))" (empty matches: a cut before each group of three from the right;
// Oniguruma's \d is \p{Nd}, where llama.cpp's std::wregex reads ASCII digits only).
constexpr std::string_view kSuperbpeRegexes[] = {R"(\p{N}+)", R"((?=(?:\p{Nd}{3})+(?!\p{Nd})))"};

template <size_t N>
constexpr std::array<std::string_view, 6> List(const std::string_view (&regexes)[N]) {
  static_assert(N <= 6);
  std::array<std::string_view, 6> out{};
  for (size_t i = 0; i < N; ++i) out[i] = regexes[i];
  return out;
}

constexpr std::string_view kRawUtf8 =
    "llama.cpp's BPE on raw UTF-8 (byte_encode = false: no byte-level alphabet, spaces escaped as U+2581, "
    "<0xNN> byte tokens)";

// Grouped by family; within a row llama.cpp's order.
constexpr std::array kPreRows = {
    // GPT-2 and its descendants.
    PreRow{{"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum",
            "modern-bert", "jina-v1-en", "jina-v2-code", "roberta-bpe", "exaone4", "mpt", "olmo", "jais", "trillion",
            "granite-docling"},
           {kGpt2Regex}, false, false},
    PreRow{{"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b", "mellum2"},
           List(kStarcoderRegexes), false, false},
    PreRow{{"default"}, List(kDefaultRegexes), false, false},
    PreRow{{"falcon"}, List(kFalconRegexes), false, false},
    PreRow{{"chameleon"}, List(kChameleonRegexes), false, true},
    // Llama 3 (cl100k) and its descendants.
    PreRow{{"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano"},
           {kLlama3Regex}, true, true},
    PreRow{{"dbrx", "smaug-bpe", "chatglm-bpe"}, {kLlama3Regex}, false, false},
    PreRow{{"glm4", "glm5"}, {kLlama3Regex}, true, false},
    PreRow{{"jais-2"}, {kJais2Regex}, false, false},
    // Qwen 2 and its descendants.
    PreRow{{"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "stablelm2", "megrez", "hunyuan", "grok-2", "solar-open"},
           {kQwen2Regex}, false, false},
    PreRow{{"qwen35"}, {kQwen35Regex}, false, false},
    PreRow{{"seed-coder"}, {kSeedCoderRegex}, false, false},
    PreRow{{"ufakzeka"}, {kUfakzekaRegex}, false, false},
    PreRow{{"laguna"}, List(kLagunaRegexes), false, false},
    PreRow{{"minicpm5"}, List(kMinicpm5Regexes), true, false},
    PreRow{{"bailingmoe", "bailingmoe2", "llada-moe"}, {kBailingRegex}, false, false},
    PreRow{{"exaone-moe"}, {kExaoneMoeRegex}, false, false},
    // GPT-4o (o200k) and its descendants. granite-embed-multi-97m: llama.cpp adds \p{M} to the
    // lookaheads of its case trick "so combining marks attach to their base letters", which is
    // what the original's classes do.
    PreRow{{"gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"}, {kGpt4oRegex}, false, false},
    PreRow{{"granite-embed-multi-97m"}, {kGpt4oRegex}, true, false},
    PreRow{{"tiny_aya", "cohere2moe"}, List(kTinyAyaRegexes), false, false},
    PreRow{{"tekken"}, {kTekkenRegex}, true, true},
    PreRow{{"youtu"}, List(kYoutuRegexes), true, false},
    PreRow{{"kimi-k2"}, {kKimiRegex}, false, false},
    // DeepSeek and its descendants.
    PreRow{{"deepseek-llm"}, List(kDeepseekLlmRegexes), false, false},
    PreRow{{"deepseek-coder"}, List(kDeepseekCoderRegexes), false, false},
    PreRow{{"deepseek-v3", "hunyuan-dense", "joyai-llm", "hy_v4"}, List(kDeepseek3Regexes), false, false},
    PreRow{{"spark2_5"}, List(kSpark25Regexes), false, false},
    PreRow{{"afmoe"}, List(kAfmoeRegexes), false, false},
    // BLOOM: everything but spaces and sentence punctuation.
    PreRow{{"bloom", "poro-chat", "gpt3-finnish"}, {kBloomRegex}, false, false},
    PreRow{{"viking"}, List(kVikingRegexes), false, false},
    PreRow{{"superbpe"}, List(kSuperbpeRegexes), false, false},
    // Not byte-level. gemma4 (also the type of tokenizer.ggml.model "gemma4") and sarvam-moe split
    // at line breaks only, merge on raw UTF-8 with spaces as U+2581 (gemma4 also looks runs of
    // line breaks up whole and always adds BOS); whitespace splits at \S+ (with
    // tokenizer.ggml.model "whitespace": drops whitespace, lowercases when told to).
    PreRow{{"gemma4", "granite-embed-multi-311m"}, {R"([^\n]+|[\n]+)"}, false, true, kRawUtf8},
    PreRow{{"sarvam-moe"}, {R"([^\n]+|[\n]+)"}, false, false, kRawUtf8},
    PreRow{{"whitespace"}, {R"(\S+)"}, false, false, kRawUtf8},
};

// No name in two rows. (Empty entries are never compared: GCC 12 refuses to compare two of the
// unset entries in a constant expression.)
constexpr bool NamesAreUnique() {
  for (size_t a = 0; a < kPreRows.size(); ++a) {
    for (const auto& x : kPreRows[a].names) {
      if (x.empty()) continue;
      for (size_t b = a; b < kPreRows.size(); ++b) {
        int seen = 0;
        for (const auto& y : kPreRows[b].names) seen += !y.empty() && x == y;
        if (seen > (a == b ? 1 : 0)) return false;
      }
    }
  }
  return true;
}
static_assert(NamesAreUnique());

// Text of the metadata must be UTF-8: byte-level vocabularies spell bytes with characters and
// SentencePiece ones spell them "<0xNN>", so no converter writes anything else, and ill-formed
// text would only fail later inside the JSON library with no file named (issue 44). `what` names
// the value ("token 17 of 'tokenizer.ggml.tokens'").
void RequireUtf8(const GgufFile& file, std::string_view text, const std::string& what) {
  const size_t bad = utf8::FindInvalid(text);
  if (bad != text.size()) {
    Fail(file.path(), ": ", what, " is not valid UTF-8 (byte ", bad, " of ", Quote(text, 60), ")");
  }
}

// Every entry of a string array of the metadata, by index.
void RequireUtf8(const GgufFile& file, const std::vector<std::string>& list, std::string_view key, std::string_view entry) {
  for (size_t i = 0; i < list.size(); ++i) {
    if (utf8::FindInvalid(list[i]) != list[i].size()) RequireUtf8(file, list[i], StrCat(entry, " ", i, " of ", Quote(key)));
  }
}

// Token types (gguf-py TokenType).
constexpr int64_t kUnknown = 2, kControl = 3, kUserDefined = 4;

template <typename T>
const std::vector<T>& ArrayOf(const GgufFile& file, std::string_view key, size_t size) {
  const GgufValue* value = file.Find(key);
  if (value == nullptr) Fail(file.path(), ": metadata ", Quote(key), " is missing");
  const auto* array = std::get_if<std::vector<T>>(&value->value);
  if (array == nullptr) Fail(file.path(), ": metadata ", Quote(key), " has the wrong type");
  if (size != 0 && array->size() != size) {
    Fail(file.path(), ": metadata ", Quote(key), " has ", array->size(), " entries for ", size, " tokens");
  }
  return *array;
}

// Whether every character of `token` stands for a byte in the byte-level (GPT-2) alphabet:
// the printable Latin-1 characters for themselves, U+0100 .. U+0143 for the others.
bool ByteLevelSpelling(std::string_view token) {
  for (size_t i = 0; i < token.size();) {
    const auto c = static_cast<unsigned char>(token[i]);
    uint32_t cp;
    if (c < 0x80) {
      cp = c, i += 1;
    } else if ((c & 0xe0) == 0xc0 && i + 1 < token.size()) {
      cp = ((c & 0x1fu) << 6) | (static_cast<unsigned char>(token[i + 1]) & 0x3fu), i += 2;
    } else {
      return false;
    }
    const bool printable = (cp >= 0x21 && cp <= 0x7e) || (cp >= 0xa1 && cp <= 0xac) || (cp >= 0xae && cp <= 0xff);
    if (!printable && !(cp >= 0x100 && cp <= 0x143)) return false;
  }
  return true;
}

// UTF-8 character boundaries of `s` (byte offsets, excluding 0 and s.size()).
std::vector<size_t> CharBoundaries(std::string_view s) {
  std::vector<size_t> out;
  for (size_t i = 1; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xc0) != 0x80) out.push_back(i);
  }
  return out;
}

json TemplateProcessing(const std::vector<std::pair<std::string, int64_t>>& prefix,
                        const std::vector<std::pair<std::string, int64_t>>& suffix) {
  json single = json::array(), pair = json::array(), specials = json::object();
  auto add = [&](const std::vector<std::pair<std::string, int64_t>>& tokens, json& into) {
    for (const auto& [text, id] : tokens) {
      into.push_back({{"SpecialToken", {{"id", text}, {"type_id", 0}}}});
      specials[text] = {{"id", text}, {"ids", {id}}, {"tokens", {text}}};
    }
  };
  add(prefix, single);
  single.push_back({{"Sequence", {{"id", "A"}, {"type_id", 0}}}});
  add(suffix, single);
  add(prefix, pair);
  pair.push_back({{"Sequence", {{"id", "A"}, {"type_id", 0}}}});
  add(suffix, pair);
  add(prefix, pair);
  pair.push_back({{"Sequence", {{"id", "B"}, {"type_id", 1}}}});
  add(suffix, pair);
  return {{"type", "TemplateProcessing"}, {"single", single}, {"pair", pair}, {"special_tokens", specials}};
}

}  // namespace

json GgufTokenizerJson(const GgufFile& file) {
  const std::string model = file.GetString("tokenizer.ggml.model");
  const std::vector<std::string>& tokens = file.GetStrings("tokenizer.ggml.tokens");
  if (tokens.empty()) Fail(file.path(), ": metadata 'tokenizer.ggml.tokens' is empty");
  RequireUtf8(file, tokens, "tokenizer.ggml.tokens", "token");
  std::vector<int64_t> types(tokens.size(), 1);
  if (file.Find("tokenizer.ggml.token_type") != nullptr) types = ArrayOf<int64_t>(file, "tokenizer.ggml.token_type", tokens.size());
  const bool byte_level = model == "gpt2";
  if (!byte_level && model != "llama") {
    Fail(file.path(), ": tokenizer.ggml.model ", Quote(model), " is not read here (gpt2: byte-level BPE, llama: SentencePiece BPE)");
  }
  const PreRow* pre = nullptr;
  if (byte_level) {
    const std::string name = file.Find("tokenizer.ggml.pre") ? file.GetString("tokenizer.ggml.pre") : "";
    for (const PreRow& row : kPreRows) {
      if (!name.empty() && std::find(row.names.begin(), row.names.end(), name) != row.names.end()) pre = &row;
    }
    if (pre == nullptr) {
      size_t count = 0;
      for (const PreRow& row : kPreRows) {
        if (row.not_read.empty()) count += std::count_if(row.names.begin(), row.names.end(), [](auto n) { return !n.empty(); });
      }
      Fail(file.path(), ": tokenizer.ggml.pre ", Quote(name), " has no row here (", count,
           " of llama.cpp's names are read, e.g. llama-bpe, qwen2, gpt-4o, gpt-2, smollm, deepseek-v3; "
           "all in kPreRows, src/tokenizer/gguf_vocab.cpp)");
    }
    if (!pre->not_read.empty()) {
      Fail(file.path(), ": tokenizer.ggml.pre ", Quote(name), " is ", pre->not_read, ", which is not read here");
    }
  }

  json vocab = json::object(), added = json::array();
  for (size_t id = 0; id < tokens.size(); ++id) {
    // llama.cpp matches unknown, control and user-defined tokens in the text (the first two only
    // when parsing special tokens, as Encode does and EncodeOrdinary does not).
    const bool is_added = types[id] == kUnknown || types[id] == kControl || types[id] == kUserDefined;
    // Byte-level vocabularies key tokens by the bytes their characters spell; an added token
    // spelled otherwise (DeepSeek's full-width bars) lives in added_tokens only.
    if (!is_added || !byte_level || ByteLevelSpelling(tokens[id])) vocab[tokens[id]] = id;
    if (is_added) {
      added.push_back({{"id", id}, {"content", tokens[id]}, {"single_word", false}, {"lstrip", false},
                       {"rstrip", false}, {"normalized", false}, {"special", types[id] != kUserDefined}});
    }
  }
  if (vocab.size() != tokens.size() && !byte_level) Fail(file.path(), ": tokenizer.ggml.tokens repeats a token");

  json merges = json::array();
  if (byte_level) {
    const std::vector<std::string>& lines = file.GetStrings("tokenizer.ggml.merges");
    RequireUtf8(file, lines, "tokenizer.ggml.merges", "merge");
    for (const std::string& m : lines) merges.push_back(m);
  } else {
    // transformers' SentencePiece extraction: every split of a token into two tokens, ranked by
    // the token's score (highest first), ties in vocabulary order of (left, right).
    const std::vector<double>& scores = ArrayOf<double>(file, "tokenizer.ggml.scores", tokens.size());
    // The merge order sorts by score: a NaN would break the sort's ordering (undefined behaviour).
    for (size_t id = 0; id < scores.size(); ++id) {
      if (std::isnan(scores[id])) Fail(file.path(), ": metadata 'tokenizer.ggml.scores': score ", id, " is NaN");
    }
    std::unordered_map<std::string_view, int64_t> ids;
    for (size_t id = 0; id < tokens.size(); ++id) ids.emplace(tokens[id], static_cast<int64_t>(id));
    struct Merge {
      double score;
      int64_t left, right;
    };
    std::vector<Merge> all;
    for (size_t id = 0; id < tokens.size(); ++id) {
      const std::string_view piece = tokens[id];
      for (const size_t at : CharBoundaries(piece)) {
        const auto left = ids.find(piece.substr(0, at)), right = ids.find(piece.substr(at));
        if (left != ids.end() && right != ids.end()) all.push_back({scores[id], left->second, right->second});
      }
    }
    std::stable_sort(all.begin(), all.end(), [](const Merge& a, const Merge& b) {
      if (a.score != b.score) return a.score > b.score;
      return std::pair(a.left, a.right) < std::pair(b.left, b.right);
    });
    for (const Merge& m : all) merges.push_back({tokens[static_cast<size_t>(m.left)], tokens[static_cast<size_t>(m.right)]});
  }

  json out;
  out["version"] = "1.0";
  out["truncation"] = nullptr;
  out["padding"] = nullptr;
  out["added_tokens"] = added;
  json bpe = {{"type", "BPE"}, {"dropout", nullptr}, {"continuing_subword_prefix", nullptr},
              {"end_of_word_suffix", nullptr}, {"vocab", vocab}, {"merges", merges}};
  if (byte_level) {
    out["normalizer"] = nullptr;
    json steps = json::array();
    for (const std::string_view regex : pre->regexes) {
      if (!regex.empty()) steps.push_back({{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}});
    }
    steps.push_back({{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", false}});
    out["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", steps}};
    out["decoder"] = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}};
    bpe.update({{"unk_token", nullptr}, {"fuse_unk", false}, {"byte_fallback", false}, {"ignore_merges", pre->ignore_merges}});
  } else {
    const bool prefix = file.Find("tokenizer.ggml.add_space_prefix") ? file.GetBool("tokenizer.ggml.add_space_prefix") : true;
    json steps = json::array();
    if (prefix) steps.push_back({{"type", "Prepend"}, {"prepend", "\u2581"}});
    steps.push_back({{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}});
    out["normalizer"] = {{"type", "Sequence"}, {"normalizers", steps}};
    out["pre_tokenizer"] = nullptr;
    json decoders = {{{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}}, {"content", " "}},
                     {{"type", "ByteFallback"}},
                     {{"type", "Fuse"}}};
    if (prefix) decoders.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
    out["decoder"] = {{"type", "Sequence"}, {"decoders", decoders}};
    json unk = nullptr;
    if (file.Find("tokenizer.ggml.unknown_token_id") != nullptr) {
      const uint64_t id = file.GetUint("tokenizer.ggml.unknown_token_id");
      if (id >= tokens.size()) Fail(file.path(), ": tokenizer.ggml.unknown_token_id ", id, " is not a token");
      unk = tokens[id];
    }
    bpe.update({{"unk_token", unk}, {"fuse_unk", true}, {"byte_fallback", true}, {"ignore_merges", false}});
  }
  out["model"] = bpe;

  const TokenizerConfig config = GgufTokenizerConfig(file);
  std::vector<std::pair<std::string, int64_t>> prefix, suffix;
  auto special = [&](const char* key) {
    const uint64_t id = file.GetUint(key);
    if (id >= tokens.size()) Fail(file.path(), ": metadata ", Quote(key), " = ", id, " is not a token");
    return std::pair(tokens[id], static_cast<int64_t>(id));
  };
  const bool add_bos = config.add_bos_token.value_or(byte_level ? pre->add_bos : true);
  const bool add_eos = config.add_eos_token.value_or(false);
  if (add_bos && file.Find("tokenizer.ggml.bos_token_id") != nullptr) prefix.push_back(special("tokenizer.ggml.bos_token_id"));
  if (add_eos && file.Find("tokenizer.ggml.eos_token_id") != nullptr) suffix.push_back(special("tokenizer.ggml.eos_token_id"));
  out["post_processor"] = TemplateProcessing(prefix, suffix);
  return out;
}

TokenizerConfig GgufTokenizerConfig(const GgufFile& file) {
  TokenizerConfig config;
  config.source = file.path();
  const std::vector<std::string>* tokens =
      file.Find("tokenizer.ggml.tokens") != nullptr ? &file.GetStrings("tokenizer.ggml.tokens") : nullptr;
  auto token = [&](const char* key) {
    ConfigToken t;
    if (file.Find(key) == nullptr || tokens == nullptr) return t;
    const uint64_t id = file.GetUint(key);
    if (id >= tokens->size()) Fail(file.path(), ": metadata ", Quote(key), " = ", id, " is not a token");
    t.present = true;
    t.content = (*tokens)[id];
    RequireUtf8(file, *t.content, StrCat("token ", id, " of 'tokenizer.ggml.tokens' (", key, ")"));
    return t;
  };
  config.bos_token = token("tokenizer.ggml.bos_token_id");
  config.eos_token = token("tokenizer.ggml.eos_token_id");
  if (file.Find("tokenizer.ggml.add_bos_token") != nullptr) config.add_bos_token = file.GetBool("tokenizer.ggml.add_bos_token");
  if (file.Find("tokenizer.ggml.add_eos_token") != nullptr) config.add_eos_token = file.GetBool("tokenizer.ggml.add_eos_token");
  if (file.Find("tokenizer.chat_template") != nullptr) {
    config.chat_template = file.GetString("tokenizer.chat_template");
    RequireUtf8(file, config.chat_template, "metadata 'tokenizer.chat_template'");
  }
  return config;
}

}  // namespace tessera
