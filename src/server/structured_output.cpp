#include "server/structured_output.h"

#include <set>

#include "core/error.h"
#include "engine/harmony.h"
#include "engine/tool_calls.h"
#include "io/json_util.h"

namespace tessera {
namespace {

using json = ApiJson;

[[noreturn]] void Bad(const std::string& param, const std::string& message) { throw ApiError(400, message, param); }

// ---- schema features ----------------------------------------------------------------------------

const std::set<std::string> kUnenforced = {"not", "if", "then", "else", "dependentRequired", "dependentSchemas",
                                           "dependencies", "contains", "minContains", "maxContains", "oneOf"};
const std::set<std::string> kFormats = {"email", "date", "time", "date-time", "duration", "ipv6", "hostname",
                                        "uuid", "uri", "uri-reference", "uri-template", "json-pointer",
                                        "relative-json-pointer"};
// (Not "ipv4": the engine's pattern allows leading zeros, "0.2.0.099", which validators refuse.)

[[noreturn]] void Unsupported(const std::string& feature, const std::string& where, const std::string& why = {}) {
  Bad("response_format", StrCat("the JSON schema feature '", feature, "' at ", where, " is not supported",
                                why.empty() ? std::string() : StrCat(" (", why, ")"),
                                ": the grammar could not guarantee a valid reply"));
}

// The schema and every schema inside it. Depth is bounded by the parser (kMaxJsonDepth).
void CheckSchemaAt(const json& schema, const std::string& where) {
  if (schema.is_boolean()) return;
  if (!schema.is_object()) Bad("response_format", StrCat("the JSON schema at ", where, " must be an object or a boolean"));
  for (const auto& [key, value] : schema.items()) {
    if (kUnenforced.count(key)) {
      Unsupported(key, where, key == "oneOf" ? "use anyOf" : std::string());
    }
    if (key == "uniqueItems" && value != false) Unsupported(key, where);
    if (key == "allOf" && (!value.is_array() || value.size() > 1)) Unsupported(key, where, "more than one schema");
    if (key == "multipleOf") {
      const json* type = schema.contains("type") ? &schema["type"] : nullptr;
      if (!value.is_number_integer() || !type || *type != "integer") Unsupported(key, where, "only an integer on type integer");
    }
    if (key == "$ref" && (!value.is_string() || value.get<std::string>().rfind('#', 0) != 0)) {
      Unsupported(key, where, "only references inside the schema ('#/...')");
    }
    if (key == "format" && (!value.is_string() || !kFormats.count(value.get<std::string>()))) {
      Unsupported(StrCat("format ", value.dump()), where);
    }
    if ((key == "minLength" || key == "maxLength") && (schema.contains("pattern") || schema.contains("format"))) {
      Unsupported(key, where, "together with pattern or format");
    }
  }
  for (const char* key : {"items", "additionalProperties", "propertyNames", "unevaluatedItems", "unevaluatedProperties"}) {
    if (schema.contains(key) && (schema[key].is_object() || schema[key].is_boolean())) {
      CheckSchemaAt(schema[key], StrCat(where, ".", key));
    }
  }
  for (const char* key : {"properties", "patternProperties", "$defs", "definitions"}) {
    if (!schema.contains(key)) continue;
    if (!schema[key].is_object()) Bad("response_format", StrCat("'", where, ".", key, "' must be an object"));
    for (const auto& [name, sub] : schema[key].items()) CheckSchemaAt(sub, StrCat(where, ".", key, ".", name));
  }
  for (const char* key : {"anyOf", "allOf", "prefixItems"}) {
    if (!schema.contains(key)) continue;
    if (!schema[key].is_array()) Bad("response_format", StrCat("'", where, ".", key, "' must be an array"));
    for (size_t i = 0; i < schema[key].size(); ++i) CheckSchemaAt(schema[key][i], StrCat(where, ".", key, "[", i, "]"));
  }
}

// ---- structural tags ----------------------------------------------------------------------------

json Const(std::string text) { return {{"type", "const_string"}, {"value", std::move(text)}}; }
json Token(int32_t id) { return {{"type", "token"}, {"token", id}}; }
json Sequence(json elements) { return {{"type", "sequence"}, {"elements", std::move(elements)}}; }
// Compact JSON (GrammarVocabulary::JsonSchemaEbnf) rather than the tag's own json_schema format.
json Schema(const json& schema) {
  return {{"type", "grammar"}, {"grammar", GrammarVocabulary::JsonSchemaEbnf(DumpJson(schema))}};
}
// Reasoning before a constrained answer: free text, at most kReasoningTokens tokens, so that a
// model that would reason forever still reaches the answer.
constexpr int kReasoningTokens = 512;
json Reasoning() { return {{"type", "any_text"}, {"max_tokens", kReasoningTokens}}; }

// One call of one of `tools` as a JSON object {"name": NAME, ARGS_KEY: arguments}.
json CallSchema(const std::vector<ToolDescription>& tools, const ToolChoice& choice, const char* args_key) {
  json variants = json::array();
  for (const ToolDescription& tool : tools) {
    if (choice.mode == ToolChoice::kFunction && tool.name != choice.function) continue;
    json args = tool.parameters ? *tool.parameters : json{{"type", "object"}};
    variants.push_back({{"type", "object"},
                        {"properties", {{"name", {{"const", tool.name}}}, {args_key, args}}},
                        {"required", {"name", args_key}},
                        {"additionalProperties", false}});
  }
  return variants.size() == 1 ? variants[0] : json{{"anyOf", variants}};
}

// harmony: an optional analysis message, then the message that carries the answer or the call.
json HarmonyReplyTag(const HarmonyTokens& t, json rest) {
  json analysis = Sequence({Token(t.channel), Const("analysis"),
                            {{"type", "tag"}, {"begin", Token(t.message)}, {"content", Reasoning()}, {"end", Token(t.end)}},
                            Token(t.start), Const("assistant")});
  json elements = json::array({{{"type", "optional"}, {"content", analysis}}});
  for (json& e : rest) elements.push_back(std::move(e));
  return Sequence(std::move(elements));
}

}  // namespace

ResponseFormat ParseResponseFormat(const json* field) {
  ResponseFormat out;
  if (!field) return out;
  const json* type = field->is_object() && field->contains("type") ? &(*field)["type"] : nullptr;
  if (!type || !type->is_string()) Bad("response_format", "'response_format' must be an object with a string 'type'");
  const std::string kind = type->get<std::string>();
  if (kind == "text") return out;
  if (kind == "json_object") {
    out.kind = ResponseFormat::kJsonObject;
    out.schema = {{"type", "object"}};
    return out;
  }
  if (kind != "json_schema") {
    Bad("response_format", StrCat("'response_format' type ", Quote(kind), " is not one of text, json_object, json_schema"));
  }
  const json* spec = field->contains("json_schema") ? &(*field)["json_schema"] : nullptr;
  if (!spec || !spec->is_object()) Bad("response_format", "'response_format.json_schema' must be an object");
  if (spec->contains("strict") && !(*spec)["strict"].is_boolean()) {
    Bad("response_format", "'response_format.json_schema.strict' must be a boolean");
  }
  if (spec->contains("name") && !(*spec)["name"].is_string()) {
    Bad("response_format", "'response_format.json_schema.name' must be a string");
  }
  // OpenAI's field is "schema"; some clients send the schema under "json_schema" itself.
  const json* schema = spec->contains("schema") ? &(*spec)["schema"] : nullptr;
  if (!schema || !schema->is_object()) Bad("response_format", "'response_format.json_schema.schema' must be an object");
  CheckSchemaSupported(*schema, "response_format.json_schema.schema");
  out.kind = ResponseFormat::kJsonSchema;
  out.schema = *schema;
  return out;
}

void CheckSchemaSupported(const json& schema, const std::string& where) { CheckSchemaAt(schema, where); }

bool CheckReplyConstraint(const ResponseFormat& response, const ChatRequestData* chat) {
  const bool forced = chat && (chat->tool_choice.mode == ToolChoice::kRequired ||
                               chat->tool_choice.mode == ToolChoice::kFunction);
  if (response.kind == ResponseFormat::kText && !forced) return false;
  if (forced && response.kind != ResponseFormat::kText) {
    Bad("response_format", "'response_format' cannot be combined with 'tool_choice' \"required\" or a named function");
  }
  if (forced) {
    for (const ToolDescription& tool : chat->tools) {
      if (tool.parameters) CheckSchemaSupported(*tool.parameters, StrCat("tools[", tool.name, "].function.parameters"));
    }
  }
  return true;
}

std::shared_ptr<const CompiledConstraint> BuildReplyConstraint(const ChatFormat& format, const ResponseFormat& response,
                                                               const ChatRequestData* chat, const CompileLimits& limits) {
  if (!CheckReplyConstraint(response, chat)) return nullptr;
  const bool forced = response.kind == ResponseFormat::kText;
  const GrammarVocabulary* vocabulary = nullptr;
  try {
    vocabulary = format.grammar_vocabulary();
  } catch (const Error& e) {
    throw ApiError(500, e.what());
  }
  if (!vocabulary) {
    throw ApiError(400, "structured outputs are not available: this build of tessera has no grammar engine "
                        "(scripts/setup_xgrammar.sh)", forced ? "tool_choice" : "response_format");
  }
  const std::string param = forced ? "tool_choice" : "response_format";
  const ReplyThinking thinking = chat ? format.thinking(chat->enable_thinking) : ReplyThinking::kNone;
  // Everything the recipe reads, as the cache key (the format is this vocabulary's own).
  json key = {{"chat", chat != nullptr}, {"kind", static_cast<int>(response.kind)}, {"schema", response.schema},
              {"thinking", static_cast<int>(thinking)}};
  if (forced) {
    json tools = json::array();
    for (const ToolDescription& tool : chat->tools) {
      tools.push_back({tool.name, tool.parameters ? *tool.parameters : json()});
    }
    key["tools"] = std::move(tools);
    key["choice"] = {static_cast<int>(chat->tool_choice.mode), chat->tool_choice.function};
  }
  // The grammar's text: built where the compile runs (a schema's EBNF can take long too).
  auto recipe = [&]() -> GrammarRecipe {
    if (!chat) return {false, DumpJson(response.schema), format.text_stop_tokens()};
    // The part of the reply after any reasoning: the answer, or the call in the family's form.
    json body = json::array();
    std::vector<int32_t> ends = format.chat_stop_tokens();
    if (format.harmony()) {
      const HarmonyTokens& t = format.harmony_encoding()->tokens();
      if (!forced) {
        body = {Token(t.channel), Const("final"), Token(t.message), Schema(response.schema)};
        ends = {t.return_};
      } else {
        json calls = json::array();
        for (const ToolDescription& tool : chat->tools) {
          if (chat->tool_choice.mode == ToolChoice::kFunction && tool.name != chat->tool_choice.function) continue;
          calls.push_back(Sequence({Const(tool.name + " "), Token(t.constrain), Const("json"), Token(t.message),
                                    Schema(tool.parameters ? *tool.parameters : json{{"type", "object"}})}));
        }
        body = {Token(t.channel), Const("commentary to=functions."),
                calls.size() == 1 ? calls[0] : json{{"type", "or"}, {"elements", calls}}};
        ends = {t.call};
      }
      return {true, DumpJson(HarmonyReplyTag(t, std::move(body))), ends};
    }
    if (!forced) {
      body.push_back(Schema(response.schema));
    } else {
      switch (format.tool_format()) {
        case ToolCallFormat::kHermes:
          body = {Const("<tool_call>\n"), Schema(CallSchema(chat->tools, chat->tool_choice, "arguments")), Const("\n</tool_call>")};
          break;
        case ToolCallFormat::kLlamaJson:
          body = {Schema(CallSchema(chat->tools, chat->tool_choice, "parameters"))};
          break;
        case ToolCallFormat::kMistral: {
          const std::optional<int32_t> marker = format.tokenizer().TokenId(kMistralToolCallsMarker);
          if (!marker) Bad(param, "this model's tokenizer has no [TOOL_CALLS] token to call tools with");
          json list = {{"type", "array"}, {"items", CallSchema(chat->tools, chat->tool_choice, "arguments")},
                       {"minItems", 1}, {"maxItems", 1}};
          body = {Token(*marker), Const(" "), Schema(list)};
          break;
        }
        case ToolCallFormat::kDeepseek: {
          // <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{…}\n```
          // <｜tool▁call▁end｜><｜tool▁calls▁end｜>: one call, as the template writes it.
          std::vector<int32_t> markers;
          for (const std::string_view text : {kDeepseekCallsBegin, kDeepseekCallBegin, kDeepseekSep,
                                              kDeepseekCallEnd, kDeepseekCallsEnd}) {
            const std::optional<int32_t> id = format.tokenizer().TokenId(text);
            if (!id) Bad(param, StrCat("this model's tokenizer has no ", text, " token to call tools with"));
            markers.push_back(*id);
          }
          json calls = json::array();
          for (const ToolDescription& tool : chat->tools) {
            if (chat->tool_choice.mode == ToolChoice::kFunction && tool.name != chat->tool_choice.function) continue;
            calls.push_back(Sequence({Const(tool.name + "\n```json\n"),
                                      Schema(tool.parameters ? *tool.parameters : json{{"type", "object"}}),
                                      Const("\n```")}));
          }
          body = {Token(markers[0]), Token(markers[1]), Const("function"), Token(markers[2]),
                  calls.size() == 1 ? calls[0] : json{{"type", "or"}, {"elements", calls}}, Token(markers[3]),
                  Token(markers[4])};
          break;
        }
        case ToolCallFormat::kNone:
          Bad(param, "this model's chat format has no tool calls to force");
      }
    }
    json elements = json::array();
    if (thinking == ReplyThinking::kMayOpen) {
      elements.push_back({{"type", "tag"}, {"begin", "<think>"}, {"content", Reasoning()}, {"end", "</think>"}});
      elements.push_back(Const("\n\n"));
    } else if (thinking == ReplyThinking::kOpen) {
      // The prompt opened the block: the reply is reasoning, </think>, then the answer.
      elements.push_back({{"type", "tag"}, {"begin", ""}, {"content", Reasoning()}, {"end", "</think>"}});
      elements.push_back(Const("\n\n"));
    }
    for (json& e : body) elements.push_back(std::move(e));
    return {true, DumpJson(Sequence(std::move(elements))), ends};
  };
  try {
    return vocabulary->Compile(DumpJson(key), recipe, limits);
  } catch (const GrammarCompileStopped&) {
    throw;
  } catch (const Error& e) {
    throw ApiError(400, e.what(), param);
  }
}

namespace {

// Counts, over every schema of a request, what its grammar's size grows with.
struct SchemaTally {
  size_t properties = 0, enum_values = 0;
  void Walk(const json& node) {
    if (node.is_object()) {
      for (const auto& [key, value] : node.items()) {
        if ((key == "properties" || key == "patternProperties") && value.is_object()) properties += value.size();
        if (key == "enum" && value.is_array()) enum_values += value.size();
        if (key == "const") ++enum_values;
        Walk(value);
      }
    } else if (node.is_array()) {
      for (const json& value : node) Walk(value);
    }
  }
};

}  // namespace

void CheckStructuredBudget(const ResponseFormat& response, const std::vector<ToolDescription>& tools) {
  if (tools.size() > kMaxTools) {
    Bad("tools", StrCat("'tools' has ", tools.size(), " tools; at most ", kMaxTools, " are accepted"));
  }
  SchemaTally tally;
  size_t bytes = 0;
  const char* param = "response_format";
  if (response.kind == ResponseFormat::kJsonSchema) {
    bytes += DumpJson(response.schema).size();
    tally.Walk(response.schema);
  }
  for (const ToolDescription& tool : tools) {
    if (!tool.parameters) continue;
    param = response.kind == ResponseFormat::kJsonSchema ? "response_format" : "tools";
    bytes += DumpJson(*tool.parameters).size();
    tally.Walk(*tool.parameters);
  }
  if (tally.properties > kMaxSchemaProperties) {
    Bad(param, StrCat("the request's JSON schemas declare ", tally.properties, " object properties; at most ",
                      kMaxSchemaProperties, " are accepted"));
  }
  if (tally.enum_values > kMaxEnumValues) {
    Bad(param, StrCat("the request's JSON schemas list ", tally.enum_values, " enum/const values; at most ",
                      kMaxEnumValues, " are accepted"));
  }
  if (bytes > kMaxSchemaBytes) {
    Bad(param, StrCat("the request's JSON schemas take ", bytes, " bytes; at most ", kMaxSchemaBytes, " are accepted"));
  }
}

}  // namespace tessera
