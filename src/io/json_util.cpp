#include "io/json_util.h"

#include <cstdio>
#include <set>
#include <vector>

#include "core/error.h"
#include "core/mapped_file.h"

namespace tessera {

std::string ReadBoundedFile(const std::string& path, size_t max_bytes) {
  // MappedFile rejects missing files, directories and other non-regular files by name.
  const MappedFile file(path);
  if (file.size() > max_bytes) {
    Fail(path, ": file too large (", file.size(), " bytes; the limit is ", max_bytes, ")");
  }
  return std::string(reinterpret_cast<const char*>(file.data()), file.size());
}

void CheckJsonNesting(std::string_view text, const std::string& source, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character cannot end the string
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) {
        Fail(source, ": invalid JSON: arrays and objects nested deeper than ", max_depth, " levels (at byte ", i, ")");
      }
    } else if (c == ']' || c == '}') {
      --depth;  // unbalanced input is the parser's to report
    }
  }
}

void CheckJsonLimits(std::string_view text, const std::string& source, const JsonLimits& limits) {
  if (text.size() > limits.max_bytes) {
    Fail(source, ": invalid JSON: ", text.size(), " bytes is larger than the limit of ", limits.max_bytes);
  }
  // nlohmann's lexer takes a NUL byte for the end of input and would ignore the rest; valid
  // JSON never holds a raw NUL.
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos) {
    Fail(source, ": invalid JSON: NUL byte at offset ", nul);
  }
  CheckJsonNesting(text, source, limits.max_depth);
}

namespace {

// Both parsers share the checks; Json is nlohmann::json or nlohmann::ordered_json.
template <typename Json>
Json ParseJsonAs(std::string_view text, const std::string& source, const JsonLimits& limits) {
  CheckJsonLimits(text, source, limits);
  // nlohmann keeps the last of duplicate keys silently; a duplicate in a model file is a
  // corruption we report instead. One set of keys per open object, innermost last.
  std::vector<std::set<std::string>> open_objects;
  std::string duplicate;
  auto callback = [&](int /*depth*/, typename Json::parse_event_t event, Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start:
        open_objects.emplace_back();
        break;
      case Json::parse_event_t::object_end:
        if (!open_objects.empty()) open_objects.pop_back();
        break;
      case Json::parse_event_t::key:
        if (!open_objects.empty() && !open_objects.back().insert(parsed.template get<std::string>()).second &&
            duplicate.empty()) {
          duplicate = parsed.template get<std::string>();
        }
        break;
      default:
        break;
    }
    return true;
  };
  Json value;
  try {
    value = Json::parse(text.begin(), text.end(), callback, /*allow_exceptions=*/true, /*ignore_comments=*/false);
  } catch (const nlohmann::json::exception& e) {
    Fail(source, ": invalid JSON: ", OneLine(e.what()));
  }
  if (!duplicate.empty()) Fail(source, ": invalid JSON: duplicate key ", Quote(duplicate));
  return value;
}

}  // namespace

nlohmann::json ParseJsonText(std::string_view text, const std::string& source, const JsonLimits& limits) {
  return ParseJsonAs<nlohmann::json>(text, source, limits);
}

nlohmann::ordered_json ParseOrderedJsonText(std::string_view text, const std::string& source,
                                            const JsonLimits& limits) {
  return ParseJsonAs<nlohmann::ordered_json>(text, source, limits);
}

std::optional<nlohmann::ordered_json> TryParseOrderedJson(std::string_view text, const JsonLimits& limits) {
  try {
    return ParseJsonAs<nlohmann::ordered_json>(text, "text", limits);
  } catch (const Error&) {
    return std::nullopt;
  }
}

const char* JsonKindName(nlohmann::json::value_t type) {
  switch (type) {
    case nlohmann::json::value_t::null:
      return "null";
    case nlohmann::json::value_t::boolean:
      return "boolean";
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned:
      return "integer";
    case nlohmann::json::value_t::number_float:
      return "number";
    case nlohmann::json::value_t::string:
      return "string";
    case nlohmann::json::value_t::array:
      return "array";
    case nlohmann::json::value_t::object:
      return "object";
    default:
      return "binary";
  }
}

const char* JsonKindName(const nlohmann::json& value) { return JsonKindName(value.type()); }
const char* JsonKindName(const nlohmann::ordered_json& value) { return JsonKindName(value.type()); }

namespace {

// Appends `text` with bytes outside printable ASCII as \xNN, stopping after `max_chars` output
// characters. Returns false when it had to stop early.
bool AppendEscaped(std::string& out, std::string_view text, size_t max_chars) {
  const size_t start = out.size();
  for (const char c : text) {
    if (out.size() - start >= max_chars) return false;
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte < 0x7f) {
      out.push_back(c);
    } else {
      char hex[5];
      std::snprintf(hex, sizeof(hex), "\\x%02x", byte);
      out += hex;
    }
  }
  return true;
}

}  // namespace

std::string Quote(std::string_view text, size_t max_chars) {
  std::string out = "'";
  if (!AppendEscaped(out, text, max_chars)) out += "...";
  out += "'";
  return out;
}

std::string OneLine(std::string_view message, size_t max_chars) {
  // nlohmann messages look like "[json.exception.parse_error.101] parse error at line 1, ...".
  if (message.substr(0, 16) == "[json.exception.") {
    const size_t close = message.find("] ");
    if (close != std::string_view::npos) message.remove_prefix(close + 2);
  }
  std::string out;
  if (!AppendEscaped(out, message, max_chars)) out += "...";
  return out;
}

}  // namespace tessera
