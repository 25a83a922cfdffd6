#include "engine/harmony_tools.h"

#include <algorithm>
#include <string>
#include <vector>

namespace tessera {

using nlohmann::ordered_json;

namespace {

const ordered_json* Get(const ordered_json& object, const char* key) {
  if (!object.is_object()) return nullptr;
  const auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

const std::string* GetString(const ordered_json& object, const char* key) {
  const ordered_json* v = Get(object, key);
  return v && v->is_string() ? v->get_ptr<const std::string*>() : nullptr;
}

bool IsEnum(const ordered_json& schema) {
  const ordered_json* e = Get(schema, "enum");
  return e && e->is_array() && !e->empty();
}

bool Nullable(const ordered_json& schema) {
  const ordered_json* n = Get(schema, "nullable");
  return n && n->is_boolean() && n->get<bool>();
}

// Compact JSON the way harmony (Rust, serde_json) prints a value: like nlohmann's dump except
// that a float's exponent has no '+' and no leading zeros (1e21, 1e-7 rather than 1e+21, 1e-07).
std::string SerdeJson(const ordered_json& value) {
  if (value.is_number_float()) {
    std::string text = value.dump();
    const size_t e = text.find_first_of("eE");
    if (e == std::string::npos) return text;
    std::string exponent = text.substr(e + 1);
    const bool negative = !exponent.empty() && exponent[0] == '-';
    if (!exponent.empty() && (exponent[0] == '+' || exponent[0] == '-')) exponent.erase(0, 1);
    exponent.erase(0, std::min(exponent.find_first_not_of('0'), exponent.size() - 1));
    return text.substr(0, e) + "e" + (negative ? "-" : "") + exponent;
  }
  if (value.is_array()) {
    std::string out = "[";
    for (size_t i = 0; i < value.size(); ++i) out.append(i ? "," : "").append(SerdeJson(value[i]));
    return out + "]";
  }
  if (value.is_object()) {
    std::string out = "{";
    bool first = true;
    for (const auto& [key, item] : value.items()) {
      out.append(first ? "" : ",").append(ordered_json(key).dump()).append(":").append(SerdeJson(item));
      first = false;
    }
    return out + "}";
  }
  return value.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

// "default: …" of `schema`. `bare_enum_strings`: a string default of an enum schema is printed
// without quotes (property lines do this; the trailing comments of top-level oneOf variants
// print it as JSON).
std::string DefaultComment(const ordered_json& schema, const ordered_json& value, bool bare_enum_strings) {
  if (value.is_string()) {
    if (!IsEnum(schema)) return "default: \"" + value.get<std::string>() + "\"";
    if (bare_enum_strings) return "default: " + value.get<std::string>();
  }
  return "default: " + SerdeJson(value);
}

// One variant of a oneOf: its type (with `| null` when nullable and no null is in it yet).
std::string VariantType(const ordered_json& variant, const std::string& indent) {
  std::string type = JsonSchemaToTypeScript(variant, indent + "   ");
  if (Nullable(variant) && type.find("null") == std::string::npos) type += " | null";
  return type;
}

std::string Join(const std::vector<std::string>& parts, std::string_view separator) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += separator;
    out += parts[i];
  }
  return out;
}

// A top-level oneOf: "\n{indent} | {variant} // {description} {default}" per variant.
std::string OneOfUnion(const ordered_json& variants, const std::string& indent) {
  std::string out;
  for (const ordered_json& variant : variants) {
    out += "\n" + indent + " | " + VariantType(variant, indent);
    std::vector<std::string> comments;
    if (const std::string* d = GetString(variant, "description")) comments.push_back(*d);
    if (const ordered_json* def = Get(variant, "default")) comments.push_back(DefaultComment(variant, *def, false));
    if (!comments.empty()) out += " // " + Join(comments, " ");
  }
  return out;
}

// A property whose schema is a oneOf: comments above, "{key}[?]:", one " | variant" line each.
void OneOfProperty(const std::string& key, bool required, const ordered_json& property, const ordered_json& variants,
                   const std::string& indent, std::string& out) {
  const std::string* property_description = GetString(property, "description");
  bool skip_description = false;
  if (property_description && !variants.empty()) {
    const std::string* first = GetString(variants[0], "description");
    skip_description = first && *first == *property_description;
  }
  const bool described_above = property_description && !skip_description;
  if (described_above) out += indent + "// " + *property_description + "\n";
  if (const ordered_json* def = Get(property, "default")) out += indent + "// " + DefaultComment(property, *def, true) + "\n";
  out += indent + key + (required ? "" : "?") + ":\n";
  for (size_t i = 0; i < variants.size(); ++i) {
    const ordered_json& variant = variants[i];
    out += indent + " | " + VariantType(variant, indent);
    std::vector<std::string> comments;
    if (!(i == 0 && described_above)) {
      const std::string* d = GetString(variant, "description");
      if (d && !(property_description && *d == *property_description)) comments.push_back(*d);
    }
    if (const ordered_json* def = Get(variant, "default")) comments.push_back(DefaultComment(variant, *def, true));
    if (!comments.empty()) out += " // " + Join(comments, " ");
    out += "\n";
  }
  out += indent + ",\n";
}

std::string ObjectType(const ordered_json& schema, const std::string& indent) {
  std::string out;
  if (const std::string* d = GetString(schema, "description")) out += indent + "// " + *d + "\n";
  out += "{\n";
  const ordered_json* properties = Get(schema, "properties");
  if (properties && properties->is_object()) {
    std::vector<std::string> required;
    if (const ordered_json* r = Get(schema, "required"); r && r->is_array()) {
      for (const ordered_json& name : *r) {
        if (name.is_string()) required.push_back(name.get<std::string>());
      }
    }
    for (const auto& [key, property] : properties->items()) {
      const bool is_required = std::find(required.begin(), required.end(), key) != required.end();
      const ordered_json* one_of = Get(property, "oneOf");
      if (const std::string* title = GetString(property, "title")) out += indent + "// " + *title + "\n" + indent + "//\n";
      if (!one_of) {
        if (const std::string* d = GetString(property, "description")) out += indent + "// " + *d + "\n";
      }
      if (const ordered_json* examples = Get(property, "examples"); examples && examples->is_array() && !examples->empty()) {
        out += indent + "// Examples:\n";
        for (const ordered_json& example : *examples) {
          if (example.is_string()) out += indent + "// - \"" + example.get<std::string>() + "\"\n";
        }
      }
      if (one_of && one_of->is_array()) {
        OneOfProperty(key, is_required, property, *one_of, indent, out);
        continue;
      }
      std::string type = JsonSchemaToTypeScript(property, indent + "    ");
      if (Nullable(property) && type.find("null") == std::string::npos) type += " | null";
      out += indent + key + (is_required ? "" : "?") + ": " + type + ",";
      if (!one_of) {
        if (const ordered_json* def = Get(property, "default")) out += " // " + DefaultComment(property, *def, true);
      }
      out += "\n";
    }
  }
  return out + indent + "}";
}

// The lines of a description as Rust's str::lines() gives them: split at '\n', a trailing '\r'
// removed from each, no final empty line after a trailing newline.
std::vector<std::string> Lines(std::string_view text) {
  std::vector<std::string> lines;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.emplace_back(line);
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return lines;
}

}  // namespace

std::string JsonSchemaToTypeScript(const ordered_json& schema, std::string_view indent_view) {
  const std::string indent(indent_view);
  if (const ordered_json* one_of = Get(schema, "oneOf"); one_of && one_of->is_array()) return OneOfUnion(*one_of, indent);
  const ordered_json* type = Get(schema, "type");
  if (type && type->is_array()) {
    std::vector<std::string> names;
    for (const ordered_json& t : *type) {
      if (t.is_string()) names.push_back(t == "integer" ? std::string("number") : t.get<std::string>());
    }
    if (!names.empty()) return Join(names, " | ");
  }
  if (!type || !type->is_string()) return "any";
  const std::string& name = type->get_ref<const std::string&>();
  if (name == "object") return ObjectType(schema, indent);
  if (name == "string") {
    std::vector<std::string> literals;
    if (const ordered_json* values = Get(schema, "enum"); values && values->is_array()) {
      for (const ordered_json& v : *values) {
        if (v.is_string()) literals.push_back("\"" + v.get<std::string>() + "\"");
      }
    }
    return literals.empty() ? "string" : Join(literals, " | ");
  }
  if (name == "number" || name == "integer") return "number";
  if (name == "boolean") return "boolean";
  if (name == "array") {
    const ordered_json* items = Get(schema, "items");
    return items ? JsonSchemaToTypeScript(*items, indent) + "[]" : "Array<any>";
  }
  return "any";
}

std::string RenderFunctionTools(std::span<const ToolDescription> tools) {
  if (tools.empty()) return {};
  std::vector<std::string> parts = {"## functions\n", "namespace functions {\n"};
  for (const ToolDescription& tool : tools) {
    for (const std::string& line : Lines(tool.description)) parts.push_back("// " + line);
    if (tool.parameters) {
      parts.push_back("type " + tool.name + " = (_: " + JsonSchemaToTypeScript(*tool.parameters) + ") => any;\n");
    } else {
      parts.push_back("type " + tool.name + " = () => any;\n");
    }
  }
  parts.push_back("} // namespace functions");
  return "# Tools\n\n" + Join(parts, "\n");
}

std::string RenderDeveloperContent(std::string_view instructions, std::span<const ToolDescription> tools) {
  std::vector<std::string> sections;
  if (!instructions.empty()) {
    sections.push_back("# Instructions");
    sections.emplace_back(instructions);
  }
  if (!tools.empty()) sections.push_back(RenderFunctionTools(tools));
  return Join(sections, "\n\n");
}

}  // namespace tessera
