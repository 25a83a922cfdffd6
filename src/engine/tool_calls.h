// Tool calls in the replies of the dense families, as their chat templates ask the model to
// write them (dense-decoders.md §8; vLLM's hermes and llama3_json tool parsers read the same):
//   kHermes     Qwen2.5 / Qwen3: <tool_call>\n{"name": …, "arguments": {…}}\n</tool_call>, any
//               number of blocks, text around them is content;
//   kLlamaJson  Llama 3.1: the whole reply is one {"name": …, "parameters": {…}} object;
//   kMistral    Mistral v0.3: text, then [TOOL_CALLS] and a JSON array of {"name": …,
//               "arguments": {…}} objects to the end of the reply. [TOOL_CALLS] is a special
//               token: the reply parser passes its text on (only when the request has tools).
//   kDeepseek   DeepSeek-V3 / R1 (deepseek.md §8): <｜tool▁calls▁begin｜>, then calls
//               <｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\nARGUMENTS\n```
//               <｜tool▁call▁end｜> (separated by newlines), then <｜tool▁calls▁end｜>; text
//               before the section is content. The markers are added tokens whose text the
//               reply parser passes on when the request has tools, special or not.
// The parser sits on the streamed reply text: content is passed on as soon as it cannot be part
// of a call, a call comes out when it is complete. A block whose JSON does not parse, or has no
// string "name", stays content (nothing the model wrote is dropped).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine/chat_template.h"

namespace tessera {

enum class ToolCallFormat { kNone, kHermes, kLlamaJson, kMistral, kDeepseek };
// The format the family's template asks for.
ToolCallFormat ToolCallFormatOf(ChatTemplateKind kind);
// The same for a template, recognised by the syntax it shows when it is no known family.
ToolCallFormat ToolCallFormatOf(const ChatTemplate& chat);
// The marker text of kMistral calls (the [TOOL_CALLS] token's content).
inline constexpr std::string_view kMistralToolCallsMarker = "[TOOL_CALLS]";
// kDeepseek's markers.
inline constexpr std::string_view kDeepseekCallsBegin = "<｜tool▁calls▁begin｜>";
inline constexpr std::string_view kDeepseekCallsEnd = "<｜tool▁calls▁end｜>";
inline constexpr std::string_view kDeepseekCallBegin = "<｜tool▁call▁begin｜>";
inline constexpr std::string_view kDeepseekCallEnd = "<｜tool▁call▁end｜>";
inline constexpr std::string_view kDeepseekSep = "<｜tool▁sep｜>";
// The marker tokens of `format` whose text the reply parser must pass on even where the
// tokenizer marks them special (decoding would otherwise skip them).
std::vector<std::string_view> ToolCallMarkerTokens(ToolCallFormat format);

struct ToolCall {
  std::string name;
  std::string arguments;  // JSON text (the OpenAI wire form: a string holding an object)
};

class ToolCallParser {
 public:
  explicit ToolCallParser(ToolCallFormat format) : format_(format) {}
  struct Output {
    std::string content;
    std::vector<ToolCall> calls;
  };
  Output Add(const std::string& text);
  Output Finish();

 private:
  ToolCallFormat format_;
  std::string pending_;
  bool in_call_ = false;
  bool decided_ = false;  // kLlamaJson: whether the reply is a JSON object has been seen
  bool json_reply_ = false;
  bool after_marker_ = false;  // kMistral: [TOOL_CALLS] seen; the rest is held until Finish
  bool in_section_ = false;    // kDeepseek: between <｜tool▁calls▁begin｜> and <｜tool▁calls▁end｜>
  bool section_had_call_ = false;  // kDeepseek: a call block of the open section was complete

  Output AddDeepseek();
};

}  // namespace tessera
