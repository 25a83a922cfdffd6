#include "engine/tool_calls.h"

#include <algorithm>
#include <array>

#include "core/error.h"
#include "io/json_util.h"

namespace tessera {
namespace {

constexpr std::string_view kOpen = "<tool_call>", kClose = "</tool_call>";

// A call from JSON text {"name": string, key: object}; nullopt when it is not one.
std::optional<ToolCall> ParseCall(std::string_view text, const char* key) {
  const std::optional<nlohmann::ordered_json> parsed = TryParseOrderedJson(text);
  if (!parsed) return std::nullopt;
  const nlohmann::ordered_json& j = *parsed;
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return std::nullopt;
  ToolCall call{j["name"].get<std::string>(), "{}"};
  if (j.contains(key) && !j[key].is_null()) {
    call.arguments = j[key].is_string() ? j[key].get<std::string>() : j[key].dump();
  }
  return call;
}

// The length of the longest tail of `text` that begins `marker`.
size_t PartialTail(const std::string& text, std::string_view marker) {
  for (size_t n = std::min(text.size(), marker.size() - 1); n > 0; --n) {
    if (text.compare(text.size() - n, n, marker.data(), n) == 0) return n;
  }
  return 0;
}

}  // namespace

ToolCallFormat ToolCallFormatOf(ChatTemplateKind kind) {
  switch (kind) {
    case ChatTemplateKind::kQwen25:
    case ChatTemplateKind::kQwen3: return ToolCallFormat::kHermes;
    case ChatTemplateKind::kLlama31: return ToolCallFormat::kLlamaJson;
    case ChatTemplateKind::kMistralV03: return ToolCallFormat::kMistral;
    case ChatTemplateKind::kDeepseekV3:
    case ChatTemplateKind::kDeepseekR1: return ToolCallFormat::kDeepseek;
    case ChatTemplateKind::kDeepseekV2:
    case ChatTemplateKind::kOther: return ToolCallFormat::kNone;
  }
  return ToolCallFormat::kNone;
}

ToolCallFormat ToolCallFormatOf(const ChatTemplate& chat) {
  if (chat.kind() != ChatTemplateKind::kOther) return ToolCallFormatOf(chat.kind());
  // Other templates, by the call syntax they show the model; the first row whose texts the
  // template all has decides. Qwen3.5 / Qwen3-Coder's XML calls (<function=NAME><parameter=...>)
  // are not parsed yet: their replies stay content.
  struct Row {
    ToolCallFormat format;
    std::array<std::string_view, 2> texts;
  };
  static constexpr std::array<Row, 4> kRows = {{
      {ToolCallFormat::kNone, {"<tool_call>", "<function="}},
      {ToolCallFormat::kHermes, {"<tool_call>", "</tool_call>"}},
      {ToolCallFormat::kLlamaJson, {"<|start_header_id|>", "\"parameters\": "}},
      {ToolCallFormat::kMistral, {"[TOOL_CALLS]", "[AVAILABLE_TOOLS]"}},
  }};
  const std::string& text = chat.text();
  for (const Row& row : kRows) {
    if (std::all_of(row.texts.begin(), row.texts.end(), [&](std::string_view t) { return text.find(t) != std::string::npos; })) {
      return row.format;
    }
  }
  return ToolCallFormat::kNone;
}

std::vector<std::string_view> ToolCallMarkerTokens(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kMistral: return {kMistralToolCallsMarker};
    case ToolCallFormat::kDeepseek:
      return {kDeepseekCallsBegin, kDeepseekCallsEnd, kDeepseekCallBegin, kDeepseekCallEnd, kDeepseekSep};
    case ToolCallFormat::kNone:
    case ToolCallFormat::kHermes:
    case ToolCallFormat::kLlamaJson: break;
  }
  return {};
}

// Between kDeepseekCallsBegin and kDeepseekCallsEnd: complete call blocks come out as calls (a
// block that is not TYPE<sep>NAME\n```json\nJSON\n``` stays content, markers included), the
// newlines between blocks are dropped. The section's end returns to content.
ToolCallParser::Output ToolCallParser::AddDeepseek() {
  Output out;
  for (;;) {
    if (!in_section_) {
      const size_t open = pending_.find(kDeepseekCallsBegin);
      if (open == std::string::npos) {
        const size_t keep = PartialTail(pending_, kDeepseekCallsBegin);
        out.content += pending_.substr(0, pending_.size() - keep);
        pending_.erase(0, pending_.size() - keep);
        return out;
      }
      out.content += pending_.substr(0, open);
      pending_.erase(0, open + kDeepseekCallsBegin.size());
      in_section_ = true;
      section_had_call_ = false;
    }
    const size_t call = pending_.find(kDeepseekCallBegin);
    const size_t end = pending_.find(kDeepseekCallsEnd);
    if (end != std::string::npos && (call == std::string::npos || end < call)) {
      pending_.erase(0, end + kDeepseekCallsEnd.size());
      in_section_ = false;
      continue;
    }
    if (call == std::string::npos) return out;  // more of the section to come
    const size_t close = pending_.find(kDeepseekCallEnd, call);
    if (close == std::string::npos) return out;
    const std::string_view block =
        std::string_view(pending_).substr(call + kDeepseekCallBegin.size(), close - call - kDeepseekCallBegin.size());
    std::optional<ToolCall> parsed;
    const size_t sep = block.find(kDeepseekSep);
    constexpr std::string_view kJsonOpen = "\n```json\n", kJsonClose = "\n```";
    if (sep != std::string_view::npos) {
      const std::string_view rest = block.substr(sep + kDeepseekSep.size());
      const size_t json_open = rest.find(kJsonOpen);
      if (json_open != std::string_view::npos && json_open > 0 && rest.ends_with(kJsonClose) &&
          json_open + kJsonOpen.size() <= rest.size() - kJsonClose.size()) {
        const std::string_view arguments =
            rest.substr(json_open + kJsonOpen.size(), rest.size() - kJsonClose.size() - json_open - kJsonOpen.size());
        const std::optional<nlohmann::ordered_json> value = TryParseOrderedJson(arguments);
        if (value && value->is_object()) parsed = ToolCall{std::string(rest.substr(0, json_open)), value->dump()};
      }
    }
    section_had_call_ = true;
    if (parsed) {
      out.calls.push_back(std::move(*parsed));
    } else {
      out.content += pending_.substr(call, close + kDeepseekCallEnd.size() - call);
    }
    pending_.erase(0, close + kDeepseekCallEnd.size());
  }
}

ToolCallParser::Output ToolCallParser::Add(const std::string& text) {
  Output out;
  pending_ += text;
  if (format_ == ToolCallFormat::kNone) {
    out.content = std::exchange(pending_, {});
    return out;
  }
  if (format_ == ToolCallFormat::kDeepseek) return AddDeepseek();
  if (format_ == ToolCallFormat::kMistral) {
    if (after_marker_) return out;
    const size_t marker = pending_.find(kMistralToolCallsMarker);
    if (marker == std::string::npos) {
      const size_t keep = PartialTail(pending_, kMistralToolCallsMarker);
      out.content = pending_.substr(0, pending_.size() - keep);
      pending_.erase(0, pending_.size() - keep);
      return out;
    }
    out.content = pending_.substr(0, marker);
    pending_.erase(0, marker);
    after_marker_ = true;
    return out;
  }
  if (format_ == ToolCallFormat::kLlamaJson) {
    if (!decided_) {
      const size_t first = pending_.find_first_not_of(" \t\n");
      if (first == std::string::npos) return out;  // only whitespace so far
      decided_ = true;
      json_reply_ = pending_[first] == '{';
    }
    if (!json_reply_) out.content = std::exchange(pending_, {});
    return out;  // a JSON reply is held until Finish
  }
  for (;;) {
    if (!in_call_) {
      const size_t open = pending_.find(kOpen);
      if (open == std::string::npos) {
        const size_t keep = PartialTail(pending_, kOpen);
        out.content += pending_.substr(0, pending_.size() - keep);
        pending_.erase(0, pending_.size() - keep);
        return out;
      }
      out.content += pending_.substr(0, open);
      pending_.erase(0, open + kOpen.size());
      in_call_ = true;
    }
    const size_t close = pending_.find(kClose);
    if (close == std::string::npos) return out;
    if (auto call = ParseCall(pending_.substr(0, close), "arguments")) {
      out.calls.push_back(std::move(*call));
    } else {
      out.content += StrCat(kOpen, pending_.substr(0, close + kClose.size()));
    }
    pending_.erase(0, close + kClose.size());
    in_call_ = false;
  }
}

ToolCallParser::Output ToolCallParser::Finish() {
  Output out;
  if (format_ == ToolCallFormat::kMistral && after_marker_) {
    // [TOOL_CALLS] [{"name": …, "arguments": {…}}, …]: every entry must be a call, or all of it
    // stays content.
    const std::string_view rest = std::string_view(pending_).substr(kMistralToolCallsMarker.size());
    const std::optional<nlohmann::ordered_json> list = TryParseOrderedJson(rest);
    std::vector<ToolCall> calls;
    if (list && list->is_array() && !list->empty()) {
      for (const nlohmann::ordered_json& entry : *list) {
        std::optional<ToolCall> call = ParseCall(entry.dump(), "arguments");
        if (!call) {
          calls.clear();
          break;
        }
        calls.push_back(std::move(*call));
      }
    }
    if (!calls.empty()) {
      out.calls = std::move(calls);
    } else {
      out.content = pending_;
    }
    pending_.clear();
    after_marker_ = false;
    return out;
  }
  if (format_ == ToolCallFormat::kLlamaJson && json_reply_) {
    if (auto call = ParseCall(pending_, "parameters")) {
      out.calls.push_back(std::move(*call));
      pending_.clear();
      return out;
    }
  }
  if (format_ == ToolCallFormat::kDeepseek) {
    // A section left open: what is left stays text, with the opening marker when no call of the
    // section came out (the newlines after its last call are dropped as inside the section).
    if (!in_section_) {
      out.content = pending_;
    } else if (!section_had_call_) {
      out.content = StrCat(kDeepseekCallsBegin, pending_);
    } else if (pending_.find_first_not_of(" \n") != std::string::npos) {
      out.content = pending_;
    }
    pending_.clear();
    in_section_ = false;
    return out;
  }
  out.content = in_call_ ? StrCat(kOpen, pending_) : pending_;  // an unfinished block stays text
  pending_.clear();
  in_call_ = false;
  return out;
}

}  // namespace tessera
