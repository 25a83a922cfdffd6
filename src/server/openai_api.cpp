#include "server/openai_api.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "io/json_util.h"
#include "engine/think_splitter.h"
#include "server/batch_engine.h"
#include "server/structured_output.h"

namespace tessera {

using json = ApiJson;

ApiError::ApiError(int status, std::string message, std::string param, std::string code)
    : std::runtime_error(std::move(message)), status_(status), param_(std::move(param)), code_(std::move(code)) {}

std::string ApiError::type() const {
  switch (status_) {
    case 401: return "authentication_error";
    case 404: return "not_found_error";
    case 429: return "rate_limit_error";
    default: return status_ >= 500 ? "server_error" : "invalid_request_error";
  }
}

json ApiError::Body() const {
  return {{"error",
           {{"message", what()},
            {"type", type()},
            {"param", param_.empty() ? json(nullptr) : json(param_)},
            {"code", code_.empty() ? json(nullptr) : json(code_)}}}};
}

namespace {

[[noreturn]] void Bad(const std::string& param, const std::string& message) { throw ApiError(400, message, param); }

const char* TypeName(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::string: return "a string";
    case json::value_t::array: return "an array";
    case json::value_t::object: return "an object";
    default: return "a number";
  }
}

// The field `key` of `body` when present and not null.
const json* Field(const json& body, const char* key) {
  const auto it = body.find(key);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

double Number(const json& body, const char* key, double fallback, double lo, double hi) {
  const json* v = Field(body, key);
  if (!v) return fallback;
  if (!v->is_number()) Bad(key, StrCat("'", key, "' must be a number, not ", TypeName(*v)));
  const double x = v->get<double>();
  if (!(x >= lo && x <= hi)) Bad(key, StrCat("'", key, "' ", x, " must lie in [", lo, ", ", hi, "]"));
  return x;
}

// An integer-valued JSON number (2, 2.0, 2e3) within [lo, hi]. Values past int64 (unsigned ones
// above 2^63 - 1, floats such as 1e37) are out of range, never converted: a float-to-integer
// conversion of a value that does not fit is undefined behaviour.
int64_t Integer(const json& body, const char* key, int64_t fallback, int64_t lo, int64_t hi) {
  const json* v = Field(body, key);
  if (!v) return fallback;
  auto out_of_range = [&](const std::string& shown) {
    Bad(key, StrCat("'", key, "' ", shown, " must lie in [", lo, ", ", hi, "]"));
  };
  int64_t x = 0;
  if (v->is_number_unsigned()) {
    const uint64_t u = v->get<uint64_t>();
    if (u > static_cast<uint64_t>(INT64_MAX)) out_of_range(std::to_string(u));
    x = static_cast<int64_t>(u);
  } else if (v->is_number_integer()) {
    x = v->get<int64_t>();
  } else if (v->is_number_float() && std::trunc(v->get<double>()) == v->get<double>()) {  // NaN is not
    const double d = v->get<double>();
    // [-2^63, 2^63): exactly the doubles that convert to int64_t (infinities fall outside).
    if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0)) out_of_range(StrCat(d));
    x = static_cast<int64_t>(d);
  } else {
    Bad(key, StrCat("'", key, "' must be an integer, not ", TypeName(*v)));
  }
  if (x < lo || x > hi) out_of_range(std::to_string(x));
  return x;
}

bool Boolean(const json& body, const char* key, bool fallback) {
  const json* v = Field(body, key);
  if (!v) return fallback;
  if (!v->is_boolean()) Bad(key, StrCat("'", key, "' must be a boolean, not ", TypeName(*v)));
  return v->get<bool>();
}

// A message's content: a string, null, or an array of text parts.
std::vector<std::string> ContentParts(const json& message, size_t index) {
  const std::string param = StrCat("messages[", index, "].content");
  const json* c = Field(message, "content");
  if (!c) return {};
  if (c->is_string()) return {c->get<std::string>()};
  if (!c->is_array()) Bad(param, StrCat("'", param, "' must be a string or an array of parts, not ", TypeName(*c)));
  std::vector<std::string> parts;
  for (size_t i = 0; i < c->size(); ++i) {
    const json& part = (*c)[i];
    const json* type = part.is_object() ? Field(part, "type") : nullptr;
    if (!type || !type->is_string()) Bad(param, StrCat("'", param, "[", i, "]' must be an object with a string 'type'"));
    if (*type != "text") {
      Bad(param, StrCat("'", param, "[", i, "]' is a '", type->get<std::string>(), "' part; this model reads text only"));
    }
    const json* t = Field(part, "text");
    if (!t || !t->is_string()) Bad(param, StrCat("'", param, "[", i, "].text' must be a string"));
    parts.push_back(t->get<std::string>());
  }
  return parts;
}

std::string Join(const std::vector<std::string>& parts, std::string_view joiner) {
  std::string text;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) text += joiner;
    text += parts[i];
  }
  return text;
}

std::string StringField(const json& message, const char* key, const std::string& param) {
  const json* v = Field(message, key);
  if (!v) return {};
  if (!v->is_string()) Bad(param, StrCat("'", param, "' must be a string, not ", TypeName(*v)));
  return v->get<std::string>();
}

// The assistant reasoning of an input message: vLLM's "reasoning" or llama.cpp's
// "reasoning_content" (serving.md §2: accept both).
std::optional<std::string> Reasoning(const json& message, size_t index) {
  for (const char* key : {"reasoning_content", "reasoning"}) {
    if (Field(message, key)) return StringField(message, key, StrCat("messages[", index, "].", key));
  }
  return std::nullopt;
}

RequestMessage MapMessage(const json& msg, size_t i) {
  if (!msg.is_object()) Bad("messages", StrCat("'messages[", i, "]' must be an object, not ", TypeName(msg)));
  const json* role = Field(msg, "role");
  if (!role || !role->is_string()) Bad("messages", StrCat("'messages[", i, "].role' must be a string"));
  RequestMessage m;
  m.role = role->get<std::string>();
  m.content = ContentParts(msg, i);
  m.content_null = Field(msg, "content") == nullptr;
  // Only an assistant message may leave its content out (or null): it may be all tool calls.
  if (m.content_null && m.role != "assistant") {
    Bad("messages", StrCat("'messages[", i, "].content' is required in a '", m.role.substr(0, 40), "' message"));
  }
  m.reasoning = Reasoning(msg, i);
  if (const json* calls = Field(msg, "tool_calls")) {
    if (!calls->is_array()) Bad("messages", StrCat("'messages[", i, "].tool_calls' must be an array"));
    for (const json& call : *calls) {
      const json* fn = call.is_object() ? Field(call, "function") : nullptr;
      const json* name = fn && fn->is_object() ? Field(*fn, "name") : nullptr;
      if (!name || !name->is_string()) Bad("messages", StrCat("'messages[", i, "].tool_calls' entries need function.name"));
    }
    m.tool_calls = *calls;
  }
  m.tool_call_id = StringField(msg, "tool_call_id", StrCat("messages[", i, "].tool_call_id"));
  m.name = StringField(msg, "name", StrCat("messages[", i, "].name"));
  return m;
}

ToolChoice MapToolChoice(const json* choice) {
  ToolChoice out;
  if (!choice) return out;
  if (choice->is_string()) {
    const std::string mode = choice->get<std::string>();
    if (mode == "none") out.mode = ToolChoice::kNone;
    else if (mode == "auto") out.mode = ToolChoice::kAuto;
    else if (mode == "required") out.mode = ToolChoice::kRequired;
    else Bad("tool_choice", StrCat("'tool_choice' ", Quote(mode), " is not one of none, auto, required, or a function"));
    return out;
  }
  const json* type = choice->is_object() ? Field(*choice, "type") : nullptr;
  const json* fn = type && *type == "function" ? Field(*choice, "function") : nullptr;
  const json* name = fn && fn->is_object() ? Field(*fn, "name") : nullptr;
  if (!name || !name->is_string()) {
    Bad("tool_choice",
        "'tool_choice' is not one of none, auto, required, or a function ({\"type\": \"function\", \"function\": {\"name\": …}})");
  }
  out.mode = ToolChoice::kFunction;
  out.function = name->get<std::string>();
  return out;
}

// harmony (gpt-oss.md §4, serving.md §6, vLLM's mapping): system and developer messages become
// the developer instructions; the reasoning effort goes into the system message.
std::vector<Message> HarmonyConversation(const ChatRequestData& request, std::string_view current_date) {
  SystemContent system;
  system.current_date = std::string(current_date);
  system.function_tools_note = !request.tools.empty();
  if (request.reasoning_effort) system.reasoning_effort = request.reasoning_effort;
  std::string instructions;
  std::vector<Message> turns;
  std::map<std::string, std::string> call_names;  // tool_call_id -> function name
  for (size_t i = 0; i < request.messages.size(); ++i) {
    const RequestMessage& msg = request.messages[i];
    const std::string text = Join(msg.content, "");
    if (msg.role == "system" || msg.role == "developer") {
      if (!instructions.empty()) instructions += "\n\n";
      instructions += text;
    } else if (msg.role == "user") {
      turns.push_back(Message::User(text));
    } else if (msg.role == "assistant") {
      if (msg.reasoning && !msg.reasoning->empty()) turns.push_back(Message::Assistant("analysis", *msg.reasoning));
      if (msg.tool_calls.is_array()) {
        for (const json& call : msg.tool_calls) {  // MapMessage checked function.name
          const json& fn = call["function"];
          const std::string name = fn["name"].get<std::string>();
          const json* args = Field(fn, "arguments");
          const std::string arguments = !args ? "{}" : args->is_string() ? args->get<std::string>() : args->dump();
          turns.push_back(Message::ToolCall("functions." + name, arguments, "json"));
          if (const json* id = Field(call, "id"); id && id->is_string()) call_names[id->get<std::string>()] = name;
        }
      }
      if (!text.empty()) turns.push_back(Message::Assistant("final", text));
    } else if (msg.role == "tool") {
      std::string name = msg.name;
      if (name.empty()) {
        const auto it = call_names.find(msg.tool_call_id);
        if (it == call_names.end()) {
          Bad("messages", StrCat("'messages[", i, "]' answers tool call '", msg.tool_call_id,
                                 "', which no earlier assistant message made"));
        }
        name = it->second;
      }
      turns.push_back(Message::ToolResult("functions." + name, text));
    } else {
      Bad("messages", StrCat("'messages[", i, "].role' '", msg.role, "' is not one of system, developer, user, assistant, tool"));
    }
  }
  std::vector<Message> conversation{Message::System(system)};
  if (!instructions.empty() || !request.tools.empty()) {
    Message developer = Message::Developer("");
    developer.content = RenderDeveloperContent(instructions, request.tools);
    conversation.push_back(std::move(developer));
  }
  for (Message& m : turns) conversation.push_back(std::move(m));
  return conversation;
}

std::vector<ChatMessage> TemplateConversation(const ChatRequestData& request) {
  std::vector<ChatMessage> out;
  for (const RequestMessage& msg : request.messages) {
    ChatMessage m;
    m.role = msg.role == "developer" ? "system" : msg.role;  // the family templates know "system"
    m.content = Join(msg.content, "\n");
    m.content_null = msg.content_null;
    m.reasoning = msg.reasoning;
    m.tool_calls = msg.tool_calls;
    m.tool_call_id = msg.tool_call_id;
    m.name = msg.name;
    out.push_back(std::move(m));
  }
  return out;
}

std::vector<int32_t> ModelEos(const Model& model) {
  std::vector<int32_t> ids;
  for (int64_t id : model.generation_config().eos_token_ids) ids.push_back(static_cast<int32_t>(id));
  for (int64_t id : model.config().eos_token_ids) {
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(static_cast<int32_t>(id));
  }
  return ids;
}

// The function tools a body declares, checked, whatever the tool choice.
std::vector<ToolDescription> DeclaredTools(const json* tools) {
  std::vector<ToolDescription> out;
  if (!tools) return out;
  if (!tools->is_array()) Bad("tools", "'tools' must be an array");
  if (tools->size() > kMaxTools) Bad("tools", StrCat("'tools' has ", tools->size(), " tools; at most ", kMaxTools, " are accepted"));
  for (size_t i = 0; i < tools->size(); ++i) {
    const std::string param = StrCat("tools[", i, "]");
    const json& tool = (*tools)[i];
    if (!tool.is_object()) Bad("tools", StrCat("'", param, "' must be an object, not ", TypeName(tool)));
    const json* type = Field(tool, "type");
    if (!type || *type != "function") Bad("tools", StrCat("'", param, ".type' must be \"function\": tessera serves function tools only"));
    const json* fn = Field(tool, "function");
    if (!fn || !fn->is_object()) Bad("tools", StrCat("'", param, ".function' must be an object"));
    ToolDescription d;
    d.name = StringField(*fn, "name", param + ".function.name");
    const bool valid = !d.name.empty() && d.name.size() <= 64 &&
                       std::all_of(d.name.begin(), d.name.end(), [](char c) {
                         return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
                       });
    if (!valid) Bad("tools", StrCat("'", param, ".function.name' '", d.name, "' must be 1 to 64 characters of a-z, A-Z, 0-9, _ and -"));
    d.description = StringField(*fn, "description", param + ".function.description");
    if (const json* p = Field(*fn, "parameters")) {
      if (!p->is_object()) Bad("tools", StrCat("'", param, ".function.parameters' must be an object (a JSON schema)"));
      d.parameters = *p;
    }
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace

ChatRequestData MapChatRequest(const json& body) {
  if (!body.is_object()) Bad("", StrCat("the request body must be a JSON object, not ", TypeName(body)));
  ChatRequestData r;
  const json* messages = Field(body, "messages");
  if (!messages) Bad("messages", "'messages' is required");
  if (!messages->is_array() || messages->empty()) Bad("messages", "'messages' must be a non-empty array");
  for (size_t i = 0; i < messages->size(); ++i) r.messages.push_back(MapMessage((*messages)[i], i));
  const json* tools = Field(body, "tools");
  r.tools = DeclaredTools(tools);
  r.tool_choice = MapToolChoice(Field(body, "tool_choice"));
  if (r.tool_choice.mode == ToolChoice::kRequired && r.tools.empty()) {
    Bad("tool_choice", "'tool_choice' \"required\" needs at least one tool in 'tools'");
  }
  if (r.tool_choice.mode == ToolChoice::kFunction &&
      std::none_of(r.tools.begin(), r.tools.end(), [&](const ToolDescription& t) { return t.name == r.tool_choice.function; })) {
    Bad("tool_choice", StrCat("'tool_choice' names function ", Quote(r.tool_choice.function), ", which 'tools' does not declare"));
  }
  // The family templates see the tools even with tool_choice "none" (vLLM's default); harmony
  // declares none then, and the reply is not read for calls.
  if (tools && !tools->empty()) r.tool_declarations = *tools;
  if (r.tool_choice.mode == ToolChoice::kNone) r.tools.clear();
  if (const json* effort = Field(body, "reasoning_effort")) {
    if (!effort->is_string()) Bad("reasoning_effort", "'reasoning_effort' must be a string");
    const std::string e = effort->get<std::string>();
    if (e != "low" && e != "medium" && e != "high") {
      Bad("reasoning_effort", StrCat("'reasoning_effort' '", e, "' is not supported by gpt-oss (low, medium, high)"));
    }
    r.reasoning_effort = ParseReasoningEffort(e);
  }
  if (const json* kwargs = Field(body, "chat_template_kwargs")) {
    if (!kwargs->is_object()) Bad("chat_template_kwargs", "'chat_template_kwargs' must be an object");
    r.enable_thinking = Boolean(*kwargs, "enable_thinking", true);
  }
  return r;
}

std::vector<Message> HarmonyMessages(const ChatRequestData& request, std::string_view current_date) {
  return HarmonyConversation(request, current_date);
}

// ---- ChatFormat ---------------------------------------------------------------------------------

const GrammarVocabulary* ChatFormat::grammar_vocabulary() const {
  if (!GrammarVocabulary::Available()) return nullptr;
  std::call_once(grammar_once_, [&] { grammar_ = std::make_unique<GrammarVocabulary>(*tokenizer_, model_vocab_); });
  return grammar_.get();
}

ChatFormat::ChatFormat(const Model& model, const Tokenizer& tokenizer, const std::string& chat_template)
    : tokenizer_(&tokenizer), model_vocab_(model.config().vocab_size) {
  text_stops_ = ModelEos(model);
  if (model.config().model_type == "gpt_oss") {
    if (!chat_template.empty()) Fail("--chat-template: gpt-oss speaks harmony (engine/harmony.h), not a Jinja template");
    harmony_ = std::make_unique<HarmonyEncoding>(tokenizer);
    chat_stops_ = harmony_->AssistantStopTokens();
    return;
  }
  if (!chat_template.empty()) {
    chat_template_ = ChatTemplate::FromOption(chat_template, model.path());
  } else {
    try {
      chat_template_ = ChatTemplate::FromModelDir(model.path());
    } catch (const Error& e) {
      warning_ = StrCat(e.what(), "; /v1/chat/completions is off (use --chat-template)");
      return;
    }
  }
  warning_ = chat_template_->warning();
  chat_stops_ = chat_template_->StopTokenIds(tokenizer, model.generation_config().eos_token_ids,
                                             model.config().eos_token_ids);
}

ToolCallFormat ChatFormat::tool_format() const {
  return chat_template_ ? ToolCallFormatOf(*chat_template_) : ToolCallFormat::kNone;
}

ReplyThinking ChatFormat::thinking(bool enable_thinking) const {
  return chat_template_ ? chat_template_->Thinking(enable_thinking) : ReplyThinking::kNone;
}

std::vector<int32_t> ChatFormat::RenderChat(const ChatRequestData& request) const {
  if (!has_chat()) {
    throw ApiError(400, "this model has no chat template tessera knows; use /v1/completions", "messages");
  }
  try {
    if (harmony_) return harmony_->RenderForCompletion(HarmonyConversation(request, {}));
    ChatOptions options;
    options.tools = request.tool_declarations;
    options.enable_thinking = request.enable_thinking;
    return chat_template_->RenderIds(*tokenizer_, TemplateConversation(request), options);
  } catch (const Error& e) {
    Bad("messages", e.what());  // the template's own checks (alternation, tool call ids, UTF-8)
  }
}

// ---- requests -----------------------------------------------------------------------------------

CompletionRequest ParseCompletionRequest(const json& body, bool chat, const ChatFormat& format,
                                         const SamplingParams& defaults) {
  if (!body.is_object()) Bad("", StrCat("the request body must be a JSON object, not ", TypeName(body)));
  CompletionRequest r;
  r.chat = chat;
  if (const json* model = Field(body, "model")) {
    if (!model->is_string()) Bad("model", "'model' must be a string");
    r.model = model->get<std::string>();
  }
  r.n = Integer(body, "n", 1, 1, 128);
  const ResponseFormat response_format = ParseResponseFormat(Field(body, "response_format"));
  if (const json* bias = Field(body, "logit_bias")) {
    if (!bias->is_object()) Bad("logit_bias", "'logit_bias' must be an object of token id -> bias");
    const int64_t vocab = format.tokenizer().vocab_size();
    for (const auto& [key, value] : bias->items()) {
      const bool digits = !key.empty() && key.size() <= 9 && key.find_first_not_of("0123456789") == std::string::npos;
      const int64_t id = digits ? std::stoll(key) : -1;
      if (id < 0 || id >= vocab) Bad("logit_bias", StrCat("'logit_bias' key ", Quote(key), " is not a token id in [0, ", vocab, ")"));
      if (!value.is_number() || !(value.get<double>() >= -100.0 && value.get<double>() <= 100.0)) {
        Bad("logit_bias", StrCat("'logit_bias' of token ", id, " must be a number in [-100, 100]"));
      }
      r.logit_bias.emplace_back(static_cast<int32_t>(id), value.get<float>());
    }
  }
  r.sampling = defaults;
  r.sampling.temperature = static_cast<float>(Number(body, "temperature", defaults.temperature, 0.0, 2.0));
  r.sampling.top_p = static_cast<float>(Number(body, "top_p", defaults.top_p, 0.0, 1.0));
  if (r.sampling.top_p <= 0.0f) Bad("top_p", "'top_p' must be greater than 0");
  r.sampling.top_k = Integer(body, "top_k", defaults.top_k, -1, 1 << 30);
  if (r.sampling.top_k < 0) r.sampling.top_k = 0;  // vLLM: -1 = off
  r.sampling.min_p = static_cast<float>(Number(body, "min_p", defaults.min_p, 0.0, 1.0));
  if (Field(body, "seed")) {
    r.sampling.seed = static_cast<uint64_t>(Integer(body, "seed", 0, INT64_MIN, INT64_MAX));
    r.seeded = true;
  }
  const int64_t max_tokens = Integer(body, "max_tokens", chat ? -1 : 16, 0, INT32_MAX);
  // max_completion_tokens (the newer name) wins over max_tokens on both routes, as in vLLM.
  r.max_tokens = Integer(body, "max_completion_tokens", max_tokens, 0, INT32_MAX);
  if (const json* stop = Field(body, "stop")) {
    if (stop->is_string()) {
      r.stop.push_back(stop->get<std::string>());
    } else if (stop->is_array()) {
      for (const json& s : *stop) {
        if (!s.is_string()) Bad("stop", "'stop' must be a string or an array of strings");
        r.stop.push_back(s.get<std::string>());
      }
    } else {
      Bad("stop", "'stop' must be a string or an array of strings");
    }
    if (r.stop.size() > 16) Bad("stop", "'stop' has more than 16 strings");
    std::erase_if(r.stop, [](const std::string& s) { return s.empty(); });
  }
  r.stream = Boolean(body, "stream", false);
  if (const json* so = Field(body, "stream_options")) {
    if (!so->is_object()) Bad("stream_options", "'stream_options' must be an object");
    if (!r.stream) Bad("stream_options", "'stream_options' is only allowed with 'stream': true");
    r.include_usage = Boolean(*so, "include_usage", false);
  }
  if (chat) {
    if (Boolean(body, "logprobs", false)) r.top_logprobs = static_cast<int>(Integer(body, "top_logprobs", 0, 0, 20));
    else if (Field(body, "top_logprobs")) Bad("top_logprobs", "'top_logprobs' needs 'logprobs': true");
    auto data = std::make_shared<const ChatRequestData>(MapChatRequest(body));
    CheckStructuredBudget(response_format, data->tools);
    r.prompt = format.RenderChat(*data);
    r.tools = !data->tools.empty();
    if (CheckReplyConstraint(response_format, data.get())) {
      r.grammar_param = response_format.kind == ResponseFormat::kText ? "tool_choice" : "response_format";
      r.build_grammar = [&format, response_format, data](const CompileLimits& limits) {
        return BuildReplyConstraint(format, response_format, data.get(), limits);
      };
    }
  } else {
    if (Field(body, "logprobs")) r.top_logprobs = static_cast<int>(Integer(body, "logprobs", 0, 0, 5));
    if (Boolean(body, "echo", false)) Bad("echo", "'echo' is not supported");
    if (Field(body, "suffix")) Bad("suffix", "'suffix' is not supported");
    if (Integer(body, "best_of", 1, 1, 128) != 1) Bad("best_of", "'best_of' must be 1");
    const json* prompt = Field(body, "prompt");
    if (!prompt) Bad("prompt", "'prompt' is required");
    const int32_t vocab = format.tokenizer().vocab_size();
    auto ids_of = [&](const json& list) {
      std::vector<int32_t> ids;
      for (const json& v : list) {
        if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= vocab) {
          Bad("prompt", StrCat("'prompt' token ids must be integers in [0, ", vocab, ")"));
        }
        ids.push_back(v.get<int32_t>());
      }
      return ids;
    };
    // A list of one prompt is that prompt.
    const json* one = prompt;
    if (prompt->is_array() && prompt->size() == 1 && ((*prompt)[0].is_string() || (*prompt)[0].is_array())) {
      one = &(*prompt)[0];
    }
    if (one->is_string()) {
      try {
        r.prompt = format.tokenizer().EncodeWithTemplate(one->get<std::string>());
      } catch (const Error& e) {
        Bad("prompt", e.what());
      }
    } else if (one != prompt || (prompt->is_array() && !prompt->empty() && (*prompt)[0].is_number())) {
      r.prompt = ids_of(*one);
    } else if (prompt->is_array() && prompt->size() > 1) {
      Bad("prompt", "'prompt' holds several prompts; send one per request");
    } else {
      Bad("prompt", "'prompt' must be a string, a list of token ids, or a list of one of those");
    }
    if (r.prompt.empty()) Bad("prompt", "'prompt' is empty");
    CheckStructuredBudget(response_format, {});
    if (CheckReplyConstraint(response_format, nullptr)) {
      r.grammar_param = "response_format";
      r.build_grammar = [&format, response_format](const CompileLimits& limits) {
        return BuildReplyConstraint(format, response_format, nullptr, limits);
      };
    }
  }
  return r;
}

// ---- replies ------------------------------------------------------------------------------------

namespace {

// Nine alphanumerics from the reply's id and the call's index: the length Mistral's template
// demands of the ids that clients send back, and unique within the server's replies.
std::string CallId(const std::string& reply_id, size_t index) {
  uint64_t h = 0xCBF29CE484222325ull;  // FNV-1a
  for (unsigned char c : StrCat(reply_id, "/", index)) h = (h ^ c) * 0x100000001B3ull;
  constexpr std::string_view kDigits = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
  std::string id;
  for (int i = 0; i < 9; ++i, h /= kDigits.size()) id += kDigits[h % kDigits.size()];
  return id;
}

}  // namespace

json ToolCallJson(const ToolCall& call, size_t index, const std::string& reply_id) {
  return {{"id", CallId(reply_id, index)},
          {"type", "function"},
          {"function", {{"name", call.name}, {"arguments", call.arguments}}}};
}

json ToolCallDeltaJson(const ToolCallDelta& delta, const std::string& reply_id) {
  if (delta.name.empty()) return {{"index", delta.index}, {"function", {{"arguments", delta.arguments}}}};
  return {{"index", delta.index},
          {"id", CallId(reply_id, delta.index)},
          {"type", "function"},
          {"function", {{"name", delta.name}, {"arguments", delta.arguments}}}};
}

ReplyParser::ReplyParser(const ChatFormat& format, bool chat, std::vector<int32_t> stop_tokens, bool tools)
    : format_(format), chat_(chat), stops_(std::move(stop_tokens)), decoder_(format.tokenizer()), tools_(tools) {
  if (chat_ && format.harmony()) harmony_ = std::make_unique<HarmonyParser>(*format.harmony_encoding());
  // Qwen3's reply may open <think> whether or not thinking was enabled (kMayOpen copes with both).
  if (chat_ && format.thinking() != ReplyThinking::kNone) think_ = std::make_unique<ThinkSplitter>(format.thinking());
  if (chat_ && tools_) {
    for (const std::string_view marker : ToolCallMarkerTokens(format.tool_format())) {
      if (const std::optional<int32_t> id = format.tokenizer().TokenId(marker)) tool_markers_.emplace_back(*id, marker);
    }
  }
}

void ReplyParser::OpenCall(size_t message, const std::string& recipient, Piece& piece) {
  call_message_ = message;
  constexpr std::string_view kNamespace = "functions.";
  std::string name = recipient.rfind(kNamespace, 0) == 0 && recipient.size() > kNamespace.size()
                         ? recipient.substr(kNamespace.size())
                         : recipient;
  piece.calls.push_back({calls_++, std::move(name), ""});
}

// harmony deltas -> reasoning (analysis), content (final, preambles) and, with tools, calls: a
// message with a recipient opens a call at its first content (or when it closes empty) and
// streams its content as the arguments.
void ReplyParser::AddHarmony(const std::vector<HarmonyDelta>& deltas, Piece& piece) {
  for (const HarmonyDelta& d : deltas) {
    if (tools_ && d.part == HarmonyPart::kToolCall) {
      if (d.message_index != call_message_) OpenCall(d.message_index, d.recipient, piece);
      if (piece.calls.empty() || piece.calls.back().index != calls_ - 1) piece.calls.push_back({calls_ - 1, "", ""});
      piece.calls.back().arguments += d.text;
    } else {
      (d.part == HarmonyPart::kAnalysis ? piece.reasoning : piece.content) += d.text;
    }
  }
  const std::vector<Message>& messages = harmony_->messages();
  for (; messages_seen_ < messages.size(); ++messages_seen_) {
    const Message& m = messages[messages_seen_];
    if (tools_ && m.IsToolCall() && messages_seen_ != call_message_) OpenCall(messages_seen_, m.recipient, piece);
  }
}

ReplyParser::Piece ReplyParser::Add(int32_t token) {
  Piece piece;
  if (harmony_) {
    AddHarmony(harmony_->Process(token), piece);
    return piece;
  }
  const Tokenizer& tokenizer = format_.tokenizer();
  if (std::find(stops_.begin(), stops_.end(), token) != stops_.end()) return piece;
  std::string text;
  const auto marker = std::find_if(tool_markers_.begin(), tool_markers_.end(),
                                   [&](const auto& entry) { return entry.first == token; });
  if (marker != tool_markers_.end()) {
    // For the tool-call parser behind; what the decoder holds comes first.
    text = decoder_.Flush() + std::string(marker->second);
  } else if (!tokenizer.Contains(token) || tokenizer.IsSpecial(token)) {
    return piece;  // skip_special_tokens
  } else {
    text = decoder_.Add(token);
  }
  if (think_) {
    auto [reasoning, content] = think_->Add(text);
    piece.reasoning = std::move(reasoning);
    piece.content = std::move(content);
  } else {
    piece.content = std::move(text);
  }
  return piece;
}

ReplyParser::Piece ReplyParser::Finish() {
  Piece piece;
  if (harmony_) {
    AddHarmony(harmony_->Finish(), piece);
    return piece;
  }
  const std::string rest = decoder_.Flush();
  if (think_) {
    auto [r1, c1] = think_->Add(rest);
    auto [r2, c2] = think_->Finish();
    piece.reasoning = r1 + r2;
    piece.content = c1 + c2;
  } else {
    piece.content = rest;
  }
  return piece;
}

std::string StopStrings::Add(const std::string& text) {
  if (stopped_) return {};
  pending_ += text;
  if (stops_.empty()) return std::exchange(pending_, {});
  size_t first = std::string::npos;
  for (const std::string& s : stops_) first = std::min(first, pending_.find(s));
  if (first != std::string::npos) {
    stopped_ = true;
    std::string out = pending_.substr(0, first);
    pending_.clear();
    return out;
  }
  // Hold back the longest tail that begins some stop string.
  size_t keep = 0;
  for (const std::string& s : stops_) {
    for (size_t n = std::min(pending_.size(), s.size() - 1); n > keep; --n) {
      if (pending_.compare(pending_.size() - n, n, s, 0, n) == 0) {
        keep = n;
        break;
      }
    }
  }
  // Never split a UTF-8 character: move the cut back to a character boundary.
  size_t cut = pending_.size() - keep;
  while (cut > 0 && cut < pending_.size() && (static_cast<unsigned char>(pending_[cut]) & 0xC0) == 0x80) --cut;
  std::string out = pending_.substr(0, cut);
  pending_.erase(0, cut);
  return out;
}

std::string StopStrings::Finish() { return stopped_ ? std::string() : std::exchange(pending_, {}); }

namespace {

// The text of one token; a token that is part of a UTF-8 character shows U+FFFD, as in vLLM.
std::string TokenText(const Tokenizer& tokenizer, int32_t token) {
  return tokenizer.Contains(token) ? tokenizer.Decode(std::span<const int32_t>(&token, 1)) : std::string();
}

}  // namespace

json TokenLogprobJson(const Tokenizer& tokenizer, int32_t token, float logprob) {
  json byte_list = json::array();
  if (tokenizer.Contains(token)) {
    for (unsigned char c : tokenizer.TokenBytes(token)) byte_list.push_back(static_cast<int>(c));
  }
  return {{"token", TokenText(tokenizer, token)}, {"logprob", logprob}, {"bytes", byte_list}};
}

ReplyState::ReplyState(const ChatFormat& format, bool chat, std::vector<int32_t> stop_tokens, std::vector<std::string> stop,
                       bool tools)
    : parser_(format, chat, std::move(stop_tokens), tools),
      stop_(std::move(stop)),
      tool_calls_(chat && tools ? format.tool_format() : ToolCallFormat::kNone) {}

ReplyParser::Piece ReplyState::Filter(ReplyParser::Piece piece, bool last) {
  if (stop_.stopped()) return {};
  reasoning_ += piece.reasoning;
  ToolCallParser::Output parsed = tool_calls_.Add(piece.content);
  if (last) {
    ToolCallParser::Output rest = tool_calls_.Finish();
    parsed.content += rest.content;
    for (ToolCall& c : rest.calls) parsed.calls.push_back(std::move(c));
  }
  // The families' calls come out whole: one delta each, after harmony's (never both).
  for (ToolCall& c : parsed.calls) {
    piece.calls.push_back({calls_.size() + piece.calls.size(), std::move(c.name), std::move(c.arguments)});
  }
  piece.content = stop_.Add(parsed.content);
  if (last && !stop_.stopped()) piece.content += stop_.Finish();
  content_ += piece.content;
  for (const ToolCallDelta& d : piece.calls) {
    if (!d.name.empty()) calls_.push_back({d.name, ""});
    calls_[d.index].arguments += d.arguments;
  }
  return piece;
}

ReplyParser::Piece ReplyState::Add(int32_t token) { return Filter(parser_.Add(token), false); }
ReplyParser::Piece ReplyState::Finish() { return Filter(parser_.Finish(), true); }

json ReplyState::LogprobsEntry(const Tokenizer& tokenizer, const TokenEvent& event, bool chat, int top) {
  if (chat) {
    json entry = TokenLogprobJson(tokenizer, event.token, event.chosen.logprob);
    json alternatives = json::array();
    for (const TokenLogprob& t : event.top) alternatives.push_back(TokenLogprobJson(tokenizer, t.token, t.logprob));
    entry["top_logprobs"] = alternatives;
    chat_logprobs_.push_back(entry);
    return {{"content", json::array({entry})}};
  }
  const std::string text = TokenText(tokenizer, event.token);
  json alternatives = json::object();
  for (const TokenLogprob& t : event.top) alternatives[TokenText(tokenizer, t.token)] = t.logprob;
  const int64_t offset = static_cast<int64_t>(content_.size());
  completion_logprobs_["tokens"].push_back(text);
  completion_logprobs_["token_logprobs"].push_back(event.chosen.logprob);
  completion_logprobs_["top_logprobs"].push_back(top > 0 ? alternatives : json(nullptr));
  completion_logprobs_["text_offset"].push_back(offset);
  return {{"tokens", {text}},
          {"token_logprobs", {event.chosen.logprob}},
          {"top_logprobs", {top > 0 ? alternatives : json(nullptr)}},
          {"text_offset", {offset}}};
}

}  // namespace tessera
