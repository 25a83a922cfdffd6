// Fuzz target of chat-template rendering (issue 44 point 6, issue 45 point 1): the Jinja engine
// (engine/jinja_template.h, llama.cpp's common/jinja compiled with our sanitizers) on template
// text and conversations, and ChatTemplate's checks around it. The input is split at
// fuzz::kSeparator lines:
//   1. the template: a tokenizer_config.json (text starting with '{"', written alone into a scratch
//      model directory and found as ChatTemplate::FromModelDir finds it), a --chat-template name
//      ("chatml", "google-gemma-2-2b-it"), or template text (ChatTemplate::FromText);
//   2. the messages as JSON: an array of objects whose "role", "content" (a string; null or
//      absent is content_null; anything else its JSON text), "reasoning_content",
//      "tool_calls" (any JSON: Render checks it), "tool_call_id" and "name" become ChatMessages;
//   3. the options as JSON: add_generation_prompt, enable_thinking, tools (any JSON),
//      date_string, and eos_token_id (ids for StopTokenIds: an int or a list).
// The prompt is rendered, encoded with a family tokenizer (tests/data/tokenizer/families), and
// the stop ids are computed. tessera::Error (a template's raise, a parse error, malformed tools)
// is an answer. Seeds: tests/fuzz/corpus/chat_template (tools/make_fuzz_seeds.py: the pinned Hub
// templates of tests/data/chat_templates, newer families' Hub templates from llama.cpp's
// collection, and conversations of the goldens).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/chat_template.h"
#include "fuzz_main.h"
#include "io/json_util.h"
#include "tokenizer/tokenizer.h"

namespace {

using namespace tessera;
using Json = nlohmann::ordered_json;

const fuzz::ScratchDir& Scratch() {
  static const fuzz::ScratchDir dir("chat_template");
  return dir;
}

// The family tokenizer whose special tokens the kind's prompts use, loaded on first use.
const Tokenizer& TokenizerFor(ChatTemplateKind kind) {
  static const auto load = [](const char* family) {
    return new Tokenizer(Tokenizer::FromModelDir(std::string(TESSERA_SOURCE_DIR "/tests/data/tokenizer/families/") +
                                                 family));  // lives for the whole process
  };
  switch (kind) {
    case ChatTemplateKind::kLlama31: {
      static const Tokenizer* t = load("llama3");
      return *t;
    }
    case ChatTemplateKind::kMistralV03: {
      static const Tokenizer* t = load("mistral");
      return *t;
    }
    case ChatTemplateKind::kQwen25: {
      static const Tokenizer* t = load("qwen2");
      return *t;
    }
    case ChatTemplateKind::kQwen3: {
      static const Tokenizer* t = load("qwen3");
      return *t;
    }
    case ChatTemplateKind::kOther: {
      static const Tokenizer* t = load("qwen3");
      return *t;
    }
    case ChatTemplateKind::kDeepseekV2:
    case ChatTemplateKind::kDeepseekV3:
    case ChatTemplateKind::kDeepseekR1: break;
  }
  static const Tokenizer* deepseek = load("deepseek3");
  return *deepseek;
}

std::optional<ChatTemplate> LoadTemplate(std::string_view text) {
  std::optional<ChatTemplate> chat;
  fuzz::Guarded([&] {
    // A JSON object ('{' then '"'), not a Jinja template ("{%", "{{").
    const size_t second = text.find_first_not_of(" \t\r\n", 1);
    if (!text.empty() && text.front() == '{' && second != std::string_view::npos && text[second] == '"') {
      Scratch().Clear();
      Scratch().Write("tokenizer_config.json", text);
      chat = ChatTemplate::FromModelDir(Scratch().str());
    } else if (text.size() <= 64 && text.find('{') == std::string_view::npos &&
               text.find('/') == std::string_view::npos) {
      chat = ChatTemplate::FromOption(std::string(text), "");
    } else {
      chat = ChatTemplate::FromText(text, "chat_template.jinja");
    }
  });
  return chat;
}

std::string StringOr(const Json& object, const char* key, std::string fallback) {
  const auto it = object.find(key);
  if (it == object.end()) return fallback;
  return it->is_string() ? it->get<std::string>() : it->dump();
}

// Messages as a client sends them, mapped without the server's checks: Render must hold its own.
std::vector<ChatMessage> Messages(const Json& array) {
  std::vector<ChatMessage> out;
  if (!array.is_array()) return out;
  for (const Json& m : array) {
    if (!m.is_object()) continue;
    ChatMessage message;
    message.role = StringOr(m, "role", "");
    const auto content = m.find("content");
    message.content_null = content == m.end() || content->is_null();
    if (!message.content_null) message.content = content->is_string() ? content->get<std::string>() : content->dump();
    if (const auto r = m.find("reasoning_content"); r != m.end() && r->is_string()) message.reasoning = r->get<std::string>();
    if (const auto calls = m.find("tool_calls"); calls != m.end()) message.tool_calls = *calls;
    message.tool_call_id = StringOr(m, "tool_call_id", "");
    message.name = StringOr(m, "name", "");
    out.push_back(std::move(message));
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<std::string_view> parts =
      fuzz::Split(std::string_view(reinterpret_cast<const char*>(data), size), 3);
  const std::optional<ChatTemplate> chat = LoadTemplate(parts[0]);
  if (!chat || parts.size() < 2) return 0;
  Json messages_json, options_json = Json::object();
  if (!fuzz::Guarded([&] { messages_json = ParseOrderedJsonText(parts[1], "messages"); })) return 0;
  if (parts.size() > 2 && !fuzz::Guarded([&] { options_json = ParseOrderedJsonText(parts[2], "options"); })) return 0;

  const std::vector<ChatMessage> messages = Messages(messages_json);
  ChatOptions options;
  std::vector<int64_t> eos_ids;
  if (options_json.is_object()) {
    if (const auto v = options_json.find("add_generation_prompt"); v != options_json.end() && v->is_boolean()) {
      options.add_generation_prompt = v->get<bool>();
    }
    if (const auto v = options_json.find("enable_thinking"); v != options_json.end() && v->is_boolean()) {
      options.enable_thinking = v->get<bool>();
    }
    if (const auto v = options_json.find("tools"); v != options_json.end()) options.tools = *v;
    options.date_string = StringOr(options_json, "date_string", "");
    if (const auto v = options_json.find("eos_token_id"); v != options_json.end()) {
      const Json list = v->is_array() ? *v : Json::array({*v});
      for (const Json& id : list) {
        if (id.is_number_integer()) eos_ids.push_back(id.get<int64_t>());
      }
    }
  }
  const Tokenizer& tokenizer = TokenizerFor(chat->kind());
  fuzz::Guarded([&] {
    const std::string prompt = chat->Render(messages, options);
    chat->Encode(tokenizer, prompt);
  });
  fuzz::Guarded([&] { chat->StopTokenIds(tokenizer, eos_ids, eos_ids); });
  chat->Thinking(options.enable_thinking);
  return 0;
}
