// The parts of a Hugging Face tokenizer_config.json (and special_tokens_map.json) that change
// what tessera encodes or renders: the tokenizer class, the BOS/EOS token texts, add_bos_token /
// add_eos_token and the chat template. Everything else in the file is ignored.
//
// Why the class matters (dense-decoders.md §7.3): with transformers 4.x, LlamaTokenizerFast
// (tokenizer_class "LlamaTokenizer" or "LlamaTokenizerFast": Mistral, Llama 2) replaces the
// post-processor of tokenizer.json in its __init__ by a TemplateProcessing built from
// add_bos_token (default true) and add_eos_token (default false); PreTrainedTokenizerFast
// (Llama 3) and Qwen2TokenizerFast keep the file's. Tokenizer::ApplyConfig does the same.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace tessera {

// A special-token entry: absent, null, or a token's text (a string, or the "content" of an
// AddedToken object such as {"__type": "AddedToken", "content": "<s>", ...}).
struct ConfigToken {
  bool present = false;                // the key is in the file (possibly null)
  std::optional<std::string> content;  // nullopt: absent or null

  // `content` when present, else `class_default` (HF's constructor default for the class).
  std::optional<std::string> Or(std::string_view class_default) const {
    return present ? content : std::optional<std::string>(std::string(class_default));
  }
};

struct TokenizerConfig {
  std::string source;           // the file read, for messages ("" when built in code)
  std::string tokenizer_class;  // "" when absent
  ConfigToken bos_token;
  ConfigToken eos_token;
  // nullopt when absent; JSON null reads as false (HF passes None on, which is falsy).
  std::optional<bool> add_bos_token;
  std::optional<bool> add_eos_token;
  // The template text: the string, or the "default" entry of the older list-of-named-templates
  // form ([{"name": ..., "template": ...}]); "" when absent, null or without a default.
  std::string chat_template;

  // True for the classes whose constructor rebuilds the post-processor (see the file comment).
  bool RebuildsPostProcessor() const;
};

// Parses tokenizer_config.json text; `source` names it in errors. Throws a one-line
// tessera::Error for invalid JSON or a read key of the wrong type.
TokenizerConfig ParseTokenizerConfig(std::string_view text, const std::string& source);

// Reads `dir`/tokenizer_config.json, then lets the bos_token / eos_token of
// `dir`/special_tokens_map.json override it (HF's loading order). nullopt when there is no
// tokenizer_config.json.
std::optional<TokenizerConfig> LoadTokenizerConfig(const std::string& dir);

}  // namespace tessera
