#include "engine/harmony.h"

#include <utility>

#include "core/error.h"

namespace tessera {
namespace {

constexpr std::string_view kStartText = "<|start|>";
constexpr std::string_view kEndText = "<|end|>";
constexpr std::string_view kMessageText = "<|message|>";
constexpr std::string_view kChannelText = "<|channel|>";
constexpr std::string_view kConstrainText = "<|constrain|>";
constexpr std::string_view kCallText = "<|call|>";

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

bool HasSpace(std::string_view s) {
  for (char c : s) {
    if (IsSpace(c)) return true;
  }
  return false;
}

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && s.substr(0, prefix.size()) == prefix;
}

std::vector<std::string_view> SplitWords(std::string_view s) {
  std::vector<std::string_view> words;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && IsSpace(s[i])) ++i;
    const size_t begin = i;
    while (i < s.size() && !IsSpace(s[i])) ++i;
    if (i > begin) words.push_back(s.substr(begin, i - begin));
  }
  return words;
}

// "to=X" with X non-empty.
std::optional<std::string_view> RecipientOf(std::string_view word) {
  if (word.size() > 3 && StartsWith(word, "to=")) return word.substr(3);
  return std::nullopt;
}

bool IsKnownRole(std::string_view word) {
  return word == "system" || word == "developer" || word == "user" || word == "assistant";
}

bool IsKnownChannel(std::string_view word) {
  return word == "analysis" || word == "commentary" || word == "final";
}

Message MakeMessage(std::string_view role, std::string_view channel, std::string_view recipient,
                    std::string_view content_type, std::string_view content) {
  Message m;
  m.role = std::string(role);
  m.channel = std::string(channel);
  m.recipient = std::string(recipient);
  m.content_type = std::string(content_type);
  m.content = std::string(content);
  return m;
}

enum class Special { kStart, kEnd, kMessage, kChannel, kConstrain, kCall };

// Walks the pieces of one rendered message: emit_special(Special) for formatting tokens,
// emit_text(string_view) for text. Validates the header first (`index` names the message).
template <typename EmitSpecial, typename EmitText>
void ForEachPiece(const Message& m, size_t index, EmitSpecial&& emit_special, EmitText&& emit_text) {
  if (m.role.empty()) Fail("harmony: message ", index, " has an empty role");
  if (HasSpace(m.role)) Fail("harmony: message ", index, ": role '", m.role, "' contains whitespace");
  if (HasSpace(m.channel)) {
    Fail("harmony: message ", index, ": channel '", m.channel, "' contains whitespace");
  }
  if (HasSpace(m.recipient)) {
    Fail("harmony: message ", index, ": recipient '", m.recipient, "' contains whitespace");
  }
  emit_special(Special::kStart);
  emit_text(m.role);
  if (!m.recipient.empty() && m.recipient != "all") emit_text(StrCat(" to=", m.recipient));
  if (!m.channel.empty()) {
    emit_special(Special::kChannel);
    emit_text(m.channel);
  }
  if (!m.content_type.empty()) {
    if (StartsWith(m.content_type, kConstrainText)) {
      emit_text(" ");
      emit_special(Special::kConstrain);
      const std::string_view rest = std::string_view(m.content_type).substr(kConstrainText.size());
      if (!rest.empty()) emit_text(rest);
    } else {
      emit_text(StrCat(" ", m.content_type));
    }
  }
  emit_special(Special::kMessage);
  if (!m.content.empty()) emit_text(m.content);
  emit_special(m.IsToolCall() ? Special::kCall : Special::kEnd);
}

std::string_view SpecialText(Special s) {
  switch (s) {
    case Special::kStart: return kStartText;
    case Special::kEnd: return kEndText;
    case Special::kMessage: return kMessageText;
    case Special::kChannel: return kChannelText;
    case Special::kConstrain: return kConstrainText;
    case Special::kCall: return kCallText;
  }
  return {};
}

// Which messages the history rule keeps (file comment of harmony.h).
std::vector<bool> KeptMessages(std::span<const Message> messages, const RenderOptions& options) {
  std::vector<bool> keep(messages.size(), true);
  if (!options.drop_completed_analysis) return keep;
  size_t last_final = 0;
  bool has_final = false;
  for (size_t i = 0; i < messages.size(); ++i) {
    if (messages[i].role == "assistant" && messages[i].channel == "final") {
      last_final = i;
      has_final = true;
    }
  }
  if (!has_final) return keep;
  // Tool calls made from the analysis channel (browser, python) stay, paired with their results.
  for (size_t i = 0; i < last_final; ++i) {
    const Message& m = messages[i];
    if (m.role == "assistant" && m.channel == "analysis" && !m.IsToolCall()) keep[i] = false;
  }
  return keep;
}

void AppendText(const Tokenizer& tokenizer, std::string_view text, std::vector<int32_t>& out) {
  const std::vector<int32_t> ids = tokenizer.EncodeOrdinary(text);
  out.insert(out.end(), ids.begin(), ids.end());
}

void RenderMessageInto(const HarmonyEncoding& encoding, const Message& message, size_t index,
                       std::vector<int32_t>& out) {
  const HarmonyTokens& t = encoding.tokens();
  ForEachPiece(
      message, index,
      [&](Special s) {
        switch (s) {
          case Special::kStart: out.push_back(t.start); break;
          case Special::kEnd: out.push_back(t.end); break;
          case Special::kMessage: out.push_back(t.message); break;
          case Special::kChannel: out.push_back(t.channel); break;
          case Special::kConstrain: out.push_back(t.constrain); break;
          case Special::kCall: out.push_back(t.call); break;
        }
      },
      [&](std::string_view text) { AppendText(encoding.tokenizer(), text, out); });
}

void RenderMessageTextInto(const Message& message, size_t index, std::string& out) {
  ForEachPiece(
      message, index, [&](Special s) { out += SpecialText(s); },
      [&](std::string_view text) { out += text; });
}

}  // namespace

std::string_view ReasoningEffortName(ReasoningEffort effort) {
  switch (effort) {
    case ReasoningEffort::kLow: return "low";
    case ReasoningEffort::kMedium: return "medium";
    case ReasoningEffort::kHigh: return "high";
  }
  return "medium";
}

ReasoningEffort ParseReasoningEffort(std::string_view name) {
  if (name == "low") return ReasoningEffort::kLow;
  if (name == "medium") return ReasoningEffort::kMedium;
  if (name == "high") return ReasoningEffort::kHigh;
  Fail("reasoning effort '", name, "' is not one of low, medium, high");
}

std::string RenderSystemContent(const SystemContent& system) {
  std::vector<std::string> sections;
  std::string top;
  auto add_line = [&top](const std::string& line) {
    if (!top.empty()) top += '\n';
    top += line;
  };
  if (!system.model_identity.empty()) add_line(system.model_identity);
  if (!system.knowledge_cutoff.empty()) add_line(StrCat("Knowledge cutoff: ", system.knowledge_cutoff));
  if (!system.current_date.empty()) add_line(StrCat("Current date: ", system.current_date));
  if (!top.empty()) sections.push_back(std::move(top));
  if (system.reasoning_effort) {
    sections.push_back(StrCat("Reasoning: ", ReasoningEffortName(*system.reasoning_effort)));
  }
  if (!system.valid_channels.empty()) {
    std::string line = "# Valid channels: ";
    for (size_t i = 0; i < system.valid_channels.size(); ++i) {
      if (i > 0) line += ", ";
      line += system.valid_channels[i];
    }
    line += '.';
    if (system.channel_required) line += " Channel must be included for every message.";
    if (system.function_tools_note) {
      line += "\nCalls to these tools must go to the commentary channel: 'functions'.";
    }
    sections.push_back(std::move(line));
  }
  std::string out;
  for (size_t i = 0; i < sections.size(); ++i) {
    if (i > 0) out += "\n\n";
    out += sections[i];
  }
  return out;
}

std::string RenderDeveloperInstructions(std::string_view instructions) {
  return StrCat("# Instructions\n\n", instructions);
}

Message Message::System(const SystemContent& system) {
  return MakeMessage("system", "", "", "", RenderSystemContent(system));
}

Message Message::Developer(std::string_view instructions) {
  return MakeMessage("developer", "", "", "", RenderDeveloperInstructions(instructions));
}

Message Message::User(std::string_view text) {
  return MakeMessage("user", "", "", "", text);
}

Message Message::Assistant(std::string_view channel, std::string_view text) {
  return MakeMessage("assistant", channel, "", "", text);
}

Message Message::ToolCall(std::string_view tool, std::string_view json_arguments, std::string_view content_type) {
  return MakeMessage("assistant", "commentary", tool, content_type, json_arguments);
}

Message Message::ToolResult(std::string_view tool, std::string_view output) {
  return MakeMessage(tool, "commentary", "assistant", "", output);
}

bool Message::IsToolCall() const {
  return role == "assistant" && !recipient.empty() && recipient != "all";
}

std::vector<Message> MakeConversation(std::string_view user_text, const SystemContent& system,
                                      std::string_view developer_instructions) {
  std::vector<Message> messages;
  messages.push_back(Message::System(system));
  if (!developer_instructions.empty()) messages.push_back(Message::Developer(developer_instructions));
  messages.push_back(Message::User(user_text));
  return messages;
}

HarmonyEncoding::HarmonyEncoding(const Tokenizer& tokenizer) : tokenizer_(&tokenizer) {
  tokens_.start = tokenizer.RequireTokenId(kStartText);
  tokens_.end = tokenizer.RequireTokenId(kEndText);
  tokens_.message = tokenizer.RequireTokenId(kMessageText);
  tokens_.channel = tokenizer.RequireTokenId(kChannelText);
  tokens_.constrain = tokenizer.RequireTokenId(kConstrainText);
  tokens_.return_ = tokenizer.RequireTokenId("<|return|>");
  tokens_.call = tokenizer.RequireTokenId(kCallText);
  tokens_.endoftext = tokenizer.RequireTokenId("<|endoftext|>");
}

const HarmonyEncoding& HarmonyEncoding::BuiltIn() {
  static const HarmonyEncoding encoding(Tokenizer::BuiltIn());
  return encoding;
}

std::vector<int32_t> HarmonyEncoding::AssistantStopTokens() const {
  return {tokens_.return_, tokens_.call, tokens_.endoftext};
}

std::vector<int32_t> HarmonyEncoding::MessageEndTokens() const {
  return {tokens_.end, tokens_.return_, tokens_.call};
}

void HarmonyEncoding::RenderMessage(const Message& message, std::vector<int32_t>& out) const {
  RenderMessageInto(*this, message, 0, out);
}

std::vector<int32_t> HarmonyEncoding::RenderConversation(std::span<const Message> messages,
                                                         const RenderOptions& options) const {
  const std::vector<bool> keep = KeptMessages(messages, options);
  std::vector<int32_t> out;
  for (size_t i = 0; i < messages.size(); ++i) {
    if (keep[i]) RenderMessageInto(*this, messages[i], i, out);
  }
  return out;
}

std::vector<int32_t> HarmonyEncoding::RenderForCompletion(std::span<const Message> messages,
                                                          const RenderOptions& options) const {
  std::vector<int32_t> out = RenderConversation(messages, options);
  out.push_back(tokens_.start);
  AppendText(*tokenizer_, "assistant", out);
  return out;
}

std::string RenderMessageText(const Message& message) {
  std::string out;
  RenderMessageTextInto(message, 0, out);
  return out;
}

std::string RenderConversationText(std::span<const Message> messages, const RenderOptions& options) {
  const std::vector<bool> keep = KeptMessages(messages, options);
  std::string out;
  for (size_t i = 0; i < messages.size(); ++i) {
    if (keep[i]) RenderMessageTextInto(messages[i], i, out);
  }
  return out;
}

std::string RenderForCompletionText(std::span<const Message> messages, const RenderOptions& options) {
  return StrCat(RenderConversationText(messages, options), kStartText, "assistant");
}

HarmonyPart ClassifyMessage(const Message& message) {
  if (message.role != "assistant") return HarmonyPart::kFinal;
  if (message.IsToolCall()) return HarmonyPart::kToolCall;
  if (message.channel == "analysis") return HarmonyPart::kAnalysis;
  if (message.channel == "commentary") return HarmonyPart::kCommentary;
  return HarmonyPart::kFinal;
}

std::string_view HarmonyPartName(HarmonyPart part) {
  switch (part) {
    case HarmonyPart::kFinal: return "final";
    case HarmonyPart::kAnalysis: return "analysis";
    case HarmonyPart::kCommentary: return "commentary";
    case HarmonyPart::kToolCall: return "tool_call";
  }
  return "final";
}

// ---- HarmonyParser -----------------------------------------------------------------------------

HarmonyParser::HarmonyParser(const HarmonyEncoding& encoding, std::string_view role)
    : encoding_(&encoding),
      default_role_(role.empty() ? "assistant" : std::string(role)),
      header_decoder_(encoding.tokenizer()),
      content_decoder_(encoding.tokenizer()) {
  if (!role.empty()) BeginHeader(std::string(role));
}

const std::string& HarmonyParser::current_role() const {
  if (state_ == State::kContent) return current_.role;
  if (state_ == State::kHeader) return preset_role_;
  return empty_;
}
const std::string& HarmonyParser::current_channel() const {
  return state_ == State::kContent ? current_.channel : empty_;
}
const std::string& HarmonyParser::current_recipient() const {
  return state_ == State::kContent ? current_.recipient : empty_;
}
const std::string& HarmonyParser::current_content_type() const {
  return state_ == State::kContent ? current_.content_type : empty_;
}
const std::string& HarmonyParser::current_content() const {
  return state_ == State::kContent ? current_.content : empty_;
}

void HarmonyParser::BeginHeader(std::string preset_role) {
  state_ = State::kHeader;
  preset_role_ = std::move(preset_role);
  header_.assign(1, HeaderSegment{});
  header_tokens_ = 0;
  header_decoder_ = IncrementalDecoder(encoding_->tokenizer());
}

void HarmonyParser::FinishHeaderText() { header_.back().text += header_decoder_.Flush(); }

void HarmonyParser::AddHeaderToken(int32_t token, bool is_text) {
  ++header_tokens_;
  if (is_text) {
    header_.back().text += header_decoder_.Add(token);
    return;
  }
  FinishHeaderText();
  HeaderSegment segment;
  segment.marker = token == encoding_->tokens().channel ? HeaderSegment::Marker::kChannel
                                                        : HeaderSegment::Marker::kConstrain;
  header_.push_back(std::move(segment));
}

Message HarmonyParser::ParseHeader() const {
  Message header;
  std::string constrained;          // "<|constrain|>json"
  std::vector<std::string> extras;  // words that are no other field, in order
  auto take = [&](std::string_view word) {
    if (auto recipient = RecipientOf(word); recipient && header.recipient.empty()) {
      header.recipient = std::string(*recipient);
    } else {
      extras.emplace_back(word);
    }
  };
  bool channel_seen = false;
  for (size_t k = 0; k < header_.size(); ++k) {
    const HeaderSegment& segment = header_[k];
    const std::vector<std::string_view> words = SplitWords(segment.text);
    size_t next = 0;
    if (k == 0) {
      if (!preset_role_.empty()) {
        header.role = preset_role_;
        if (!words.empty() && words[0] == preset_role_) next = 1;
      } else if (!words.empty()) {
        header.role = std::string(words[0]);
        next = 1;
      } else {
        header.role = default_role_;
      }
    } else if (segment.marker == HeaderSegment::Marker::kChannel) {
      // A second <|channel|> does not override the first; its words become extras.
      if (!channel_seen && !words.empty()) {
        header.channel = std::string(words[0]);
        next = 1;
      }
      channel_seen = true;
    } else {
      std::string type = StrCat(kConstrainText, words.empty() ? std::string_view() : words[0]);
      next = words.empty() ? 0 : 1;
      if (constrained.empty()) {
        constrained = std::move(type);
      } else {
        extras.push_back(std::move(type));
      }
    }
    for (size_t i = next; i < words.size(); ++i) take(words[i]);
  }
  header.content_type = std::move(constrained);
  for (const std::string& extra : extras) {
    if (!header.content_type.empty()) header.content_type += ' ';
    header.content_type += extra;
  }
  return header;
}

std::pair<Message, std::string> HarmonyParser::RecoverHeader() {
  FinishHeaderText();
  Message header;
  header.role = preset_role_;
  std::string content;
  bool in_content = false;
  for (size_t k = 0; k < header_.size(); ++k) {
    const HeaderSegment& segment = header_[k];
    const std::string_view text = segment.text;
    if (in_content) {
      content += text;
      continue;
    }
    size_t pos = 0;
    // The next word from `pos`: [begin, end) or begin == end at the end of the text.
    auto peek = [&](size_t& begin, size_t& end) {
      begin = pos;
      while (begin < text.size() && IsSpace(text[begin])) ++begin;
      end = begin;
      while (end < text.size() && !IsSpace(text[end])) ++end;
    };
    size_t begin = 0;
    size_t end = 0;
    peek(begin, end);
    std::string_view word = text.substr(begin, end - begin);
    if (k == 0) {
      if (!word.empty() && (word == preset_role_ || (preset_role_.empty() && IsKnownRole(word)))) {
        header.role = std::string(word);
        pos = end;
      }
    } else if (segment.marker == HeaderSegment::Marker::kChannel) {
      // Only a known channel name counts: in a broken header the word may be the answer itself.
      if (header.channel.empty() && IsKnownChannel(word)) {
        header.channel = std::string(word);
        pos = end;
      }
    } else if (header.content_type.empty() && !word.empty()) {
      header.content_type = StrCat(kConstrainText, word);
      pos = end;
    }
    for (;;) {
      peek(begin, end);
      auto recipient = RecipientOf(text.substr(begin, end - begin));
      if (!recipient || !header.recipient.empty()) break;
      header.recipient = std::string(*recipient);
      pos = end;
    }
    while (pos < text.size() && IsSpace(text[pos])) ++pos;
    if (pos < text.size()) {
      in_content = true;
      content += text.substr(pos);
    }
  }
  if (header.role.empty()) header.role = default_role_;
  if (header.channel.empty() && header.recipient.empty() && header.role == "assistant") {
    header.channel = "final";
  }
  return {std::move(header), std::move(content)};
}

void HarmonyParser::RecoverAndClose() {
  auto [header, content] = RecoverHeader();
  if (!content.empty() || !header.recipient.empty()) {
    OpenContent(std::move(header));
    AppendContent(content);
    CloseContent();
  }
  state_ = State::kExpectStart;
}

void HarmonyParser::OpenContent(Message header) {
  state_ = State::kContent;
  current_ = std::move(header);
  current_.content.clear();
  content_decoder_ = IncrementalDecoder(encoding_->tokenizer());
}

void HarmonyParser::AppendContent(const std::string& text) {
  if (text.empty()) return;
  current_.content += text;
  HarmonyDelta delta;
  delta.message_index = messages_.size();
  delta.part = ClassifyMessage(current_);
  delta.role = current_.role;
  delta.channel = current_.channel;
  delta.recipient = current_.recipient;
  delta.text = text;
  deltas_.push_back(std::move(delta));
}

void HarmonyParser::CloseContent() {
  AppendContent(content_decoder_.Flush());
  messages_.push_back(std::move(current_));
  current_ = Message{};
  state_ = State::kExpectStart;
}

const std::vector<HarmonyDelta>& HarmonyParser::Process(int32_t token) {
  deltas_.clear();
  tokens_.push_back(token);
  const HarmonyTokens& t = encoding_->tokens();
  const Tokenizer& tokenizer = encoding_->tokenizer();
  const bool closes = token == t.end || token == t.return_ || token == t.call || token == t.endoftext;
  // Ordinary text; every other special token and any id the tokenizer lacks is formatting.
  const bool is_text = tokenizer.Contains(token) && !tokenizer.IsSpecial(token);

  switch (state_) {
    case State::kExpectStart:
      if (token == t.start) {
        BeginHeader("");
      } else if (token == t.channel) {
        BeginHeader(default_role_);
        AddHeaderToken(token, false);
      } else if (token == t.message || is_text) {
        OpenContent(MakeMessage(default_role_, "final", "", "", ""));
        if (is_text) AppendContent(content_decoder_.Add(token));
      }
      break;

    case State::kHeader:
      if (token == t.message) {
        FinishHeaderText();
        OpenContent(ParseHeader());
      } else if (token == t.start) {
        if (header_tokens_ > 0) RecoverAndClose();
        BeginHeader("");
      } else if (closes) {
        RecoverAndClose();
      } else if (token == t.channel || token == t.constrain) {
        AddHeaderToken(token, false);
      } else if (is_text) {
        AddHeaderToken(token, true);
        const bool newline = tokenizer.TokenBytes(token).find('\n') != std::string_view::npos;
        if ((newline || header_tokens_ > kMaxHeaderTokens) && header_decoder_.pending() == 0) {
          auto [header, content] = RecoverHeader();
          OpenContent(std::move(header));
          AppendContent(content);
        }
      }
      break;

    case State::kContent:
      if (closes) {
        CloseContent();
      } else if (token == t.start) {
        CloseContent();
        BeginHeader("");
      } else if (token == t.channel) {
        std::string role = current_.role;
        CloseContent();
        BeginHeader(std::move(role));
        AddHeaderToken(token, false);
      } else if (is_text) {
        AppendContent(content_decoder_.Add(token));
      }
      break;
  }
  return deltas_;
}

const std::vector<HarmonyDelta>& HarmonyParser::Finish() {
  deltas_.clear();
  if (state_ == State::kContent) {
    CloseContent();
  } else if (state_ == State::kHeader) {
    RecoverAndClose();
  }
  state_ = State::kExpectStart;
  return deltas_;
}

std::vector<Message> ParseHarmony(const HarmonyEncoding& encoding, std::span<const int32_t> tokens,
                                  std::string_view role) {
  HarmonyParser parser(encoding, role);
  for (int32_t token : tokens) parser.Process(token);
  parser.Finish();
  return parser.messages();
}

HarmonyReply SummarizeReply(std::span<const Message> messages) {
  HarmonyReply reply;
  for (const Message& m : messages) {
    switch (ClassifyMessage(m)) {
      case HarmonyPart::kFinal: reply.final_text += m.content; break;
      case HarmonyPart::kAnalysis: reply.analysis_text += m.content; break;
      case HarmonyPart::kCommentary: reply.commentary_text += m.content; break;
      case HarmonyPart::kToolCall:
        reply.tool_calls.push_back(
            HarmonyToolCall{m.recipient, m.channel, m.content_type, m.content});
        break;
    }
  }
  return reply;
}

}  // namespace tessera
