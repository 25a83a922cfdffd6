// The OpenAI request/response shapes of `tessera serve` (server/openai_api.h), without a socket:
// field errors are 400s naming the field (serving.md §1, §4), the gpt-oss chat mapping renders
// what harmony renders for the same conversation (serving.md §6), and replies split reasoning
// from content and honour stop strings (§3).
#include "server/openai_api.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "chat_model_dir.h"
#include "core/error.h"

namespace tessera {
namespace {

using json = nlohmann::ordered_json;

const std::string kGptOss = std::string(TESSERA_SOURCE_DIR) + "/models/tiny-gpt-oss";

struct Fixture {
  std::unique_ptr<Model> model = Model::Load(kGptOss);
  Tokenizer tokenizer = Tokenizer::FromModelDir(kGptOss);
  ChatFormat format{*model, tokenizer};
};
Fixture& Shared() {
  static Fixture f;
  return f;
}

// The ApiError a body gives: "status param: message".
std::string ErrorOf(const json& body, bool chat = true) {
  try {
    ParseCompletionRequest(body, chat, Shared().format, SamplingParams{});
  } catch (const ApiError& e) {
    return StrCat(e.status(), " ", e.param(), ": ", e.what());
  }
  return "no error";
}

const json kHello = json::array({{{"role", "user"}, {"content", "Hello"}}});

TEST(OpenAiApi, BadFieldsAre400sNamingTheField) {
  EXPECT_EQ(ErrorOf(json::array()), "400 : the request body must be a JSON object, not an array");
  EXPECT_EQ(ErrorOf({{"messages", kHello}, {"n", 0}}), "400 n: 'n' 0 must lie in [1, 128]");
  EXPECT_EQ(ErrorOf({{"messages", kHello}, {"temperature", "hot"}}),
            "400 temperature: 'temperature' must be a number, not a string");
  EXPECT_EQ(ErrorOf({{"messages", kHello}, {"temperature", 3}}), "400 temperature: 'temperature' 3 must lie in [0, 2]");
  EXPECT_EQ(ErrorOf({{"messages", kHello}, {"top_p", 0}}), "400 top_p: 'top_p' must be greater than 0");
  EXPECT_EQ(ErrorOf({{"messages", kHello}, {"max_tokens", 1.5}}), "400 max_tokens: 'max_tokens' must be an integer, not a number");
  EXPECT_EQ(ErrorOf({{"messages", kHello}, {"n", 0.0}}), "400 n: 'n' 0 must lie in [1, 128]");  // integral floats are integers
  // Integers past int64 are out of range, never converted (a float-to-int64 conversion of 1e37 is
  // undefined behaviour: the fuzz target found it; its input is in tests/fuzz/corpus).
  for (const json& huge : {json(1e37), json(-1e37), json(9223372036854775808.0), json(18446744073709551615ull)}) {
    const std::string error = ErrorOf({{"messages", kHello}, {"max_tokens", huge}});
    EXPECT_EQ(error.rfind("400 max_tokens: 'max_tokens' ", 0), 0u) << error;
    EXPECT_NE(error.find(" must lie in ["), std::string::npos) << error;
  }
  EXPECT_EQ(ErrorOf({{"messages", kHello}, {"stream_options", {{"include_usage", true}}}}),
            "400 stream_options: 'stream_options' is only allowed with 'stream': true");
  EXPECT_EQ(ErrorOf({{"messages", kHello}, {"response_format", {{"type", "yaml"}}}}),
            "400 response_format: 'response_format' type 'yaml' is not one of text, json_object, json_schema");
  EXPECT_EQ(ErrorOf({{"messages", kHello}, {"top_logprobs", 3}}), "400 top_logprobs: 'top_logprobs' needs 'logprobs': true");
  EXPECT_EQ(ErrorOf({{"messages", kHello}, {"stop", 5}}), "400 stop: 'stop' must be a string or an array of strings");
  EXPECT_EQ(ErrorOf({{"messages", "hi"}}), "400 messages: 'messages' must be a non-empty array");
  EXPECT_EQ(ErrorOf({{"messages", json::array({{{"content", "x"}}})}}), "400 messages: 'messages[0].role' must be a string");
  EXPECT_EQ(ErrorOf({{"messages", json::array({{{"role", "robot"}, {"content", "x"}}})}}),
            "400 messages: 'messages[0].role' 'robot' is not one of system, developer, user, assistant, tool");
  EXPECT_EQ(ErrorOf({{"messages", json::array({{{"role", "user"}, {"content", {{{"type", "image_url"}}}}}})}}),
            "400 messages[0].content: 'messages[0].content[0]' is a 'image_url' part; this model reads text only");
  EXPECT_EQ(ErrorOf({{"messages", kHello}, {"reasoning_effort", "none"}}),
            "400 reasoning_effort: 'reasoning_effort' 'none' is not supported by gpt-oss (low, medium, high)");
  EXPECT_EQ(ErrorOf({{"messages", kHello}, {"tools", json::array({{{"type", "function"}}})}}),
            "400 tools: 'tools[0].function' must be an object");
  EXPECT_EQ(ErrorOf({{"messages", kHello}, {"tools", json::array({{{"type", "retrieval"}}})}}),
            "400 tools: 'tools[0].type' must be \"function\": tessera serves function tools only");
  EXPECT_EQ(ErrorOf({{"messages", kHello}, {"tools", json::array({{{"type", "function"}, {"function", {{"name", "get weather"}}}}})}}),
            "400 tools: 'tools[0].function.name' 'get weather' must be 1 to 64 characters of a-z, A-Z, 0-9, _ and -");
  EXPECT_EQ(ErrorOf({{"messages", kHello},
                     {"tools", json::array({{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", "x"}}}}})}}),
            "400 tools: 'tools[0].function.parameters' must be an object (a JSON schema)");
  EXPECT_EQ(ErrorOf({{"messages", kHello}, {"tool_choice", "required"}}),
            "400 tool_choice: 'tool_choice' \"required\" needs at least one tool in 'tools'");
  EXPECT_EQ(ErrorOf({{"messages", kHello}, {"tool_choice", "sometimes"}}),
            "400 tool_choice: 'tool_choice' 'sometimes' is not one of none, auto, required, or a function");
  EXPECT_EQ(ErrorOf({{"messages", kHello}, {"tool_choice", {{"type", "function"}}}}).substr(0, 74),
            "400 tool_choice: 'tool_choice' is not one of none, auto, required, or a fu");
  const json f_tool = json::array({{{"type", "function"}, {"function", {{"name", "f"}}}}});
  EXPECT_EQ(ErrorOf({{"messages", kHello}, {"tools", f_tool}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "g"}}}}}}),
            "400 tool_choice: 'tool_choice' names function 'g', which 'tools' does not declare");
  EXPECT_EQ(ErrorOf({{"messages", kHello}, {"logit_bias", {{"abc", 1}}}}),
            "400 logit_bias: 'logit_bias' key 'abc' is not a token id in [0, 4096)");
  EXPECT_EQ(ErrorOf({{"messages", kHello}, {"logit_bias", {{"7", "x"}}}}),
            "400 logit_bias: 'logit_bias' of token 7 must be a number in [-100, 100]");
  EXPECT_EQ(ErrorOf({{"messages", json::array({{{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "18"}}})}}),
            "400 messages: 'messages[0]' answers tool call 'c1', which no earlier assistant message made");
  // Completions.
  EXPECT_EQ(ErrorOf(json::object(), false), "400 prompt: 'prompt' is required");
  EXPECT_EQ(ErrorOf({{"prompt", {"a", "b"}}}, false), "400 prompt: 'prompt' holds several prompts; send one per request");
  EXPECT_EQ(ErrorOf({{"prompt", {1, -2}}}, false), "400 prompt: 'prompt' token ids must be integers in [0, 4096)");
  EXPECT_EQ(ErrorOf({{"prompt", "x"}, {"logprobs", 9}}, false), "400 logprobs: 'logprobs' 9 must lie in [0, 5]");
  EXPECT_EQ(ErrorOf({{"prompt", "x"}, {"echo", true}}, false), "400 echo: 'echo' is not supported");
}

TEST(OpenAiApi, LimitsDefaultsAndUnknownFields) {
  const ChatFormat& f = Shared().format;
  const SamplingParams defaults{.temperature = 0.5f, .top_k = 7};
  CompletionRequest chat = ParseCompletionRequest({{"messages", kHello}, {"user", "x"}, {"store", false}}, true, f, defaults);
  EXPECT_EQ(chat.max_tokens, -1);  // chat: until a stop token or the context
  EXPECT_EQ(chat.sampling.temperature, 0.5f);
  EXPECT_EQ(chat.sampling.top_k, 7);
  EXPECT_FALSE(chat.seeded);
  chat = ParseCompletionRequest({{"messages", kHello}, {"max_tokens", 9}, {"max_completion_tokens", 5}, {"seed", 4},
                                 {"stop", "END"}, {"stream", true}, {"stream_options", {{"include_usage", true}}}},
                                true, f, defaults);
  EXPECT_EQ(chat.max_tokens, 5);
  EXPECT_TRUE(chat.seeded);
  EXPECT_EQ(chat.sampling.seed, 4u);
  EXPECT_EQ(chat.stop, std::vector<std::string>{"END"});
  EXPECT_TRUE(chat.include_usage);
  const CompletionRequest text = ParseCompletionRequest({{"prompt", {5, 6, 7}}}, false, f, defaults);
  EXPECT_EQ(text.max_tokens, 16);  // OpenAI's completions default
  EXPECT_EQ(text.prompt, (std::vector<int32_t>{5, 6, 7}));
  // The newer name wins on /v1/completions too; n and logit_bias are carried to the engine.
  const CompletionRequest capped = ParseCompletionRequest(
      {{"prompt", {5}}, {"max_tokens", 9}, {"max_completion_tokens", 3}, {"n", 4}, {"logit_bias", {{"12", -100}}}}, false, f,
      defaults);
  EXPECT_EQ(capped.max_tokens, 3);
  EXPECT_EQ(capped.n, 4);
  EXPECT_EQ(capped.logit_bias, (std::vector<std::pair<int32_t, float>>{{12, -100.0f}}));
}

TEST(OpenAiApi, GptOssChatRendersAsHarmony) {
  const Fixture& fx = Shared();
  const json body = {{"reasoning_effort", "low"},
                     {"messages", json::array({{{"role", "system"}, {"content", "Be brief."}},
                                               {{"role", "user"}, {"content", {{{"type", "text"}, {"text", "Hi"}}}}},
                                               {{"role", "assistant"}, {"reasoning_content", "Greet."}, {"content", "Hello!"}},
                                               {{"role", "user"}, {"content", "Weather?"}}})}};
  SystemContent system;
  system.reasoning_effort = ReasoningEffort::kLow;
  const std::vector<Message> expected = {Message::System(system), Message::Developer("Be brief."), Message::User("Hi"),
                                         Message::Assistant("analysis", "Greet."), Message::Assistant("final", "Hello!"),
                                         Message::User("Weather?")};
  EXPECT_EQ(fx.format.RenderChat(MapChatRequest(body)), fx.format.harmony_encoding()->RenderForCompletion(expected));
}

TEST(OpenAiApi, RepliesSplitReasoningAndHonourStopStrings) {
  const Fixture& fx = Shared();
  const std::vector<int32_t> ids = fx.tokenizer.Encode(
      "<|channel|>analysis<|message|>Think first.<|end|><|start|>assistant<|channel|>final<|message|>The answer is 42. "
      "END here<|return|>");
  ReplyState reply(fx.format, true, fx.format.chat_stop_tokens(), {"END"});
  std::string reasoning, content;
  for (int32_t id : ids) {
    const ReplyParser::Piece p = reply.Add(id);
    reasoning += p.reasoning;
    content += p.content;
  }
  const ReplyParser::Piece tail = reply.Finish();
  content += tail.content;
  EXPECT_EQ(reasoning, "Think first.");
  EXPECT_EQ(content, "The answer is 42. ");
  EXPECT_TRUE(reply.stopped());
  EXPECT_EQ(reply.content(), content);

  StopStrings stop({"world", "xyz"});
  EXPECT_EQ(stop.Add("Hello wor"), "Hello ");  // "wor" may begin "world"
  EXPECT_EQ(stop.Add("m"), "worm");
  EXPECT_EQ(stop.Add(" x"), " ");
  EXPECT_EQ(stop.Finish(), "x");
  StopStrings utf8({"\xC3\xA9t\xC3\xA9"});     // "été"
  EXPECT_EQ(utf8.Add("caf\xC3\xA9"), "caf");   // the é could begin the stop string
  EXPECT_EQ(utf8.Add("!"), "\xC3\xA9!");
}

// gpt-oss with tools: a message addressed to functions.NAME becomes a call, opened by its first
// delta and streamed as its arguments arrive; preambles stay content, analysis is reasoning.
// Without tools in the request the same reply is content.
TEST(OpenAiApi, HarmonyToolCallsStreamAsDeltas) {
  const Fixture& fx = Shared();
  const std::vector<int32_t> ids = fx.tokenizer.Encode(
      "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary<|message|>Checking."
      "<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
      "{\"city\": \"Paris\"}<|call|>");
  ReplyState reply(fx.format, true, fx.format.chat_stop_tokens(), {}, /*tools=*/true);
  std::string reasoning, content, arguments;
  std::vector<ToolCallDelta> deltas;
  auto take = [&](const ReplyParser::Piece& p) {
    reasoning += p.reasoning;
    content += p.content;
    for (const ToolCallDelta& d : p.calls) {
      deltas.push_back(d);
      arguments += d.arguments;
    }
  };
  for (int32_t id : ids) take(reply.Add(id));
  take(reply.Finish());
  EXPECT_EQ(reasoning, "Need weather.");
  EXPECT_EQ(content, "Checking.");
  ASSERT_GE(deltas.size(), 2u);  // the arguments arrive over several tokens
  EXPECT_EQ(deltas[0].name, "get_weather");
  for (size_t i = 0; i < deltas.size(); ++i) {
    EXPECT_EQ(deltas[i].index, 0u);
    if (i > 0) {
      EXPECT_EQ(deltas[i].name, "");
    }
  }
  EXPECT_EQ(arguments, "{\"city\": \"Paris\"}");
  // As a client accumulates the chunks' deltas by index, it gets the message's call.
  json accumulated = json::array();
  for (const ToolCallDelta& d : deltas) {
    const json j = ToolCallDeltaJson(d, "chatcmpl-7");
    const size_t index = j["index"];
    if (index == accumulated.size()) {
      EXPECT_TRUE(j.contains("id") && j.contains("type")) << j.dump();
      accumulated.push_back({{"id", j["id"]}, {"type", j["type"]}, {"function", j["function"]}});
    } else {
      EXPECT_FALSE(j.contains("id")) << j.dump();
      accumulated[index]["function"]["arguments"] =
          accumulated[index]["function"]["arguments"].get<std::string>() + j["function"]["arguments"].get<std::string>();
    }
  }
  ASSERT_EQ(reply.calls().size(), 1u);
  EXPECT_EQ(accumulated, json::array({ToolCallJson(reply.calls()[0], 0, "chatcmpl-7")}));
  EXPECT_EQ(accumulated[0]["id"].get<std::string>().size(), 9u);  // Mistral's templates demand 9
  EXPECT_NE(ToolCallJson(reply.calls()[0], 1, "chatcmpl-7")["id"], accumulated[0]["id"]);
  EXPECT_EQ(reply.calls()[0].name, "get_weather");
  EXPECT_EQ(reply.calls()[0].arguments, arguments);

  // A second call with empty arguments still opens (index 1), from its closing token.
  ReplyState two(fx.format, true, fx.format.chat_stop_tokens(), {}, true);
  for (int32_t id : fx.tokenizer.Encode("<|channel|>commentary to=functions.a json<|message|>{}<|call|>"
                                        "<|start|>assistant<|channel|>commentary to=functions.b json<|message|><|call|>")) {
    two.Add(id);
  }
  two.Finish();
  ASSERT_EQ(two.calls().size(), 2u);
  EXPECT_EQ(two.calls()[1].name, "b");
  EXPECT_EQ(two.calls()[1].arguments, "");

  ReplyState plain(fx.format, true, fx.format.chat_stop_tokens(), {}, false);
  std::string text;
  for (int32_t id : ids) text += plain.Add(id).content;
  text += plain.Finish().content;
  EXPECT_EQ(text, "Checking.{\"city\": \"Paris\"}");
  EXPECT_TRUE(plain.calls().empty());
}

// Declared tools reach the harmony prompt (developer message, system note); tool_choice "none"
// declares nothing, and the schema keeps the client's key order.
TEST(OpenAiApi, GptOssToolsAreDeclaredInTheDeveloperMessage) {
  const Fixture& fx = Shared();
  const json tool = json::parse(R"({"type": "function", "function": {"name": "get_weather", "description": "Weather.",
      "parameters": {"type": "object", "properties": {"unit": {"type": "string"}, "city": {"type": "string"}}}}})");
  json body = {{"messages", kHello}, {"tools", json::array({tool})}};
  const std::vector<Message> messages = HarmonyMessages(MapChatRequest(body));
  ASSERT_EQ(messages.size(), 3u);
  EXPECT_NE(messages[0].content.find("Calls to these tools must go to the commentary channel: 'functions'."),
            std::string::npos);
  EXPECT_EQ(messages[1].role, "developer");
  EXPECT_NE(messages[1].content.find("type get_weather = (_: {\nunit?: string,\ncity?: string,\n}) => any;"),
            std::string::npos);
  CompletionRequest r = ParseCompletionRequest(body, true, fx.format, {});
  EXPECT_TRUE(r.tools);
  body["tool_choice"] = "none";
  EXPECT_EQ(HarmonyMessages(MapChatRequest(body)).size(), 2u);  // system, user
  EXPECT_FALSE(ParseCompletionRequest(body, true, fx.format, {}).tools);
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

// engine/tool_calls.h on streamed text cut at every byte: the same content and calls as in one
// piece, and a broken block stays content.
ToolCallParser::Output Stream(ToolCallFormat format, const std::string& text, size_t step) {
  ToolCallParser parser(format);
  ToolCallParser::Output all;
  auto take = [&](ToolCallParser::Output o) {
    all.content += o.content;
    for (ToolCall& c : o.calls) all.calls.push_back(std::move(c));
  };
  for (size_t i = 0; i < text.size(); i += step) take(parser.Add(text.substr(i, step)));
  take(parser.Finish());
  return all;
}

TEST(ToolCalls, HermesAndLlamaJsonCallsComeOutOfStreamedText) {
  const std::string hermes =
      "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call><tool_call>not json</tool_call> done";
  for (size_t step : {1, 3, 1000}) {
    SCOPED_TRACE(step);
    const ToolCallParser::Output out = Stream(ToolCallFormat::kHermes, hermes, step);
    ASSERT_EQ(out.calls.size(), 2u);
    EXPECT_EQ(out.calls[0].name, "get_weather");
    EXPECT_EQ(out.calls[0].arguments, "{\"city\":\"Paris\"}");
    EXPECT_EQ(out.calls[1].name, "get_time");
    EXPECT_EQ(out.calls[1].arguments, "{}");
    EXPECT_EQ(out.content, "Let me look.\n\n<tool_call>not json</tool_call> done");
  }
  const ToolCallParser::Output unfinished = Stream(ToolCallFormat::kHermes, "a <tool_call>{\"name\": \"f\"", 2);
  EXPECT_TRUE(unfinished.calls.empty());
  EXPECT_EQ(unfinished.content, "a <tool_call>{\"name\": \"f\"");
  const ToolCallParser::Output llama =
      Stream(ToolCallFormat::kLlamaJson, " {\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}", 4);
  ASSERT_EQ(llama.calls.size(), 1u);
  EXPECT_EQ(llama.calls[0].arguments, "{\"city\":\"Oslo\"}");
  EXPECT_EQ(llama.content, "");
  EXPECT_EQ(Stream(ToolCallFormat::kLlamaJson, "It is sunny {\"a\": 1}", 2).content, "It is sunny {\"a\": 1}");
  EXPECT_EQ(Stream(ToolCallFormat::kLlamaJson, "{not a call}", 2).content, "{not a call}");
  EXPECT_EQ(ToolCallFormatOf(ChatTemplateKind::kQwen3), ToolCallFormat::kHermes);
  EXPECT_EQ(ToolCallFormatOf(ChatTemplateKind::kMistralV03), ToolCallFormat::kMistral);
}

TEST(ToolCalls, MistralCallsFollowTheMarker) {
  const std::string reply =
      "Checking. [TOOL_CALLS] [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}, "
      "{\"name\": \"get_time\", \"arguments\": {}}]";
  for (size_t step : {1, 5, 1000}) {
    SCOPED_TRACE(step);
    const ToolCallParser::Output out = Stream(ToolCallFormat::kMistral, reply, step);
    ASSERT_EQ(out.calls.size(), 2u);
    EXPECT_EQ(out.calls[0].name, "get_weather");
    EXPECT_EQ(out.calls[0].arguments, "{\"city\":\"Paris\"}");
    EXPECT_EQ(out.calls[1].arguments, "{}");
    EXPECT_EQ(out.content, "Checking. ");
  }
  EXPECT_EQ(Stream(ToolCallFormat::kMistral, "[TOOL_CALLS] [{\"nom\": 1}]", 3).content, "[TOOL_CALLS] [{\"nom\": 1}]");
  EXPECT_EQ(Stream(ToolCallFormat::kMistral, "[TOOL_CALLS] [{\"name\"", 3).content, "[TOOL_CALLS] [{\"name\"");
  EXPECT_EQ(Stream(ToolCallFormat::kMistral, "no [TOOL calls", 2).content, "no [TOOL calls");
}

// DeepSeek-V3 / R1 calls (deepseek.md §8): the section opens with <｜tool▁calls▁begin｜>, each call
// is TYPE<｜tool▁sep｜>NAME + a ```json fence; text before the section is content.
TEST(ToolCalls, DeepseekCallsComeOutOfStreamedText) {
  const std::string reply =
      "Checking both.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
      "{\"city\": \"Paris\"}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n```json\n"
      "{}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>broken\n```json\n{nope\n```"
      "<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
  for (size_t step : {1, 3, 7, 1000}) {
    SCOPED_TRACE(step);
    const ToolCallParser::Output out = Stream(ToolCallFormat::kDeepseek, reply, step);
    ASSERT_EQ(out.calls.size(), 2u);
    EXPECT_EQ(out.calls[0].name, "get_weather");
    EXPECT_EQ(out.calls[0].arguments, "{\"city\":\"Paris\"}");
    EXPECT_EQ(out.calls[1].name, "get_time");
    EXPECT_EQ(out.calls[1].arguments, "{}");
    // The block that is not a call stays content, markers and all.
    EXPECT_EQ(out.content,
              "Checking both.<｜tool▁call▁begin｜>function<｜tool▁sep｜>broken\n```json\n{nope\n```<｜tool▁call▁end｜>");
  }
  // A section the reply leaves open: complete calls come out, an unfinished one stays text.
  const ToolCallParser::Output open = Stream(
      ToolCallFormat::kDeepseek,
      "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{\"x\": 1}\n```<｜tool▁call▁end｜>\n", 2);
  ASSERT_EQ(open.calls.size(), 1u);
  EXPECT_EQ(open.content, "");
  EXPECT_EQ(Stream(ToolCallFormat::kDeepseek, "a<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function", 4).content,
            "a<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function");
  EXPECT_EQ(Stream(ToolCallFormat::kDeepseek, "plain <｜tool text", 3).content, "plain <｜tool text");
  EXPECT_EQ(ToolCallFormatOf(ChatTemplateKind::kDeepseekV3), ToolCallFormat::kDeepseek);
  EXPECT_EQ(ToolCallFormatOf(ChatTemplateKind::kDeepseekR1), ToolCallFormat::kDeepseek);
  EXPECT_EQ(ToolCallFormatOf(ChatTemplateKind::kDeepseekV2), ToolCallFormat::kNone);
}

// A DeepSeek-R1 model directory (tiny-llama's weights, the deepseek3 family tokenizer and R1's
// Hub template): the prompt opens <think>, so the reply is reasoning up to </think>, then the
// answer and, with tools, the calls; a V3 directory's reply is all answer.
TEST(OpenAiApi, DeepseekR1RepliesSplitReasoningAndCalls) {
  for (const char* kind : {"deepseek-r1", "deepseek-v3"}) {
    SCOPED_TRACE(kind);
    const ChatModelDir dir("deepseek3", kind);
    const std::unique_ptr<Model> model = Model::Load(dir.str());
    const Tokenizer tokenizer = Tokenizer::FromModelDir(dir.str());
    const ChatFormat format(*model, tokenizer);
    const bool r1 = std::string(kind) == "deepseek-r1";
    EXPECT_EQ(format.thinking(), r1 ? ReplyThinking::kOpen : ReplyThinking::kNone);
    ASSERT_EQ(format.tool_format(), ToolCallFormat::kDeepseek);
    const std::optional<int32_t> eos = tokenizer.TokenId("<｜end▁of▁sentence｜>");
    ASSERT_TRUE(eos.has_value());
    EXPECT_NE(std::find(format.chat_stop_tokens().begin(), format.chat_stop_tokens().end(), *eos),
              format.chat_stop_tokens().end());
    std::vector<int32_t> ids = tokenizer.Encode(
        "Paris is in France.\n</think>\n\nLet me check.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function"
        "<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Paris\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>");
    ids.push_back(*eos);
    ReplyState state(format, true, format.chat_stop_tokens(), {}, true);
    for (int32_t id : ids) state.Add(id);
    state.Finish();
    ASSERT_EQ(state.calls().size(), 1u);
    EXPECT_EQ(state.calls()[0].name, "get_weather");
    EXPECT_EQ(state.calls()[0].arguments, "{\"city\":\"Paris\"}");
    if (r1) {
      EXPECT_EQ(state.reasoning(), "Paris is in France.\n");
      EXPECT_EQ(state.content(), "Let me check.");
    } else {
      EXPECT_EQ(state.reasoning(), "");
      EXPECT_EQ(state.content(), "Paris is in France.\n</think>\n\nLet me check.");
    }
  }
}

// A Mistral v0.3 model directory (tiny-llama's weights, the Mistral family tokenizer and the
// Hub template): [TOOL_CALLS] is a special token, passed to the call parser only when the
// request declared tools.
TEST(ToolCalls, MistralReplyWithTheSpecialTokenBecomesCalls) {
  const ChatModelDir dir("mistral", "mistral-v0.3", /*with_tokenizer_json=*/false);
  const std::string data = std::string(TESSERA_SOURCE_DIR) + "/tests/data";
  const std::unique_ptr<Model> model = Model::Load(dir.str());
  const Tokenizer tokenizer = Tokenizer::FromFile(data + "/tokenizer/families/mistral/tokenizer.json");
  const ChatFormat format(*model, tokenizer);
  ASSERT_EQ(format.tool_format(), ToolCallFormat::kMistral);
  const std::vector<int32_t> ids = tokenizer.Encode("Sure.[TOOL_CALLS] [{\"name\": \"f\", \"arguments\": {\"x\": 1}}]");
  ASSERT_NE(std::find(ids.begin(), ids.end(), 5), ids.end());  // [TOOL_CALLS]
  ReplyState with(format, true, format.chat_stop_tokens(), {}, true), without(format, true, format.chat_stop_tokens(), {});
  std::string plain;
  for (int32_t id : ids) {
    with.Add(id);
    plain += without.Add(id).content;
  }
  with.Finish();
  plain += without.Finish().content;
  ASSERT_EQ(with.calls().size(), 1u);
  EXPECT_EQ(with.calls()[0].name, "f");
  EXPECT_EQ(with.calls()[0].arguments, "{\"x\":1}");
  EXPECT_TRUE(without.calls().empty());
  // Without tools the special token is skipped like any other and the JSON is content.
  EXPECT_EQ(plain, with.content() + " [{\"name\": \"f\", \"arguments\": {\"x\": 1}}]");
  EXPECT_NE(with.content().find("Sure."), std::string::npos);
}

}  // namespace
}  // namespace tessera
