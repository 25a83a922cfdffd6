// The golden files' conversations as ChatTemplate inputs (tests/data/chat_templates: goldens.json
// of make_chat_goldens.py, hub_goldens.json of make_hub_chat_goldens.py): a message object as
// the client sent it, and the options object of a case.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "engine/chat_template.h"

namespace tessera::test {

inline ChatMessage ChatMessageFromJson(const nlohmann::ordered_json& j) {
  ChatMessage m;
  m.role = j.at("role").get<std::string>();
  if (j.at("content").is_null()) {
    m.content_null = true;
  } else {
    m.content = j["content"].get<std::string>();
  }
  if (j.contains("reasoning_content")) m.reasoning = j["reasoning_content"].get<std::string>();
  if (j.contains("tool_calls")) m.tool_calls = j["tool_calls"];
  if (j.contains("tool_call_id")) m.tool_call_id = j["tool_call_id"].get<std::string>();
  if (j.contains("name")) m.name = j["name"].get<std::string>();
  return m;
}

inline ChatOptions ChatOptionsFromJson(const nlohmann::ordered_json& j) {
  ChatOptions o;
  o.add_generation_prompt = j.at("add_generation_prompt").get<bool>();
  o.enable_thinking = j.at("enable_thinking").get<bool>();
  if (j.contains("tools")) o.tools = j["tools"];
  if (j.contains("date_string")) o.date_string = j["date_string"].get<std::string>();
  return o;
}

}  // namespace tessera::test
