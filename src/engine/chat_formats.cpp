// The four family renderers (declared in engine/chat_formats.h). Each follows its Hub template
// (tests/data/chat_templates/<kind>.jinja) statement by statement, in the same order, so that
// the output and the errors are the template's; comments quote the template where it is not
// obvious. Jinja's whitespace control (trim_blocks, lstrip_blocks, "{%-") leaves no text between
// the statements of these templates, so only the quoted strings appear in the output.
#include <optional>

#include "core/error.h"
#include "engine/chat_formats.h"
#include "io/json_util.h"

namespace tessera::chat_internal {
namespace {

using Json = nlohmann::ordered_json;

constexpr std::string_view kQwenDefaultSystem = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";
constexpr std::string_view kQwenToolsIntro =
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>";
constexpr std::string_view kQwenToolsOutro =
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
    "<args-json-object>}\n</tool_call><|im_end|>\n";

// The raise_exception messages of the templates, quoted in tessera's errors.
constexpr std::string_view kLlamaNoFirstUser =
    "Cannot put tools in the first user message when there's no first user message!";
constexpr std::string_view kLlamaSingleCall = "This model only supports single tool-calls at once!";
constexpr std::string_view kMistralAlternation =
    "After the optional system message, conversation roles must alternate user/assistant/user/assistant/...";
constexpr std::string_view kMistralIds = "Tool call IDs should be alphanumeric strings with length 9!";
constexpr std::string_view kMistralRoles =
    "Only user and assistant roles are supported, with the exception of an initial optional system message!";

// A string member of a tool call's function object, required where the template concatenates it.
const std::string& StringField(const Json& object, const char* key, std::string_view kind, size_t index,
                               const ChatMessage& m) {
  const auto it = object.find(key);
  if (it == object.end() || !it->is_string()) {
    Raise(kind, StrCat("a tool call needs a string \"", key, "\""), index, m);
  }
  return it->get_ref<const std::string&>();
}

const Json& ObjectField(const Json& object, const char* key, std::string_view kind, size_t index,
                        const ChatMessage& m) {
  const auto it = object.find(key);
  if (it == object.end() || !it->is_object()) {
    Raise(kind, StrCat("a tool call needs an object \"", key, "\""), index, m);
  }
  return *it;
}

const Json& Field(const Json& object, const char* key, std::string_view kind, size_t index, const ChatMessage& m) {
  const auto it = object.find(key);
  if (it == object.end()) Raise(kind, StrCat("a tool call needs \"", key, "\""), index, m);
  return *it;
}

bool HasCalls(const ChatMessage& m) { return !m.tool_calls.is_null(); }         // "is defined and not none"
bool HasSomeCalls(const ChatMessage& m) { return !m.tool_calls.empty(); }      // truthy (null is empty)
bool HasSomeTools(const ChatOptions& o) { return o.tools.is_array() && !o.tools.empty(); }

// Qwen's tool results: consecutive "tool" messages share one user turn.
void AppendQwenToolResult(std::span<const ChatMessage> messages, size_t i, std::string& out) {
  if (i == 0 || messages[i - 1].role != "tool") out += "<|im_start|>user";
  out += "\n<tool_response>\n";
  out += messages[i].content;
  out += "\n</tool_response>";
  if (i + 1 == messages.size() || messages[i + 1].role != "tool") out += "<|im_end|>\n";
}

// "{%- if tool_call.function %}{%- set tool_call = tool_call.function %}" (Qwen3; Qwen2.5 tests
// "is defined"): the OpenAI wrapper, or the call itself in the bare {name, arguments} form.
const Json& QwenFunction(const Json& call, bool truthy_test) {
  const auto it = call.find("function");
  if (it == call.end()) return call;
  if (truthy_test && (it->is_null() || (it->is_object() && it->empty()))) return call;
  return *it;
}

}  // namespace

void Raise(std::string_view kind, std::string_view message, size_t index, const ChatMessage& m) {
  Fail(kind, " chat template: ", message, " (message ", index, ", role ", Quote(m.role), ")");
}

std::string RenderLlama31(const RenderInput& in) {
  constexpr std::string_view kKind = "llama3.1";
  std::span<const ChatMessage> messages = in.messages;
  const bool has_tools = !in.options.tools.is_null();  // "tools is not none"
  std::string out(in.bos);
  std::string_view system_message;
  if (messages[0].role == "system") {
    system_message = PyStrip(messages[0].content);
    messages = messages.subspan(1);
  }
  out += "<|start_header_id|>system<|end_header_id|>\n\n";
  if (has_tools) out += "Environment: ipython\n";
  out += "Cutting Knowledge Date: December 2023\n";
  out += "Today Date: ";
  out += in.options.date_string.empty() ? std::string_view("26 Jul 2024") : std::string_view(in.options.date_string);
  out += "\n\n";
  out += system_message;
  out += "<|eot_id|>";
  if (has_tools) {
    // The declarations go into the first message left, whatever its role.
    if (messages.empty()) Fail(kKind, " chat template: ", kLlamaNoFirstUser);
    const std::string_view first_user_message = PyStrip(messages[0].content);
    messages = messages.subspan(1);
    out += "<|start_header_id|>user<|end_header_id|>\n\n";
    out += "Given the following functions, please respond with a JSON for a function call with its proper "
           "arguments that best answers the given prompt.\n\n";
    out += "Respond in the format {\"name\": function name, \"parameters\": dictionary of argument name and its "
           "value}.Do not use variables.\n\n";
    for (const Json& tool : in.options.tools) {
      out += PyJsonDumps(tool, 4);
      out += "\n\n";
    }
    out += first_user_message;
    out += "<|eot_id|>";
  }
  const size_t offset = in.messages.size() - messages.size();
  for (size_t k = 0; k < messages.size(); ++k) {
    const ChatMessage& m = messages[k];
    const size_t index = offset + k;
    if (!(m.role == "ipython" || m.role == "tool" || HasCalls(m))) {
      out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n";
      out += PyStrip(m.content);
      out += "<|eot_id|>";
    } else if (HasCalls(m)) {  // "'tool_calls' in message"
      if (m.tool_calls.size() != 1) Raise(kKind, kLlamaSingleCall, index, m);
      const Json& function = ObjectField(m.tool_calls[0], "function", kKind, index, m);
      out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
      out += "{\"name\": \"" + StringField(function, "name", kKind, index, m) + "\", ";
      out += "\"parameters\": ";
      out += PyJsonDumps(Field(function, "arguments", kKind, index, m));
      out += "}<|eot_id|>";  // <|eom_id|> only with builtin_tools, which tessera does not pass
    } else {
      // "message.content is mapping or message.content is iterable": true for a string too.
      out += "<|start_header_id|>ipython<|end_header_id|>\n\n";
      out += PyJsonDumps(Json(m.content));
      out += "<|eot_id|>";
    }
  }
  if (in.options.add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

std::string RenderMistralV03(const RenderInput& in) {
  constexpr std::string_view kKind = "mistral-v0.3";
  std::span<const ChatMessage> loop_messages = in.messages;
  std::optional<std::string_view> system_message;
  if (loop_messages[0].role == "system") {
    system_message = loop_messages[0].content;
    loop_messages = loop_messages.subspan(1);
  }
  const size_t offset = in.messages.size() - loop_messages.size();
  const bool has_tools = !in.options.tools.is_null();
  const ChatMessage* last_user = nullptr;  // user_messages[-1]
  for (const ChatMessage& m : loop_messages) {
    if (m.role == "user") last_user = &m;
  }
  // The alternation check runs over the whole conversation before anything is rendered.
  size_t turn = 0;
  for (size_t k = 0; k < loop_messages.size(); ++k) {
    const ChatMessage& m = loop_messages[k];
    if (m.role == "tool" || m.role == "tool_results" || HasCalls(m)) continue;
    if ((m.role == "user") != (turn % 2 == 0)) Raise(kKind, kMistralAlternation, offset + k, m);
    ++turn;
  }
  std::string out(in.bos);
  for (size_t k = 0; k < loop_messages.size(); ++k) {
    const ChatMessage& m = loop_messages[k];
    const size_t index = offset + k;
    if (m.role == "user") {
      // "message == user_messages[-1]" compares by value: an earlier equal message gets them too.
      if (has_tools && m == *last_user) {
        out += "[AVAILABLE_TOOLS] [";
        for (size_t t = 0; t < in.options.tools.size(); ++t) {
          const Json& tool = in.options.tools[t];
          const auto function = tool.find("function");
          if (function == tool.end() || !function->is_object()) {
            Fail(kKind, " chat template: tool ", t, " has no \"function\" object");
          }
          out += "{\"type\": \"function\", \"function\": {";
          bool first = true;
          for (const auto& [key, value] : function->items()) {
            if (key == "return") continue;
            if (!first) out += ", ";
            first = false;
            // Strings are inserted between quotes as they are (not JSON-escaped), other values
            // through tojson.
            out += '"';
            out += key;
            out += "\": ";
            if (value.is_string()) {
              out += '"';
              out += value.get_ref<const std::string&>();
              out += '"';
            } else {
              out += PyJsonDumps(value);
            }
          }
          out += "}}";
          out += t + 1 < in.options.tools.size() ? ", " : "]";
        }
        out += "[/AVAILABLE_TOOLS]";
      }
      out += "[INST] ";
      if (k + 1 == loop_messages.size() && system_message) {
        out += *system_message;
        out += "\n\n";
      }
      out += m.content;
      out += "[/INST]";
    } else if (HasCalls(m)) {
      out += "[TOOL_CALLS] [";
      for (size_t c = 0; c < m.tool_calls.size(); ++c) {
        const Json& call = m.tool_calls[c];
        std::string function = PyJsonDumps(ObjectField(call, "function", kKind, index, m));
        function.pop_back();  // "out[:-1]": the closing brace
        out += function;
        const auto id = call.find("id");
        if (id == call.end() || !id->is_string() || CodePointCount(id->get_ref<const std::string&>()) != 9) {
          Raise(kKind, kMistralIds, index, m);
        }
        out += ", \"id\": \"";
        out += id->get_ref<const std::string&>();
        out += "\"}";
        if (c + 1 < m.tool_calls.size()) {
          out += ", ";
        } else {
          out += ']';
          out += in.eos;
        }
      }
    } else if (m.role == "assistant") {
      out += " ";
      out += PyStrip(m.content);
      out += in.eos;
    } else if (m.role == "tool_results" || m.role == "tool") {
      out += "[TOOL_RESULTS] {\"content\": " + m.content + ", ";
      if (CodePointCount(m.tool_call_id) != 9) Raise(kKind, kMistralIds, index, m);
      out += "\"call_id\": \"" + m.tool_call_id + "\"}[/TOOL_RESULTS]";
    } else {
      Raise(kKind, kMistralRoles, index, m);
    }
  }
  return out;  // the template has no generation prompt: the prompt ends with [/INST]
}

std::string RenderQwen25(const RenderInput& in) {
  constexpr std::string_view kKind = "qwen2.5";
  const std::span<const ChatMessage> messages = in.messages;
  const bool has_system = messages[0].role == "system";
  std::string out;
  if (HasSomeTools(in.options)) {  // "{%- if tools %}": an empty list is false
    out += "<|im_start|>system\n";
    out += has_system ? std::string_view(messages[0].content) : kQwenDefaultSystem;
    out += "\n\n";
    out += kQwenToolsIntro;
    for (const Json& tool : in.options.tools) {
      out += "\n";
      out += PyJsonDumps(tool);
    }
    out += kQwenToolsOutro;
  } else {
    out += "<|im_start|>system\n";
    out += has_system ? std::string_view(messages[0].content) : kQwenDefaultSystem;
    out += "<|im_end|>\n";
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "user" || (m.role == "system" && i != 0) || (m.role == "assistant" && !HasSomeCalls(m))) {
      out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
    } else if (m.role == "assistant") {
      out += "<|im_start|>assistant";
      if (!m.content.empty()) out += "\n" + m.content;
      for (const Json& call : m.tool_calls) {
        const Json& function = QwenFunction(call, /*truthy_test=*/false);
        if (!function.is_object()) Raise(kKind, "a tool call's \"function\" must be an object", i, m);
        out += "\n<tool_call>\n{\"name\": \"" + StringField(function, "name", kKind, i, m) + "\", \"arguments\": ";
        out += PyJsonDumps(Field(function, "arguments", kKind, i, m));
        out += "}\n</tool_call>";
      }
      out += "<|im_end|>\n";
    } else if (m.role == "tool") {
      AppendQwenToolResult(messages, i, out);
    }
    // Any other role (and the first system message, rendered above) adds nothing.
  }
  if (in.options.add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

std::string RenderQwen3(const RenderInput& in) {
  constexpr std::string_view kKind = "qwen3";
  const std::span<const ChatMessage> messages = in.messages;
  const bool has_system = messages[0].role == "system";
  std::string out;
  if (HasSomeTools(in.options)) {
    out += "<|im_start|>system\n";
    if (has_system) out += messages[0].content + "\n\n";
    out += kQwenToolsIntro;
    for (const Json& tool : in.options.tools) {
      out += "\n";
      out += PyJsonDumps(tool);
    }
    out += kQwenToolsOutro;
  } else if (has_system) {
    out += "<|im_start|>system\n" + messages[0].content + "<|im_end|>\n";
  }
  // The last user message that is a real query, not a <tool_response> wrapper; the messages
  // after it are the turn being answered and keep their reasoning.
  size_t last_query_index = messages.size() - 1;
  for (size_t k = messages.size(); k-- > 0;) {
    const std::string& c = messages[k].content;
    const bool wrapper = c.starts_with("<tool_response>") && c.ends_with("</tool_response>");
    if (messages[k].role == "user" && !wrapper) {
      last_query_index = k;
      break;
    }
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "user" || (m.role == "system" && i != 0)) {
      out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
    } else if (m.role == "assistant") {
      std::string_view content = m.content;
      std::string_view reasoning;
      if (m.reasoning) {
        reasoning = *m.reasoning;
      } else if (const size_t close = content.find("</think>"); close != std::string_view::npos) {
        // content.split('</think>')[-1].lstrip('\n') and
        // content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n')
        const std::string_view before = RstripNewlines(content.substr(0, close));
        const size_t open = before.rfind("<think>");
        reasoning = LstripNewlines(open == std::string_view::npos ? before : before.substr(open + 7));
        content = LstripNewlines(content.substr(content.rfind("</think>") + 8));
      }
      out += "<|im_start|>assistant\n";
      if (i > last_query_index && (i + 1 == messages.size() || !reasoning.empty())) {
        out += "<think>\n";
        out += StripNewlines(reasoning);
        out += "\n</think>\n\n";
        out += LstripNewlines(content);
      } else {
        out += content;
      }
      for (size_t c = 0; c < m.tool_calls.size(); ++c) {
        if (c > 0 || !content.empty()) out += "\n";
        const Json& function = QwenFunction(m.tool_calls[c], /*truthy_test=*/true);
        if (!function.is_object()) Raise(kKind, "a tool call's \"function\" must be an object", i, m);
        out += "<tool_call>\n{\"name\": \"" + StringField(function, "name", kKind, i, m) + "\", \"arguments\": ";
        const Json& arguments = Field(function, "arguments", kKind, i, m);
        out += arguments.is_string() ? arguments.get<std::string>() : PyJsonDumps(arguments);  // strings as they are
        out += "}\n</tool_call>";
      }
      out += "<|im_end|>\n";
    } else if (m.role == "tool") {
      AppendQwenToolResult(messages, i, out);
    }
  }
  if (in.options.add_generation_prompt) {
    out += "<|im_start|>assistant\n";
    if (!in.options.enable_thinking) out += "<think>\n\n</think>\n\n";
  }
  return out;
}

}  // namespace tessera::chat_internal
