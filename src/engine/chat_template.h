// Chat formats of the dense families: built-in renderers for the Hub chat templates of
// Llama 3.1 Instruct, Mistral-7B-Instruct v0.3, Qwen2.5 Instruct (ChatML), Qwen3, and DeepSeek's
// V2 chat, V3 and R1 templates, which give
// byte for byte the text transformers' apply_chat_template renders from the real template
// strings (tests/data/chat_templates: the pinned templates and goldens made by
// tools/make_chat_goldens.py), plus the prompt ids and the stop-token set. No Jinja runs here:
// FromModelDir reads the model's template text only to recognise which family it is.
//
// Reference: ../shared/reference/dense-decoders.md §7.3 (BOS), §8 (the templates), §8.5 (stop
// tokens); deepseek.md §8 (DeepSeek's). gpt-oss's harmony format is engine/harmony.h.
//
// What each renderer reproduces, including the templates' quirks (they are what the models were
// trained on and what other servers send):
//   llama3.1   BOS text, a system header that is always there ("Cutting Knowledge Date: December
//              2023", "Today Date: {date_string}", default "26 Jul 2024"), every content
//              Python-str.strip()ped; with tools, "Environment: ipython" and the declarations
//              (json.dumps indent 4) put into the first non-system message, whatever its role;
//              one tool call per message as {"name": …, "parameters": …}; tool results under the
//              "ipython" header, JSON-quoted (a string is "iterable" in Jinja).
//   mistral-v0.3  <s>, "[INST] …[/INST]", " {assistant, stripped}</s>"; the system text goes
//              before the last message only when that message is a user message (else it is
//              dropped); [AVAILABLE_TOOLS] before every user message equal to the last one;
//              [TOOL_CALLS] with 9-character ids; [TOOL_RESULTS] with the content inserted
//              unquoted; no generation prompt. Roles that do not alternate, other roles and
//              ids of another length are errors, as the template raises them.
//   qwen2.5    ChatML with the default system prompt "You are Qwen, created by Alibaba Cloud. You
//              are a helpful assistant."; tools in the system message; <tool_call> blocks;
//              consecutive tool results merged into one user turn of <tool_response> blocks.
//   qwen3      ChatML without default system prompt; <think> blocks for assistant turns after
//              the last real user query (reasoning from ChatMessage::reasoning, else split off
//              the content at </think>; the last message always gets one); enable_thinking
//              false pre-fills an empty think block in the generation prompt.
//   deepseek-v2  DeepSeek-V2(-Lite)-Chat: BOS, "User: {user}\n\n", "Assistant: {assistant}<EOS>",
//              system text + "\n\n" where it stands; generation prompt "Assistant:"; other roles
//              and tools are not rendered.
//   deepseek-v3  BOS, every system text (joined by "\n\n"), then <｜User｜>{user} and
//              <｜Assistant｜>{assistant}<｜end▁of▁sentence｜>; generation prompt <｜Assistant｜>
//              (not after tool outputs). Tool calls render only for an assistant message whose
//              content is null (ChatMessage::content_null): the first call of the conversation
//              opens <｜Assistant｜><｜tool▁calls▁begin｜> and is never closed, every later one
//              (in any later message too) is "\n<｜tool▁call▁begin｜>…<｜tool▁call▁end｜>
//              <｜tool▁calls▁end｜><｜end▁of▁sentence｜>"; tool outputs are
//              <｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>…, later ones after "\n". The tool
//              declarations are not rendered (the Hub template has none).
//   deepseek-r1  V3's tokens with R1's rules: tool calls whenever given (after the content, each
//              message's calls closed), the reasoning before the last </think> of an assistant
//              content dropped, no "\n" between tool outputs, and the generation prompt
//              <｜Assistant｜><think>\n, so the reply starts inside its reasoning.
//              The DeepSeek templates concatenate tool-call arguments as text: they must be
//              the JSON string the OpenAI wire form sends (not parsed, unlike the other kinds).
// Tool-call arguments given as a JSON string (the OpenAI wire form) are parsed before rendering
// (except for the DeepSeek kinds, see above), as vLLM does (chat_utils.py _postprocess_messages; an empty string becomes {}), so they render
// as objects, not as double-encoded strings. JSON inside prompts is Python's json.dumps
// (ensure_ascii=False: ", " and ": " separators, keys in the caller's order, repr floats).
//
// Not reproduced (no field carries them): Llama's builtin_tools / custom_tools /
// tools_in_user_message=false, content given as a list of parts or an object (contents are
// strings here; an absent content is ""), and malformed tool calls (no "function" object or no
// string "name"), which are errors here where a template might print an empty name.
//
// Special tokens (§7.3): Encode tokenizes the whole rendered text with special tokens parsed and
// without the tokenizer's post-processor (HF and vLLM: add_special_tokens=False), so the BOS the
// template writes is the only one. As there, content that spells a control token ("<|eot_id|>")
// becomes that token.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tessera {

class Tokenizer;
struct TokenizerConfig;

enum class ChatTemplateKind { kLlama31, kMistralV03, kQwen25, kQwen3, kDeepseekV2, kDeepseekV3, kDeepseekR1 };

// "llama3.1" | "mistral-v0.3" | "qwen2.5" | "qwen3" | "deepseek-v2" | "deepseek-v3" | "deepseek-r1".
std::string_view ChatTemplateKindName(ChatTemplateKind kind);
// Inverse of ChatTemplateKindName; throws tessera::Error naming the known kinds.
ChatTemplateKind ParseChatTemplateKind(std::string_view name);
// Which family template `text` is, from distinctive substrings of the Hub templates (not exact
// equality: the Hub files were revised), or nullopt. Variants that render differently (Llama 3.2's
// strftime_now date, Mistral Nemo's "[INST]" without space, Qwen2.5-Math's system prompt) are not
// recognised.
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
  bool enable_thinking = true;        // Qwen3 only
  // null: no tools; else an array of OpenAI tool declarations ({"type": "function", "function":
  // {"name", "description", "parameters"}}), rendered in their key order. An empty array is not
  // null: Llama and Mistral then render an empty tool section, as their templates do.
  nlohmann::ordered_json tools;
  std::string date_string;  // Llama 3.1's "Today Date"; "" leaves the template's default
};

// How a reply to a rendered prompt begins (ThinkSplitter, engine/think_splitter.h): plain answer;
// a <think> block the model may open (Qwen3 with thinking enabled); or already inside its
// reasoning, the prompt having opened <think> (DeepSeek-R1).
enum class ReplyThinking { kNone, kMayOpen, kOpen };

class ChatTemplate {
 public:
  // The family's renderer with its usual BOS/EOS texts ("<|begin_of_text|>"; "<s>", "</s>";
  // "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>").
  explicit ChatTemplate(ChatTemplateKind kind);
  // Recognises `text` (RecognizeChatTemplate); `source` names it in the error for an unknown
  // template. BOS/EOS texts come from `config` when it gives them.
  static ChatTemplate FromText(std::string_view text, const std::string& source,
                               const TokenizerConfig* config = nullptr);
  // The template of a model directory, found as transformers finds it: chat_template.jinja, else
  // tokenizer_config.json's "chat_template", else chat_template.json's. Throws a one-line
  // tessera::Error when there is none or it is not one of the known families.
  static ChatTemplate FromModelDir(const std::string& dir);

  ChatTemplateKind kind() const { return kind_; }
  std::string_view name() const { return ChatTemplateKindName(kind_); }
  const std::string& bos_token() const { return bos_token_; }
  const std::string& eos_token() const { return eos_token_; }

  // The prompt text. Throws a one-line tessera::Error for no messages, text that is not UTF-8,
  // malformed tools or tool calls, and whatever the family's template raises (its message is
  // quoted: Mistral's alternation and tool-call-id checks, Llama's single tool call).
  std::string Render(std::span<const ChatMessage> messages, const ChatOptions& options = {}) const;
  // Ids of a rendered prompt: special tokens parsed, no post-processor (see the file comment).
  std::vector<int32_t> Encode(const Tokenizer& tokenizer, std::string_view rendered) const;
  // Render then Encode.
  std::vector<int32_t> RenderIds(const Tokenizer& tokenizer, std::span<const ChatMessage> messages,
                                 const ChatOptions& options = {}) const;

  // How the reply to a prompt rendered with `enable_thinking` begins.
  ReplyThinking Thinking(bool enable_thinking = true) const;

  // The tokens that end an assistant turn in this format: <|eot_id|>, <|eom_id|> (Llama: the end
  // of an ipython tool call); </s> (Mistral); <|im_end|>, <|endoftext|> (Qwen);
  // <｜end▁of▁sentence｜> (DeepSeek).
  std::vector<std::string_view> TurnEndTokens() const;
  // Ids to stop sampling on, without repeats, in this order: generation_config.json's
  // eos_token_id, config.json's, then TurnEndTokens() and the configured EOS text as far as the
  // tokenizer has them (config.json's single eos misses some: §8.5). Throws for a negative or
  // too large configured id.
  std::vector<int32_t> StopTokenIds(const Tokenizer& tokenizer, std::span<const int64_t> generation_config_eos,
                                    std::span<const int64_t> model_config_eos = {}) const;

 private:
  ChatTemplateKind kind_;
  std::string bos_token_;
  std::string eos_token_;
};

}  // namespace tessera
