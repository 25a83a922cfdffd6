#include "tokenizer/pipeline.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/stringpiece.h>
#include <unicode/uchar.h>

#include "core/error.h"
#include "tokenizer/utf8.h"

namespace tessera {

bool IsRustWhitespace(char32_t c) {
  // Unicode White_Space, the set of Rust's char::is_whitespace.
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

bool IsRustNumeric(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  const int8_t type = u_charType(static_cast<UChar32>(c));
  return type == U_DECIMAL_DIGIT_NUMBER || type == U_LETTER_NUMBER || type == U_OTHER_NUMBER;
}

bool IsRustWordChar(char32_t c) {
  if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  return u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_ALPHABETIC) || IsRustNumeric(c);
}

namespace {

std::string Nfc(std::string_view text) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* nfc = icu::Normalizer2::getNFCInstance(status);
  if (U_FAILURE(status)) Fail("ICU NFC normalizer unavailable: ", u_errorName(status));
  const icu::StringPiece piece(text.data(), static_cast<int32_t>(text.size()));
  if (nfc->isNormalizedUTF8(piece, status) && U_SUCCESS(status)) return std::string(text);
  status = U_ZERO_ERROR;
  std::string out;
  icu::StringByteSink<std::string> sink(&out, static_cast<int32_t>(text.size()));
  nfc->normalizeUTF8(0, piece, sink, nullptr, status);
  if (U_FAILURE(status)) Fail("ICU NFC normalization failed: ", u_errorName(status));
  return out;
}

bool StartsWith(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

}  // namespace

std::string ReplaceAll(std::string_view text, const SplitRegex* regex, std::string_view literal,
                       std::string_view content) {
  std::string out;
  size_t prev = 0;
  if (regex != nullptr) {
    // Non-overlapping matches in find_iter order; an empty match right after the previous
    // match is skipped by one character, as in SplitRegex::Split.
    size_t search = 0, begin = 0, end = 0;
    size_t last_end = ~size_t{0};
    while (search <= text.size() && regex->Find(text, search, begin, end)) {
      if (begin == end && last_end == end) {
        if (search >= text.size()) break;
        size_t pos = search;
        utf8::Next(text, pos);
        search = pos;
        continue;
      }
      out.append(text.substr(prev, begin - prev));
      out.append(content);
      prev = end;
      search = end;
      last_end = end;
    }
  } else if (!literal.empty()) {
    for (size_t hit = text.find(literal); hit != std::string_view::npos; hit = text.find(literal, prev)) {
      out.append(text.substr(prev, hit - prev));
      out.append(content);
      prev = hit + literal.size();
    }
  }
  out.append(text.substr(prev));
  return out;
}

std::string Normalizer::Apply(std::string_view text) const {
  std::string s(text);
  for (const Step& step : steps) {
    switch (step.kind) {
      case Step::Kind::kNfc: s = Nfc(s); break;
      case Step::Kind::kPrepend:
        if (!s.empty()) s.insert(0, step.text);  // HF prepends only to non-empty strings
        break;
      case Step::Kind::kReplace: s = ReplaceAll(s, step.regex.get(), step.text, step.content); break;
    }
  }
  return s;
}

void PiecePipeline::RunFrom(size_t level, std::string_view text, bool at_origin,
                            const std::function<void(std::string_view)>& emit) const {
  if (text.empty()) return;
  if (level == steps.size()) {
    emit(text);
    return;
  }
  const PreTokenizerStep& step = steps[level];
  switch (step.kind) {
    case PreTokenizerStep::Kind::kSplit: {
      bool first = true;
      step.regex->Split(text, [&](size_t begin, size_t end) {
        RunFrom(level + 1, text.substr(begin, end - begin), at_origin && first && begin == 0, emit);
        first = false;
      });
      return;
    }
    case PreTokenizerStep::Kind::kByteLevelPrefix: {
      if (text[0] == ' ') {
        RunFrom(level + 1, text, at_origin, emit);
      } else {
        RunFrom(level + 1, StrCat(" ", text), at_origin, emit);
      }
      return;
    }
    case PreTokenizerStep::Kind::kMetaspace: {
      std::string s = ReplaceAll(text, nullptr, " ", step.replacement);
      const bool prepend = step.prepend == PreTokenizerStep::Prepend::kAlways ||
                           (step.prepend == PreTokenizerStep::Prepend::kFirst && at_origin);
      if (prepend && !StartsWith(s, step.replacement)) s.insert(0, step.replacement);
      if (!step.split) {
        RunFrom(level + 1, s, at_origin, emit);
        return;
      }
      // Behavior MergedWithNext: every replacement character starts a new piece.
      const std::string_view v(s);
      size_t begin = 0;
      for (size_t hit = v.find(step.replacement, 1); hit != std::string_view::npos;
           hit = v.find(step.replacement, hit + step.replacement.size())) {
        RunFrom(level + 1, v.substr(begin, hit - begin), at_origin && begin == 0, emit);
        begin = hit;
      }
      RunFrom(level + 1, v.substr(begin), at_origin && begin == 0, emit);
      return;
    }
    case PreTokenizerStep::Kind::kDigits: {
      // Isolated numeric characters (individual_digits) or runs of them (Contiguous).
      size_t begin = 0, pos = 0;
      bool prev_numeric = false;
      while (pos < text.size()) {
        const size_t start = pos;
        const bool numeric = IsRustNumeric(utf8::Next(text, pos));
        if (start > begin && (numeric != prev_numeric || (numeric && step.individual_digits))) {
          RunFrom(level + 1, text.substr(begin, start - begin), at_origin && begin == 0, emit);
          begin = start;
        }
        prev_numeric = numeric;
      }
      RunFrom(level + 1, text.substr(begin), at_origin && begin == 0, emit);
      return;
    }
  }
}

int ByteFallbackValue(std::string_view token) {
  if (token.size() != 6 || token.substr(0, 3) != "<0x" || token[5] != '>') return -1;
  const auto hex = [](char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
  };
  const int hi = hex(token[3]), lo = hex(token[4]);
  if (token[3] == '+' && lo >= 0) return lo;
  if (hi < 0 || lo < 0) return -1;
  return hi * 16 + lo;
}

namespace {

// GPT-2's byte-level alphabet, inverted: the byte a character stands for, or -1.
int ByteOfByteLevelChar(char32_t c) {
  static const auto table = [] {
    std::vector<int16_t> t(0x144, -1);
    char32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      t[printable ? b : next++] = static_cast<int16_t>(b);
    }
    return t;
  }();
  return c < table.size() ? table[c] : -1;
}

std::string Lossy(std::string_view bytes) {
  std::string out;
  utf8::AppendLossy(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), true, out);
  return out;
}

// HF ByteLevel decoding of one token: its bytes if every character is in the alphabet,
// otherwise its UTF-8 text.
void AppendByteLevel(std::string_view token, std::string& bytes) {
  const size_t mark = bytes.size();
  size_t pos = 0;
  while (pos < token.size()) {
    const int b = ByteOfByteLevelChar(utf8::Next(token, pos));
    if (b < 0) {
      bytes.resize(mark);
      bytes.append(token);
      return;
    }
    bytes.push_back(static_cast<char>(b));
  }
}

std::string Strip(std::string_view token, char32_t c, size_t start, size_t stop) {
  std::vector<std::pair<size_t, char32_t>> chars;  // (byte offset, char)
  for (size_t pos = 0; pos < token.size();) {
    const size_t at = pos;
    chars.emplace_back(at, utf8::Next(token, pos));
  }
  size_t cut_start = 0, cut_stop = 0;
  while (cut_start < start && cut_start < chars.size() && chars[cut_start].second == c) ++cut_start;
  while (cut_stop < stop && cut_stop < chars.size() && chars[chars.size() - 1 - cut_stop].second == c) ++cut_stop;
  // HF panics when both cuts overlap (a token made only of `c`); the empty string is the
  // only sensible result there.
  if (cut_start + cut_stop >= chars.size()) return {};
  const size_t begin = chars[cut_start].first;
  const size_t end = cut_stop == 0 ? token.size() : chars[chars.size() - cut_stop].first;
  return std::string(token.substr(begin, end - begin));
}

}  // namespace

std::string Decoder::Decode(std::vector<std::string> tokens) const {
  for (const Step& step : steps) {
    std::vector<std::string> next;
    switch (step.kind) {
      case Step::Kind::kByteLevel: {
        std::string bytes;
        for (const std::string& t : tokens) AppendByteLevel(t, bytes);
        next.push_back(Lossy(bytes));
        break;
      }
      case Step::Kind::kReplace:
        for (const std::string& t : tokens) next.push_back(ReplaceAll(t, step.regex.get(), step.pattern, step.content));
        break;
      case Step::Kind::kByteFallback: {
        // A run of byte tokens becomes its text if it is valid UTF-8, else one U+FFFD per byte.
        std::string run;
        const auto flush = [&] {
          if (run.empty()) return;
          if (utf8::FindInvalid(run) == run.size()) {
            next.push_back(run);
          } else {
            for (size_t i = 0; i < run.size(); ++i) next.push_back("\xEF\xBF\xBD");
          }
          run.clear();
        };
        for (std::string& t : tokens) {
          const int b = ByteFallbackValue(t);
          if (b >= 0) {
            run.push_back(static_cast<char>(b));
          } else {
            flush();
            next.push_back(std::move(t));
          }
        }
        flush();
        break;
      }
      case Step::Kind::kFuse: {
        std::string all;
        for (const std::string& t : tokens) all += t;
        next.push_back(std::move(all));
        break;
      }
      case Step::Kind::kStrip: {
        size_t pos = 0;
        const char32_t c = utf8::Next(step.content, pos);
        for (const std::string& t : tokens) next.push_back(Strip(t, c, step.start, step.stop));
        break;
      }
      case Step::Kind::kMetaspace: {
        // Every replacement character becomes a space, except in the first token, where they
        // are all dropped when a prefix may have been prepended (HF's exact rule).
        for (size_t i = 0; i < tokens.size(); ++i) {
          std::string out;
          for (size_t pos = 0; pos < tokens[i].size();) {
            const size_t at = pos;
            const char32_t c = utf8::Next(tokens[i], pos);
            if (c != step.replacement) {
              out.append(tokens[i], at, pos - at);
            } else if (i != 0 || !step.strip_first) {
              out += ' ';
            }
          }
          next.push_back(std::move(out));
        }
        break;
      }
    }
    tokens = std::move(next);
  }
  std::string text;
  for (const std::string& t : tokens) text += t;
  return text;
}

std::string Decoder::TokenBytes(std::string_view token) const {
  std::string s(token);
  for (const Step& step : steps) {
    switch (step.kind) {
      case Step::Kind::kByteLevel: {
        std::string bytes;
        AppendByteLevel(s, bytes);
        s = std::move(bytes);
        break;
      }
      case Step::Kind::kReplace: s = ReplaceAll(s, step.regex.get(), step.pattern, step.content); break;
      case Step::Kind::kByteFallback:
        if (const int b = ByteFallbackValue(s); b >= 0) s = std::string(1, static_cast<char>(b));
        break;
      case Step::Kind::kFuse:
      case Step::Kind::kStrip: break;  // whole-text effects
      case Step::Kind::kMetaspace: {
        std::string rep;
        utf8::Append(step.replacement, rep);
        s = ReplaceAll(s, nullptr, rep, " ");
        break;
      }
    }
  }
  return s;
}

}  // namespace tessera
