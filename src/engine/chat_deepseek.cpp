// DeepSeek's chat templates (declared in engine/chat_formats.h; the Hub texts are
// tests/data/chat_templates/deepseek-{v2,v3,r1}.jinja, deepseek.md §8). Each renderer follows its
// template statement by statement; the templates write no text outside their quoted strings.
// Where a template would fail with a Python error (a null or non-string value concatenated to a
// string), the error quotes Python's message.
#include <string>
#include <string_view>

#include "core/error.h"
#include "engine/chat_formats.h"
#include "engine/tool_calls.h"
#include "io/json_util.h"

namespace tessera::chat_internal {
namespace {

using Json = nlohmann::ordered_json;

constexpr std::string_view kUser = "<｜User｜>";
constexpr std::string_view kAssistant = "<｜Assistant｜>";
constexpr std::string_view kEndOfSentence = "<｜end▁of▁sentence｜>";
// The call markers are those the reply parser reads (engine/tool_calls.h).
constexpr std::string_view kCallsBegin = kDeepseekCallsBegin, kCallsEnd = kDeepseekCallsEnd;
constexpr std::string_view kCallBegin = kDeepseekCallBegin, kCallEnd = kDeepseekCallEnd, kSep = kDeepseekSep;
constexpr std::string_view kOutputsBegin = "<｜tool▁outputs▁begin｜>";
constexpr std::string_view kOutputsEnd = "<｜tool▁outputs▁end｜>";
constexpr std::string_view kOutputBegin = "<｜tool▁output▁begin｜>";
constexpr std::string_view kOutputEnd = "<｜tool▁output▁end｜>";

// The name Python gives a JSON value's type, for the TypeError of "str + value".
std::string_view PyTypeName(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null: return "NoneType";
    case Json::value_t::object: return "dict";
    case Json::value_t::array: return "list";
    case Json::value_t::boolean: return "bool";
    case Json::value_t::number_float: return "float";
    case Json::value_t::string: return "str";
    default: return "int";
  }
}

// A message's content where the template concatenates it: null content is Python's TypeError.
const std::string& Text(const ChatMessage& m, std::string_view kind, size_t index) {
  if (m.content_null) Raise(kind, "can only concatenate str (not \"NoneType\") to str (null content)", index, m);
  return m.content;
}

// tool[key] of a call as the template concatenates it: a string, else the template's error.
const std::string& ConcatenatedField(const Json& object, const char* key, std::string_view kind, size_t index,
                                     const ChatMessage& m) {
  const auto it = object.find(key);
  if (it == object.end()) Raise(kind, StrCat("'dict object' has no attribute '", key, "'"), index, m);
  if (!it->is_string()) {
    Raise(kind, StrCat("can only concatenate str (not \"", PyTypeName(*it), "\") to str (tool call \"", key, "\")"),
          index, m);
  }
  return it->get_ref<const std::string&>();
}

// type<｜tool▁sep｜>name\n```json\narguments\n```<｜tool▁call▁end｜> of one call.
std::string CallText(const Json& call, std::string_view kind, size_t index, const ChatMessage& m) {
  const std::string& type = ConcatenatedField(call, "type", kind, index, m);
  const auto function = call.find("function");
  if (function == call.end() || !function->is_object()) {
    Raise(kind, "'dict object' has no attribute 'function'", index, m);
  }
  const std::string& name = ConcatenatedField(*function, "name", kind, index, m);
  const std::string& arguments = ConcatenatedField(*function, "arguments", kind, index, m);
  return StrCat(kCallBegin, type, kSep, name, "\n```json\n", arguments, "\n```", kCallEnd);
}

// The system texts, wherever they stand, joined by "\n\n" (V3 and R1).
std::string SystemPrompt(std::span<const ChatMessage> messages, std::string_view kind) {
  std::string prompt;
  bool first = true;
  for (size_t index = 0; index < messages.size(); ++index) {
    if (messages[index].role != "system") continue;
    if (!first) prompt += "\n\n";
    prompt += Text(messages[index], kind, index);
    first = false;
  }
  return prompt;
}

// One tool output; the first of the conversation opens the outputs block.
void AppendToolOutput(const ChatMessage& m, std::string_view kind, size_t index, bool newline_between,
                      bool& output_first, std::string& out) {
  const std::string& text = Text(m, kind, index);
  if (output_first) {
    out += kOutputsBegin;
    output_first = false;
  } else if (newline_between) {
    out += '\n';
  }
  out += kOutputBegin;
  out += text;
  out += kOutputEnd;
}

// Jinja's `content.split('</think>')[-1]`: what follows the last </think>.
std::string_view AfterLastThinkEnd(std::string_view content) {
  constexpr std::string_view kThinkEnd = "</think>";
  const size_t at = content.rfind(kThinkEnd);
  return at == std::string_view::npos ? content : content.substr(at + kThinkEnd.size());
}

}  // namespace

std::string RenderDeepseekV2(const RenderInput& in) {
  constexpr std::string_view kKind = "deepseek-v2";
  std::string out(in.bos);
  for (size_t index = 0; index < in.messages.size(); ++index) {
    const ChatMessage& m = in.messages[index];
    if (m.role == "user") {
      out += StrCat("User: ", Text(m, kKind, index), "\n\n");
    } else if (m.role == "assistant") {
      out += StrCat("Assistant: ", Text(m, kKind, index), in.eos);
    } else if (m.role == "system") {
      out += StrCat(Text(m, kKind, index), "\n\n");
    }
  }
  if (in.options.add_generation_prompt) out += "Assistant:";
  return out;
}

std::string RenderDeepseekV3(const RenderInput& in) {
  constexpr std::string_view kKind = "deepseek-v3";
  bool call_written = false, after_tool = false, output_first = true;  // ns.is_first, is_tool, is_output_first
  std::string out = StrCat(in.bos, SystemPrompt(in.messages, kKind));
  for (size_t index = 0; index < in.messages.size(); ++index) {
    const ChatMessage& m = in.messages[index];
    if (m.role == "user") {
      after_tool = false;
      out += StrCat(kUser, Text(m, kKind, index));
    }
    if (m.role == "assistant" && m.content_null) {
      after_tool = false;
      // Without tool_calls the loop runs over an undefined value: nothing is written.
      for (const Json& call : m.tool_calls.is_array() ? m.tool_calls : Json::array()) {
        if (!call_written) {
          out += StrCat(kAssistant, kCallsBegin, CallText(call, kKind, index, m));
          call_written = true;
        } else {
          out += StrCat("\n", CallText(call, kKind, index, m), kCallsEnd, kEndOfSentence);
        }
      }
    }
    if (m.role == "assistant" && !m.content_null) {
      if (after_tool) {
        out += StrCat(kOutputsEnd, m.content, kEndOfSentence);
        after_tool = false;
      } else {
        out += StrCat(kAssistant, m.content, kEndOfSentence);
      }
    }
    if (m.role == "tool") {
      after_tool = true;
      AppendToolOutput(m, kKind, index, /*newline_between=*/true, output_first, out);
    }
  }
  if (after_tool) out += kOutputsEnd;
  if (in.options.add_generation_prompt && !after_tool) out += kAssistant;
  return out;
}

std::string RenderDeepseekR1(const RenderInput& in) {
  constexpr std::string_view kKind = "deepseek-r1";
  bool call_written = false, after_tool = false, output_first = true;
  std::string out = StrCat(in.bos, SystemPrompt(in.messages, kKind));
  for (size_t index = 0; index < in.messages.size(); ++index) {
    const ChatMessage& m = in.messages[index];
    if (m.role == "user") {
      after_tool = false;
      out += StrCat(kUser, Text(m, kKind, index));
    }
    const bool has_calls = !m.tool_calls.is_null();  // "'tool_calls' in message"
    if (m.role == "assistant" && has_calls) {
      after_tool = false;
      for (const Json& call : m.tool_calls) {
        if (!call_written) {
          // Null content and "" render alike.
          out += StrCat(kAssistant, m.content, kCallsBegin, CallText(call, kKind, index, m));
          call_written = true;
        } else {
          out += StrCat("\n", CallText(call, kKind, index, m));
        }
      }
      out += StrCat(kCallsEnd, kEndOfSentence);
    }
    if (m.role == "assistant" && !has_calls) {
      if (after_tool) {
        out += StrCat(kOutputsEnd, Text(m, kKind, index), kEndOfSentence);
        after_tool = false;
      } else {
        if (m.content_null) Raise(kKind, "argument of type 'NoneType' is not iterable (null content)", index, m);
        out += StrCat(kAssistant, AfterLastThinkEnd(m.content), kEndOfSentence);
      }
    }
    if (m.role == "tool") {
      after_tool = true;
      AppendToolOutput(m, kKind, index, /*newline_between=*/false, output_first, out);
    }
  }
  if (after_tool) out += kOutputsEnd;
  if (in.options.add_generation_prompt && !after_tool) out += StrCat(kAssistant, "<think>\n");
  return out;
}

}  // namespace tessera::chat_internal
