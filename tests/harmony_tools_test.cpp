// gpt-oss function tools against openai-harmony 0.0.8 itself (tests/data/harmony/goldens.json,
// made by tools/make_harmony_goldens.py; serving.md §6): chat request bodies with tools, tool
// calls and tool results render to the same token ids, every parameter schema to the same
// TypeScript declaration, and model output with calls parses to the same messages.
#include "engine/harmony_tools.h"

#include <gtest/gtest.h>

#include <fstream>

#include "engine/harmony.h"
#include "server/openai_api.h"

namespace tessera {
namespace {

using json = nlohmann::ordered_json;

const json& Goldens() {
  static const json goldens = [] {
    std::ifstream in(std::string(TESSERA_SOURCE_DIR) + "/tests/data/harmony/goldens.json");
    return json::parse(in);
  }();
  return goldens;
}

TEST(HarmonyTools, GoldensComeFromThePinnedHarmony) {
  EXPECT_EQ(Goldens()["meta"]["openai_harmony"], "0.0.8");
  EXPECT_EQ(Goldens()["render"].size(), 4u);
  EXPECT_EQ(Goldens()["schemas"].size(), 4u);
  EXPECT_EQ(Goldens()["parse"].size(), 6u);
}

TEST(HarmonyTools, SchemasRenderAsHarmonyDeclaresThem) {
  for (const json& c : Goldens()["schemas"]) {
    const ToolDescription tool{"f", "A tool.", c["parameters"]};
    EXPECT_EQ(RenderDeveloperContent("", std::span(&tool, 1)), c["text"].get<std::string>()) << c["parameters"].dump();
  }
}

TEST(HarmonyTools, DescriptionsAndToolsWithoutParameters) {
  const std::vector<ToolDescription> tools = {{"a", "first\r\n\nthird\n", std::nullopt}, {"b", "", std::nullopt}};
  EXPECT_EQ(RenderDeveloperContent("Be kind.", tools),
            "# Instructions\n\nBe kind.\n\n# Tools\n\n## functions\n\nnamespace functions {\n\n// first\n// \n// third\n"
            "type a = () => any;\n\ntype b = () => any;\n\n} // namespace functions");
  EXPECT_EQ(RenderDeveloperContent("Be kind.", {}), "# Instructions\n\nBe kind.");
  EXPECT_EQ(RenderFunctionTools({}), "");
  EXPECT_EQ(JsonSchemaToTypeScript(json::parse(R"({"type": "array", "items": {"type": "array"}})")), "Array<any>[]");
  EXPECT_EQ(JsonSchemaToTypeScript(json::parse(R"({"type": "string", "enum": [1, 2]})")), "string");
  EXPECT_EQ(JsonSchemaToTypeScript(json::parse(R"({"type": [1]})")), "any");
}

TEST(HarmonyTools, ChatBodiesRenderTokenExact) {
  const HarmonyEncoding& encoding = HarmonyEncoding::BuiltIn();
  for (const json& c : Goldens()["render"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const std::vector<Message> messages = HarmonyMessages(MapChatRequest(c["body"]), c["current_date"].get<std::string>());
    EXPECT_EQ(RenderForCompletionText(messages), c["text"].get<std::string>());
    EXPECT_EQ(encoding.RenderForCompletion(messages), c["ids"].get<std::vector<int32_t>>());
  }
}

TEST(HarmonyTools, ModelOutputParsesAsHarmonyParsesIt) {
  const HarmonyEncoding& encoding = HarmonyEncoding::BuiltIn();
  for (const json& c : Goldens()["parse"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const std::vector<int32_t> ids = c["ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(encoding.tokenizer().Encode(c["text"].get<std::string>()), ids);
    std::vector<Message> expected;
    for (const json& m : c["messages"]) {
      expected.push_back({m["role"], m["channel"], m["recipient"], m["content_type"], m["content"]});
    }
    EXPECT_EQ(ParseHarmony(encoding, ids), expected);
  }
}

}  // namespace
}  // namespace tessera
