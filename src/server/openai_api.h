// The OpenAI-compatible request and response shapes of `tessera serve` (serving.md §1–4), kept
// apart from HTTP so that they can be tested without a socket.
//
//   ParseCompletionRequest   a /v1/chat/completions or /v1/completions body -> prompt ids,
//                            sampling, limits, stop strings, streaming options; every bad field
//                            is an ApiError (400, naming the field), never a crash
//   ChatFormat               the model's chat format: harmony for gpt-oss (system message with
//                            the reasoning effort, developer instructions from system/developer
//                            messages, assistant reasoning as analysis, final answers), the
//                            family chat templates otherwise (engine/chat_template.h)
//   ReplyParser              generated ids -> reasoning and content text, UTF-8-safe pieces
//                            (harmony's analysis channel / Qwen3's <think> block -> reasoning)
//   StopStrings              `stop` strings on the content, holding back only what could still
//                            begin one; the stop string itself is not returned
//
// Unknown fields are ignored (as vLLM does), except the ones that change what a reply means
// and are not implemented, which are refused with 400 rather than silently dropped: tools
// other than functions, echo, suffix, best_of > 1. response_format and tool_choice "required" /
// a named function become a grammar (server/structured_output.h).
//
// Bodies are nlohmann::ordered_json: a tool's parameter schema is rendered in the client's key
// order (harmony's TypeScript declarations, the templates' tojson), as Python servers do.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/chat_template.h"
#include "engine/grammar.h"
#include "engine/harmony.h"
#include "engine/harmony_tools.h"
#include "engine/think_splitter.h"
#include "engine/tool_calls.h"
#include "engine/sampler.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace tessera {

using ApiJson = nlohmann::ordered_json;

// JSON text of a reply; bytes that are not UTF-8 (a path, a model name, a token fragment in a
// header) become U+FFFD instead of an exception in the middle of writing a reply.
inline std::string DumpJson(const ApiJson& value) { return value.dump(-1, ' ', false, ApiJson::error_handler_t::replace); }

// An error answered with the OpenAI error object {"error": {message, type, param, code}}.
class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string message, std::string param = {}, std::string code = {});
  int status() const { return status_; }
  const std::string& param() const { return param_; }
  const std::string& code() const { return code_; }
  // invalid_request_error (4xx), authentication_error (401), not_found_error (404),
  // rate_limit_error (429), server_error (5xx).
  std::string type() const;
  ApiJson Body() const;

 private:
  int status_;
  std::string param_, code_;
};

// A chat body's message, checked, in the engine's terms.
struct RequestMessage {
  std::string role;                   // as sent; harmony accepts system/developer/user/assistant/tool
  std::vector<std::string> content;   // text parts (a string content is one part, none is empty)
  bool content_null = false;          // content null or absent (DeepSeek-V3's template tells)
  std::optional<std::string> reasoning;  // reasoning_content / reasoning
  ApiJson tool_calls;                 // null, or the array as sent; every entry has function.name
  std::string tool_call_id, name;     // "" is absent
};

struct ToolChoice {
  enum Mode { kNone, kAuto, kRequired, kFunction };
  Mode mode = kAuto;
  std::string function;  // kFunction: the name
};

// A chat request body mapped once, at the boundary, into what the renderers take (harmony, the
// family templates): they never see the client's JSON. The tool schemas stay JSON (they are
// rendered back as JSON / TypeScript), bounded by the parse limits like the rest of the body.
struct ChatRequestData {
  std::vector<RequestMessage> messages;
  std::vector<ToolDescription> tools;  // declared to the model; empty when none or tool_choice "none"
  ApiJson tool_declarations;           // `tools` as sent (null when absent or empty): the templates render it
  ToolChoice tool_choice;
  std::optional<ReasoningEffort> reasoning_effort;  // nullopt: harmony's default (medium)
  bool enable_thinking = true;                      // chat_template_kwargs (Qwen3)
};

// Checks the chat fields of `body` (messages, tools, tool_choice, reasoning_effort,
// chat_template_kwargs) and maps them; throws ApiError 400 naming the field. Tools are function
// tools {"type": "function", "function": {"name", "description"?, "parameters"?}} with a name of
// 1–64 characters from [A-Za-z0-9_-] (OpenAI's rule; harmony writes it into headers).
ChatRequestData MapChatRequest(const ApiJson& body);

class ChatFormat {
 public:
  // harmony for gpt-oss; otherwise `chat_template` (ChatTemplate::FromOption: "" is the
  // model's own, ChatML when it has none, with a warning on stderr). Throws for a --chat-template
  // that cannot be used; a model template that does not parse leaves /v1/completions only (chat
  // requests get a 400 saying so) after a warning.
  ChatFormat(const Model& model, const Tokenizer& tokenizer, const std::string& chat_template = "");

  bool harmony() const { return harmony_ != nullptr; }
  // What to tell the operator once the server listens ("" when nothing): the ChatML fallback, or
  // the model's template that does not parse.
  const std::string& warning() const { return warning_; }
  bool has_chat() const { return harmony_ || chat_template_.has_value(); }
  // How replies begin (Qwen3: a <think> block the model may open; DeepSeek-R1: inside one the
  // prompt opened); kNone for harmony and the other templates.
  ReplyThinking thinking(bool enable_thinking = true) const;
  // How replies write tool calls (engine/tool_calls.h); kNone for harmony and completions.
  ToolCallFormat tool_format() const;
  // The prompt ids of a mapped chat request. Throws ApiError 400 for what the format refuses
  // (roles harmony does not know, a template's alternation rule).
  std::vector<int32_t> RenderChat(const ChatRequestData& request) const;
  // Ids that end a reply: harmony's <|return|>, <|call|>, <|endoftext|>; the family's turn-end
  // and EOS tokens; for /v1/completions without a template, config.json's EOS ids.
  const std::vector<int32_t>& chat_stop_tokens() const { return chat_stops_; }
  const std::vector<int32_t>& text_stop_tokens() const { return text_stops_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const HarmonyEncoding* harmony_encoding() const { return harmony_.get(); }
  // The tokenizer as structured outputs' grammars see it, built on first use (tens of ms);
  // nullptr when this build has no grammar engine.
  const GrammarVocabulary* grammar_vocabulary() const;

 private:
  const Tokenizer* tokenizer_;
  int64_t model_vocab_ = 0;
  mutable std::once_flag grammar_once_;
  mutable std::unique_ptr<GrammarVocabulary> grammar_;
  std::unique_ptr<HarmonyEncoding> harmony_;
  std::optional<ChatTemplate> chat_template_;
  std::string warning_;
  std::vector<int32_t> chat_stops_, text_stops_;
};

struct CompletionRequest {
  bool chat = true;
  std::string model;
  std::vector<int32_t> prompt;
  SamplingParams sampling;
  bool seeded = false;          // a seed was given (else the server draws one)
  int64_t max_tokens = -1;      // < 0: until a stop token or the end of the context
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;
  int top_logprobs = -1;        // < 0: no logprobs
  bool tools = false;           // chat with a non-empty `tools`: replies may hold tool calls
  int64_t n = 1;                // choices, each its own engine request (seed + index)
  // response_format / a forced tool call as a grammar (server/structured_output.h), compiled
  // when the caller calls this: after the checks that may refuse the request cheaply (the
  // prompt's length), within the caller's limits. Empty: no grammar.
  std::function<std::shared_ptr<const CompiledConstraint>(const CompileLimits&)> build_grammar;
  std::string grammar_param;  // what the grammar comes from: "response_format" or "tool_choice"
  std::vector<std::pair<int32_t, float>> logit_bias;  // token id -> added to its logit, in [-100, 100]
};

// `body` must be a JSON object. `default_max_tokens` applies when the body gives none (OpenAI's
// completions default is 16; chat: until the end of the context, -1).
CompletionRequest ParseCompletionRequest(const ApiJson& body, bool chat, const ChatFormat& format,
                                         const SamplingParams& defaults);

// The harmony conversation of a mapped chat request (serving.md §6, vLLM's mapping): the system message
// (reasoning_effort, `current_date` when not empty, the function-tools note), one developer
// message with the system/developer messages' text as instructions and the declared tools,
// then user turns, assistant reasoning (analysis), tool calls (commentary, recipient
// functions.NAME, content type json) and answers (final), tool results (author functions.NAME,
// found from tool_call_id). Throws ApiError 400 for malformed messages.
std::vector<Message> HarmonyMessages(const ChatRequestData& request, std::string_view current_date = {});

// A piece of one tool call of a reply, as a streamed chunk carries it.
struct ToolCallDelta {
  size_t index = 0;       // the call's position among the reply's calls
  std::string name;       // set on the call's first delta only: it opens the call
  std::string arguments;  // the next piece of its arguments (JSON text)
};

// A finished call as the reply message lists it: {id, type: function, function: {name,
// arguments}}; the id (9 alphanumerics) is made of the reply's id and the call's index.
ApiJson ToolCallJson(const ToolCall& call, size_t index, const std::string& reply_id);
// One streamed piece of a call as a chunk's delta carries it: the first piece has the index, id,
// type and name (it opens the call), later ones the index and more of the arguments, which
// clients append (the OpenAI SDKs accumulate by index).
ApiJson ToolCallDeltaJson(const ToolCallDelta& delta, const std::string& reply_id);

// Generated ids -> reply text, split into reasoning and content.
class ReplyParser {
 public:
  struct Piece {
    std::string reasoning, content;
    std::vector<ToolCallDelta> calls;  // at most one delta per call
    bool empty() const { return reasoning.empty() && content.empty() && calls.empty(); }
  };
  // chat false: plain text (completions); stop tokens produce no text. `tools`: the request
  // declared tools, so harmony messages addressed to a recipient become tool calls (name: the
  // recipient without "functions."), streamed as their arguments arrive; without it they stay
  // content.
  ReplyParser(const ChatFormat& format, bool chat, std::vector<int32_t> stop_tokens, bool tools = false);
  Piece Add(int32_t token);
  Piece Finish();

 private:
  const ChatFormat& format_;
  bool chat_;
  std::vector<int32_t> stops_;
  IncrementalDecoder decoder_;
  std::unique_ptr<HarmonyParser> harmony_;
  std::unique_ptr<ThinkSplitter> think_;
  bool tools_ = false;
  // The tool-call format's marker tokens ([TOOL_CALLS]; DeepSeek's tool▁call markers), passed on
  // as text when tools_ although decoding would skip a special token.
  std::vector<std::pair<int32_t, std::string_view>> tool_markers_;
  size_t calls_ = 0;                     // harmony tool calls opened so far
  size_t call_message_ = SIZE_MAX;       // message index of the last opened call
  size_t messages_seen_ = 0;             // closed harmony messages checked for calls
  void AddHarmony(const std::vector<HarmonyDelta>& deltas, Piece& piece);
  void OpenCall(size_t message, const std::string& recipient, Piece& piece);
};

// Finds the first of `stops` in streamed text. Add returns the text that is safe to send; once
// a stop string is seen, stopped() holds and everything from it on is dropped.
class StopStrings {
 public:
  explicit StopStrings(std::vector<std::string> stops) : stops_(std::move(stops)) {}
  std::string Add(const std::string& text);
  std::string Finish();  // what was held back (no stop string completed)
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string pending_;
  bool stopped_ = false;
};

// The token's text as the logprobs objects show it, and its UTF-8 bytes.
ApiJson TokenLogprobJson(const Tokenizer& tokenizer, int32_t token, float logprob);

struct TokenEvent;

// One reply as it is written: the parser, the stop strings on its content, the text and the
// log-probabilities so far.
class ReplyState {
 public:
  // `tools`: the request declared tools, so the content is read for the family's tool calls.
  ReplyState(const ChatFormat& format, bool chat, std::vector<int32_t> stop_tokens, std::vector<std::string> stop,
             bool tools = false);
  // The new text of one token, after the stop strings (nothing once one was seen).
  ReplyParser::Piece Add(int32_t token);
  ReplyParser::Piece Finish();
  bool stopped() const { return stop_.stopped(); }
  const std::string& content() const { return content_; }
  const std::string& reasoning() const { return reasoning_; }
  const std::vector<ToolCall>& calls() const { return calls_; }
  // The logprobs of one token, kept for the whole reply and returned as a streamed chunk shows
  // it: chat {"content": [entry]}, completions {tokens, token_logprobs, top_logprobs, text_offset}.
  ApiJson LogprobsEntry(const Tokenizer& tokenizer, const TokenEvent& event, bool chat, int top);
  const ApiJson& chat_logprobs() const { return chat_logprobs_; }
  const ApiJson& completion_logprobs() const { return completion_logprobs_; }

 private:
  ReplyParser::Piece Filter(ReplyParser::Piece piece, bool last);
  ReplyParser parser_;
  StopStrings stop_;
  ToolCallParser tool_calls_;
  std::string content_, reasoning_;
  std::vector<ToolCall> calls_;
  ApiJson chat_logprobs_ = ApiJson::array();
  ApiJson completion_logprobs_ = {{"tokens", ApiJson::array()},
                                  {"token_logprobs", ApiJson::array()},
                                  {"top_logprobs", ApiJson::array()},
                                  {"text_offset", ApiJson::array()}};
};

}  // namespace tessera
