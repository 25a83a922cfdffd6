#include "tokenizer/tokenizer_config.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/json_util.h"

namespace tessera {
namespace {

// Real files are a few KB to a few MB (added_tokens_decoder of large vocabularies).
constexpr size_t kMaxTokenizerConfigBytes = size_t{64} << 20;

using Json = nlohmann::json;

ConfigToken ReadToken(const Json& top, const char* key, const std::string& source) {
  ConfigToken token;
  const auto it = top.find(key);
  if (it == top.end()) return token;
  token.present = true;
  if (it->is_null()) return token;
  if (it->is_string()) {
    token.content = it->get<std::string>();
    return token;
  }
  if (it->is_object()) {
    const auto content = it->find("content");
    if (content != it->end() && content->is_string()) {
      token.content = content->get<std::string>();
      return token;
    }
  }
  Fail(source, ": \"", key, "\" must be a string, an object with a string \"content\", or null (got ",
       JsonKindName(*it), ")");
}

std::optional<bool> ReadFlag(const Json& top, const char* key, const std::string& source) {
  const auto it = top.find(key);
  if (it == top.end()) return std::nullopt;
  if (it->is_null()) return false;
  if (!it->is_boolean()) Fail(source, ": \"", key, "\" must be true, false or null (got ", JsonKindName(*it), ")");
  return it->get<bool>();
}

std::string ReadChatTemplate(const Json& top, const std::string& source) {
  const auto it = top.find("chat_template");
  if (it == top.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_array()) {
    for (const Json& entry : *it) {
      if (!entry.is_object() || !entry.contains("name") || !entry.contains("template") || !entry["name"].is_string() ||
          !entry["template"].is_string()) {
        Fail(source, ": \"chat_template\" entries must be objects with string \"name\" and \"template\"");
      }
      if (entry["name"] == "default") return entry["template"].get<std::string>();
    }
    return "";
  }
  Fail(source, ": \"chat_template\" must be a string or a list of named templates (got ", JsonKindName(*it), ")");
}

const Json& TopObject(const Json& top, const std::string& source) {
  if (!top.is_object()) Fail(source, ": expected a JSON object at the top level (got ", JsonKindName(top), ")");
  return top;
}

}  // namespace

bool TokenizerConfig::RebuildsPostProcessor() const {
  return tokenizer_class == "LlamaTokenizer" || tokenizer_class == "LlamaTokenizerFast";
}

TokenizerConfig ParseTokenizerConfig(std::string_view text, const std::string& source) {
  const Json top = ParseJsonText(text, source);
  TopObject(top, source);
  TokenizerConfig config;
  config.source = source;
  if (const auto it = top.find("tokenizer_class"); it != top.end() && !it->is_null()) {
    if (!it->is_string()) Fail(source, ": \"tokenizer_class\" must be a string (got ", JsonKindName(*it), ")");
    config.tokenizer_class = it->get<std::string>();
  }
  config.bos_token = ReadToken(top, "bos_token", source);
  config.eos_token = ReadToken(top, "eos_token", source);
  config.add_bos_token = ReadFlag(top, "add_bos_token", source);
  config.add_eos_token = ReadFlag(top, "add_eos_token", source);
  config.chat_template = ReadChatTemplate(top, source);
  return config;
}

std::optional<TokenizerConfig> LoadTokenizerConfig(const std::string& dir) {
  const std::filesystem::path base(dir);
  const std::string path = (base / "tokenizer_config.json").string();
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::nullopt;
  TokenizerConfig config = ParseTokenizerConfig(ReadBoundedFile(path, kMaxTokenizerConfigBytes), path);
  const std::string map_path = (base / "special_tokens_map.json").string();
  if (std::filesystem::exists(map_path, ec)) {
    const Json map = ParseJsonText(ReadBoundedFile(map_path, kMaxTokenizerConfigBytes), map_path);
    TopObject(map, map_path);
    // HF (tokenization_utils_base.py, _from_pretrained): the map's entries replace the config's.
    if (ConfigToken bos = ReadToken(map, "bos_token", map_path); bos.present) config.bos_token = bos;
    if (ConfigToken eos = ReadToken(map, "eos_token", map_path); eos.present) config.eos_token = eos;
  }
  return config;
}

}  // namespace tessera
