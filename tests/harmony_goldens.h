// The two harmony golden renderings of ../shared/reference/gpt-oss.md §4.3, as text and as
// o200k_harmony token ids: the tokenizer tests encode the text, the harmony tests render it.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace tessera::golden {

// (a) openai/harmony test-data/test_simple_convo.txt (no date).
inline constexpr std::string_view kSimpleConversationText =
    "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
    "Knowledge cutoff: 2024-06\n\nReasoning: medium\n\n# Valid channels: analysis, commentary, final. "
    "Channel must be included for every message.<|end|><|start|>user<|message|>What is 2 + 2?<|end|>"
    "<|start|>assistant";
inline const std::vector<int32_t> kSimpleConversationIds = {
    200006, 17360, 200008, 3575,  553,   17554,  162016, 11,    261,  4410,   6439,   2359,   22203,
    656,    7788,  17527,  558,   87447, 100594, 25,     220,   1323, 19,     12,     3218,   279,
    30377,  289,   25,     14093, 279,   2,      13888,  18403, 25,   8450,   11,     49159,  11,
    1721,   13,    21030,  2804,  413,   7360,   395,    1753,  3176, 13,     200007, 200006, 1428,
    200008, 4827,  382,    220,   17,    659,    220,    17,    30,   200007, 200006, 173781};

// (b) HF chat_template.jinja for [system "You are a helpful assistant.", user "Hello"] with the
// date pinned to 2025-06-28: the leading system message becomes the developer message.
inline constexpr std::string_view kChatTemplateText =
    "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
    "Knowledge cutoff: 2024-06\nCurrent date: 2025-06-28\n\nReasoning: medium\n\n# Valid channels: "
    "analysis, commentary, final. Channel must be included for every message.<|end|><|start|>developer"
    "<|message|># Instructions\n\nYou are a helpful assistant.<|end|><|start|>user<|message|>Hello<|end|>"
    "<|start|>assistant";
inline const std::vector<int32_t> kChatTemplateIds = {
    200006, 17360, 200008, 3575,   553,    17554,  162016, 11,     261,    4410,   6439,  2359, 22203, 656,
    7788,   17527, 558,    87447,  100594, 25,     220,    1323,   19,     12,     3218,  198,  6576,  3521,
    25,     220,   1323,   20,     12,     3218,   12,     2029,   279,    30377,  289,   25,   14093, 279,
    2,      13888, 18403,  25,     8450,   11,     49159,  11,     1721,   13,     21030, 2804, 413,   7360,
    395,    1753,  3176,   13,     200007, 200006, 77944,  200008, 2,      68406,  279,   3575, 553,   261,
    10297,  29186, 13,     200007, 200006, 1428,   200008, 13225,  200007, 200006, 173781};

}  // namespace tessera::golden
