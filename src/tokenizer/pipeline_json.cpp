#include "tokenizer/pipeline_json.h"

#include "tokenizer/utf8.h"

namespace tessera {

using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::object;

// {"String": s} or {"Regex": r} of Replace components: the literal or the compiled regex.
void PipelineJson::LoadPattern(const object& obj, const std::string& path, std::string& literal,
                               std::shared_ptr<SplitRegex>& regex) {
  element e, value;
  if (!Get(obj, "pattern", e)) Reject(path, "has no \"pattern\"");
  const object pattern = AsObject(e, StrCat(path, ".pattern"));
  if (Get(pattern, "String", value)) {
    literal = std::string(AsString(value, StrCat(path, ".pattern.String")));
    if (literal.empty()) Reject(StrCat(path, ".pattern.String"), "is empty");
  } else if (Get(pattern, "Regex", value)) {
    const std::string_view r = AsString(value, StrCat(path, ".pattern.Regex"));
    try {
      regex = std::make_shared<SplitRegex>(r);
    } catch (const tessera::Error& err) {
      Reject(StrCat(path, ".pattern.Regex"), err.what());
    }
  } else {
    Reject(StrCat(path, ".pattern"), "expected {\"String\": ...} or {\"Regex\": ...}");
  }
}

// The members of a Sequence (`list_key`) or the component itself, with their JSON paths.
std::vector<std::pair<object, std::string>> PipelineJson::Flatten(const object& obj, const std::string& path,
                                                                  std::string_view list_key) {
  std::vector<std::pair<object, std::string>> out;
  if (TypeOf(obj, path) != "Sequence") {
    out.emplace_back(obj, path);
    return out;
  }
  element list_e;
  const std::string list_path = StrCat(path, ".", list_key);
  if (!Get(obj, list_key, list_e)) Reject(list_path, "is missing");
  size_t index = 0;
  for (element item : AsArray(list_e, list_path)) {
    const std::string item_path = StrCat(list_path, "[", index++, "]");
    for (auto& inner : Flatten(AsObject(item, item_path), item_path, list_key)) out.push_back(std::move(inner));
  }
  return out;
}

void PipelineJson::LoadNormalizer(const object& top, Normalizer& out) {
  element e;
  if (!Get(top, "normalizer", e) || e.is_null()) return;
  using Step = Normalizer::Step;
  for (const auto& [n, path] : Flatten(AsObject(e, "normalizer"), "normalizer", "normalizers")) {
    const std::string_view type = TypeOf(n, path);
    Step step{};
    if (type == "NFC") {
      step.kind = Step::Kind::kNfc;
    } else if (type == "Prepend") {
      step.kind = Step::Kind::kPrepend;
      element p;
      if (!Get(n, "prepend", p)) Reject(path, "has no \"prepend\"");
      step.text = std::string(AsString(p, StrCat(path, ".prepend")));
    } else if (type == "Replace") {
      step.kind = Step::Kind::kReplace;
      std::shared_ptr<SplitRegex> regex;
      LoadPattern(n, path, step.text, regex);
      step.regex = std::move(regex);
      element c;
      if (!Get(n, "content", c)) Reject(path, "has no \"content\"");
      step.content = std::string(AsString(c, StrCat(path, ".content")));
    } else {
      Reject(path, "type ", QuoteToken(type), " is not supported (NFC, Prepend, Replace or a Sequence of them)");
    }
    out.steps.push_back(std::move(step));
  }
}

void PipelineJson::LoadPostProcessor(const object& top, PostProcessor& out) {
  element e;
  if (!Get(top, "post_processor", e) || e.is_null()) return;
  for (const auto& [p, path] : Flatten(AsObject(e, "post_processor"), "post_processor", "processors")) {
    const std::string_view type = TypeOf(p, path);
    if (type == "ByteLevel") continue;  // only adjusts offsets; ids are untouched
    if (type != "TemplateProcessing") {
      Reject(path, "type ", QuoteToken(type), " is not supported (TemplateProcessing, ByteLevel or a Sequence of them)");
    }
    element single_e, specials_e;
    if (!Get(p, "single", single_e)) Reject(path, "has no \"single\"");
    object specials;
    const bool has_specials = Get(p, "special_tokens", specials_e);
    if (has_specials) specials = AsObject(specials_e, StrCat(path, ".special_tokens"));
    // A later template wraps the result of an earlier one.
    std::vector<int32_t> prefix, suffix;
    bool seen_a = false;
    size_t index = 0;
    for (element item_e : AsArray(single_e, StrCat(path, ".single"))) {
      const std::string item_path = StrCat(path, ".single[", index++, "]");
      const object item = AsObject(item_e, item_path);
      element inner;
      if (Get(item, "Sequence", inner)) {
        element id;
        if (!Get(AsObject(inner, item_path), "id", id) || AsString(id, item_path) != "A" || seen_a) {
          Reject(item_path, "a single-sequence template must use $A exactly once");
        }
        seen_a = true;
      } else if (Get(item, "SpecialToken", inner)) {
        element id_e, entry_e, ids_e;
        if (!Get(AsObject(inner, item_path), "id", id_e)) Reject(item_path, "has no \"id\"");
        const std::string_view name = AsString(id_e, StrCat(item_path, ".id"));
        const std::string entry_path = StrCat(path, ".special_tokens[", QuoteToken(name), "]");
        if (!has_specials || !Get(specials, name, entry_e)) Reject(entry_path, "is missing");
        if (!Get(AsObject(entry_e, entry_path), "ids", ids_e)) Reject(entry_path, "has no \"ids\"");
        for (element id : AsArray(ids_e, StrCat(entry_path, ".ids"))) {
          (seen_a ? suffix : prefix).push_back(AsId(id, StrCat(entry_path, ".ids")));
        }
      } else {
        Reject(item_path, "expected {\"Sequence\": ...} or {\"SpecialToken\": ...}");
      }
    }
    if (!seen_a) Reject(StrCat(path, ".single"), "has no $A");
    PostProcessor& post = out;
    post.prefix.insert(post.prefix.begin(), prefix.begin(), prefix.end());
    post.suffix.insert(post.suffix.end(), suffix.begin(), suffix.end());
    post.has_template = true;
  }
}

void PipelineJson::LoadDecoder(const object& top, Decoder& out) {
  element e;
  if (!Get(top, "decoder", e) || e.is_null()) Reject("decoder", "is missing (HF would join tokens with spaces)");
  using Step = Decoder::Step;
  for (const auto& [d, path] : Flatten(AsObject(e, "decoder"), "decoder", "decoders")) {
    const std::string_view type = TypeOf(d, path);
    Step step{};
    if (type == "ByteLevel") {
      step.kind = Step::Kind::kByteLevel;
    } else if (type == "ByteFallback") {
      step.kind = Step::Kind::kByteFallback;
    } else if (type == "Fuse") {
      step.kind = Step::Kind::kFuse;
    } else if (type == "Replace") {
      step.kind = Step::Kind::kReplace;
      std::shared_ptr<SplitRegex> regex;
      LoadPattern(d, path, step.pattern, regex);
      step.regex = std::move(regex);
      element c;
      if (!Get(d, "content", c)) Reject(path, "has no \"content\"");
      step.content = std::string(AsString(c, StrCat(path, ".content")));
    } else if (type == "Strip") {
      step.kind = Step::Kind::kStrip;
      element c, start, stop;
      if (!Get(d, "content", c) || !Get(d, "start", start) || !Get(d, "stop", stop)) {
        Reject(path, "needs \"content\", \"start\" and \"stop\"");
      }
      step.content = std::string(AsString(c, StrCat(path, ".content")));
      size_t pos = 0;
      if (step.content.empty() || (utf8::Next(step.content, pos), pos != step.content.size())) {
        Reject(StrCat(path, ".content"), "must be one character");
      }
      step.start = static_cast<size_t>(AsId(start, StrCat(path, ".start")));
      step.stop = static_cast<size_t>(AsId(stop, StrCat(path, ".stop")));
    } else if (type == "Metaspace") {
      step.kind = Step::Kind::kMetaspace;
      const PreTokenizerStep meta = LoadMetaspace(d, path);
      size_t pos = 0;
      step.replacement = utf8::Next(meta.replacement, pos);
      step.strip_first = meta.prepend != PreTokenizerStep::Prepend::kNever;
    } else {
      Reject(path, "type ", QuoteToken(type),
             " is not supported (ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace or a Sequence of them)");
    }
    out.steps.push_back(std::move(step));
  }
}

PreTokenizerStep PipelineJson::LoadMetaspace(const object& m, const std::string& path) {
  PreTokenizerStep step{};
  step.kind = PreTokenizerStep::Kind::kMetaspace;
  element r;
  if (!Get(m, "replacement", r)) Reject(path, "has no \"replacement\"");
  step.replacement = std::string(AsString(r, StrCat(path, ".replacement")));
  size_t pos = 0;
  if (step.replacement.empty() || (utf8::Next(step.replacement, pos), pos != step.replacement.size())) {
    Reject(StrCat(path, ".replacement"), "must be one character");
  }
  const std::string_view scheme = OptionalString(m, "prepend_scheme", StrCat(path, ".prepend_scheme"));
  if (scheme.empty()) {
    // Files older than prepend_scheme: add_prefix_space true meant "always".
    const bool add = OptionalBool(m, "add_prefix_space", StrCat(path, ".add_prefix_space"), true);
    step.prepend = add ? PreTokenizerStep::Prepend::kAlways : PreTokenizerStep::Prepend::kNever;
  } else if (scheme == "always") {
    step.prepend = PreTokenizerStep::Prepend::kAlways;
  } else if (scheme == "first") {
    step.prepend = PreTokenizerStep::Prepend::kFirst;
  } else if (scheme == "never") {
    step.prepend = PreTokenizerStep::Prepend::kNever;
  } else {
    Reject(StrCat(path, ".prepend_scheme"), QuoteToken(scheme), " is not one of always, first, never");
  }
  step.split = OptionalBool(m, "split", StrCat(path, ".split"), true);
  return step;
}

bool PipelineJson::LoadPreTokenizer(const element& e, std::vector<PreTokenizerStep>& steps) {
  bool byte_level = false;
  const auto list = Flatten(AsObject(e, "pre_tokenizer"), "pre_tokenizer", "pretokenizers");
  byte_level = false;
  for (size_t index = 0; index < list.size(); ++index) {
    const auto& [p, path] = list[index];
    const std::string_view type = TypeOf(p, path);
    if (byte_level) Reject(path, "nothing may follow the ByteLevel pre-tokenizer");
    PreTokenizerStep step{};
    if (type == "Split") {
      step.kind = PreTokenizerStep::Kind::kSplit;
      step.regex = LoadSplit(p, path);
    } else if (type == "ByteLevel") {
      // ByteLevel maps bytes to characters last; here that is implicit: the model is keyed
      // by raw bytes.
      byte_level = true;
      if (OptionalBool(p, "add_prefix_space", StrCat(path, ".add_prefix_space"), true)) {
        PreTokenizerStep prefix{};
        prefix.kind = PreTokenizerStep::Kind::kByteLevelPrefix;
        steps.push_back(std::move(prefix));
      }
      OptionalBool(p, "trim_offsets", StrCat(path, ".trim_offsets"), true);  // offsets only
      if (OptionalBool(p, "use_regex", StrCat(path, ".use_regex"), true)) {
        // HF's ByteLevel split: GPT-2's pattern, behavior Isolated.
        step.kind = PreTokenizerStep::Kind::kSplit;
        step.regex = MakeSplit(R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)", path);
      } else {
        continue;
      }
    } else if (type == "Metaspace") {
      step = LoadMetaspace(p, path);
    } else if (type == "Digits") {
      step.kind = PreTokenizerStep::Kind::kDigits;
      step.individual_digits = OptionalBool(p, "individual_digits", StrCat(path, ".individual_digits"), false);
    } else {
      Reject(path, "type ", QuoteToken(type), " is not supported (Split, ByteLevel, Metaspace, Digits or a Sequence of them)");
    }
    steps.push_back(std::move(step));
  }
  return byte_level;
}

std::shared_ptr<SplitRegex> PipelineJson::LoadSplit(const object& s, const std::string& path) {
  element pattern_e;
  if (!Get(s, "pattern", pattern_e)) Reject(path, "has no \"pattern\"");
  const object pattern = AsObject(pattern_e, StrCat(path, ".pattern"));
  element value;
  if (!Get(pattern, "Regex", value)) {
    // {"String": ...} splits are not supported: nothing in use needs them, and the golden
    // data only covers regex splits.
    Reject(StrCat(path, ".pattern"), "expected {\"Regex\": ...} (String patterns are not supported)");
  }
  const std::string_view regex = AsString(value, StrCat(path, ".pattern.Regex"));
  element behavior_e;
  if (!Get(s, "behavior", behavior_e)) Reject(path, "has no \"behavior\"");
  const std::string_view behavior = AsString(behavior_e, StrCat(path, ".behavior"));
  if (behavior != "Isolated") Reject(StrCat(path, ".behavior"), QuoteToken(behavior), " is not supported (only Isolated)");
  if (OptionalBool(s, "invert", StrCat(path, ".invert"), false)) {
    Reject(StrCat(path, ".invert"), "true is not supported");
  }
  return MakeSplit(regex, StrCat(path, ".pattern"));
}

std::shared_ptr<SplitRegex> PipelineJson::MakeSplit(std::string_view regex, const std::string& path) {
  try {
    return std::make_shared<SplitRegex>(regex);
  } catch (const tessera::Error& e) {
    Reject(path, e.what());
  }
}

}  // namespace tessera
