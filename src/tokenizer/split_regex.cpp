#include "tokenizer/split_regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cctype>
#include <cstdio>
#include <vector>

#include "core/error.h"
#include "tokenizer/unicode_delta.h"
#include "tokenizer/utf8.h"

namespace tessera {
namespace {

std::string Hex(char32_t c) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "\\x{%X}", static_cast<unsigned>(c));
  return buf;
}

bool IsAsciiLetter(char32_t c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
char32_t Lower(char32_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

std::string_view CaselessSet(char32_t letter) {
  return unicode_delta::kCaselessAscii[Lower(letter) - 'a'];
}

std::string_view PropertyAdditions(std::string_view name) {
  for (const auto& entry : unicode_delta::kAdditions) {
    if (entry.property == name) return entry.additions;
  }
  return {};
}

bool IsSupportedProperty(std::string_view name) {
  for (const auto& entry : unicode_delta::kAdditions) {
    if (entry.property == name) return true;
  }
  return false;
}

// Recursive-descent over the Oniguruma syntax subset described in split_regex.h. Output is
// built left to right; every construct either maps to an exact PCRE2 equivalent or fails.
class Translator {
 public:
  explicit Translator(std::string_view pattern) : p_(pattern) {}

  std::string Run() {
    if (utf8::FindInvalid(p_) != p_.size()) Fail("pattern is not valid UTF-8");
    scopes_.push_back({false, false});
    while (i_ < p_.size()) Step();
    CloseImplicitScopes();
    if (scopes_.size() != 1) Fail("unbalanced '(' at offset ", p_.size());
    return out_;
  }

 private:
  [[noreturn]] void Unsupported(std::string_view what, size_t at) {
    // `what` may quote pattern bytes; keep the message one printable line.
    std::string shown;
    for (const char ch : what) {
      const auto b = static_cast<unsigned char>(ch);
      if (b >= 0x20 && b < 0x7F) {
        shown += ch;
      } else {
        char buf[8];
        std::snprintf(buf, sizeof(buf), "\\x%02X", b);
        shown += buf;
      }
    }
    Fail("unsupported regex construct ", shown, " at offset ", at);
  }

  bool caseless() const { return scopes_.back().caseless; }

  void CloseImplicitScopes() {
    while (scopes_.back().implicit) {
      scopes_.pop_back();
      out_ += ')';
    }
  }

  void Step() {
    const size_t at = i_;
    const char c = p_[i_];
    switch (c) {
      case '\\':
        Escape();
        return;
      case '[':
        Class();
        last_letter_ = 0;
        return;
      case '(':
        Group();
        return;
      case ')':
        CloseImplicitScopes();
        if (scopes_.size() <= 1) Fail("unbalanced ')' at offset ", at);
        scopes_.pop_back();
        out_ += ')';
        ++i_;
        last_letter_ = 0;
        return;
      case '|':
        out_ += '|';
        ++i_;
        last_letter_ = 0;
        return;
      case '*':
      case '+':
      case '?':
        out_ += c;
        ++i_;
        // Lazy (*?) and possessive (*+) suffixes mean the same in both engines.
        if (i_ < p_.size() && (p_[i_] == '?' || p_[i_] == '+')) out_ += p_[i_++];
        return;
      case '{':
        Interval();
        return;
      case '.':
        // Oniguruma (Ruby syntax, no multiline option): any character but newline.
        out_ += "[^\\n]";
        ++i_;
        last_letter_ = 0;
        return;
      case '$':
        // Ruby syntax: the end of a line, before any newline or at the end of the subject
        // (DeepSeek LLM's \s+$). The subject is the piece being split, as in `tokenizers`.
        out_ += "(?=\\n|\\z)";
        ++i_;
        last_letter_ = 0;
        return;
      case '^':
        // A line anchor in Ruby syntax; no known pre-tokenizer uses it.
        Unsupported("'^'", at);
      default:
        Literal(utf8::Next(p_, i_), at);
        return;
    }
  }

  void Literal(char32_t c, size_t at) {
    if (caseless() && IsAsciiLetter(c)) {
      // Oniguruma folds some letter pairs into one character (ss ~ ß, st ~ ﬅ, ff ~ ﬀ, fi ~ ﬁ,
      // fl ~ ﬂ); PCRE2 cannot, so such caseless sequences are refused rather than mismatched.
      const char32_t lower = Lower(c);
      if (last_letter_ != 0) {
        const char pair[3] = {static_cast<char>(last_letter_), static_cast<char>(lower), 0};
        const std::string_view folds[] = {"ss", "st", "ff", "fi", "fl"};
        for (auto f : folds) {
          if (f == pair) Unsupported(StrCat("caseless \"", pair, "\" (multi-character case folding)"), at);
        }
      }
      out_ += '[';
      out_ += CaselessSet(c);
      out_ += ']';
      last_letter_ = lower;
      return;
    }
    if (caseless() && c >= 0x80) Unsupported("caseless non-ASCII literal", at);
    last_letter_ = 0;
    if (c < 0x20 || c == 0x7F) {
      out_ += Hex(c);
    } else if (c < 0x80 && !((c >= '0' && c <= '9') || IsAsciiLetter(c) || c == ' ')) {
      // Escaping every ASCII punctuation character keeps it literal in PCRE2 (e.g. ']', '}', '#').
      out_ += '\\';
      out_ += static_cast<char>(c);
    } else {
      utf8::Append(c, out_);
    }
  }

  // Parses \x.., \x{..}, \u.... after the backslash and letter; returns the code point.
  char32_t HexEscape(char kind, size_t at) {
    uint32_t value = 0;
    size_t digits = 0;
    auto hex_digit = [](char ch) -> int {
      if (ch >= '0' && ch <= '9') return ch - '0';
      if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
      if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
      return -1;
    };
    if (kind == 'x' && i_ < p_.size() && p_[i_] == '{') {
      ++i_;
      while (i_ < p_.size() && p_[i_] != '}') {
        const int d = hex_digit(p_[i_]);
        if (d < 0 || ++digits > 8) Fail("malformed \\x{...} escape at offset ", at);
        value = value * 16 + d;
        ++i_;
      }
      if (i_ == p_.size() || digits == 0) Fail("malformed \\x{...} escape at offset ", at);
      ++i_;
    } else {
      const size_t want = kind == 'x' ? 2 : 4;
      while (digits < want && i_ < p_.size() && hex_digit(p_[i_]) >= 0) {
        value = value * 16 + hex_digit(p_[i_]);
        ++i_;
        ++digits;
      }
      if (digits == 0 || (kind == 'u' && digits != 4)) Fail("malformed \\", kind, " escape at offset ", at);
    }
    if (value >= 0x110000 || (value >= 0xD800 && value < 0xE000)) {
      Fail("escape at offset ", at, " is not a Unicode scalar value");
    }
    return value;
  }

  // Parses \p{Name}, \p{^Name} or \P{Name} after the backslash; returns {name, negated}.
  std::pair<std::string_view, bool> Property(bool upper, size_t at) {
    if (i_ >= p_.size() || p_[i_] != '{') Fail("malformed \\p escape at offset ", at);
    const size_t close = p_.find('}', i_);
    if (close == std::string_view::npos) Fail("malformed \\p escape at offset ", at);
    std::string_view name = p_.substr(i_ + 1, close - i_ - 1);
    i_ = close + 1;
    bool negated = upper;
    if (!name.empty() && name[0] == '^') {
      negated = !negated;
      name.remove_prefix(1);
    }
    if (!IsSupportedProperty(name)) Unsupported(StrCat("\\p{", name, "}"), at);
    return {name, negated};
  }

  // Control-character and punctuation escapes shared by classes and plain text; returns false
  // when `e` is not one of them.
  bool SimpleEscape(char e, size_t at, char32_t& c) {
    switch (e) {
      case 't': c = '\t'; return true;
      case 'n': c = '\n'; return true;
      case 'r': c = '\r'; return true;
      case 'f': c = '\f'; return true;
      case 'v': c = '\v'; return true;  // Ruby: vertical tab (PCRE2: a class)
      case 'a': c = 0x07; return true;
      case 'e': c = 0x1B; return true;
      case 'x':
      case 'u':
        c = HexEscape(e, at);
        return true;
      default:
        if (static_cast<unsigned char>(e) < 0x80 && !std::isalnum(static_cast<unsigned char>(e))) {
          c = static_cast<unsigned char>(e);
          return true;
        }
        return false;
    }
  }

  void Escape() {
    const size_t at = i_;
    if (i_ + 1 >= p_.size()) Fail("trailing backslash at offset ", at);
    const char e = p_[i_ + 1];
    i_ += 2;
    if (e == 's' || e == 'S') {
      out_ += e == 's' ? "[" : "[^";
      out_ += unicode_delta::kWhiteSpace;
      out_ += ']';
      last_letter_ = 0;
      return;
    }
    if (e == 'p' || e == 'P') {
      if (caseless()) Unsupported("caseless \\p{...}", at);
      const auto [name, negated] = Property(e == 'P', at);
      out_ += negated ? "[^\\p{" : "[\\p{";
      out_ += name;
      out_ += '}';
      out_ += PropertyAdditions(name);
      out_ += ']';
      last_letter_ = 0;
      return;
    }
    char32_t c = 0;
    if (SimpleEscape(e, at, c)) {
      if (caseless() && (IsAsciiLetter(c) || c >= 0x80)) Unsupported("caseless escaped letter", at);
      Literal(c, at);
      return;
    }
    Unsupported(StrCat("\\", std::string(1, e)), at);
  }

  void Class() {
    const size_t at = i_;
    ++i_;
    std::string body;
    bool negated = false;
    if (i_ < p_.size() && p_[i_] == '^') {
      negated = true;
      ++i_;
    }
    if (i_ < p_.size() && p_[i_] == ']') Unsupported("']' first in a class (write \\])", i_);
    bool any = false;
    while (true) {
      if (i_ >= p_.size()) Fail("unterminated character class at offset ", at);
      const size_t item = i_;
      const char c = p_[i_];
      if (c == ']') {
        ++i_;
        break;
      }
      if (c == '[') Unsupported("nested class or POSIX bracket", item);
      if (c == '&' && i_ + 1 < p_.size() && p_[i_ + 1] == '&') Unsupported("class intersection '&&'", item);
      any = true;
      if (c == '\\') {
        if (i_ + 1 >= p_.size()) Fail("trailing backslash at offset ", item);
        const char e = p_[i_ + 1];
        if (e == 's') {
          i_ += 2;
          body += unicode_delta::kWhiteSpace;
          continue;
        }
        if (e == 'p') {
          i_ += 2;
          if (caseless()) Unsupported("caseless \\p{...}", item);
          const auto [name, prop_negated] = Property(false, item);
          if (prop_negated) Unsupported("negated property inside a class", item);
          body += "\\p{";
          body += name;
          body += '}';
          body += PropertyAdditions(name);
          continue;
        }
      }
      const char32_t lo = ClassCodePoint(item);
      char32_t hi = lo;
      if (i_ + 1 < p_.size() && p_[i_] == '-' && p_[i_ + 1] != ']') {
        ++i_;
        const size_t hi_at = i_;
        if (p_[i_] == '[') Unsupported("nested class or POSIX bracket", hi_at);
        if (p_[i_] == '\\' && i_ + 1 < p_.size() && (p_[i_ + 1] == 's' || p_[i_ + 1] == 'p')) {
          Fail("range ending in a class escape at offset ", hi_at);
        }
        hi = ClassCodePoint(hi_at);
        if (hi < lo) Fail("range out of order in character class at offset ", item);
      }
      if (caseless()) {
        if (hi >= 0x80) Unsupported("caseless non-ASCII class member", item);
        for (char32_t ch = lo; ch <= hi; ++ch) {
          if (IsAsciiLetter(ch)) {
            body += CaselessSet(ch);
          } else {
            body += Hex(ch);
          }
        }
      } else {
        body += Hex(lo);
        if (hi != lo) {
          body += '-';
          body += Hex(hi);
        }
      }
    }
    if (!any) Unsupported("empty class", at);
    out_ += negated ? "[^" : "[";
    out_ += body;
    out_ += ']';
  }

  // One literal or escaped code point inside a class (not \s or \p).
  char32_t ClassCodePoint(size_t at) {
    if (p_[i_] != '\\') return utf8::Next(p_, i_);
    const char e = p_[i_ + 1];
    i_ += 2;
    char32_t c = 0;
    if (!SimpleEscape(e, at, c)) Unsupported(StrCat("\\", std::string(1, e), " inside a class"), at);
    return c;
  }

  void Group() {
    const size_t at = i_;
    const std::string_view rest = p_.substr(i_);
    auto open = [&](size_t consumed, std::string_view emit, bool caseless_scope) {
      i_ += consumed;
      out_ += emit;
      scopes_.push_back({caseless_scope, false});
      last_letter_ = 0;
    };
    if (rest.substr(0, 3) == "(?:") return open(3, "(?:", caseless());
    if (rest.substr(0, 3) == "(?=") return open(3, "(?=", caseless());
    if (rest.substr(0, 3) == "(?!") return open(3, "(?!", caseless());
    if (rest.substr(0, 3) == "(?>") return open(3, "(?>", caseless());
    if (rest.substr(0, 4) == "(?<=") return open(4, "(?<=", caseless());
    if (rest.substr(0, 4) == "(?<!") return open(4, "(?<!", caseless());
    if (rest.substr(0, 4) == "(?i:") return open(4, "(?:", true);
    if (rest.substr(0, 5) == "(?-i:") return open(5, "(?:", false);
    if (rest.substr(0, 4) == "(?i)" || rest.substr(0, 5) == "(?-i)") {
      // Oniguruma: an isolated option opens a group that runs to the end of the enclosing
      // group, alternatives included (ab(?i)c|d == ab(?i:c|d)); PCRE2 would split at the '|'.
      const bool on = rest[2] == 'i';
      i_ += on ? 4 : 5;
      out_ += "(?:";
      scopes_.push_back({on, true});
      last_letter_ = 0;
      return;
    }
    if (rest.substr(0, 2) == "(?") Unsupported("group syntax \"(?\"", at);
    // Capturing groups: Split only uses whole matches and back-references are rejected.
    open(1, "(?:", caseless());
  }

  void Interval() {
    const size_t at = i_;
    size_t j = i_ + 1;
    auto number = [&](std::string& digits) {
      while (j < p_.size() && p_[j] >= '0' && p_[j] <= '9') digits += p_[j++];
    };
    std::string lo, hi;
    number(lo);
    bool comma = false;
    if (j < p_.size() && p_[j] == ',') {
      comma = true;
      ++j;
      number(hi);
    }
    if (j >= p_.size() || p_[j] != '}' || (lo.empty() && hi.empty()) || lo.size() > 5 || hi.size() > 5) {
      Unsupported("'{' that is not a repetition {n,m}", at);
    }
    if (!hi.empty() && !lo.empty() && std::stoi(hi) < std::stoi(lo)) Fail("repetition {n,m} with m < n at offset ", at);
    out_ += '{';
    out_ += lo.empty() ? "0" : lo;  // Oniguruma {,m} == {0,m}; PCRE2 10.42 reads {,m} literally
    if (comma) out_ += ',';
    out_ += hi;
    out_ += '}';
    i_ = j + 1;
    if (i_ < p_.size() && p_[i_] == '?') {
      // Ruby syntax reads a{n}? as (?:a{n})?, PCRE2 as a lazy (so exact) a{n}.
      if (!comma) Unsupported("'{n}?'", i_);
      out_ += '?';
      ++i_;
    } else if (i_ < p_.size() && p_[i_] == '+') {
      // Ruby syntax reads {n,m}+ as a repetition of a repetition, PCRE2 as possessive.
      Unsupported("'{n,m}+'", i_);
    }
  }

  std::string_view p_;
  size_t i_ = 0;
  std::string out_;
  struct Scope {
    bool caseless;
    bool implicit;  // opened by an isolated (?i)/(?-i); closes with the enclosing group
  };
  std::vector<Scope> scopes_;   // one entry per open group; back() is the current scope
  char32_t last_letter_ = 0;    // previous atom, if it was a caseless ASCII letter (lower case)
};

// Per-thread PCRE2 match state, shared by all patterns (the match data only needs the
// overall match, ovector pair 0).
struct MatchState {
  pcre2_match_data* data = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* jit_stack = nullptr;

  MatchState() {
    data = pcre2_match_data_create(1, nullptr);
    context = pcre2_match_context_create(nullptr);
    // The default 32 KiB JIT stack overflows on some backtracking over long runs; this grows
    // up to 64 MiB on demand.
    jit_stack = pcre2_jit_stack_create(32 * 1024, 64 * 1024 * 1024, nullptr);
    TESSERA_CHECK(data != nullptr && context != nullptr && jit_stack != nullptr);
    pcre2_jit_stack_assign(context, nullptr, jit_stack);
  }
  ~MatchState() {
    pcre2_jit_stack_free(jit_stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(data);
  }
};

MatchState& ThreadMatchState() {
  thread_local MatchState state;
  return state;
}

std::string Pcre2Message(int code) {
  PCRE2_UCHAR buffer[256];
  if (pcre2_get_error_message(code, buffer, sizeof(buffer)) < 0) return StrCat("PCRE2 error ", code);
  return reinterpret_cast<const char*>(buffer);
}

}  // namespace

const std::string_view kO200kPattern =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*"
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

std::string TranslateOnigurumaPattern(std::string_view pattern) { return Translator(pattern).Run(); }

// Class flags of every BMP code point for the o200k matcher. Each flag is the membership test
// of one class of kO200kPattern, computed by running that class, translated like the pattern,
// through PCRE2 over all BMP code points; the pattern's other classes are unions and
// complements of these ([^\r\n\p{L}\p{N}], [^\s\p{L}\p{N}]).
struct SplitRegex::ClassTable {
  enum : uint8_t {
    kUpper = 1,   // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
    kLower = 2,   // [\p{Ll}\p{Lm}\p{Lo}\p{M}]
    kLetter = 4,  // \p{L}
    kNumber = 8,  // \p{N}
    kSpace = 16,  // \s
  };
  uint8_t flags[0x10000] = {};

  ClassTable() {
    std::string bmp;
    std::vector<char32_t> at_offset;  // code point at each byte offset of `bmp`
    for (char32_t c = 0; c < 0x10000; ++c) {
      if (c >= 0xD800 && c < 0xE000) continue;
      utf8::Append(c, bmp);
      at_offset.resize(bmp.size(), c);
    }
    const std::pair<const char*, uint8_t> classes[] = {
        {"[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]", kUpper},
        {"[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]", kLower},
        {"\\p{L}", kLetter},
        {"\\p{N}", kNumber},
        {"\\s", kSpace},
    };
    for (const auto& [pattern, flag] : classes) {
      const SplitRegex run(StrCat("(?:", pattern, ")+"), false);
      size_t start = 0, begin = 0, end = 0;
      while (start < bmp.size() && run.Find(bmp, start, begin, end)) {
        for (size_t i = begin; i < end; ++i) flags[at_offset[i]] |= flag;
        start = end;
      }
    }
  }
};


struct SplitRegex::Code {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Code() { pcre2_code_free(code); }
};

SplitRegex::SplitRegex(std::string_view oniguruma_pattern, bool allow_fast_path)
    : code_(std::make_unique<Code>()), pcre2_pattern_(TranslateOnigurumaPattern(oniguruma_pattern)) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  code_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pcre2_pattern_.data()), pcre2_pattern_.size(),
                              PCRE2_UTF | PCRE2_UCP | PCRE2_NEVER_BACKSLASH_C, &error, &offset, nullptr);
  if (code_->code == nullptr) {
    Fail("regex does not compile: ", Pcre2Message(error), " (translated pattern offset ", offset, ")");
  }
  code_->jit = pcre2_jit_compile(code_->code, PCRE2_JIT_COMPLETE) == 0;
  if (allow_fast_path && oniguruma_pattern == kO200kPattern) {
    static const ClassTable* table = new ClassTable();  // shared by all tokenizers, never freed
    fast_ = table;
  }
}

SplitRegex::~SplitRegex() = default;
SplitRegex::SplitRegex(SplitRegex&&) noexcept = default;
SplitRegex& SplitRegex::operator=(SplitRegex&&) noexcept = default;

bool SplitRegex::Find(std::string_view text, size_t start, size_t& begin, size_t& end) const {
  MatchState& state = ThreadMatchState();
  // PCRE2's default match limit (10 million backtracking steps) is below what one match over a
  // long run of whitespace takes (Llama 3's \s*[\r\n]+ backtracks over the whole run before
  // \s+(?!\S) takes it): 10 MB of spaces failed. The limit grows with the text still to match,
  // so such a match costs a few steps per byte, as in a backtracking engine without a limit.
  constexpr uint64_t kStepsPerByte = 8, kMinSteps = 10'000'000;
  const uint64_t steps = std::max<uint64_t>(kMinSteps, kStepsPerByte * (text.size() - start));
  pcre2_set_match_limit(state.context, static_cast<uint32_t>(std::min<uint64_t>(UINT32_MAX, steps)));
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  // The subject was validated once by the caller; PCRE2 need not re-check it per call.
  const int rc = code_->jit ? pcre2_jit_match(code_->code, subject, text.size(), start, 0, state.data, state.context)
                            : pcre2_match(code_->code, subject, text.size(), start, PCRE2_NO_UTF_CHECK, state.data,
                                          state.context);
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  if (rc < 0) Fail("pre-tokenizer regex failed: ", Pcre2Message(rc));
  const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(state.data);
  begin = ovector[0];
  end = ovector[1];
  // \K or lookbehind tricks could report a match ending before its start; the subset we
  // translate has neither.
  TESSERA_CHECK(begin <= end && end <= text.size());
  return true;
}

}  // namespace tessera

namespace tessera {

// The o200k alternatives, tried in order at `p` as a backtracking engine would:
//   A1 P? U* W+ C?   A2 P? U+ W* C?   A3 N{1,3}   A4 " "? Q+ [\r\n/]*
//   A5 S* [\r\n]+   A6 S+ (?!\S)     A7 S+
// with U = kUpper, W = kLower, N = kNumber, S = kSpace, P = not (\r, \n, letter, number),
// Q = not (space, letter, number), C = the caseless contractions 's 't 're 've 'm 'll 'd.
// U and W overlap (Lm, Lo, M), which is why A1 can backtrack into U*.
size_t SplitRegex::FastMatch(std::string_view text, size_t p) const {
  using T = ClassTable;
  const uint8_t* flags = fast_->flags;
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  constexpr int kAstral = -1;

  // Flags of the character at i (< n) and its length; kAstral above U+FFFF.
  auto classify = [&](size_t i, size_t& len) -> int {
    const unsigned char b = s[i];
    if (b < 0x80) {
      len = 1;
      return flags[b];
    }
    if (b < 0xE0) {
      len = 2;
      return flags[((b & 0x1F) << 6) | (s[i + 1] & 0x3F)];
    }
    if (b < 0xF0) {
      len = 3;
      return flags[((b & 0x0F) << 12) | ((s[i + 1] & 0x3F) << 6) | (s[i + 2] & 0x3F)];
    }
    len = 4;
    return kAstral;
  };
  // End of the run of characters from i for which member(flags) holds; kNone if the run
  // reaches a character the table does not cover.
  auto run_end = [&](size_t i, auto member) -> size_t {
    size_t len = 0;
    while (i < n) {
      const int f = classify(i, len);
      if (f == kAstral) return kNone;
      if (!member(f)) break;
      i += len;
    }
    return i;
  };
  auto is_upper = [](int f) { return (f & T::kUpper) != 0; };
  auto is_lower = [](int f) { return (f & T::kLower) != 0; };
  auto is_number = [](int f) { return (f & T::kNumber) != 0; };
  auto is_space = [](int f) { return (f & T::kSpace) != 0; };
  auto is_q = [](int f) { return (f & (T::kSpace | T::kLetter | T::kNumber)) == 0; };
  // Length of the contraction at e, 0 if none (C is optional, so A1/A2 never fail on it).
  // The caseless sets are those of unicode_delta::kCaselessAscii: s also matches U+017F.
  auto contraction = [&](size_t e) -> size_t {
    if (e + 1 >= n || s[e] != '\'') return 0;
    const unsigned char c = s[e + 1] | 0x20;
    if (c == 's' || c == 't' || c == 'm' || c == 'd') return (s[e + 1] >= 'A' && s[e + 1] <= 'z') ? 2 : 0;
    if (s[e + 1] == 0xC5 && e + 2 < n && s[e + 2] == 0xBF) return 3;  // 'ſ
    if (e + 2 >= n) return 0;
    const unsigned char d = s[e + 2] | 0x20;
    const bool second_ok = s[e + 2] >= 'A' && s[e + 2] <= 'z';
    if ((c == 'r' && d == 'e') || (c == 'v' && d == 'e') || (c == 'l' && d == 'l')) return second_ok ? 3 : 0;
    return 0;
  };

  size_t len0 = 0;
  const int f0 = classify(p, len0);
  if (f0 == kAstral) return 0;
  const bool has_prefix = s[p] != '\r' && s[p] != '\n' && (f0 & (T::kLetter | T::kNumber)) == 0;

  // A1 from `start`: 1 match (end set), 0 no match, -1 unknown.
  auto a1 = [&](size_t start, size_t& end) -> int {
    const size_t u_end = run_end(start, is_upper);
    if (u_end == kNone) return -1;
    if (u_end < n) {
      size_t len = 0;
      const int f = classify(u_end, len);
      if (f == kAstral) return -1;
      if (is_lower(f)) {
        const size_t w_end = run_end(u_end, is_lower);
        if (w_end == kNone) return -1;
        end = w_end + contraction(w_end);
        return 1;
      }
    }
    // Give back characters of U* until one can start W+; that W+ then ends right after it
    // (the character following it is not in W).
    for (size_t j = u_end; j > start;) {
      do --j;
      while ((s[j] & 0xC0) == 0x80);
      size_t len = 0;
      if (is_lower(classify(j, len))) {
        end = j + len;
        end += contraction(end);
        return 1;
      }
    }
    return 0;
  };
  // A2 from `start`.
  auto a2 = [&](size_t start, size_t& end) -> int {
    const size_t u_end = run_end(start, is_upper);
    if (u_end == kNone) return -1;
    if (u_end == start) return 0;
    const size_t w_end = run_end(u_end, is_lower);
    if (w_end == kNone) return -1;
    end = w_end + contraction(w_end);
    return 1;
  };

  size_t end = 0;
  for (int which = 0; which < 2; ++which) {
    if (has_prefix) {
      const int r = which == 0 ? a1(p + len0, end) : a2(p + len0, end);
      if (r != 0) return r > 0 ? end : 0;
    }
    const int r = which == 0 ? a1(p, end) : a2(p, end);
    if (r != 0) return r > 0 ? end : 0;
  }
  // A3
  if (is_number(f0)) {
    size_t i = p;
    for (int count = 0; count < 3 && i < n; ++count) {
      size_t len = 0;
      const int f = classify(i, len);
      if (f == kAstral) return 0;
      if (!is_number(f)) break;
      i += len;
    }
    return i;
  }
  // A4
  {
    const size_t start = s[p] == ' ' ? p + 1 : p;
    const size_t q_end = run_end(start, is_q);
    if (q_end == kNone) return 0;
    if (q_end > start) {
      size_t e = q_end;
      while (e < n && (s[e] == '\r' || s[e] == '\n' || s[e] == '/')) ++e;
      return e;
    }
  }
  // A5, A6, A7 share the run of spaces.
  const size_t s_end = run_end(p, is_space);
  if (s_end == kNone) return 0;
  if (s_end == p) return 0;  // unreachable: every character fits some alternative
  for (size_t j = s_end; j > p; --j) {
    // \r and \n are ASCII, so no byte of a multi-byte space can be mistaken for them.
    if (s[j - 1] == '\r' || s[j - 1] == '\n') return j;
  }
  if (s_end == n) return s_end;
  size_t last = s_end;
  do --last;
  while ((s[last] & 0xC0) == 0x80);
  return last > p ? last : s_end;
}

}  // namespace tessera
