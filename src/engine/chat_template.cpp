#include "engine/chat_template.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <filesystem>

#include "core/error.h"
#include "engine/chat_formats.h"
#include "io/gguf.h"
#include "io/json_util.h"
#include "tokenizer/gguf_vocab.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_config.h"
#include "tokenizer/utf8.h"

namespace tessera {
namespace {

using Json = nlohmann::ordered_json;

// The Hub templates are 2 to 20 KB; a larger file is not a chat template.
constexpr size_t kMaxChatTemplateBytes = size_t{1} << 20;

constexpr std::array<ChatTemplateKind, 7> kKinds = {
    ChatTemplateKind::kLlama31,     ChatTemplateKind::kMistralV03, ChatTemplateKind::kQwen25,
    ChatTemplateKind::kQwen3,       ChatTemplateKind::kDeepseekV2, ChatTemplateKind::kDeepseekV3,
    ChatTemplateKind::kDeepseekR1};
constexpr std::string_view kKnownKinds = "llama3.1, mistral-v0.3, qwen2.5, qwen3, deepseek-v2, deepseek-v3, deepseek-r1";

bool IsDeepseek(ChatTemplateKind kind) {
  return kind == ChatTemplateKind::kDeepseekV2 || kind == ChatTemplateKind::kDeepseekV3 ||
         kind == ChatTemplateKind::kDeepseekR1;
}

// Substrings a template must contain (and must not) to be rendered by a built-in renderer. They
// are chosen among the strings that decide the output (fixed texts, the system-message
// placement, the tool formats), so a revision that keeps them renders the same, and the
// neighbouring templates that render differently fail at least one of them.
struct Fingerprint {
  ChatTemplateKind kind;
  std::vector<std::string_view> required;
  std::vector<std::string_view> forbidden;
};

const std::vector<Fingerprint>& Fingerprints() {
  static const std::vector<Fingerprint> fingerprints = {
      {ChatTemplateKind::kLlama31,
       {"<|start_header_id|>", "<|eot_id|>", "Cutting Knowledge Date: December 2023", "\"26 Jul 2024\"",
        "tools_in_user_message", "Given the following functions, please respond with a JSON for a function call",
        "\"parameters\": ", "<|python_tag|>", "ipython"},
       // Llama 3.2 dates the prompt with strftime_now; 3.2 Vision adds <|image|>.
       {"strftime_now", "<|image|>"}},
      {ChatTemplateKind::kMistralV03,
       // Mistral Nemo and later write "[INST]" and "[TOOL_CALLS][" without the space.
       {"[INST] ", "[/INST]", "[AVAILABLE_TOOLS] [", "[/AVAILABLE_TOOLS]", "[TOOL_CALLS] [",
        "[TOOL_RESULTS] {\"content\": ", "[/TOOL_RESULTS]", "length != 9", "loop.last and system_message is defined",
        "|trim + eos_token"},
       {}},
      {ChatTemplateKind::kQwen25,
       {"<|im_start|>", "<|im_end|>", "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.",
        "# Tools", "<tool_call>", "<tool_response>", "tool_call.arguments | tojson"},
       {"<think>", "last_query_index"}},
      {ChatTemplateKind::kQwen3,
       {"<|im_start|>", "<|im_end|>", "# Tools", "<tool_call>", "<tool_response>", "</think>", "reasoning_content",
        "multi_step_tool", "loop.index0 > ns.last_query_index %}",
        "enable_thinking is defined and enable_thinking is false"},
       {"You are Qwen, created by Alibaba Cloud"}},
      {ChatTemplateKind::kDeepseekV2,
       {"'User: ' + message['content'] + '", "'Assistant: ' + message['content'] + eos_token",
        "message['content'] + '", "{{ 'Assistant:' }}"},
       {"<｜User｜>", "<｜Assistant｜>"}},
      // V3-0324 and R1-0528 add is_last_user and render differently; R1's first revision lacks
      // the <think> prefill; R1-Distill tests "content is none" and keeps one system prompt.
      {ChatTemplateKind::kDeepseekV3,
       {"<｜User｜>", "'<｜Assistant｜>' + message['content'] + '<｜end▁of▁sentence｜>'",
        "message['role'] == 'assistant' and message['content'] is none", "ns.is_first_sp",
        "'<｜Assistant｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>' + tool['type']", "<｜tool▁outputs▁end｜>"},
       {"</think>", "is_last_user", "'tool_calls' in message"}},
      {ChatTemplateKind::kDeepseekR1,
       {"<｜User｜>", "'tool_calls' in message", "'tool_calls' not in message", "ns.is_first_sp",
        "content.split('</think>')[-1]", "<｜Assistant｜><think>", "<｜tool▁outputs▁end｜>"},
       {"is_last_user"}},
  };
  return fingerprints;
}

void CheckUtf8(std::string_view text, size_t index, const char* field) {
  const size_t bad = utf8::FindInvalid(text);
  if (bad != text.size()) Fail("chat message ", index, ": ", field, " is not valid UTF-8 (byte offset ", bad, ")");
}

// The checks of ChatTemplate::Render and vLLM's argument parsing (see chat_formats.h).
std::vector<ChatMessage> Normalize(std::span<const ChatMessage> messages, const ChatOptions& options,
                                   std::string_view kind, bool parse_arguments) {
  if (messages.empty()) Fail(kind, " chat template: no messages to render");
  if (!options.tools.is_null()) {
    if (!options.tools.is_array()) Fail("chat tools must be an array (got ", JsonKindName(options.tools), ")");
    for (size_t t = 0; t < options.tools.size(); ++t) {
      if (!options.tools[t].is_object()) {
        Fail("chat tool ", t, " must be an object (got ", JsonKindName(options.tools[t]), ")");
      }
    }
  }
  if (utf8::FindInvalid(options.date_string) != options.date_string.size()) Fail("chat date_string is not valid UTF-8");
  std::vector<ChatMessage> normalized(messages.begin(), messages.end());
  for (size_t i = 0; i < normalized.size(); ++i) {
    ChatMessage& m = normalized[i];
    if (m.role.empty()) Fail("chat message ", i, " has no role");
    CheckUtf8(m.role, i, "role");
    CheckUtf8(m.content, i, "content");
    if (m.reasoning) CheckUtf8(*m.reasoning, i, "reasoning");
    CheckUtf8(m.tool_call_id, i, "tool_call_id");
    CheckUtf8(m.name, i, "name");
    if (m.tool_calls.is_null()) continue;
    if (!m.tool_calls.is_array()) {
      Fail("chat message ", i, ": tool_calls must be an array (got ", JsonKindName(m.tool_calls), ")");
    }
    for (size_t c = 0; c < m.tool_calls.size(); ++c) {
      Json& call = m.tool_calls[c];
      if (!call.is_object()) {
        Fail("chat message ", i, ": tool call ", c, " must be an object (got ", JsonKindName(call), ")");
      }
      const auto function = call.find("function");
      if (!parse_arguments || m.role != "assistant" || function == call.end() || !function->is_object()) continue;
      // vLLM: "if content := item['function'].get('arguments'): json.loads(content) else {}".
      Json& arguments = (*function)["arguments"];
      if (arguments.is_null() || (arguments.is_string() && arguments.get_ref<const std::string&>().empty())) {
        arguments = Json::object();
      } else if (arguments.is_string()) {
        const std::string source = StrCat("chat message ", i, ", tool call ", c, " arguments");
        arguments = ParseOrderedJsonText(arguments.get<std::string>(), source);
      }
    }
  }
  return normalized;
}

void CheckStopId(int64_t id, const char* what) {
  if (id < 0 || id > INT32_MAX) Fail(what, " eos_token_id ", id, " is not a token id");
}

}  // namespace

std::string_view ChatTemplateKindName(ChatTemplateKind kind) {
  switch (kind) {
    case ChatTemplateKind::kLlama31: return "llama3.1";
    case ChatTemplateKind::kMistralV03: return "mistral-v0.3";
    case ChatTemplateKind::kQwen25: return "qwen2.5";
    case ChatTemplateKind::kQwen3: return "qwen3";
    case ChatTemplateKind::kDeepseekV2: return "deepseek-v2";
    case ChatTemplateKind::kDeepseekV3: return "deepseek-v3";
    case ChatTemplateKind::kDeepseekR1: return "deepseek-r1";
  }
  return "?";
}

ChatTemplateKind ParseChatTemplateKind(std::string_view name) {
  for (const ChatTemplateKind kind : kKinds) {
    if (ChatTemplateKindName(kind) == name) return kind;
  }
  Fail("unknown chat template ", Quote(name), " (known: ", kKnownKinds, ")");
}

std::optional<ChatTemplateKind> RecognizeChatTemplate(std::string_view text) {
  for (const Fingerprint& f : Fingerprints()) {
    const auto has = [&](std::string_view s) { return text.find(s) != std::string_view::npos; };
    if (std::all_of(f.required.begin(), f.required.end(), has) &&
        std::none_of(f.forbidden.begin(), f.forbidden.end(), has)) {
      return f.kind;
    }
  }
  return std::nullopt;
}

ChatTemplate::ChatTemplate(ChatTemplateKind kind) : kind_(kind) {
  switch (kind) {
    case ChatTemplateKind::kLlama31:
      bos_token_ = "<|begin_of_text|>";
      eos_token_ = "<|eot_id|>";
      break;
    case ChatTemplateKind::kMistralV03:
      bos_token_ = "<s>";
      eos_token_ = "</s>";
      break;
    case ChatTemplateKind::kQwen25:
    case ChatTemplateKind::kQwen3:
      eos_token_ = "<|im_end|>";  // Qwen's tokenizer_config has bos_token null
      break;
    case ChatTemplateKind::kDeepseekV2:
    case ChatTemplateKind::kDeepseekV3:
    case ChatTemplateKind::kDeepseekR1:
      bos_token_ = "<｜begin▁of▁sentence｜>";
      eos_token_ = "<｜end▁of▁sentence｜>";
      break;
  }
}

ChatTemplate ChatTemplate::FromText(std::string_view text, const std::string& source, const TokenizerConfig* config) {
  const std::optional<ChatTemplateKind> kind = RecognizeChatTemplate(text);
  if (!kind) {
    Fail("unknown chat template in ", source, " (known: ", kKnownKinds, "; use --raw to send the prompt untemplated)");
  }
  ChatTemplate chat(*kind);
  if (config != nullptr) {
    if (config->bos_token.content) chat.bos_token_ = *config->bos_token.content;
    if (config->eos_token.content) chat.eos_token_ = *config->eos_token.content;
  }
  return chat;
}

ChatTemplate ChatTemplate::FromModelDir(const std::string& dir) {
  if (IsGgufPath(dir)) {  // tokenizer.chat_template in a GGUF file's metadata
    const TokenizerConfig config = GgufTokenizerConfig(*GgufFile::Open(dir));
    if (config.chat_template.empty()) {
      Fail(dir, ": no chat template (no tokenizer.chat_template; use --raw to send the prompt untemplated)");
    }
    return FromText(config.chat_template, dir, &config);
  }
  const std::filesystem::path base(dir);
  const std::optional<TokenizerConfig> config = LoadTokenizerConfig(dir);
  std::error_code ec;
  // transformers: a chat_template.jinja beside the config takes priority over its entry;
  // chat_template.json is the older processor file (multimodal repositories).
  const std::string jinja_path = (base / "chat_template.jinja").string();
  if (std::filesystem::exists(jinja_path, ec)) {
    return FromText(ReadBoundedFile(jinja_path, kMaxChatTemplateBytes), jinja_path, config ? &*config : nullptr);
  }
  if (config && !config->chat_template.empty()) return FromText(config->chat_template, config->source, &*config);
  const std::string json_path = (base / "chat_template.json").string();
  if (std::filesystem::exists(json_path, ec)) {
    const nlohmann::json file = ParseJsonText(ReadBoundedFile(json_path, kMaxChatTemplateBytes), json_path);
    if (!file.is_object() || !file.contains("chat_template") || !file["chat_template"].is_string()) {
      Fail(json_path, ": expected an object with a string \"chat_template\"");
    }
    return FromText(file["chat_template"].get<std::string>(), json_path, config ? &*config : nullptr);
  }
  Fail(dir, ": no chat template (no chat_template.jinja, and ",
       config ? "tokenizer_config.json has no \"chat_template\"" : "no tokenizer_config.json",
       "; use --raw to send the prompt untemplated)");
}

std::string ChatTemplate::Render(std::span<const ChatMessage> messages, const ChatOptions& options) const {
  const std::vector<ChatMessage> normalized = Normalize(messages, options, name(), !IsDeepseek(kind_));
  const chat_internal::RenderInput in{normalized, options, bos_token_, eos_token_};
  switch (kind_) {
    case ChatTemplateKind::kLlama31: return chat_internal::RenderLlama31(in);
    case ChatTemplateKind::kMistralV03: return chat_internal::RenderMistralV03(in);
    case ChatTemplateKind::kQwen25: return chat_internal::RenderQwen25(in);
    case ChatTemplateKind::kQwen3: return chat_internal::RenderQwen3(in);
    case ChatTemplateKind::kDeepseekV2: return chat_internal::RenderDeepseekV2(in);
    case ChatTemplateKind::kDeepseekV3: return chat_internal::RenderDeepseekV3(in);
    case ChatTemplateKind::kDeepseekR1: return chat_internal::RenderDeepseekR1(in);
  }
  TESSERA_CHECK(false);
  return {};
}

std::vector<int32_t> ChatTemplate::Encode(const Tokenizer& tokenizer, std::string_view rendered) const {
  return tokenizer.Encode(rendered);  // add_special_tokens=False: the template wrote the BOS
}

std::vector<int32_t> ChatTemplate::RenderIds(const Tokenizer& tokenizer, std::span<const ChatMessage> messages,
                                             const ChatOptions& options) const {
  return Encode(tokenizer, Render(messages, options));
}

std::vector<std::string_view> ChatTemplate::TurnEndTokens() const {
  switch (kind_) {
    case ChatTemplateKind::kLlama31: return {"<|eot_id|>", "<|eom_id|>"};
    case ChatTemplateKind::kMistralV03: return {"</s>"};
    case ChatTemplateKind::kQwen25:
    case ChatTemplateKind::kQwen3: return {"<|im_end|>", "<|endoftext|>"};
    case ChatTemplateKind::kDeepseekV2:
    case ChatTemplateKind::kDeepseekV3:
    case ChatTemplateKind::kDeepseekR1: return {"<｜end▁of▁sentence｜>"};
  }
  return {};
}

ReplyThinking ChatTemplate::Thinking(bool enable_thinking) const {
  if (kind_ == ChatTemplateKind::kQwen3 && enable_thinking) return ReplyThinking::kMayOpen;
  if (kind_ == ChatTemplateKind::kDeepseekR1) return ReplyThinking::kOpen;
  return ReplyThinking::kNone;
}

std::vector<int32_t> ChatTemplate::StopTokenIds(const Tokenizer& tokenizer,
                                                std::span<const int64_t> generation_config_eos,
                                                std::span<const int64_t> model_config_eos) const {
  std::vector<int32_t> ids;
  const auto add = [&](int32_t id) {
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  };
  for (const int64_t id : generation_config_eos) {
    CheckStopId(id, "generation_config.json");
    add(static_cast<int32_t>(id));
  }
  for (const int64_t id : model_config_eos) {
    CheckStopId(id, "config.json");
    add(static_cast<int32_t>(id));
  }
  std::vector<std::string_view> tokens = TurnEndTokens();
  if (!eos_token_.empty()) tokens.push_back(eos_token_);
  for (const std::string_view token : tokens) {
    if (const std::optional<int32_t> id = tokenizer.TokenId(token)) add(*id);
  }
  return ids;
}

}  // namespace tessera
