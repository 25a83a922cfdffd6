// Chat templates: the model's own Jinja chat_template (from chat_template.jinja,
// tokenizer_config.json, chat_template.json or a GGUF file's tokenizer.chat_template), rendered by a
// real Jinja engine (engine/jinja_template.h) as transformers' apply_chat_template renders it, plus
// what a template cannot say: which family's tool-call syntax and reasoning blocks the replies use,
// and which tokens end a turn. tests/data/chat_templates holds the pinned Hub templates and the
// goldens that transformers rendered from them (tools/make_chat_goldens.py).
//
// Reference: ../shared/reference/dense-decoders.md §7.3 (BOS), §8 (the templates), §8.5 (stop
// tokens); deepseek.md §8; families-2026.md "Chat templates". gpt-oss's harmony format is
// engine/harmony.h.
//
// What the template sees (transformers' names): messages (role, content — null when the client
// sent none —, reasoning_content, tool_calls, tool_call_id, name, each only when given), tools,
// add_generation_prompt, enable_thinking, bos_token, eos_token, date_string when set; strftime_now
// formats the render's local time. Tool-call arguments given as a JSON string (the OpenAI wire
// form) are parsed into objects before rendering, as vLLM does (chat_utils.py
// _postprocess_messages; an empty string becomes {}), except for the DeepSeek families, whose
// templates concatenate the string.
//
// A model without a template gets ChatML, with a warning (llama-server's rule); --chat-template
// FILE|NAME replaces the model's (NAME: "chatml" or one of the Hub templates llama.cpp keeps,
// e.g. "meta-llama-Llama-3.2-3B-Instruct"; see ChatTemplate::FromOption).
//
// Special tokens (§7.3): Encode tokenizes the whole rendered text with special tokens parsed and
// without the tokenizer's post-processor (HF and vLLM: add_special_tokens=False), so the BOS the
// template writes is the only one. As there, content that spells a control token ("<|eot_id|>")
// becomes that token.
#pragma once

#include <array>
#include <cstdint>
#include <ctime>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tessera {

class JinjaTemplate;
class Tokenizer;
struct TokenizerConfig;

// The families whose reply syntax (tool calls, reasoning) tessera parses; kOther is any other
// template (its tool calls are recognised by the syntax the template shows, ToolCallFormatOf).
enum class ChatTemplateKind { kLlama31, kMistralV03, kQwen25, kQwen3, kDeepseekV2, kDeepseekV3, kDeepseekR1, kOther };

// "llama3.1" | "mistral-v0.3" | "qwen2.5" | "qwen3" | "deepseek-v2" | "deepseek-v3" | "deepseek-r1" | "other".
std::string_view ChatTemplateKindName(ChatTemplateKind kind);
// Which family template `text` is, from distinctive substrings of the Hub templates (not exact
// equality: the Hub files were revised), or nullopt. Variants whose replies differ (Mistral
// Nemo's "[TOOL_CALLS][" without space, ...) are not recognised; they render all the same.
std::optional<ChatTemplateKind> RecognizeChatTemplate(std::string_view text);

struct ChatMessage {
  // "system" | "user" | "assistant" | "tool"; the templates also know "ipython" (Llama) and
  // "tool_results" (Mistral) and treat other roles each in its own way (see the file comment).
  std::string role;
  std::string content;
  // The client sent no content (null or absent), which only DeepSeek-V3's template tells apart
  // from "": it renders tool calls only then.
  bool content_null = false;
  // Assistant reasoning (Qwen3's reasoning_content). nullopt: none given, so Qwen3 splits the
  // content at </think>; "" is given and empty.
  std::optional<std::string> reasoning;
  // Assistant tool calls: null for none, else an OpenAI-style array of
  // {"id", "type": "function", "function": {"name", "arguments"}}, "arguments" an object or a
  // JSON string. Ordered: key order is rendered. An empty array is "given" (the templates tell).
  nlohmann::ordered_json tool_calls;
  std::string tool_call_id;  // tool results; "" is absent (Mistral requires 9 characters)
  std::string name;          // "" is absent; no family template renders it

  bool operator==(const ChatMessage&) const = default;
};

struct ChatOptions {
  bool add_generation_prompt = true;  // end with the assistant header (Mistral has none)
  bool enable_thinking = true;        // the templates that read it (Qwen3, SmolLM3, ...)
  // null: no tools; else an array of OpenAI tool declarations ({"type": "function", "function":
  // {"name", "description", "parameters"}}), rendered in their key order. An empty array is not
  // null: Llama and Mistral then render an empty tool section, as their templates do.
  nlohmann::ordered_json tools;
  std::string date_string;  // Llama 3.1's "Today Date"; "" leaves the template's default
  // The time strftime_now formats (Llama 3.2's date); 0 is the time of the render.
  std::time_t now = 0;
};

// How a reply to a rendered prompt begins (ThinkSplitter, engine/think_splitter.h): plain answer;
// a <think> block the model may open (Qwen3 with thinking enabled); or already inside its
// reasoning, the prompt having opened <think> (DeepSeek-R1).
enum class ReplyThinking { kNone, kMayOpen, kOpen };

class ChatTemplate {
 public:
  // Parses `text` (a one-line tessera::Error naming `source` when it does not parse) and
  // recognises its family (RecognizeChatTemplate, else kOther). BOS/EOS texts come from `config`
  // when it gives them, else from the family's usual ones.
  static ChatTemplate FromText(std::string_view text, const std::string& source,
                               const TokenizerConfig* config = nullptr);
  // The template of a model directory or GGUF file, found as transformers finds it:
  // chat_template.jinja, else tokenizer_config.json's "chat_template", else chat_template.json's
  // (GGUF: tokenizer.chat_template). None: ChatML, and warning() says so.
  static ChatTemplate FromModelDir(const std::string& dir);
  // --chat-template: "" is FromModelDir(dir); an existing file is a template (.jinja text, or
  // a .json with a "chat_template" string); else a name: "chatml" or the stem of a Hub template
  // that llama.cpp keeps (ChatTemplateNames()). The model's BOS/EOS texts are kept.
  static ChatTemplate FromOption(const std::string& option, const std::string& dir);

  ChatTemplateKind kind() const { return kind_; }
  // The family's name; for kOther the template's own ("chatml", a file name, "jinja").
  const std::string& name() const { return name_; }
  const std::string& bos_token() const { return bos_token_; }
  const std::string& eos_token() const { return eos_token_; }
  const std::string& text() const;
  // Non-empty when the model had no template and ChatML stands in: the line to print.
  const std::string& warning() const { return warning_; }

  // The prompt text. Throws a one-line tessera::Error for no messages, text that is not UTF-8,
  // malformed tools or tool calls, and whatever the template raises (its message is quoted:
  // Mistral's alternation and tool-call-id checks, Llama's single tool call).
  std::string Render(std::span<const ChatMessage> messages, const ChatOptions& options = {}) const;
  // Ids of a rendered prompt: special tokens parsed, no post-processor (see the file comment).
  std::vector<int32_t> Encode(const Tokenizer& tokenizer, std::string_view rendered) const;
  // Render then Encode.
  std::vector<int32_t> RenderIds(const Tokenizer& tokenizer, std::span<const ChatMessage> messages,
                                 const ChatOptions& options = {}) const;

  // How the reply to a prompt rendered with `enable_thinking` begins: kOpen when the generation
  // prompt ends inside <think> (DeepSeek-R1), kMayOpen when the template knows </think> and
  // thinking is on (Qwen3, SmolLM3, ...).
  ReplyThinking Thinking(bool enable_thinking = true) const;

  // The tokens that end an assistant turn in this format: <|eot_id|>, <|eom_id|> (Llama: the end
  // of an ipython tool call); </s> (Mistral); <|im_end|>, <|endoftext|> (Qwen);
  // <｜end▁of▁sentence｜> (DeepSeek); for other templates those of a table of turn ends
  // (<end_of_turn>, <turn|>, <|end|>, <|user|>, ...) that the template text writes.
  std::vector<std::string_view> TurnEndTokens() const;
  // Ids to stop sampling on, without repeats, in this order: generation_config.json's
  // eos_token_id, config.json's, then TurnEndTokens() and the configured EOS text as far as the
  // tokenizer has them (config.json's single eos misses some: §8.5). Throws for a negative or
  // too large configured id.
  std::vector<int32_t> StopTokenIds(const Tokenizer& tokenizer, std::span<const int64_t> generation_config_eos,
                                    std::span<const int64_t> model_config_eos = {}) const;

 private:
  ChatTemplate(std::shared_ptr<const JinjaTemplate> jinja, ChatTemplateKind kind, std::string name);
  // Thinking's answer worked out from the family or, for other templates, a one-turn probe render.
  ReplyThinking ProbeThinking(bool enable_thinking) const;

  std::shared_ptr<const JinjaTemplate> jinja_;
  ChatTemplateKind kind_;
  std::string name_;
  std::string bos_token_;
  std::string eos_token_;
  std::string warning_;
  std::array<ReplyThinking, 2> thinking_{};  // Thinking(false), Thinking(true)
};

// The names --chat-template accepts besides files: "chatml", then the Hub templates llama.cpp
// keeps (file stems, sorted).
std::vector<std::string> ChatTemplateNames();

}  // namespace tessera
