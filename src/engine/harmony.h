// The harmony chat format of gpt-oss: rendering conversations to token ids (and to text), the
// stop-token sets, and one lenient state machine that parses model output into messages both
// while it streams and at the end.
//
// Reference: ../shared/reference/gpt-oss.md §4 (tokens, rendering rules, golden renderings, stop
// tokens) and ecosystem.md §5 (what servers and users expect); upstream: openai/harmony
// src/encoding.rs (renderer, StreamableParser) and docs/format.md.
//
// Rendering (token level, like harmony's renderer):
//   <|start|>{role}[ to={recipient}]<|channel|>{channel}[ {content_type}]<|message|>{content}<|end|>
// Special tokens are emitted as ids; every text part (role, channel, recipient, content) goes
// through Tokenizer::EncodeOrdinary, so a user who types "<|start|>" gets text, never the token.
// The recipient follows the role for every role, as openai-harmony 0.0.8 renders it (measured,
// tests/data/harmony/goldens.json): `<|start|>assistant to=functions.f<|channel|>commentary json`
// for a call in the history, `<|start|>functions.f to=assistant<|channel|>commentary` for its
// result. (harmony's older test-data put an assistant's recipient after the channel, which is how
// the model itself tends to write calls; the parser reads both.)
// A content type starting with "<|constrain|>" is rendered as " ", the <|constrain|> token and
// the rest as text. An assistant message with a recipient (a tool call) ends with <|call|>, every
// other message with <|end|> (history never holds <|return|>: docs/format.md "Implementation
// note"). RenderForCompletion appends `<|start|>assistant`.
//
// History rule (gpt-oss.md §4.2, HF chat template's `future_final_message`): an assistant
// message on the analysis channel is dropped when a later assistant message of the conversation
// is on the final channel, i.e. its turn completed. Chain of thought of a turn that is still in
// the middle of tool calls (no final message after it yet) is kept.
//
// Parsing: HarmonyParser consumes one token id at a time (see its comment for the recovery
// rules); it never throws on model output and never drops model text.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace tessera {

inline constexpr std::string_view kHarmonyModelIdentity =
    "You are ChatGPT, a large language model trained by OpenAI.";
inline constexpr std::string_view kHarmonyKnowledgeCutoff = "2024-06";

enum class ReasoningEffort { kLow, kMedium, kHigh };

// "low" | "medium" | "high" (the rendered line is "Reasoning: medium": capital R, lower-case value).
std::string_view ReasoningEffortName(ReasoningEffort effort);
// Inverse of ReasoningEffortName; throws tessera::Error naming the accepted values.
ReasoningEffort ParseReasoningEffort(std::string_view name);

// The system message of gpt-oss (identity, dates, reasoning effort, channels). Sections are
// joined by a blank line: identity / "Knowledge cutoff: …" / "Current date: …" (single newlines
// between them), "Reasoning: …", "# Valid channels: … ." with the "Channel must be included for
// every message." sentence when channel_required.
struct SystemContent {
  std::string model_identity = std::string(kHarmonyModelIdentity);  // empty: line omitted
  std::string knowledge_cutoff = std::string(kHarmonyKnowledgeCutoff);  // empty: line omitted
  std::string current_date;  // "YYYY-MM-DD"; empty: line omitted (harmony's default)
  std::optional<ReasoningEffort> reasoning_effort = ReasoningEffort::kMedium;  // nullopt: omitted
  std::vector<std::string> valid_channels = {"analysis", "commentary", "final"};  // empty: omitted
  bool channel_required = true;
  // Adds "Calls to these tools must go to the commentary channel: 'functions'." under the
  // channels line; harmony does so when the developer message declares function tools.
  bool function_tools_note = false;
};

// The content text of the system message.
std::string RenderSystemContent(const SystemContent& system);
// The content text of a developer message: "# Instructions\n\n{instructions}" (no trailing newline).
std::string RenderDeveloperInstructions(std::string_view instructions);

// One harmony message. Absent header fields are empty strings.
struct Message {
  // "system" | "developer" | "user" | "assistant", or a tool's name for a tool result
  // ("functions.get_weather"). Never empty, no whitespace.
  std::string role;
  std::string channel;       // "analysis" | "commentary" | "final" | …; no whitespace
  std::string recipient;     // "functions.get_weather", "assistant", …; no whitespace
  std::string content_type;  // "<|constrain|>json", "json", "code", …
  std::string content;

  static Message System(const SystemContent& system = {});
  // Developer message carrying `instructions` as "# Instructions\n\n{instructions}".
  static Message Developer(std::string_view instructions);
  static Message User(std::string_view text);
  static Message Assistant(std::string_view channel, std::string_view text);
  // A tool call: assistant, commentary channel, recipient `tool` ("functions.get_weather"),
  // content type `content_type` ("<|constrain|>json" as the model writes it; vLLM renders calls
  // sent back by API clients with "json", serving.md §6).
  static Message ToolCall(std::string_view tool, std::string_view json_arguments,
                          std::string_view content_type = "<|constrain|>json");
  // The output of `tool` sent back to the model: role `tool`, recipient "assistant",
  // commentary channel.
  static Message ToolResult(std::string_view tool, std::string_view output);

  // An assistant message addressed to a tool (recipient set, not "all"), on any channel:
  // gpt-oss-120b sometimes calls tools from the analysis channel (ecosystem.md §5.2).
  bool IsToolCall() const;

  bool operator==(const Message&) const = default;
};

// [system, developer (only when `developer_instructions` is not empty), user]: the prompt of
// `tessera generate` and the first turn of `tessera chat`.
std::vector<Message> MakeConversation(std::string_view user_text, const SystemContent& system = {},
                                      std::string_view developer_instructions = {});

struct RenderOptions {
  // Applies the history rule of the file comment; false renders every message.
  bool drop_completed_analysis = true;
};

// Ids of the formatting tokens (gpt-oss.md §4.1).
struct HarmonyTokens {
  int32_t start = 0;        // <|start|>      200006
  int32_t end = 0;          // <|end|>        200007
  int32_t message = 0;      // <|message|>    200008
  int32_t channel = 0;      // <|channel|>    200005
  int32_t constrain = 0;    // <|constrain|>  200003
  int32_t return_ = 0;      // <|return|>     200002
  int32_t call = 0;         // <|call|>       200012
  int32_t endoftext = 0;    // <|endoftext|>  199999
};

// The harmony format bound to a tokenizer (which must outlive it).
class HarmonyEncoding {
 public:
  // Looks the formatting tokens up; throws tessera::Error naming the tokenizer and the missing
  // token when it is not a harmony tokenizer.
  explicit HarmonyEncoding(const Tokenizer& tokenizer);
  // Over Tokenizer::BuiltIn().
  static const HarmonyEncoding& BuiltIn();

  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const HarmonyTokens& tokens() const { return tokens_; }

  // Stop set for sampling an assistant reply: <|return|>, <|call|> (harmony
  // stop_tokens_for_assistant_actions) plus <|endoftext|> as a safety net (gpt-oss.md §4.4).
  // <|end|> is not in it: it closes one message (e.g. the analysis) and the reply goes on.
  std::vector<int32_t> AssistantStopTokens() const;
  // Tokens that close a message: <|end|>, <|return|>, <|call|> (harmony stop_tokens()).
  std::vector<int32_t> MessageEndTokens() const;

  // Appends the tokens of one message. Throws tessera::Error for an empty role or whitespace in
  // role, channel or recipient (the header would not parse back), or content that is not UTF-8.
  void RenderMessage(const Message& message, std::vector<int32_t>& out) const;
  std::vector<int32_t> RenderConversation(std::span<const Message> messages,
                                          const RenderOptions& options = {}) const;
  // RenderConversation followed by <|start|>assistant: the prompt of a reply.
  std::vector<int32_t> RenderForCompletion(std::span<const Message> messages,
                                           const RenderOptions& options = {}) const;

 private:
  const Tokenizer* tokenizer_;
  HarmonyTokens tokens_;
};

// Text forms of the renderings above (special tokens spelled out), for display and debugging;
// Tokenizer::Decode of the token form gives the same text. Same errors as the token forms.
std::string RenderMessageText(const Message& message);
std::string RenderConversationText(std::span<const Message> messages,
                                   const RenderOptions& options = {});
std::string RenderForCompletionText(std::span<const Message> messages,
                                    const RenderOptions& options = {});

// What a message (or a piece of streamed content) is for the reader of a reply.
enum class HarmonyPart {
  kFinal,       // final channel; also no channel, an unknown channel, any non-assistant role,
                // and text that could not be parsed: nothing is lost, it is shown as the answer
  kAnalysis,    // analysis channel without recipient: chain of thought, not for end users
  kCommentary,  // commentary channel without recipient: user-visible preambles
  kToolCall,    // an assistant message with a recipient, on any channel
};
HarmonyPart ClassifyMessage(const Message& message);
std::string_view HarmonyPartName(HarmonyPart part);  // "final" | "analysis" | ...

// Content text produced by one parser step, tagged with the header of its message.
struct HarmonyDelta {
  size_t message_index = 0;  // index the message has (or will have) in HarmonyParser::messages()
  HarmonyPart part = HarmonyPart::kFinal;
  std::string role;
  std::string channel;
  std::string recipient;
  std::string text;  // valid UTF-8, never empty
};

// Incremental parser of model output, one state machine for streaming and final parsing (the
// shape of harmony's StreamableParser): expect-start -> header -> content -> expect-start.
//
// Well-formed output continues the prompt's `<|start|>assistant`:
//   <|channel|>analysis<|message|>…<|end|><|start|>assistant<|channel|>final<|message|>…<|return|>
// <|end|>, <|return|>, <|call|> and <|endoftext|> close a message; the parser then waits for the
// next <|start|> (it does not stop: callers stop on AssistantStopTokens()).
//
// Header fields are read at the token level: the text before the first <|channel|> holds the
// role (unless the parser was started inside a header with a known role) and possibly
// `to=recipient`; the first word after <|channel|> is the channel, a `to=…` word there is the
// recipient; <|constrain|> plus the word after it is the content type; another bare word is the
// content type and any further words are appended to it (so nothing is dropped).
//
// Recovery (never throws, never drops text; unparseable text becomes final content):
//   - text outside any message (before a header, after a closed message): opens an assistant
//     message on the final channel holding that text;
//   - a header that ends without <|message|> (a closing token, <|start|>, end of output):
//     role / channel / recipient / content type are taken from its leading words and the rest
//     of its text becomes the message content (channel "final" when none was given); a header
//     that grows a newline or past kMaxHeaderTokens tokens is read the same way and the message
//     continues as content, so streaming is not held up;
//   - <|start|> inside content closes the message (a missing <|end|>); <|channel|> inside content
//     closes it and starts a new header of the same role (a missing <|end|><|start|>role);
//   - <|channel|> where a message should start opens a header of the default role;
//     <|message|> there opens a final-channel message;
//   - stray <|message|> / <|constrain|> in content, closing tokens outside messages, other
//     special tokens and ids the tokenizer lacks (the model's vocabulary has reserved ids the
//     tokenizer does not) are formatting, not text: they are skipped;
//   - end of output inside content closes the message (an incomplete UTF-8 sequence becomes
//     U+FFFD, as in harmony).
// Content deltas are valid UTF-8; for every message, the texts of its deltas concatenate to
// its content.
class HarmonyParser {
 public:
  static constexpr size_t kMaxHeaderTokens = 48;

  enum class State { kExpectStart, kHeader, kContent };

  // `role`: the role of the header the output continues, "assistant" when the prompt ends with
  // `<|start|>assistant` (RenderForCompletion); empty when the output starts with <|start|>.
  // The encoding must outlive the parser.
  explicit HarmonyParser(const HarmonyEncoding& encoding, std::string_view role = "assistant");

  // Consumes one token id; returns the content it produced (usually zero or one delta; valid
  // until the next call).
  const std::vector<HarmonyDelta>& Process(int32_t token);
  // End of output: closes an open message or header. The parser may be fed again afterwards
  // (it then expects <|start|>).
  const std::vector<HarmonyDelta>& Finish();

  // Closed messages, in order.
  const std::vector<Message>& messages() const { return messages_; }
  // All ids fed so far.
  const std::vector<int32_t>& tokens() const { return tokens_; }

  State state() const { return state_; }
  // Header fields of the message being read (kContent); empty otherwise, except current_role()
  // which also reports a role known before the header is complete.
  const std::string& current_role() const;
  const std::string& current_channel() const;
  const std::string& current_recipient() const;
  const std::string& current_content_type() const;
  // Content of the open message so far (kContent), empty otherwise.
  const std::string& current_content() const;

 private:
  struct HeaderSegment {
    enum class Marker { kNone, kChannel, kConstrain } marker = Marker::kNone;
    std::string text;
  };

  void BeginHeader(std::string preset_role);
  void AddHeaderToken(int32_t token, bool is_text);
  void FinishHeaderText();
  Message ParseHeader() const;
  // Reads a header that has no <|message|>; returns the header and the text that becomes content.
  std::pair<Message, std::string> RecoverHeader();
  void RecoverAndClose();
  void OpenContent(Message header);
  void AppendContent(const std::string& text);
  void CloseContent();

  const HarmonyEncoding* encoding_;
  std::string default_role_;  // role given to headers and text that lack one
  State state_ = State::kExpectStart;

  // kHeader
  std::string preset_role_;  // role known before the header text (empty: read from the header)
  std::vector<HeaderSegment> header_;
  size_t header_tokens_ = 0;
  IncrementalDecoder header_decoder_;

  // kContent
  Message current_;
  IncrementalDecoder content_decoder_;

  std::vector<Message> messages_;
  std::vector<int32_t> tokens_;
  std::vector<HarmonyDelta> deltas_;
  std::string empty_;
};

// Runs a HarmonyParser over `tokens` and Finish(); the parsed messages.
std::vector<Message> ParseHarmony(const HarmonyEncoding& encoding, std::span<const int32_t> tokens,
                                  std::string_view role = "assistant");

struct HarmonyToolCall {
  std::string recipient;  // "functions.get_weather"
  std::string channel;    // usually "commentary"; "analysis" for built-in tools (and some 120b calls)
  std::string content_type;
  std::string arguments;  // the message content, usually JSON
};

// A parsed reply split by purpose (ClassifyMessage); texts of the same part are concatenated in
// order, so the final text equals the concatenated kFinal deltas of the stream.
struct HarmonyReply {
  std::string final_text;
  std::string analysis_text;
  std::string commentary_text;
  std::vector<HarmonyToolCall> tool_calls;
};
HarmonyReply SummarizeReply(std::span<const Message> messages);

}  // namespace tessera
