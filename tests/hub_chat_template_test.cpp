// The Hub chat templates llama.cpp keeps (scripts/setup_jinja.sh extracts them; the names
// --chat-template accepts) and tessera's ChatML, through the Jinja engine, against transformers:
// tests/data/chat_templates/hub_goldens.json (tools/make_hub_chat_goldens.py: every conversation of
// make_chat_goldens.py rendered by transformers' render_jinja_template) byte for byte. A template
// that raises in jinja2 must raise here with the same message when the message is the template's
// own raise_exception; the other divergences are listed, each with its reason.
#include <gtest/gtest.h>

#include <cstdlib>
#include <ctime>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "engine/chat_template.h"
#include "io/json_util.h"
#include "chat_goldens.h"
#include "test_util.h"
#include "tokenizer/tokenizer_config.h"

namespace tessera {
namespace {

using Json = nlohmann::ordered_json;

const Json& HubGoldens() {
  static const Json goldens = ParseOrderedJsonText(
      ReadBoundedFile(std::string(TESSERA_TEST_DATA) + "/chat_templates/hub_goldens.json", size_t{64} << 20),
      "hub_goldens.json");
  return goldens;
}

using test::ChatMessageFromJson;
using test::ChatOptionsFromJson;

ChatTemplate HubTemplate(const std::string& name, const Json& meta) {
  TokenizerConfig config;
  config.bos_token.present = config.eos_token.present = true;
  config.bos_token.content = meta["bos_token"].get<std::string>();
  config.eos_token.content = meta["eos_token"].get<std::string>();
  const std::string text = ChatTemplate::FromOption(name, "").text();
  return ChatTemplate::FromText(text, name, &config);
}

TEST(HubChatTemplates, TheNamesAreTheGoldensTemplates) {
  const std::vector<std::string> names = ChatTemplateNames();
  std::set<std::string> golden;
  for (const auto& [name, meta] : HubGoldens()["meta"]["templates"].items()) golden.insert(name);
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()), golden);
  EXPECT_EQ(ChatTemplate::FromOption("chatml", "").text(), HubGoldens()["meta"]["chatml"].get<std::string>());
}

// Where llama.cpp's engine prints differently from jinja2 (each case exactly; one that starts to
// match fails the test, so the list stays true):
//   - None printed by {{ }}: jinja2 writes "None", the engine "" (runtime.h
//     gather_string_parts_recursive; Gemma 4 prints tool-call arguments value by value);
//   - a dict printed by {{ }}: jinja2 writes Python's repr, the engine nothing (MiniCPM5);
//   - functionary v3.1 HTML-escapes its tool declarations through jinja2's Markup ("&#34;").
bool KnownDivergence(const std::string& name, const std::string& c) {
  if (name == "meetkai-functionary-medium-v3.1") {
    static const std::set<std::string> kCases = {
        "tools_declared", "tools_declared_with_system", "tool_call_and_result", "tool_call_and_result_then_answer",
        "tool_call_with_content", "tool_call_dict_arguments", "tool_call_empty_arguments", "parallel_tool_calls",
        "tool_call_id_not_9_chars", "tool_result_id_not_9_chars", "repeated_user_message_with_tools",
        "tools_without_user_message"};
    return kCases.count(c) > 0;
  }
  return c == "tool_call_dict_arguments" &&
         (name == "google-gemma-4-31B-it" || name == "google-gemma-4-31B-it-interleaved" || name == "openbmb-MiniCPM5-1B");
}

TEST(HubChatTemplates, RenderAsTransformers) {
  // strftime_now's clock, frozen as the goldens' (local time: UTC here).
  setenv("TZ", "UTC", 1);
  tzset();
  const std::time_t now = HubGoldens()["meta"]["now"].get<std::time_t>();
  std::map<std::string, ChatTemplate> templates;
  int rendered = 0, raised = 0, lenient = 0, divergent = 0;
  for (const auto& [name, meta] : HubGoldens()["meta"]["templates"].items()) templates.emplace(name, HubTemplate(name, meta));
  for (const Json& c : HubGoldens()["cases"]) {
    const std::string name = c["template"].get<std::string>();
    const std::string what = name + " / " + c["name"].get<std::string>();
    const ChatTemplate& chat = templates.at(name);
    std::vector<ChatMessage> messages;
    for (const Json& m : c["messages"]) messages.push_back(ChatMessageFromJson(m));
    ChatOptions options = ChatOptionsFromJson(c["options"]);
    options.now = now;
    std::string got, error;
    try {
      got = chat.Render(messages, options);
    } catch (const Error& e) {
      error = e.what();
    }
    EXPECT_EQ(error.find('\n'), std::string::npos) << what << ": " << error;
    if (c.contains("text")) {
      ++rendered;
      EXPECT_EQ(error, "") << what;
      const std::string want = c["text"].get<std::string>();
      if (KnownDivergence(name, c["name"].get<std::string>())) {
        ++divergent;
        EXPECT_NE(got, want) << what << " matches now: take it off KnownDivergence";
        continue;
      }
      if (got != want) {  // where they part, not two whole prompts
        size_t at = 0;
        while (at < got.size() && at < want.size() && got[at] == want[at]) ++at;
        const size_t from = at > 60 ? at - 60 : 0;
        ADD_FAILURE() << what << ": differs at byte " << at << "\n  got:  " << Json(got.substr(from, 140)).dump()
                      << "\n  want: " << Json(want.substr(from, 140)).dump();
      }
      continue;
    }
    const std::string want = c["error"].get<std::string>();
    if (chat.text().find(want) != std::string::npos) {  // the template's own raise_exception
      ++raised;
      EXPECT_NE(error.find(want), std::string::npos) << what << ": " << error;
    } else if (error.empty()) {
      ++lenient;  // a Python TypeError / UndefinedError that the engine renders past
    }
  }
  EXPECT_EQ(divergent, 15);
  EXPECT_GE(rendered, 1500);
  EXPECT_GE(raised, 20);
  std::printf("hub templates: %d cases rendered, %d of them known to differ; %d raised alike, %d lenient\n", rendered,
              divergent, raised, lenient);
}

}  // namespace
}  // namespace tessera
