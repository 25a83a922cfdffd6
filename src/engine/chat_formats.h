// Internal to engine/chat_template.cpp: the family renderers and the pieces of Python
// semantics the Hub templates rely on (transformers renders them with Python's jinja2).
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>

#include "engine/chat_template.h"

namespace tessera::chat_internal {

// What every renderer gets. ChatTemplate::Render has checked that `messages` is not empty, that
// all text is UTF-8, that tools is null or an array of objects and tool_calls null or an array
// of objects, and has parsed JSON-string arguments of assistant tool calls (vLLM's rule; not for
// the DeepSeek kinds, whose templates concatenate the string).
struct RenderInput {
  std::span<const ChatMessage> messages;
  const ChatOptions& options;
  std::string_view bos;  // bos_token / eos_token as the template sees them
  std::string_view eos;
};

std::string RenderLlama31(const RenderInput& in);
std::string RenderMistralV03(const RenderInput& in);
std::string RenderQwen25(const RenderInput& in);
std::string RenderQwen3(const RenderInput& in);
// engine/chat_deepseek.cpp
std::string RenderDeepseekV2(const RenderInput& in);
std::string RenderDeepseekV3(const RenderInput& in);
std::string RenderDeepseekR1(const RenderInput& in);

// "<kind> chat template: <message> (message <index>, role "<role>")": a template's error.
[[noreturn]] void Raise(std::string_view kind, std::string_view message, size_t index, const ChatMessage& m);

// json.dumps(value, ensure_ascii=False[, indent=indent]) as transformers' tojson filter calls it:
// separators ", " / ": " (with indent: "," at line ends), object keys in stored order, floats as
// Python's repr, control characters as \u00XX, everything else (non-ASCII too) as is.
std::string PyJsonDumps(const nlohmann::ordered_json& value, int indent = -1);
// Python's str.strip() (Jinja's trim filter): removes leading and trailing characters for which
// str.isspace() holds (ASCII whitespace, \x1c-\x1f, U+0085, U+00A0, U+3000, ...). `text` is UTF-8.
std::string_view PyStrip(std::string_view text);
// str.strip / lstrip / rstrip with the argument '\n'.
std::string_view StripNewlines(std::string_view text);
std::string_view LstripNewlines(std::string_view text);
std::string_view RstripNewlines(std::string_view text);
// len() of a Python str: code points of UTF-8 text.
size_t CodePointCount(std::string_view text);

}  // namespace tessera::chat_internal
