// One JSON entry point (issue 27, point 1): every JSON text the program reads goes through
// io/json_util.h's size and nesting limits, so no path can hand a parser (or a recursive walk
// afterwards) a document nested 100,000 levels deep. The source tree is held to it: outside
// json_util.cpp no file calls nlohmann's parse, and the two readers that use another parser
// (nlohmann's SAX interface, simdjson) call CheckJsonLimits in the same file.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "engine/tool_calls.h"
#include "io/json_util.h"
#include "test_util.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

std::string Slurp(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(JsonEntry, NoFileParsesJsonAroundTheLimits) {
  const fs::path src = fs::path(TESSERA_SOURCE_DIR) / "src";
  const std::regex dom_parse(R"((json|ordered_json|Json)::parse\s*\()");
  const std::regex other_parser(R"(sax_parse\s*\(|simdjson::padded_string|\.parse\(padded)");
  int files = 0;
  for (const auto& entry : fs::recursive_directory_iterator(src)) {
    if (!entry.is_regular_file()) continue;
    const std::string ext = entry.path().extension();
    if (ext != ".cpp" && ext != ".h") continue;
    ++files;
    const std::string name = fs::relative(entry.path(), src).string();
    const std::string text = Slurp(entry.path());
    if (name == "io/json_util.cpp") continue;
    EXPECT_FALSE(std::regex_search(text, dom_parse)) << name << " parses JSON without io/json_util.h's limits";
    if (std::regex_search(text, other_parser)) {
      EXPECT_NE(text.find("CheckJsonLimits("), std::string::npos) << name << " runs a parser without CheckJsonLimits";
    }
  }
  EXPECT_GT(files, 100);
}

TEST(JsonEntry, SizeAndDepthLimits) {
  EXPECT_NE(ErrorOf([] { ParseJsonText("[1, 2, 3]", "body", {.max_bytes = 8}); }).find("9 bytes is larger than the limit of 8"),
            std::string::npos);
  EXPECT_NO_THROW(ParseJsonText("[1, 2, 3]", "body", {.max_bytes = 9}));
  EXPECT_NE(ErrorOf([] { ParseOrderedJsonText("[[[1]]]", "body", {.max_depth = 2}); }).find("nested deeper than 2"),
            std::string::npos);
  EXPECT_NE(ErrorOf([] { ParseOrderedJsonText(std::string("{\"a\": 1}\0x", 10), "body"); }).find("NUL byte"),
            std::string::npos);
  // What a model generates may be anything: no error, no crash.
  EXPECT_FALSE(TryParseOrderedJson(std::string(100000, '[') + std::string(100000, ']')).has_value());
  EXPECT_FALSE(TryParseOrderedJson("{\"name\": ").has_value());
  EXPECT_EQ(TryParseOrderedJson(R"({"b": 1, "a": 2})")->dump(), R"({"b":1,"a":2})");
}

TEST(JsonEntry, GeneratedToolCallsNestedTooDeepStayContent) {
  // A model that writes 100,000 brackets inside <tool_call> gets its text back, not a crash.
  ToolCallParser parser(ToolCallFormat::kHermes);
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  ToolCallParser::Output out = parser.Add("<tool_call>{\"name\": \"f\", \"arguments\": " + deep + "}</tool_call>");
  ToolCallParser::Output rest = parser.Finish();
  EXPECT_TRUE(out.calls.empty() && rest.calls.empty());
  EXPECT_NE((out.content + rest.content).find("<tool_call>"), std::string::npos);
}

}  // namespace
}  // namespace tessera
