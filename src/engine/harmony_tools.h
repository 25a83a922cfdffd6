// Function tools in the harmony format of gpt-oss: the `# Tools` section of the developer message
// that declares them to the model, as openai-harmony 0.0.8 renders it (serving.md §6; goldens in
// tests/data/harmony/goldens.json, made by tools/make_harmony_goldens.py).
//
//   # Tools
//
//   ## functions
//
//   namespace functions {
//
//   // {description, one `// ` line per line}
//   type {name} = (_: {parameters as TypeScript}) => any;     or  `type {name} = () => any;`
//
//   } // namespace functions
//
// The parameters' JSON schema becomes a TypeScript-like type: objects list their properties in
// the schema's key order (so the schema must be kept in request order: nlohmann::ordered_json),
// a property's title / description / examples become `//` lines above it, optional properties
// (not in `required`) get `?`, string enums become unions of quoted literals, `oneOf` becomes a
// `|` list with one variant per line, `nullable` adds `| null`, defaults become a trailing
// `// default: …` comment; integer is number, an array without items is Array<any>, anything
// else is any. The quirks of harmony's renderer are kept (a nested object's description appears
// both above its property and again inside the type; a default is quoted only when it is a string
// of a property without enum), because the model was trained on exactly that text.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace tessera {

struct ToolDescription {
  std::string name;         // no whitespace (it is rendered into headers as functions.{name})
  std::string description;  // may be empty (no comment line)
  std::optional<nlohmann::ordered_json> parameters;  // JSON schema; nullopt: `() => any`
};

// The TypeScript-like type of a JSON schema; nested levels are indented by `indent`.
std::string JsonSchemaToTypeScript(const nlohmann::ordered_json& schema, std::string_view indent = {});

// The `# Tools` section declaring `tools` in the `functions` namespace (empty text for no tools).
std::string RenderFunctionTools(std::span<const ToolDescription> tools);

// The content text of a developer message: "# Instructions\n\n{instructions}" when instructions
// are given, then the `# Tools` section, joined by a blank line.
std::string RenderDeveloperContent(std::string_view instructions, std::span<const ToolDescription> tools);

}  // namespace tessera
