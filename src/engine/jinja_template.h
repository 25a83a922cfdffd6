// A parsed Jinja template, rendered by llama.cpp's C++ Jinja engine (common/jinja, built from the
// pinned llama-cpp-python sdist by scripts/setup_jinja.sh; patched so that floats print as
// Python's repr and trim/strip remove Python's whitespace). The engine's headers stay inside
// jinja_template.cpp.
//
// Rendering follows transformers' apply_chat_template (../shared/reference/families-2026.md
// "Chat templates"): the context's keys become the template's globals; raise_exception,
// strftime_now, tojson, namespaces, loop controls and the usual filters are the engine's. Where
// jinja2 raises and the engine is lenient (None or a missing key concatenated to a string is ""),
// the engine's leniency is kept, as llama-server's.
#pragma once

#include <ctime>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace tessera {

class JinjaTemplate {
 public:
  // Parses `text`; `source` names it in errors. Throws a one-line tessera::Error when it does not
  // parse ("<source>: the chat template does not parse: <what> (line L, column C)").
  JinjaTemplate(std::string_view text, std::string source);

  // Renders with the members of `globals` (an object) as the template's variables; `now` is the
  // time strftime_now formats (local time). Throws a one-line tessera::Error: "<what>" with the
  // template's own message for raise_exception, and the line and column where it stopped.
  std::string Render(const nlohmann::ordered_json& globals, std::time_t now) const;

  const std::string& text() const;
  const std::string& source() const;

 private:
  struct Impl;
  std::shared_ptr<const Impl> impl_;
};

}  // namespace tessera
