// Structured outputs of `tessera serve`: what agents and tool-using front ends send, as a grammar
// over the model's own reply format (engine/grammar.h applies it, token by token).
//
//   response_format {type: json_object}            a JSON object
//   response_format {type: json_schema, json_schema: {name?, schema, strict?}}
//                                                  a JSON value valid against the schema
//   tool_choice "required" / {type: function, function: {name}}
//                                                  one call of a declared function (or of that
//                                                  one), its arguments valid against its schema
//
// The grammar covers the whole reply as the format writes it, so the reply parser reads the
// answer or the call as usual:
//   harmony (gpt-oss)   an optional analysis message (free text, at most 512 tokens: a model that
//                       would reason on forever still answers), then the final message holding
//                       the JSON (end <|return|>), or a commentary message to=functions.NAME
//                       with <|constrain|>json and the arguments (end <|call|>); the formatting
//                       tokens are matched by id.
//   Qwen3 (thinking)    the <think>…</think> block (at most 512 tokens), a blank line, then the
//                       answer or call.
//   Hermes (Qwen2.5/3)  <tool_call>\n{"name": …, "arguments": …}\n</tool_call>
//   Llama 3.1           {"name": …, "parameters": …}
//   Mistral v0.3        [TOOL_CALLS] [{"name": …, "arguments": …}]
//   /v1/completions     the JSON alone (response_format only).
//
// JSON schema features the grammar engine would not enforce (so that a reply could fail to
// validate) are refused with a 400 naming the feature and where it is: not, if/then/else,
// dependentRequired, dependentSchemas, dependencies, uniqueItems, contains, minContains,
// maxContains, oneOf (the engine falls back to anyOf for overlapping branches), allOf with more
// than one schema, multipleOf other than an integer on an integer, a $ref outside the document,
// a format the engine does not know (or, ipv4, does not match exactly: leading zeros), and
// minLength/maxLength together with pattern or format.
#pragma once

#include <memory>
#include <string>

#include "engine/grammar.h"
#include "server/openai_api.h"

namespace tessera {

struct ResponseFormat {
  enum Kind { kText, kJsonObject, kJsonSchema };
  Kind kind = kText;
  ApiJson schema;  // kJsonSchema
};

// `response_format` of a body (nullptr: absent). Throws ApiError 400 naming the field.
ResponseFormat ParseResponseFormat(const ApiJson* field);

// Throws ApiError 400 ("... '<feature>' at <where> is not supported ...") for the features
// listed above; `where` names the schema in the request ("response_format.json_schema.schema").
void CheckSchemaSupported(const ApiJson& schema, const std::string& where);

// The checks of BuildReplyConstraint that need no compile (ApiError 400): false when the reply
// is unconstrained.
bool CheckReplyConstraint(const ResponseFormat& response, const ChatRequestData* chat);

// The grammar of a request's reply, or nullptr when it is unconstrained. `chat` is the mapped
// chat request (nullptr for /v1/completions). Compiled grammars are cached (by everything that
// shapes them); a compile runs within `limits` (the server isolates it: engine/grammar.h).
// Throws ApiError 400 for a schema the engine cannot compile, and 400 when this build has no
// grammar engine; GrammarCompileStopped when `limits` stopped the compile.
std::shared_ptr<const CompiledConstraint> BuildReplyConstraint(const ChatFormat& format, const ResponseFormat& response,
                                                               const ChatRequestData* chat,
                                                               const CompileLimits& limits = {});

// The budget of a request's structured outputs, checked before any work on them (400 naming the
// limit and the value): the response schema and the tools' parameter schemas together at most
// kMaxSchemaBytes of JSON, kMaxSchemaProperties object properties and kMaxEnumValues enum or
// const values; at most kMaxTools tools (OpenAI's own cap).
inline constexpr size_t kMaxSchemaBytes = 256 << 10;
inline constexpr size_t kMaxSchemaProperties = 2000;
inline constexpr size_t kMaxEnumValues = 4096;
inline constexpr size_t kMaxTools = 128;
void CheckStructuredBudget(const ResponseFormat& response, const std::vector<ToolDescription>& tools);

}  // namespace tessera
