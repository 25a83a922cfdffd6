// Python semantics used by the chat renderers (declared in engine/chat_formats.h).
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "core/error.h"
#include "engine/chat_formats.h"
#include "tokenizer/utf8.h"

namespace tessera::chat_internal {
namespace {

using Json = nlohmann::ordered_json;

// Python's float.__repr__: the shortest digits that round-trip, in fixed notation when the
// decimal point falls within 16 digits of them (-4 < exponent + 1 <= 16), else d.ddde±XX with at
// least two exponent digits; "NaN" / "Infinity" as json.dumps writes them.
void AppendPyFloat(double value, std::string& out) {
  if (std::isnan(value)) {
    out += "NaN";
    return;
  }
  if (std::isinf(value)) {
    out += value < 0 ? "-Infinity" : "Infinity";
    return;
  }
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value, std::chars_format::scientific);
  TESSERA_CHECK(result.ec == std::errc());
  const std::string_view text(buffer, static_cast<size_t>(result.ptr - buffer));  // "-1.25e+16"
  const size_t e = text.find('e');
  std::string_view mantissa = text.substr(0, e);
  const int exponent = std::atoi(std::string(text.substr(e + 1)).c_str());
  if (!mantissa.empty() && mantissa[0] == '-') {
    out += '-';
    mantissa.remove_prefix(1);
  }
  std::string digits;
  for (const char c : mantissa) {
    if (c != '.') digits += c;
  }
  const int point = exponent + 1;  // digits before the decimal point
  const int count = static_cast<int>(digits.size());
  if (point > -4 && point <= 16) {
    if (point <= 0) {
      out += "0.";
      out.append(static_cast<size_t>(-point), '0');
      out += digits;
    } else if (point >= count) {
      out += digits;
      out.append(static_cast<size_t>(point - count), '0');
      out += ".0";
    } else {
      out.append(digits, 0, static_cast<size_t>(point));
      out += '.';
      out.append(digits, static_cast<size_t>(point));
    }
    return;
  }
  out += digits[0];
  if (count > 1) {
    out += '.';
    out.append(digits, 1);
  }
  char exponent_text[16];
  std::snprintf(exponent_text, sizeof(exponent_text), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  out += exponent_text;
}

// json.encoder's ESCAPE_DCT with ensure_ascii=False: only '"', '\\' and bytes below 0x20.
void AppendPyString(std::string_view text, std::string& out) {
  out += '"';
  for (const char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char escaped[8];
          std::snprintf(escaped, sizeof(escaped), "\\u%04x", static_cast<unsigned>(c));
          out += escaped;
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

void AppendPyJson(const Json& value, int indent, int level, std::string& out) {
  // With an indent every item goes on its own line ("," ending the line), without one they are
  // separated by ", " (json.dumps' default separators).
  const auto separate = [&](bool first, int depth) {
    if (!first) out += indent < 0 ? ", " : ",";
    if (indent >= 0) {
      out += '\n';
      out.append(static_cast<size_t>(indent) * static_cast<size_t>(depth), ' ');
    }
  };
  switch (value.type()) {
    case Json::value_t::null: out += "null"; return;
    case Json::value_t::boolean: out += value.get<bool>() ? "true" : "false"; return;
    case Json::value_t::number_integer: out += std::to_string(value.get<int64_t>()); return;
    case Json::value_t::number_unsigned: out += std::to_string(value.get<uint64_t>()); return;
    case Json::value_t::number_float: AppendPyFloat(value.get<double>(), out); return;
    case Json::value_t::string: AppendPyString(value.get_ref<const std::string&>(), out); return;
    case Json::value_t::array: {
      if (value.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      bool first = true;
      for (const Json& item : value) {
        separate(first, level + 1);
        first = false;
        AppendPyJson(item, indent, level + 1, out);
      }
      if (indent >= 0) separate(true, level);
      out += ']';
      return;
    }
    case Json::value_t::object: {
      if (value.empty()) {
        out += "{}";
        return;
      }
      out += '{';
      bool first = true;
      for (const auto& [key, item] : value.items()) {
        separate(first, level + 1);
        first = false;
        AppendPyString(key, out);
        out += ": ";
        AppendPyJson(item, indent, level + 1, out);
      }
      if (indent >= 0) separate(true, level);
      out += '}';
      return;
    }
    default: Fail("chat template: binary JSON values cannot be rendered");
  }
}

// Python's str.isspace(): bidirectional class WS, B or S, or general category Zs.
bool IsPySpace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

}  // namespace

std::string PyJsonDumps(const nlohmann::ordered_json& value, int indent) {
  std::string out;
  AppendPyJson(value, indent, 0, out);
  return out;
}

std::string_view PyStrip(std::string_view text) {
  size_t begin = text.size(), end = 0;  // the first and one past the last non-space character
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t start = pos;
    if (!IsPySpace(utf8::Next(text, pos))) {
      if (begin == text.size()) begin = start;
      end = pos;
    }
  }
  return begin < end ? text.substr(begin, end - begin) : std::string_view();
}

std::string_view LstripNewlines(std::string_view text) {
  const size_t first = text.find_first_not_of('\n');
  return first == std::string_view::npos ? std::string_view() : text.substr(first);
}

std::string_view RstripNewlines(std::string_view text) {
  const size_t last = text.find_last_not_of('\n');
  return last == std::string_view::npos ? std::string_view() : text.substr(0, last + 1);
}

std::string_view StripNewlines(std::string_view text) { return RstripNewlines(LstripNewlines(text)); }

size_t CodePointCount(std::string_view text) {
  size_t count = 0;
  for (const char c : text) count += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return count;
}

}  // namespace tessera::chat_internal
