#include "engine/chat_template.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <filesystem>
#include <iostream>

#include "core/error.h"
#include "engine/jinja_template.h"
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

// ChatML as the Hugging Face documentation writes it; what a model without a template gets
// (llama-server's fallback too).
constexpr std::string_view kChatMl =
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";

// Tokens that end an assistant turn in the templates of the other families; those a template
// writes are its turn ends (Gemma 2/3 <end_of_turn>, Gemma 4 <turn|>, Phi <|end|>, GLM <|user|>
// and <|observation|>, ChatML <|im_end|>, ...).
constexpr std::array<std::string_view, 11> kTurnEnds = {
    "<|eot_id|>", "<|eom_id|>", "<|im_end|>", "<|endoftext|>", "<end_of_turn>", "<turn|>",
    "<|end|>",    "<|user|>",   "<|observation|>", "</s>", "<｜end▁of▁sentence｜>"};

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
      const Json& tool = options.tools[t];
      if (!tool.is_object()) Fail("chat tool ", t, " must be an object (got ", JsonKindName(tool), ")");
      const auto function = tool.find("function");
      if (function == tool.end() || !function->is_object()) Fail("chat tool ", t, " has no \"function\" object");
      const auto name = function->find("name");
      if (name == function->end() || !name->is_string()) Fail("chat tool ", t, ": its function has no string \"name\"");
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
      // OpenAI's schema (and vLLM's check of it): a call names its function; jinja2 and the
      // engine would render a missing one differently (an error there, "" here).
      const auto function = call.find("function");
      if (function == call.end() || !function->is_object()) {
        Fail("chat message ", i, ": tool call ", c, " has no \"function\" object");
      }
      const auto name = function->find("name");
      if (name == function->end() || !name->is_string()) {
        Fail("chat message ", i, ": tool call ", c, ": its function has no string \"name\"");
      }
      if (!parse_arguments || m.role != "assistant") continue;
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
    case ChatTemplateKind::kOther: return "other";
  }
  return "?";
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

// The usual BOS/EOS texts of a family's tokenizer, for a template given without its
// tokenizer_config.json.
std::pair<std::string, std::string> FamilyBosEos(ChatTemplateKind kind) {
  switch (kind) {
    case ChatTemplateKind::kLlama31: return {"<|begin_of_text|>", "<|eot_id|>"};
    case ChatTemplateKind::kMistralV03: return {"<s>", "</s>"};
    case ChatTemplateKind::kQwen25:
    case ChatTemplateKind::kQwen3: return {"", "<|im_end|>"};  // Qwen's tokenizer_config has bos_token null
    case ChatTemplateKind::kDeepseekV2:
    case ChatTemplateKind::kDeepseekV3:
    case ChatTemplateKind::kDeepseekR1: return {"<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"};
    case ChatTemplateKind::kOther: break;
  }
  return {"", ""};
}

ChatTemplate::ChatTemplate(std::shared_ptr<const JinjaTemplate> jinja, ChatTemplateKind kind, std::string name)
    : jinja_(std::move(jinja)), kind_(kind), name_(std::move(name)) {
  std::tie(bos_token_, eos_token_) = FamilyBosEos(kind_);
}

ChatTemplate ChatTemplate::FromText(std::string_view text, const std::string& source, const TokenizerConfig* config) {
  if (text.size() > kMaxChatTemplateBytes) Fail(source, ": the chat template is ", text.size(), " bytes (at most ", kMaxChatTemplateBytes, ")");
  if (utf8::FindInvalid(text) != text.size()) Fail(source, ": the chat template is not valid UTF-8");
  const ChatTemplateKind kind = RecognizeChatTemplate(text).value_or(ChatTemplateKind::kOther);
  std::string name = kind != ChatTemplateKind::kOther ? std::string(ChatTemplateKindName(kind)) : "jinja";
  std::shared_ptr<const JinjaTemplate> jinja;
  try {
    jinja = std::make_shared<const JinjaTemplate>(text, source);
  } catch (const Error& e) {
    Fail(e.what(), " (--chat-template FILE|NAME replaces it; --raw sends the prompt untemplated)");
  }
  ChatTemplate chat(std::move(jinja), kind, std::move(name));
  if (config != nullptr) {
    if (config->bos_token.content) chat.bos_token_ = *config->bos_token.content;
    if (config->eos_token.content) chat.eos_token_ = *config->eos_token.content;
  }
  // Once per template, not per request: for other templates it renders a probe.
  chat.thinking_ = {chat.ProbeThinking(false), chat.ProbeThinking(true)};
  return chat;
}

const std::string& ChatTemplate::text() const { return jinja_->text(); }

std::vector<std::string> ChatTemplateNames() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(TESSERA_JINJA_TEMPLATES, ec)) {
    if (entry.path().extension() == ".jinja") names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  names.insert(names.begin(), "chatml");
  return names;
}

ChatTemplate ChatTemplate::FromOption(const std::string& option, const std::string& dir) {
  if (option.empty()) return FromModelDir(dir);
  // The model's BOS/EOS texts, which the replacement template writes.
  std::optional<TokenizerConfig> config;
  if (IsGgufPath(dir)) {
    config = GgufTokenizerConfig(*GgufFile::Open(dir));
  } else if (!dir.empty()) {
    config = LoadTokenizerConfig(dir);
  }
  const TokenizerConfig* model_config = config ? &*config : nullptr;
  std::error_code ec;
  if (std::filesystem::is_regular_file(option, ec)) {
    const std::string text = ReadBoundedFile(option, kMaxChatTemplateBytes);
    if (std::filesystem::path(option).extension() == ".json") {
      const nlohmann::json file = ParseJsonText(text, option);
      if (!file.is_object() || !file.contains("chat_template") || !file["chat_template"].is_string()) {
        Fail(option, ": expected an object with a string \"chat_template\"");
      }
      return FromText(file["chat_template"].get<std::string>(), option, model_config);
    }
    ChatTemplate chat = FromText(text, option, model_config);
    if (chat.kind_ == ChatTemplateKind::kOther) chat.name_ = std::filesystem::path(option).stem().string();
    return chat;
  }
  if (option == "chatml") {
    ChatTemplate chat = FromText(kChatMl, "chatml", model_config);
    chat.name_ = "chatml";
    return chat;
  }
  const std::vector<std::string> names = ChatTemplateNames();
  if (std::find(names.begin(), names.end(), option) == names.end()) {
    Fail("--chat-template ", Quote(option), " is neither a file nor a known name (",
         names.size(), " names: chatml, ", names.size() > 1 ? names[1] : "", ", ...; `tessera info --chat-templates` lists them)");
  }
  const std::string path = std::string(TESSERA_JINJA_TEMPLATES) + "/" + option + ".jinja";
  ChatTemplate chat = FromText(ReadBoundedFile(path, kMaxChatTemplateBytes), path, model_config);
  if (chat.kind_ == ChatTemplateKind::kOther) chat.name_ = option;
  return chat;
}

ChatTemplate ChatTemplate::FromModelDir(const std::string& dir) {
  if (IsGgufPath(dir)) {  // tokenizer.chat_template in a GGUF file's metadata
    const TokenizerConfig config = GgufTokenizerConfig(*GgufFile::Open(dir));
    if (config.chat_template.empty()) {
      ChatTemplate chat = FromOption("chatml", dir);
      chat.warning_ = StrCat(dir, " has no chat template (no tokenizer.chat_template): using ChatML");
      return chat;
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
  ChatTemplate chat = FromOption("chatml", dir);
  chat.warning_ = StrCat(dir, " has no chat template (no chat_template.jinja, and ",
                         config ? "tokenizer_config.json has no \"chat_template\"" : "no tokenizer_config.json",
                         "): using ChatML");
  return chat;
}

namespace {

// A message as transformers passes it to the template: only the keys the client gave.
Json MessageJson(const ChatMessage& m) {
  Json j = Json::object();
  j["role"] = m.role;
  j["content"] = m.content_null ? Json(nullptr) : Json(m.content);
  if (m.reasoning) j["reasoning_content"] = *m.reasoning;
  if (!m.tool_calls.is_null()) j["tool_calls"] = m.tool_calls;
  if (!m.tool_call_id.empty()) j["tool_call_id"] = m.tool_call_id;
  if (!m.name.empty()) j["name"] = m.name;
  return j;
}

}  // namespace

std::string ChatTemplate::Render(std::span<const ChatMessage> messages, const ChatOptions& options) const {
  const std::vector<ChatMessage> normalized = Normalize(messages, options, name_, !IsDeepseek(kind_));
  Json globals = Json::object();
  Json& list = globals["messages"] = Json::array();
  for (const ChatMessage& m : normalized) list.push_back(MessageJson(m));
  if (!options.tools.is_null()) globals["tools"] = options.tools;
  globals["add_generation_prompt"] = options.add_generation_prompt;
  globals["enable_thinking"] = options.enable_thinking;
  globals["bos_token"] = bos_token_;
  globals["eos_token"] = eos_token_;
  if (!options.date_string.empty()) globals["date_string"] = options.date_string;
  try {
    return jinja_->Render(globals, options.now != 0 ? options.now : std::time(nullptr));
  } catch (const Error& e) {
    Fail(name_, " chat template: ", e.what());
  }
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
    case ChatTemplateKind::kOther: break;
  }
  std::vector<std::string_view> tokens;
  for (const std::string_view token : kTurnEnds) {
    if (text().find(token) != std::string::npos) tokens.push_back(token);
  }
  return tokens;
}

ReplyThinking ChatTemplate::Thinking(bool enable_thinking) const { return thinking_[enable_thinking ? 1 : 0]; }

ReplyThinking ChatTemplate::ProbeThinking(bool enable_thinking) const {
  if (kind_ == ChatTemplateKind::kDeepseekR1) return ReplyThinking::kOpen;
  if (kind_ != ChatTemplateKind::kOther) {
    return kind_ == ChatTemplateKind::kQwen3 && enable_thinking ? ReplyThinking::kMayOpen : ReplyThinking::kNone;
  }
  if (text().find("</think>") == std::string::npos) return ReplyThinking::kNone;
  // Does the generation prompt open the block itself? Ask the template with one user turn.
  ChatMessage probe;
  probe.role = "user";
  probe.content = "x";
  ChatOptions options;
  options.enable_thinking = enable_thinking;
  std::string prompt;
  try {
    prompt = Render({&probe, 1}, options);
  } catch (const Error&) {
    return enable_thinking ? ReplyThinking::kMayOpen : ReplyThinking::kNone;
  }
  while (!prompt.empty() && (prompt.back() == '\n' || prompt.back() == ' ')) prompt.pop_back();
  if (prompt.ends_with("<think>")) return ReplyThinking::kOpen;
  return enable_thinking ? ReplyThinking::kMayOpen : ReplyThinking::kNone;
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
