// Fuzz target of tokenizer loading and tokenization (issue 44 point 6). The first input byte
// chooses the mode:
//   - below 0x80, shipped tokenizers on fuzzed text: tokenizer (byte % count) of the built-in
//     o200k_harmony, the built-in models' byte-level BPE (models/tiny-llama) and the family
//     tokenizers of tests/data/tokenizer/families (Llama 3, Mistral with and without the legacy
//     normalizer, Qwen2, Qwen3, DeepSeek-V3, ...), loaded once; the rest of the input (at most
//     kMaxText bytes) is encoded three ways (Encode, EncodeOrdinary, EncodeWithTemplate), the ids
//     decoded whole and through IncrementalDecoder, and the text's bytes read as token ids
//     (little-endian 16-bit, modulo the vocabulary) decoded too;
//   - 0x80 and above, fuzzed tokenizer files on short text: the rest is split at fuzz::kSeparator
//     lines into tokenizer.json, tokenizer_config.json and a text of at most kMaxShortText bytes;
//     the tokenizer is loaded (Tokenizer::FromJson), the config parsed and applied
//     (ParseTokenizerConfig, ApplyConfig), and the text encoded and decoded.
// tessera::Error (a refused file, text that is not UTF-8, an id with no token) is an answer.
// Seeds: tests/fuzz/corpus/tokenizer (texts of the golden corpora for each shipped tokenizer;
// the family tokenizers cut to a few hundred tokens by tools/make_fuzz_seeds.py).
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_main.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_config.h"

namespace {

using namespace tessera;

constexpr size_t kMaxText = 4096;       // bounds one input's encode time with the shipped tokenizers
constexpr size_t kMaxShortText = 256;   // with a fuzzed tokenizer (its merges may be pathological)
constexpr const char* kFamilies[] = {"llama3", "mistral", "mistral_legacy", "qwen2", "qwen3",
                                     "deepseek3", "misc", "misc_bytelevel", "flags"};

const std::vector<std::unique_ptr<Tokenizer>>& Shipped() {
  static const auto* tokenizers = [] {
    auto* out = new std::vector<std::unique_ptr<Tokenizer>>();  // lives for the whole process
    out->push_back(nullptr);  // slot 0: the built-in o200k_harmony (owned by Tokenizer::BuiltIn)
    out->push_back(std::make_unique<Tokenizer>(Tokenizer::FromModelDir(TESSERA_SOURCE_DIR "/models/tiny-llama")));
    for (const char* family : kFamilies) {
      out->push_back(std::make_unique<Tokenizer>(
          Tokenizer::FromModelDir(std::string(TESSERA_SOURCE_DIR "/tests/data/tokenizer/families/") + family)));
    }
    return out;
  }();
  return *tokenizers;
}

const Tokenizer& ShippedAt(size_t i) {
  const auto& all = Shipped();
  const size_t k = i % all.size();
  return k == 0 ? Tokenizer::BuiltIn() : *all[k];
}

// Encodes and decodes `text` every way the engine does.
void Exercise(const Tokenizer& tokenizer, std::string_view text) {
  fuzz::Guarded([&] {
    const std::vector<int32_t> ids = tokenizer.Encode(text);
    tokenizer.Decode(ids);
    tokenizer.Decode(ids, /*skip_special_tokens=*/true);
    IncrementalDecoder incremental(tokenizer);
    for (const int32_t id : ids) incremental.Add(id);
    incremental.Flush();
    tokenizer.EncodeOrdinary(text);
    tokenizer.EncodeWithTemplate(text);
    tokenizer.TokenId(text);
  });
  // The bytes as ids: ids without a token are refused, the others decoded alone and in a stream.
  if (tokenizer.vocab_size() <= 0) return;
  std::vector<int32_t> ids;
  for (size_t i = 0; i + 1 < text.size() && ids.size() < 256; i += 2) {
    const uint32_t v = static_cast<uint8_t>(text[i]) | static_cast<uint32_t>(static_cast<uint8_t>(text[i + 1])) << 8;
    ids.push_back(static_cast<int32_t>(v % static_cast<uint32_t>(tokenizer.vocab_size())));
  }
  fuzz::Guarded([&] { tokenizer.Decode(ids, /*skip_special_tokens=*/false); });
  IncrementalDecoder incremental(tokenizer);
  for (const int32_t id : ids) {
    fuzz::Guarded([&] {
      incremental.Add(id);
      tokenizer.TokenBytes(id);
    });
  }
  incremental.Flush();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  if (mode < 0x80) {
    Exercise(ShippedAt(mode), rest.substr(0, kMaxText));
    return 0;
  }
  const std::vector<std::string_view> parts = fuzz::Split(rest, 3);
  std::unique_ptr<Tokenizer> tokenizer;
  fuzz::Guarded([&] { tokenizer = std::make_unique<Tokenizer>(Tokenizer::FromJson(parts[0], "tokenizer.json")); });
  if (!tokenizer) return 0;
  if (parts.size() > 1 && !parts[1].empty()) {
    fuzz::Guarded([&] { tokenizer->ApplyConfig(ParseTokenizerConfig(parts[1], "tokenizer_config.json")); });
  }
  Exercise(*tokenizer, parts.size() > 2 ? parts[2].substr(0, kMaxShortText) : std::string_view("Hello, world!"));
  return 0;
}
