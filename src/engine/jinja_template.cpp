#include "engine/jinja_template.h"

#include <mutex>
#include <regex>

#include "core/error.h"
#include "jinja/lexer.h"
#include "jinja/parser.h"
#include "jinja/runtime.h"
#include "jinja/value.h"

namespace tessera {
namespace {

using Json = nlohmann::ordered_json;

// JSON to the engine's values (its own converter takes llama.cpp's common_json; this one takes
// ours). Object keys keep their order, as Python dicts do.
jinja::value ToValue(const Json& j) {
  switch (j.type()) {
    case Json::value_t::null: return jinja::mk_val<jinja::value_none>();
    case Json::value_t::boolean: return jinja::mk_val<jinja::value_bool>(j.get<bool>());
    case Json::value_t::number_integer: return jinja::mk_val<jinja::value_int>(j.get<int64_t>());
    case Json::value_t::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return jinja::mk_val<jinja::value_float>(static_cast<double>(u));
      return jinja::mk_val<jinja::value_int>(static_cast<int64_t>(u));
    }
    case Json::value_t::number_float: return jinja::mk_val<jinja::value_float>(j.get<double>());
    case Json::value_t::string: return jinja::mk_val<jinja::value_string>(j.get<std::string>());
    case Json::value_t::array: {
      auto array = jinja::mk_val<jinja::value_array>();
      for (const Json& item : j) array->push_back(ToValue(item));
      return array;
    }
    case Json::value_t::object: {
      auto object = jinja::mk_val<jinja::value_object>();
      for (auto it = j.begin(); it != j.end(); ++it) object->insert(it.key(), ToValue(it.value()));
      return object;
    }
    default: Fail("chat template input: unsupported JSON value (", j.type_name(), ")");
  }
}

// The engine's messages span lines (a source excerpt with a caret); ours are one line: the
// message itself ("Error: ..." of a runtime error, else the first line) and where.
std::string OneLine(const std::string& what) {
  std::string message;
  const size_t error = what.rfind("\nError: ");
  if (error != std::string::npos) {
    message = what.substr(error + 8);
  } else {
    const size_t start = what.find_first_not_of('\n');
    message = start == std::string::npos ? what : what.substr(start);
  }
  message = message.substr(0, message.find('\n'));
  for (const std::string_view prefix : {"Jinja Exception: ", "lexer: ", "parser: "}) {
    if (message.rfind(prefix, 0) == 0) message.erase(0, prefix.size());
  }
  static const std::regex kWhere("at line ([0-9]+), column ([0-9]+)");
  std::smatch where;
  if (std::regex_search(what, where, kWhere)) message += StrCat(" (line ", where[1].str(), ", column ", where[2].str(), ")");
  return message;
}

}  // namespace

struct JinjaTemplate::Impl {
  std::string text;
  std::string source;
  std::string lexed_source;  // the engine's copy of the text (its error positions refer to it)
  jinja::program program;
  // The engine builds a scope per render but shares the program's nodes; renders are short
  // (well under a millisecond for the Hub templates), so they take turns.
  mutable std::mutex mutex;
};

JinjaTemplate::JinjaTemplate(std::string_view text, std::string source) {
  auto impl = std::make_shared<Impl>();
  impl->text = std::string(text);
  impl->source = std::move(source);
  try {
    jinja::lexer lexer;
    const jinja::lexer_result lexed = lexer.tokenize(impl->text);
    impl->lexed_source = lexed.source;
    impl->program = jinja::parse_from_tokens(lexed);
  } catch (const std::exception& e) {
    Fail(impl->source, ": the chat template does not parse: ", OneLine(e.what()));
  }
  impl_ = std::move(impl);
}

std::string JinjaTemplate::Render(const Json& globals, std::time_t now) const {
  TESSERA_CHECK(globals.is_object());
  std::lock_guard<std::mutex> lock(impl_->mutex);
  try {
    jinja::context context(impl_->lexed_source);
    context.current_time = now;
    for (auto it = globals.begin(); it != globals.end(); ++it) context.set_val(it.key(), ToValue(it.value()));
    jinja::runtime runtime(context);
    const jinja::value results = runtime.execute(impl_->program);
    return jinja::runtime::gather_string_parts(results)->as_string().str();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    Fail(OneLine(e.what()));
  }
}

const std::string& JinjaTemplate::text() const { return impl_->text; }
const std::string& JinjaTemplate::source() const { return impl_->source; }

}  // namespace tessera
