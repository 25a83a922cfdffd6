// The one bounded reader of untrusted JSON. Every JSON document tessera reads (config.json,
// generation_config.json, model.safetensors.index.json, safetensors headers, tokenizer.json,
// JSON on standard input, HTTP request bodies, tool-call arguments, JSON a model generated) goes
// through CheckJsonLimits (size and depth limits) before any parser sees it: ParseJsonText /
// ParseOrderedJsonText / TryParseOrderedJson call it, and the two readers that use another
// parser (simdjson for tokenizer.json, nlohmann's SAX for safetensors headers) call it
// themselves. nlohmann's and simdjson's values are walked recursively (dump, copy, comparison,
// our own renderers), so a document nested 100,000 levels deep would otherwise overflow the stack
// wherever it is walked; with the limit every walk is at most kMaxJsonDepth frames deep.
// tests/json_entry_test.cpp holds the source tree to this: no other file calls a JSON parser.
// Also: parsing that turns nlohmann's exceptions into one-line tessera::Error messages, and
// quoting of untrusted names so that an error message stays on one line whatever bytes a file
// holds.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace tessera {

// Reads a whole regular file of at most `max_bytes` bytes. Throws "<path>: ..." when the file
// is missing, is not a regular file, or is larger (the limit keeps a corrupt or hostile file from
// driving an unbounded allocation).
std::string ReadBoundedFile(const std::string& path, size_t max_bytes);

// Deepest nesting of arrays and objects accepted in any JSON document. Real model files nest at
// most ~8 levels (tokenizer.json); simdjson's own default is 1024.
inline constexpr int kMaxJsonDepth = 128;

// Largest JSON text accepted by default (tokenizer.json files are up to ~30 MB; HTTP bodies have
// the server's own, smaller --max-body limit, which it passes in).
inline constexpr size_t kMaxJsonBytes = size_t{256} << 20;

struct JsonLimits {
  size_t max_bytes = kMaxJsonBytes;
  int max_depth = kMaxJsonDepth;
};

// Throws "<source>: invalid JSON: arrays and objects nested deeper than <max_depth> levels (at
// byte N)" when they are. A linear scan that tracks strings and escapes, so it is exact for valid
// JSON and bounded (never recursive) for anything else.
void CheckJsonNesting(std::string_view text, const std::string& source, int max_depth = kMaxJsonDepth);
// The gate of every parser: throws "<source>: invalid JSON: ..." for text larger than
// limits.max_bytes, holding a NUL byte (nlohmann's lexer would stop there and ignore the rest),
// or nested deeper than limits.max_depth.
void CheckJsonLimits(std::string_view text, const std::string& source, const JsonLimits& limits = {});

// Parses JSON text (no comments, no trailing garbage, within `limits`); throws
// "<source>: invalid JSON: <why>". Duplicate keys in an object are an error (Python would keep
// the last one silently).
nlohmann::json ParseJsonText(std::string_view text, const std::string& source, const JsonLimits& limits = {});
// As ParseJsonText, keeping the keys of every object in document order (nlohmann::json sorts
// them): for JSON that is rendered back into text, such as chat tool declarations and request
// bodies.
nlohmann::ordered_json ParseOrderedJsonText(std::string_view text, const std::string& source,
                                            const JsonLimits& limits = {});
// As ParseOrderedJsonText, for text that may simply not be JSON (what a model generated):
// nullopt instead of an error.
std::optional<nlohmann::ordered_json> TryParseOrderedJson(std::string_view text, const JsonLimits& limits = {});

// The kind of a JSON value for messages: "null", "boolean", "integer", "number", "string",
// "array", "object".
const char* JsonKindName(const nlohmann::json& value);
const char* JsonKindName(const nlohmann::ordered_json& value);
const char* JsonKindName(nlohmann::json::value_t type);

// `text` in single quotes, with bytes outside printable ASCII written as \xNN and long text cut
// to `max_chars` characters (marked with "..."), so that untrusted names cannot break a message
// across lines.
std::string Quote(std::string_view text, size_t max_chars = 120);

// Makes a third-party message (nlohmann's exception text) printable and one line: strips the
// "[json.exception.*] " prefix, escapes control and non-ASCII bytes, caps the length.
std::string OneLine(std::string_view message, size_t max_chars = 240);

}  // namespace tessera
