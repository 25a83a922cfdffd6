// config.json and generation_config.json.
//
// Every JSON key tessera understands is one row of a field table (Fields(), RopeFields(),
// QuantFields(), GenerationFields()): its key and other spellings, how it is read and written,
// its default, its numeric limits and the architectures that require it. Parsing, writing
// (ModelConfigToJson) and validation all walk these tables (style.md §7.5), so a new key is one
// new row. Keys no row describes stay in ModelConfig::raw and are written back unchanged.
#include "io/config.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>
#include <utility>

#include "core/error.h"
#include "io/gguf.h"
#include "io/gguf_config.h"
#include "io/gguf_tensors.h"
#include "io/json_util.h"
#include "io/model_dir.h"
#include "io/model_limits.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// config.json files are a few KB; the bound only stops a wrong file from being read whole.
constexpr size_t kMaxConfigBytes = 16u << 20;
// The budgets of io/model_limits.h as field limits: layer_types is derived with one entry per
// layer, the tensor list with one entry per layer and expert, so no count may drive an unbounded
// allocation.
constexpr double kMaxLayers = kMaxConfigLayers;
constexpr double kMaxExperts = kMaxConfigExperts;
constexpr double kMaxHeads = kMaxConfigHeads;
constexpr double kMaxVocab = kMaxConfigVocab;
constexpr double kMaxWidth = kMaxConfigWidth;
constexpr double kMaxContext = kMaxConfigContext;

// ---- architectures -------------------------------------------------------------------------

// One bit per model_type whose keys the tables know; `required_for` masks are made of these.
enum : uint32_t {
  kGptOss = 1u << 0,
  kLlama = 1u << 1,
  kQwen2 = 1u << 2,
  kQwen3 = 1u << 3,
  kDeepseekV3 = 1u << 4,
  kMistral = 1u << 5,
  kQwen3Moe = 1u << 6,
  kDeepseekV2 = 1u << 7,
  kOtherArch = 1u << 8,
  kGemma3 = 1u << 9,  // gemma3_text (and the text part of gemma3, whose config nests it)
  kSmolLm3 = 1u << 10,
  kPhi3 = 1u << 11,
  kGlm4Moe = 1u << 12,
};
constexpr uint32_t kDeepseek = kDeepseekV2 | kDeepseekV3;
constexpr uint32_t kKnownArchs = kGptOss | kLlama | kQwen2 | kQwen3 | kDeepseek | kMistral | kQwen3Moe | kGemma3 | kSmolLm3 | kPhi3 | kGlm4Moe;
// Architectures whose config class gives every size a default (Gemma3TextConfig: the Hub's
// multimodal configs leave vocab_size and others out of text_config): those keys are not required.
constexpr uint32_t kSizesRequired = kKnownArchs & ~kGemma3;

uint32_t ArchBit(std::string_view model_type) {
  if (model_type == "gpt_oss") return kGptOss;
  if (model_type == "llama") return kLlama;
  if (model_type == "qwen2") return kQwen2;
  if (model_type == "qwen3") return kQwen3;
  if (model_type == "deepseek_v3") return kDeepseekV3;
  if (model_type == "deepseek_v2") return kDeepseekV2;
  if (model_type == "mistral") return kMistral;
  if (model_type == "qwen3_moe") return kQwen3Moe;
  if (model_type == "gemma3_text") return kGemma3;
  if (model_type == "smollm3") return kSmolLm3;
  if (model_type == "phi3") return kPhi3;
  if (model_type == "glm4_moe") return kGlm4Moe;
  return kOtherArch;
}


// ---- reading helpers -------------------------------------------------------------------------

// Where a value sits, for messages "<source>: <key>: <problem>".
struct Ctx {
  const std::string* source;
  std::string key;   // the spelling found in the file, dotted for nested keys
  const json* root;  // the whole document (for keys whose default depends on another key)
  uint32_t arch;

  template <typename... Args>
  [[noreturn]] void Fail(Args&&... args) const {
    tessera::Fail(*source, ": ", key, ": ", std::forward<Args>(args)...);
  }
  Ctx Child(std::string_view child) const {
    return Ctx{source, key.empty() ? std::string(child) : StrCat(key, ".", child), root, arch};
  }
};

// A short rendering of a JSON value for messages: `string "64"`, `integer -3`.
std::string Describe(const json& v) {
  std::string text = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (v.is_array() || v.is_object()) return JsonKindName(v);
  return StrCat(JsonKindName(v), " ", OneLine(text, 40));
}

std::string FormatNumber(double v) {
  if (std::nearbyint(v) == v && std::fabs(v) < 1e15) return StrCat(static_cast<int64_t>(v));
  return StrCat(v);
}

int64_t ToInt(const json& v, const Ctx& ctx) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) ctx.Fail("out of range: ", u);
    return static_cast<int64_t>(u);
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  ctx.Fail("must be an integer, got ", Describe(v));
}

double ToNumber(const json& v, const Ctx& ctx) {
  if (!v.is_number()) ctx.Fail("must be a number, got ", Describe(v));
  return v.get<double>();
}

bool ToBool(const json& v, const Ctx& ctx) {
  if (!v.is_boolean()) ctx.Fail("must be true or false, got ", Describe(v));
  return v.get<bool>();
}

std::string ToString(const json& v, const Ctx& ctx) {
  if (!v.is_string()) ctx.Fail("must be a string, got ", Describe(v));
  return v.get<std::string>();
}

const json& ToArray(const json& v, const Ctx& ctx) {
  if (!v.is_array()) ctx.Fail("must be an array, got ", Describe(v));
  return v;
}

// Writes a number the way the source spelled it: HF stores e.g. rope_theta 150000 as an integer
// and factor 32.0 as a float, and Python code downstream may care.
json NumberJson(double v, const json* previous) {
  const bool as_int = previous != nullptr && (previous->is_number_integer() || previous->is_number_unsigned());
  if (as_int && std::nearbyint(v) == v && std::fabs(v) < 9e18) return static_cast<int64_t>(v);
  return v;
}

// Dotted-path lookup ("rope_parameters.rope_theta"); nullptr when any step is missing.
const json* Lookup(const json& obj, std::string_view path) {
  const json* cur = &obj;
  while (true) {
    if (!cur->is_object()) return nullptr;
    const size_t dot = path.find('.');
    const auto it = cur->find(std::string(path.substr(0, dot)));
    if (it == cur->end()) return nullptr;
    if (dot == std::string_view::npos) return &*it;
    cur = &*it;
    path.remove_prefix(dot + 1);
  }
}

void SetPath(json& obj, std::string_view path, json value) {
  json* cur = &obj;
  size_t dot;
  while ((dot = path.find('.')) != std::string_view::npos) {
    json& next = (*cur)[std::string(path.substr(0, dot))];
    if (!next.is_object()) next = json::object();
    cur = &next;
    path.remove_prefix(dot + 1);
  }
  (*cur)[std::string(path)] = std::move(value);
}

void ErasePath(json& obj, std::string_view path) {
  const size_t dot = path.rfind('.');
  json* parent = &obj;
  if (dot != std::string_view::npos) {
    parent = const_cast<json*>(Lookup(obj, path.substr(0, dot)));
    if (parent == nullptr) return;
    path.remove_prefix(dot + 1);
  }
  if (parent->is_object()) parent->erase(std::string(path));
}

// ---- numeric limits --------------------------------------------------------------------------

enum class Sign { kAny, kPositive, kNonNegative, kUnitInterval, kPositiveOrMinusOne };

struct Limits {
  Sign sign = Sign::kAny;
  std::optional<double> max;
};

void CheckNumber(double v, const Limits& limits, const Ctx& ctx) {
  switch (limits.sign) {
    case Sign::kAny:
      break;
    case Sign::kPositive:
      if (!(v > 0)) ctx.Fail("must be positive, got ", FormatNumber(v));
      break;
    case Sign::kNonNegative:
      if (!(v >= 0)) ctx.Fail("must not be negative, got ", FormatNumber(v));
      break;
    case Sign::kUnitInterval:
      if (!(v >= 0 && v <= 1)) ctx.Fail("must lie in [0, 1], got ", FormatNumber(v));
      break;
    case Sign::kPositiveOrMinusOne:
      if (!(v > 0 || v == -1)) ctx.Fail("must be positive or -1, got ", FormatNumber(v));
      break;
  }
  if (limits.max && v > *limits.max) ctx.Fail("must be at most ", FormatNumber(*limits.max), ", got ", FormatNumber(v));
}

// ---- the field description -------------------------------------------------------------------

// One JSON key of a config object C (ModelConfig, RopeScaling, QuantizationConfig,
// GenerationConfig).
template <typename C>
struct Field {
  std::string_view key;
  // Other spellings read as the same value (dotted paths allowed). When several are present they
  // must agree. Writing updates every spelling the source used, else writes `key` (or the
  // architecture's own spelling from `arch_keys`).
  std::vector<std::string_view> aliases;
  std::vector<std::pair<uint32_t, std::string_view>> arch_keys;
  json default_value;  // read when no spelling is present; null leaves the member as constructed
  std::vector<std::pair<uint32_t, json>> arch_defaults;
  uint32_t required_for = 0;  // architectures for which the key must be present
  Limits limits;
  // Reads a present, non-null value (type checks and limits included).
  std::function<void(C&, const json&, const Ctx&)> read;
  // The JSON to write; null omits the key. `previous` is the source's value at that spelling.
  std::function<json(const C&, const json* previous, std::string_view spelling)> write;
  // The value for limit checks on a struct built in code; nullopt when unset or not numeric.
  std::function<std::optional<double>(const C&)> number;
  // Whether two spellings' values agree (default: JSON equality, numbers compared by value).
  std::function<bool(const json&, const json&)> agree;

  Field&& Alias(std::string_view alias) && {
    aliases.push_back(alias);
    return std::move(*this);
  }
  Field&& ArchKey(uint32_t arch, std::string_view k) && {
    arch_keys.emplace_back(arch, k);
    return std::move(*this);
  }
  Field&& Default(json v) && {
    default_value = std::move(v);
    return std::move(*this);
  }
  Field&& ArchDefault(uint32_t arch, json v) && {
    arch_defaults.emplace_back(arch, std::move(v));
    return std::move(*this);
  }
  Field&& Required(uint32_t archs) && {
    required_for = archs;
    return std::move(*this);
  }
  Field&& Positive() && {
    limits.sign = Sign::kPositive;
    return std::move(*this);
  }
  Field&& NonNegative() && {
    limits.sign = Sign::kNonNegative;
    return std::move(*this);
  }
  Field&& UnitInterval() && {
    limits.sign = Sign::kUnitInterval;
    return std::move(*this);
  }
  Field&& PositiveOrMinusOne() && {
    limits.sign = Sign::kPositiveOrMinusOne;
    return std::move(*this);
  }
  Field&& Max(double m) && {
    limits.max = m;
    return std::move(*this);
  }
  // Writes the key only while `pred` holds (e.g. beta_fast only for yarn).
  Field&& When(std::function<bool(const C&)> pred) && {
    write = [w = std::move(write), pred = std::move(pred)](const C& c, const json* prev, std::string_view s) {
      return pred(c) ? w(c, prev, s) : json();
    };
    return std::move(*this);
  }
};

// Row builders, one per member type. Each reads with type checks and the row's limits.

template <typename C>
Field<C> Int(std::string_view key, int64_t C::*m) {
  Field<C> f;
  f.key = key;
  f.read = [m](C& c, const json& v, const Ctx& ctx) { c.*m = ToInt(v, ctx); };
  // 0 is the member's "not given" value (e.g. num_local_experts of a dense model): written only
  // when the source had the key.
  f.write = [m](const C& c, const json* prev, std::string_view) {
    return c.*m == 0 && prev == nullptr ? json() : json(c.*m);
  };
  f.number = [m](const C& c) { return std::optional<double>(static_cast<double>(c.*m)); };
  return f;
}

template <typename C>
Field<C> OptInt(std::string_view key, std::optional<int64_t> C::*m) {
  Field<C> f;
  f.key = key;
  f.read = [m](C& c, const json& v, const Ctx& ctx) { c.*m = ToInt(v, ctx); };
  f.write = [m](const C& c, const json*, std::string_view) { return (c.*m) ? json(*(c.*m)) : json(); };
  f.number = [m](const C& c) { return (c.*m) ? std::optional<double>(static_cast<double>(*(c.*m))) : std::nullopt; };
  return f;
}

template <typename C>
Field<C> Num(std::string_view key, double C::*m) {
  Field<C> f;
  f.key = key;
  f.read = [m](C& c, const json& v, const Ctx& ctx) { c.*m = ToNumber(v, ctx); };
  // As for Int: 0 (e.g. swiglu_limit outside gpt_oss) is written only when the source had it.
  f.write = [m](const C& c, const json* prev, std::string_view) {
    return c.*m == 0 && prev == nullptr ? json() : NumberJson(c.*m, prev);
  };
  f.number = [m](const C& c) { return std::optional<double>(c.*m); };
  return f;
}

template <typename C>
Field<C> OptNum(std::string_view key, std::optional<double> C::*m) {
  Field<C> f;
  f.key = key;
  f.read = [m](C& c, const json& v, const Ctx& ctx) { c.*m = ToNumber(v, ctx); };
  f.write = [m](const C& c, const json* prev, std::string_view) { return (c.*m) ? NumberJson(*(c.*m), prev) : json(); };
  f.number = [m](const C& c) { return c.*m; };
  return f;
}

template <typename C>
Field<C> Bool(std::string_view key, bool C::*m) {
  Field<C> f;
  f.key = key;
  f.read = [m](C& c, const json& v, const Ctx& ctx) { c.*m = ToBool(v, ctx); };
  f.write = [m](const C& c, const json*, std::string_view) { return json(c.*m); };
  return f;
}

// A bool that is written back only when the source had the key or the value is true (keys that
// some architectures' config classes do not have, e.g. mlp_bias in a gpt-oss config).
template <typename C>
Field<C> SparseBool(std::string_view key, bool C::*m) {
  Field<C> f = Bool(key, m);
  f.write = [m](const C& c, const json* prev, std::string_view) { return prev != nullptr || c.*m ? json(c.*m) : json(); };
  return f;
}

template <typename C>
Field<C> IntList(std::string_view key, std::vector<int64_t> C::*m) {
  Field<C> f;
  f.key = key;
  f.read = [m](C& c, const json& v, const Ctx& ctx) {
    (c.*m).clear();
    for (size_t i = 0; i < ToArray(v, ctx).size(); ++i) (c.*m).push_back(ToInt(v[i], ctx.Child(StrCat(i))));
  };
  f.write = [m](const C& c, const json* prev, std::string_view) {
    return (c.*m).empty() && prev == nullptr ? json() : json(c.*m);
  };
  return f;
}

template <typename C>
Field<C> OptBool(std::string_view key, std::optional<bool> C::*m) {
  Field<C> f;
  f.key = key;
  f.read = [m](C& c, const json& v, const Ctx& ctx) { c.*m = ToBool(v, ctx); };
  f.write = [m](const C& c, const json*, std::string_view) { return (c.*m) ? json(*(c.*m)) : json(); };
  return f;
}

// A string; empty means unset and is not written.
template <typename C>
Field<C> Str(std::string_view key, std::string C::*m) {
  Field<C> f;
  f.key = key;
  f.read = [m](C& c, const json& v, const Ctx& ctx) { c.*m = ToString(v, ctx); };
  f.write = [m](const C& c, const json*, std::string_view) { return (c.*m).empty() ? json() : json(c.*m); };
  return f;
}

// A list of strings; written when non-empty or when the source had the key.
template <typename C>
Field<C> StrList(std::string_view key, std::vector<std::string> C::*m) {
  Field<C> f;
  f.key = key;
  f.read = [m](C& c, const json& v, const Ctx& ctx) {
    (c.*m).clear();
    for (size_t i = 0; i < ToArray(v, ctx).size(); ++i) (c.*m).push_back(ToString(v[i], ctx.Child(StrCat(i))));
  };
  f.write = [m](const C& c, const json* prev, std::string_view) {
    return (c.*m).empty() && prev == nullptr ? json() : json(c.*m);
  };
  return f;
}

template <typename C>
Field<C> NumList(std::string_view key, std::vector<double> C::*m) {
  Field<C> f;
  f.key = key;
  f.read = [m](C& c, const json& v, const Ctx& ctx) {
    (c.*m).clear();
    for (size_t i = 0; i < ToArray(v, ctx).size(); ++i) (c.*m).push_back(ToNumber(v[i], ctx.Child(StrCat(i))));
  };
  f.write = [m](const C& c, const json* prev, std::string_view) {
    return (c.*m).empty() && prev == nullptr ? json() : json(c.*m);
  };
  return f;
}

// Token ids: an integer or a list of integers (config.json and generation_config.json both use
// either form; gpt-oss.md §1.3). Written back in the source's form, else an integer for one id.
template <typename C>
Field<C> TokenIds(std::string_view key, std::vector<int64_t> C::*m) {
  Field<C> f;
  f.key = key;
  f.read = [m](C& c, const json& v, const Ctx& ctx) {
    (c.*m).clear();
    auto add = [&](const json& id, const Ctx& at) {
      const int64_t value = ToInt(id, at);
      if (value < 0) at.Fail("token id must not be negative, got ", value);
      (c.*m).push_back(value);
    };
    if (v.is_array()) {
      for (size_t i = 0; i < v.size(); ++i) add(v[i], ctx.Child(StrCat(i)));
    } else if (v.is_number()) {
      add(v, ctx);
    } else {
      ctx.Fail("must be an integer or a list of integers, got ", Describe(v));
    }
  };
  f.write = [m](const C& c, const json* prev, std::string_view) {
    const auto& ids = c.*m;
    if (ids.empty()) return prev != nullptr && prev->is_array() ? json::array() : json();
    if (ids.size() == 1 && (prev == nullptr || !prev->is_array())) return json(ids[0]);
    return json(ids);
  };
  return f;
}

// ---- walking the tables ----------------------------------------------------------------------

template <typename C>
void ReadFields(const std::vector<Field<C>>& fields, const json& obj, C& config, const Ctx& parent,
                std::string_view arch_name) {
  // parent.key is "" at the top level, else the dotted key of the object being read.
  auto full_key = [&](std::string_view k) { return parent.key.empty() ? std::string(k) : StrCat(parent.key, ".", k); };
  for (const auto& f : fields) {
    const json* found = nullptr;
    std::string_view found_key;
    auto consider = [&](std::string_view spelling) {
      const json* v = Lookup(obj, spelling);
      if (v == nullptr || v->is_null()) return;  // null means absent (e.g. "sliding_window": null)
      if (found == nullptr) {
        found = v;
        found_key = spelling;
        return;
      }
      const bool same = f.agree ? f.agree(*found, *v) : *found == *v;
      if (!same) {
        Fail(*parent.source, ": ", full_key(found_key), ": disagrees with ", full_key(spelling), " (", Describe(*found),
             " vs ", Describe(*v), ")");
      }
    };
    consider(f.key);
    for (const auto alias : f.aliases) consider(alias);

    const Ctx ctx{parent.source, full_key(found ? found_key : f.key), parent.root, parent.arch};
    if (found != nullptr) {
      f.read(config, *found, ctx);
    } else {
      if (f.required_for & parent.arch) {
        ctx.Fail("missing (required for model_type '", arch_name, "')");
      }
      json def = f.default_value;
      for (const auto& [mask, value] : f.arch_defaults) {
        if (mask & parent.arch) def = value;
      }
      if (def.is_null()) continue;
      f.read(config, def, ctx);
    }
    if (f.number) {
      if (const auto v = f.number(config)) CheckNumber(*v, f.limits, ctx);
    }
  }
}

template <typename C>
json WriteFields(const std::vector<Field<C>>& fields, const C& config, const json& previous, uint32_t arch) {
  json out = previous.is_object() ? previous : json::object();
  for (const auto& f : fields) {
    std::vector<std::string_view> spellings;  // those the source used
    auto used = [&](std::string_view s) {
      const json* v = Lookup(previous, s);
      if (v != nullptr && !v->is_null()) spellings.push_back(s);
    };
    used(f.key);
    for (const auto alias : f.aliases) used(alias);
    if (spellings.empty()) {
      std::string_view key = f.key;
      for (const auto& [mask, k] : f.arch_keys) {
        if (mask & arch) key = k;
      }
      json value = f.write(config, nullptr, key);
      if (!value.is_null()) SetPath(out, key, std::move(value));
      continue;
    }
    for (const auto s : spellings) {
      json value = f.write(config, Lookup(previous, s), s);
      if (value.is_null()) {
        ErasePath(out, s);
      } else {
        SetPath(out, s, std::move(value));
      }
    }
  }
  return out;
}

// Limit checks for a struct built in code (ValidateModelConfig): the same limits parsing applies.
template <typename C>
void CheckFieldValues(const std::vector<Field<C>>& fields, const C& config, const Ctx& parent) {
  for (const auto& f : fields) {
    if (!f.number) continue;
    if (const auto v = f.number(config)) {
      // 0 is an Int / Num member's "not given" (e.g. swiglu_limit of a Llama config); a key the
      // architecture requires is checked by ValidateModelConfig's required pass instead.
      const std::string key = parent.key.empty() ? std::string(f.key) : StrCat(parent.key, ".", f.key);
      if (*v == 0 && !(f.required_for & parent.arch) && (parent.root == nullptr || Lookup(*parent.root, key) == nullptr)) {
        continue;
      }
      CheckNumber(*v, f.limits, Ctx{parent.source, key, parent.root, parent.arch});
    }
  }
}

// ---- rope_scaling / rope_parameters (rope.md) --------------------------------------------------

constexpr std::string_view kRopeTypes[] = {"default", "linear", "dynamic", "yarn", "longrope", "llama3"};

const std::vector<Field<RopeScaling>>& RopeFields() {
  using R = RopeScaling;
  auto is = [](std::initializer_list<std::string_view> types) {
    std::vector<std::string> list(types.begin(), types.end());
    return [list](const R& r) { return std::find(list.begin(), list.end(), r.rope_type) != list.end(); };
  };
  static const std::vector<Field<R>> fields = [&] {
    std::vector<Field<R>> f;
    // "type" is the pre-4.40 spelling (DeepSeek-V3's config still uses it).
    f.push_back(Str("rope_type", &R::rope_type).Alias("type"));
    f.push_back(Num("factor", &R::factor).Positive().When([](const R& r) { return r.rope_type != "default"; }));
    f.push_back(OptInt("original_max_position_embeddings", &R::original_max_position_embeddings).Positive().Max(kMaxContext));
    f.push_back(Num("beta_fast", &R::beta_fast).When(is({"yarn"})));
    f.push_back(Num("beta_slow", &R::beta_slow).When(is({"yarn"})));
    // Absent means true (HF floors/ceils the YaRN correction range); gpt-oss writes false.
    auto truncate = Bool("truncate", &R::truncate).When(is({"yarn"}));
    auto plain = truncate.write;
    truncate.write = [plain](const R& r, const json* prev, std::string_view s) {
      return (!r.truncate || prev != nullptr) ? plain(r, prev, s) : json();
    };
    f.push_back(std::move(truncate));
    f.push_back(OptNum("attention_factor", &R::attention_factor).Positive());
    f.push_back(OptNum("mscale", &R::mscale));
    f.push_back(OptNum("mscale_all_dim", &R::mscale_all_dim));
    f.push_back(OptNum("low_freq_factor", &R::low_freq_factor).Positive());
    f.push_back(OptNum("high_freq_factor", &R::high_freq_factor).Positive());
    f.push_back(NumList("freq_factors", &R::freq_factors).When(is({"llama3"})));
    f.push_back(NumList("short_factor", &R::short_factor).When(is({"longrope"})));
    f.push_back(NumList("long_factor", &R::long_factor).When(is({"longrope"})));
    return f;
  }();
  return fields;
}

// Reads the object under `rope_scaling` or `rope_parameters`. A "default" type carries no
// scaling and yields nullopt. `rope_theta` inside rope_parameters belongs to ModelConfig.
std::optional<RopeScaling> ReadRope(const json& v, const Ctx& ctx, std::string_view arch_name) {
  if (!v.is_object()) ctx.Fail("must be an object, got ", Describe(v));
  RopeScaling r;
  const bool v5 = ctx.key == "rope_parameters";
  if (Lookup(v, "rope_type") == nullptr && Lookup(v, "type") == nullptr) {
    // transformers v5 fills in "default"; the older rope_scaling object must name its type.
    if (!v5) ctx.Child("rope_type").Fail("missing");
  }
  ReadFields(RopeFields(), v, r, ctx, arch_name);
  if (std::find(std::begin(kRopeTypes), std::end(kRopeTypes), r.rope_type) == std::end(kRopeTypes)) {
    ctx.Child("rope_type")
        .Fail("unknown rope type ", Quote(r.rope_type),
              " (expected default, linear, dynamic, yarn, longrope or llama3)");
  }
  auto has = [&](std::string_view k) {
    const json* x = Lookup(v, k);
    return x != nullptr && !x->is_null();
  };
  const std::string& type = r.rope_type;
  if ((type == "linear" || type == "dynamic" || type == "llama3") && !has("factor")) {
    ctx.Child("factor").Fail("missing (required for rope type '", type, "')");
  }
  if (type == "yarn" && !has("factor")) {
    // HF: factor = max_position_embeddings / original_max_position_embeddings (rope.md §5).
    const json* mpe = Lookup(*ctx.root, "max_position_embeddings");
    if (!r.original_max_position_embeddings || mpe == nullptr || !mpe->is_number()) {
      ctx.Child("factor").Fail(
          "missing, and not derivable from max_position_embeddings / original_max_position_embeddings");
    }
    r.factor = mpe->get<double>() / static_cast<double>(*r.original_max_position_embeddings);
    CheckNumber(r.factor, Limits{Sign::kPositive, std::nullopt}, ctx.Child("factor"));
  }
  if (type == "llama3" && !r.freq_factors.empty()) {
    for (const double f : r.freq_factors) {
      if (!(f > 0.0) || !std::isfinite(f)) ctx.Child("freq_factors").Fail("entries must be positive and finite");
    }
  } else if (type == "llama3") {
    // rope.md §8: all three are needed to place the smooth band.
    for (const auto k : {"low_freq_factor", "high_freq_factor", "original_max_position_embeddings"}) {
      if (!has(k)) ctx.Child(k).Fail("missing (required for rope type 'llama3')");
    }
    if (!(*r.high_freq_factor > *r.low_freq_factor)) {
      ctx.Child("high_freq_factor")
          .Fail("must exceed low_freq_factor (", FormatNumber(*r.high_freq_factor),
                " <= ", FormatNumber(*r.low_freq_factor), ")");
    }
  }
  if (type == "longrope") {
    if (r.short_factor.empty()) ctx.Child("short_factor").Fail("missing (required for rope type 'longrope')");
    if (r.long_factor.size() != r.short_factor.size()) {
      ctx.Child("long_factor")
          .Fail("has ", r.long_factor.size(), " entries but short_factor has ", r.short_factor.size());
    }
  }
  if (type == "default") return std::nullopt;
  return r;
}

// ---- quantization_config (quantization.md) ---------------------------------------------------

// compressed-tensors config_groups entries (dense-decoders.md §10).
const std::vector<Field<QuantGroup>>& QuantGroupFields() {
  using G = QuantGroup;
  static const std::vector<Field<G>> fields = [] {
    std::vector<Field<G>> f;
    f.push_back(StrList("targets", &G::targets));
    f.push_back(Str("format", &G::format));
    f.push_back(OptInt("weights.num_bits", &G::num_bits).Positive());
    f.push_back(Str("weights.type", &G::type));
    f.push_back(OptBool("weights.symmetric", &G::symmetric));
    f.push_back(Str("weights.strategy", &G::strategy));
    f.push_back(OptInt("weights.group_size", &G::group_size).PositiveOrMinusOne());
    Field<G> actorder;  // a string ("group", "weight"), or a boolean in older files
    actorder.key = "weights.actorder";
    actorder.read = [](G& g, const json& v, const Ctx& ctx) {
      g.actorder = v.is_boolean() ? (v.get<bool>() ? "true" : "") : ToString(v, ctx);
    };
    actorder.write = [](const G& g, const json*, std::string_view) { return g.actorder.empty() ? json() : json(g.actorder); };
    f.push_back(std::move(actorder));
    f.push_back(OptBool("weights.dynamic", &G::dynamic));
    for (const std::string_view key : {"input_activations", "output_activations"}) {
      Field<G> act;
      act.key = key;
      act.read = [](G& g, const json&, const Ctx&) { g.quantized_activations = true; };
      act.write = [](const G&, const json* prev, std::string_view) { return prev != nullptr ? *prev : json(); };
      f.push_back(std::move(act));
    }
    return f;
  }();
  return fields;
}

const std::vector<Field<QuantizationConfig>>& QuantFields() {
  using Q = QuantizationConfig;
  static const std::vector<Field<Q>> fields = [] {
    std::vector<Field<Q>> f;
    f.push_back(Str("quant_method", &Q::quant_method));
    // mxfp4: modules kept in BF16 ("model.layers.*.self_attn", ..., gpt-oss.md §1.1).
    f.push_back(StrList("modules_to_not_convert", &Q::modules_to_not_convert));
    // AWQ: transformers' AwqConfig spellings; AutoAWQ's quant_config.json says w_bit/q_group_size.
    f.push_back(OptInt("bits", &Q::bits).Alias("w_bit").Positive());
    f.push_back(OptInt("group_size", &Q::group_size).Alias("q_group_size").PositiveOrMinusOne());
    f.push_back(OptBool("zero_point", &Q::zero_point));
    f.push_back(Str("version", &Q::version));
    // compressed-tensors
    f.push_back(Str("format", &Q::format));
    f.push_back(Str("quantization_status", &Q::quantization_status));
    f.push_back(StrList("ignore", &Q::ignore));
    // fp8 (DeepSeek-V3, deepseek.md §7): [block rows, block columns] of one weight_scale_inv entry.
    f.push_back(IntList("weight_block_size", &Q::weight_block_size));
    f.push_back(Str("fmt", &Q::fmt));
    f.push_back(Str("activation_scheme", &Q::activation_scheme));
    Field<Q> groups;
    groups.key = "config_groups";
    groups.read = [](Q& q, const json& v, const Ctx& ctx) {
      if (!v.is_object()) ctx.Fail("must be an object, got ", Describe(v));
      q.config_groups.clear();
      for (const auto& [name, entry] : v.items()) {
        const Ctx child = ctx.Child(name);
        if (!entry.is_object()) child.Fail("must be an object, got ", Describe(entry));
        QuantGroup g;
        g.name = name;
        ReadFields(QuantGroupFields(), entry, g, child, "");
        q.config_groups.push_back(std::move(g));
      }
    };
    groups.write = [](const Q& q, const json* prev, std::string_view) -> json {
      if (q.config_groups.empty()) return prev != nullptr ? *prev : json();
      json out = json::object();
      for (const QuantGroup& g : q.config_groups) {
        const json* before = prev != nullptr && prev->is_object() && prev->contains(g.name) ? &(*prev)[g.name] : nullptr;
        out[g.name] = WriteFields(QuantGroupFields(), g, before != nullptr ? *before : json::object(), 0);
      }
      return out;
    };
    f.push_back(std::move(groups));
    return f;
  }();
  return fields;
}

QuantizationConfig ReadQuantization(const json& v, const Ctx& ctx, std::string_view default_method) {
  if (!v.is_object()) ctx.Fail("must be an object, got ", Describe(v));
  QuantizationConfig q;
  ReadFields(QuantFields(), v, q, ctx, "");
  if (q.quant_method.empty()) q.quant_method = std::string(default_method);
  if (q.quant_method.empty()) ctx.Child("quant_method").Fail("missing");
  // AutoAWQ writes "GEMM"; transformers and vLLM use lower case (quantization.md B.1).
  std::transform(q.version.begin(), q.version.end(), q.version.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return q;
}

// ---- config.json -----------------------------------------------------------------------------

const char* LayerTypeName(LayerType t) {
  return t == LayerType::kSlidingAttention ? "sliding_attention" : "full_attention";
}

// model_types that ship their own modelling code for an architecture the tables describe, with
// the same config keys: Kimi-K2's "kimi_k2" is DeepSeek-V3's code (its architectures entry is
// DeepseekV3ForCausalLM; deepseek.md §1). Read as the canonical name; written back as stored.
std::string CanonicalModelType(std::string model_type) {
  if (model_type == "kimi_k2") return "deepseek_v3";
  return model_type;
}

const std::vector<Field<ModelConfig>>& Fields() {
  using M = ModelConfig;
  static const std::vector<Field<M>> fields = [] {
    std::vector<Field<M>> f;
    Field<M> type = Str("model_type", &M::model_type);
    type.read = [read = type.read](M& c, const json& v, const Ctx& ctx) {
      read(c, v, ctx);
      c.model_type = CanonicalModelType(c.model_type);
    };
    type.write = [write = type.write](const M& c, const json* prev, std::string_view spelling) -> json {
      if (prev != nullptr && prev->is_string() && CanonicalModelType(prev->get<std::string>()) == c.model_type) return *prev;
      return write(c, prev, spelling);
    };
    f.push_back(std::move(type));
    f.push_back(StrList("architectures", &M::architectures));
    // Sizes (gpt-oss.md §1.1 for gpt_oss values).
    // Gemma3TextConfig's defaults (families-2026.md "Gemma 3") where a gemma3_text config leaves a size out.
    f.push_back(Int("vocab_size", &M::vocab_size).Positive().Max(kMaxVocab).Required(kSizesRequired).ArchDefault(kGemma3, 262208));
    f.push_back(Int("hidden_size", &M::hidden_size).Positive().Max(kMaxWidth).Required(kSizesRequired).ArchDefault(kGemma3, 2304));
    f.push_back(Int("intermediate_size", &M::intermediate_size).Positive().Max(kMaxWidth).Required(kSizesRequired)
                    .ArchDefault(kGemma3, 9216));
    f.push_back(Int("num_hidden_layers", &M::num_hidden_layers).Positive().Max(kMaxLayers).Required(kSizesRequired)
                    .ArchDefault(kGemma3, 26));
    f.push_back(Int("num_attention_heads", &M::num_attention_heads).Positive().Max(kMaxHeads).Required(kSizesRequired)
                    .ArchDefault(kGemma3, 8));
    // Absent: num_attention_heads (derived after the walk).
    f.push_back(Int("num_key_value_heads", &M::num_key_value_heads).Positive().Max(kMaxHeads).Required(kGptOss).ArchDefault(kGemma3, 4));
    // gpt_oss: 64, not 2880/64 = 45, so it must be read. Gemma: 256 whatever hidden / heads.
    // Elsewhere derived when absent.
    f.push_back(Int("head_dim", &M::head_dim).Positive().Max(kMaxWidth).Required(kGptOss).ArchDefault(kGemma3, 256)
                    .ArchDefault(kGlm4Moe, 128));
    f.push_back(Int("max_position_embeddings", &M::max_position_embeddings).Positive().Max(kMaxContext)
                    .Required(kSizesRequired).ArchDefault(kGemma3, 131072));
    f.push_back(Num("rms_norm_eps", &M::rms_norm_eps).Positive().Default(1e-6).Required(kGptOss));

    // rope_scaling (transformers 4.x) or rope_parameters (v5); the latter also holds rope_theta,
    // so it must be written before rope_theta (whose alias points inside it).
    Field<M> rope;
    rope.key = "rope_scaling";
    rope.aliases = {"rope_parameters"};
    rope.required_for = kGptOss;
    rope.read = [](M& c, const json& v, const Ctx& ctx) { c.rope_scaling = ReadRope(v, ctx, c.model_type); };
    rope.write = [](const M& c, const json* prev, std::string_view spelling) -> json {
      if (!c.rope_scaling) {
        // v5 always writes rope_parameters, at least {"rope_type": "default", "rope_theta": ...}.
        return spelling == "rope_parameters" ? json{{"rope_type", "default"}} : json();
      }
      return WriteFields(RopeFields(), *c.rope_scaling, prev != nullptr ? *prev : json::object(), 0);
    };
    // rope_scaling and rope_parameters may both be present; rope_theta lives only in the latter.
    rope.agree = [](const json& a, const json& b) {
      auto strip = [](json x) {
        if (x.is_object()) x.erase("rope_theta");
        return x;
      };
      return strip(a) == strip(b);
    };
    f.push_back(std::move(rope));
    f.push_back(Num("rope_theta", &M::rope_theta)
                    .Alias("rope_parameters.rope_theta")
                    .Positive()
                    .Default(10000.0)
                    .ArchDefault(kGemma3, 1000000.0)
                    .ArchDefault(kSmolLm3, 2000000.0)
                    .Required(kGptOss));
    // Gemma 3: the sliding layers' own base, unscaled (the global layers use rope_theta and the
    // config's rope_scaling); the attention scale query_pre_attn_scalar ** -0.5 instead of
    // head_dim ** -0.5; every sliding_window_pattern-th layer global when layer_types is absent.
    const auto gemma3 = [](const M& c) { return ArchBit(c.model_type) == kGemma3; };
    f.push_back(Num("rope_local_base_freq", &M::rope_local_base_freq).Positive().ArchDefault(kGemma3, 10000.0).When(gemma3));
    f.push_back(OptNum("query_pre_attn_scalar", &M::query_pre_attn_scalar).Positive().ArchDefault(kGemma3, 256));
    f.push_back(Int("sliding_window_pattern", &M::sliding_window_pattern).Positive().Max(kMaxLayers).When(gemma3));
    f.push_back(OptNum("final_logit_softcapping", &M::final_logit_softcapping).Positive());
    f.push_back(OptNum("attn_logit_softcapping", &M::attn_logit_softcapping).Positive());

    f.push_back(Bool("attention_bias", &M::attention_bias).Default(false).ArchDefault(kGptOss, true));
    f.push_back(Bool("tie_word_embeddings", &M::tie_word_embeddings).Default(false).ArchDefault(kGemma3, true));
    f.push_back(SparseBool("mlp_bias", &M::mlp_bias).Default(false));
    // Gemma spells it hidden_activation (gelu_pytorch_tanh by default).
    f.push_back(Str("hidden_act", &M::hidden_act)
                    .Alias("hidden_activation")
                    .ArchKey(kGemma3, "hidden_activation")
                    .Default("silu")
                    .ArchDefault(kGemma3, "gelu_pytorch_tanh"));
    // Qwen2/Qwen3 sliding window switches (dense-decoders.md §2.3): read by DeriveDefaults.
    f.push_back(SparseBool("use_sliding_window", &M::use_sliding_window).Default(false));
    f.push_back(Int("max_window_layers", &M::max_window_layers).NonNegative().Max(kMaxLayers));

    // layer_types: one entry per layer. Absent: derived after the walk.
    Field<M> layers;
    layers.key = "layer_types";
    layers.read = [](M& c, const json& v, const Ctx& ctx) {
      c.layer_types.clear();
      if (ToArray(v, ctx).size() > static_cast<size_t>(kMaxConfigLayers)) {
        ctx.Fail("has ", v.size(), " entries, more than the limit of ", kMaxConfigLayers, " layers");
      }
      for (size_t i = 0; i < v.size(); ++i) {
        const Ctx at = ctx.Child(StrCat(i));
        const std::string name = ToString(v[i], at);
        if (name == "sliding_attention") {
          c.layer_types.push_back(LayerType::kSlidingAttention);
        } else if (name == "full_attention") {
          c.layer_types.push_back(LayerType::kFullAttention);
        } else {
          at.Fail("unknown layer type ", Quote(name), " (expected full_attention or sliding_attention)");
        }
      }
    };
    layers.write = [](const M& c, const json* prev, std::string_view) -> json {
      // gpt_oss configs always carry the list; elsewhere it is written back only when the source
      // had it (Llama's config class has no such key).
      if (prev == nullptr && (c.layer_types.empty() || c.model_type != "gpt_oss")) return json();
      json out = json::array();
      for (const auto t : c.layer_types) out.push_back(LayerTypeName(t));
      return out;
    };
    f.push_back(std::move(layers));
    f.push_back(OptInt("sliding_window", &M::sliding_window).Positive().Max(kMaxContext).Required(kGptOss)
                    .ArchDefault(kGemma3, 4096));

    // Mixture of experts. DeepSeek-V3 spells the expert count n_routed_experts; gpt-oss repeats
    // num_experts_per_tok as the legacy experts_per_token.
    f.push_back(Int("num_local_experts", &M::num_local_experts)
                    .Alias("n_routed_experts")
                    .Alias("num_experts")
                    .ArchKey(kDeepseek, "n_routed_experts")
                    .ArchKey(kQwen3Moe, "num_experts")
                    .NonNegative()
                    .Max(kMaxExperts)
                    .Required(kGptOss | kQwen3Moe));
    f.push_back(Int("num_experts_per_tok", &M::num_experts_per_tok)
                    .Alias("experts_per_token")
                    .NonNegative()
                    .Max(kMaxExperts)
                    .Required(kGptOss | kQwen3Moe));
    f.push_back(Num("swiglu_limit", &M::swiglu_limit).Positive().Required(kGptOss));
    // Qwen3-MoE (dense-decoders.md §2.5). norm_topk_prob is required rather than defaulted: the
    // class default (false) differs from what the released checkpoints set (true).
    f.push_back(Int("moe_intermediate_size", &M::moe_intermediate_size).Positive().Max(kMaxWidth).Required(kQwen3Moe));
    // DeepseekV3Config defaults it to true; V2's router never reads it (deepseek.md §5).
    f.push_back(SparseBool("norm_topk_prob", &M::norm_topk_prob).Default(false).ArchDefault(kDeepseekV3 | kGlm4Moe, true));
    f.push_back(Int("decoder_sparse_step", &M::decoder_sparse_step).Positive().Max(kMaxLayers));
    f.push_back(IntList("mlp_only_layers", &M::mlp_only_layers));
    // SmolLM3 (families-2026.md): no_rope_layers[i] 1 = RoPE, 0 = no position encoding (NoPE);
    // absent: every no_rope_layer_interval-th layer NoPE (DeriveDefaults).
    const auto smollm3 = [](const M& c) { return ArchBit(c.model_type) == kSmolLm3; };
    f.push_back(IntList("no_rope_layers", &M::no_rope_layers));
    f.push_back(Int("no_rope_layer_interval", &M::no_rope_layer_interval).Positive().Max(kMaxLayers)
                    .ArchDefault(kSmolLm3, 4).When(smollm3));
    f.push_back(Num("router_aux_loss_coef", &M::router_aux_loss_coef).NonNegative());

    // DeepSeek-V2/V3 (deepseek.md §1, §5): written back for those types only. The class defaults
    // differ from the released checkpoints (V3: 8 groups, scale 2.5), so the routing keys are
    // read with the class defaults when absent, as HF would. The sizes a model needs are checked
    // by ValidateModelConfig (a config read for its rope alone may lack them).
    const auto deepseek = [](const M& c) { return (ArchBit(c.model_type) & kDeepseek) != 0; };
    f.push_back(OptInt("q_lora_rank", &M::q_lora_rank).Positive().Max(kMaxWidth).When(deepseek));
    f.push_back(Int("kv_lora_rank", &M::kv_lora_rank).Positive().Max(kMaxWidth).When(deepseek));
    f.push_back(Int("qk_nope_head_dim", &M::qk_nope_head_dim).Positive().Max(kMaxWidth).When(deepseek));
    f.push_back(Int("qk_rope_head_dim", &M::qk_rope_head_dim).Positive().Max(kMaxWidth).When(deepseek));
    f.push_back(Int("v_head_dim", &M::v_head_dim).Positive().Max(kMaxWidth).When(deepseek));
    // GLM-4.5 (glm4_moe) shares DeepSeek-V3's routing keys with Glm4MoeConfig's defaults (one
    // shared expert, the first layer dense, no groups, noaux_tc), and adds use_qk_norm.
    const auto glm = [](const M& c) { return ArchBit(c.model_type) == kGlm4Moe; };
    const auto routed = [deepseek, glm](const M& c) { return deepseek(c) || glm(c); };
    f.push_back(Int("n_shared_experts", &M::n_shared_experts).NonNegative().Max(kMaxExperts).ArchDefault(kGlm4Moe, 1).When(routed));
    f.push_back(Int("first_k_dense_replace", &M::first_k_dense_replace).NonNegative().Max(kMaxLayers)
                    .ArchDefault(kGlm4Moe, 1).When(routed));
    f.push_back(Bool("use_qk_norm", &M::use_qk_norm).Default(false).When(glm));
    f.push_back(Int("moe_layer_freq", &M::moe_layer_freq).Positive().Max(kMaxLayers).Default(1).When(deepseek));
    f.push_back(Int("n_group", &M::n_group).NonNegative().Max(kMaxExperts).ArchDefault(kDeepseekV3, 8)
                    .ArchDefault(kGlm4Moe, 1).When(routed));
    f.push_back(Int("topk_group", &M::topk_group).NonNegative().Max(kMaxExperts).ArchDefault(kDeepseekV3, 4)
                    .ArchDefault(kGlm4Moe, 1).When(routed));
    // Glm4MoeConfig has no topk_method: its router is always V3's noaux_tc (sigmoid + bias).
    f.push_back(Str("topk_method", &M::topk_method).ArchDefault(kDeepseekV2, "greedy").ArchDefault(kDeepseekV3, "noaux_tc")
                    .ArchDefault(kGlm4Moe, "noaux_tc").When(deepseek));
    f.push_back(Num("routed_scaling_factor", &M::routed_scaling_factor)
                    .Positive()
                    .Default(1.0)
                    .ArchDefault(kDeepseekV3, 2.5)
                    .When(routed));

    f.push_back(OptInt("bos_token_id", &M::bos_token_id).NonNegative());
    f.push_back(TokenIds("eos_token_id", &M::eos_token_ids));
    f.push_back(OptInt("pad_token_id", &M::pad_token_id).NonNegative());

    Field<M> quant;
    quant.key = "quantization_config";
    quant.read = [](M& c, const json& v, const Ctx& ctx) { c.quantization = ReadQuantization(v, ctx, ""); };
    quant.write = [](const M& c, const json* prev, std::string_view) -> json {
      if (c.quantization.quant_method.empty()) return json();
      return WriteFields(QuantFields(), c.quantization, prev != nullptr ? *prev : json::object(), 0);
    };
    f.push_back(std::move(quant));
    return f;
  }();
  return fields;
}

// Values that follow from others when absent, as HF's config classes compute them.
void DeriveDefaults(ModelConfig& c, const json& obj, uint32_t arch, const std::string& source) {
  if (c.num_key_value_heads == 0) c.num_key_value_heads = c.num_attention_heads;
  if (c.head_dim == 0 && arch == kQwen3) {
    c.head_dim = 128;  // Qwen3Config's default, independent of hidden / heads (dense-decoders.md §2.4)
  }
  if (c.head_dim == 0 && c.num_attention_heads > 0) {
    const json* rope_dim = Lookup(obj, "qk_rope_head_dim");
    if ((arch & kDeepseek) && rope_dim != nullptr) {
      // DeepseekV2/V3Config set head_dim = qk_rope_head_dim (the rotary part of a head).
      c.head_dim = ToInt(*rope_dim, Ctx{&source, "qk_rope_head_dim", &obj, arch});
      CheckNumber(static_cast<double>(c.head_dim), Limits{Sign::kPositive, std::nullopt},
                  Ctx{&source, "qk_rope_head_dim", &obj, arch});
    } else if (c.hidden_size % c.num_attention_heads == 0) {
      c.head_dim = c.hidden_size / c.num_attention_heads;
    } else if (arch & kKnownArchs) {
      // Unknown architectures may not have heads of hidden_size / num_attention_heads at all;
      // they keep head_dim 0 and ValidateModelConfig refuses them anyway.
      Fail(source, ": head_dim: missing, and hidden_size ", c.hidden_size, " is not divisible by num_attention_heads ",
           c.num_attention_heads);
    }
  }
  if (arch == kQwen3Moe && c.decoder_sparse_step == 0) c.decoder_sparse_step = 1;  // class default
  if (arch == kSmolLm3 && c.no_rope_layers.empty() && c.num_hidden_layers > 0) {
    // SmolLM3Config: int((i + 1) % no_rope_layer_interval != 0).
    const int64_t interval = c.no_rope_layer_interval > 0 ? c.no_rope_layer_interval : 4;
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) c.no_rope_layers.push_back((i + 1) % interval != 0 ? 1 : 0);
  }
  if (c.layer_types.empty() && c.num_hidden_layers > 0) {
    // HF's per-family rules (dense-decoders.md §2): which layers slide when layer_types is absent.
    const auto n = static_cast<int64_t>(c.num_hidden_layers);
    const bool window = c.sliding_window.has_value();
    std::function<bool(int64_t)> sliding = [](int64_t) { return false; };
    if (arch == kGptOss) {
      // configuration_gpt_oss.py: sliding when i + 1 is odd, i.e. even layer index (gpt-oss.md §1.1).
      sliding = [](int64_t i) { return i % 2 == 0; };
    } else if ((arch == kMistral || arch == kPhi3) && window) {
      sliding = [](int64_t) { return true; };  // every layer when sliding_window is not null
    } else if ((arch == kQwen2 || arch == kQwen3) && c.use_sliding_window && window) {
      // Layers from max_window_layers on (class default 28); the first ones stay full.
      const int64_t first = Lookup(obj, "max_window_layers") != nullptr ? c.max_window_layers : 28;
      sliding = [first](int64_t i) { return i >= first; };
    } else if (arch == kQwen3Moe && c.use_sliding_window && window) {
      sliding = [](int64_t) { return true; };  // HF4 Qwen3MoeAttention: all layers
    } else if (arch == kSmolLm3 && c.use_sliding_window && window) {
      // SmolLM3Config: the NoPE layers slide when use_sliding_window.
      const std::vector<int64_t> rope = c.no_rope_layers;
      sliding = [rope](int64_t i) { return static_cast<size_t>(i) < rope.size() && rope[static_cast<size_t>(i)] == 0; };
    } else if (arch == kGemma3) {
      // Gemma3TextConfig: sliding unless (i + 1) is a multiple of the pattern (default 6: 5 local, 1 global).
      const int64_t pattern = c.sliding_window_pattern > 0 ? c.sliding_window_pattern : 6;
      sliding = [pattern](int64_t i) { return (i + 1) % pattern != 0; };
    }
    for (int64_t i = 0; i < n; ++i) {
      c.layer_types.push_back(sliding(i) ? LayerType::kSlidingAttention : LayerType::kFullAttention);
    }
  }
}

// Relations between fields that hold for every architecture.
void CheckRelations(const ModelConfig& c, const std::string& source) {
  if (c.num_attention_heads > 0 && c.num_key_value_heads > 0 && c.num_attention_heads % c.num_key_value_heads != 0) {
    Fail(source, ": num_key_value_heads: num_attention_heads ", c.num_attention_heads, " is not divisible by ",
         c.num_key_value_heads);
  }
  if (!c.layer_types.empty() && static_cast<int64_t>(c.layer_types.size()) != c.num_hidden_layers) {
    Fail(source, ": layer_types: has ", c.layer_types.size(), " entries but num_hidden_layers is ",
         c.num_hidden_layers);
  }
  if (!c.no_rope_layers.empty() && static_cast<int64_t>(c.no_rope_layers.size()) != c.num_hidden_layers) {
    Fail(source, ": no_rope_layers: has ", c.no_rope_layers.size(), " entries but num_hidden_layers is ", c.num_hidden_layers);
  }
  for (const int64_t v : c.no_rope_layers) {
    if (v != 0 && v != 1) Fail(source, ": no_rope_layers: entries must be 0 (no RoPE) or 1 (RoPE), got ", v);
  }
  if (c.num_local_experts > 0 && c.num_experts_per_tok > c.num_local_experts) {
    Fail(source, ": num_experts_per_tok: ", c.num_experts_per_tok, " exceeds num_local_experts ", c.num_local_experts);
  }
  const bool any_sliding =
      std::find(c.layer_types.begin(), c.layer_types.end(), LayerType::kSlidingAttention) != c.layer_types.end();
  if (any_sliding && !c.sliding_window) Fail(source, ": sliding_window: missing, but layer_types has sliding layers");
}

// ---- generation_config.json ------------------------------------------------------------------

const std::vector<Field<GenerationConfig>>& GenerationFields() {
  using G = GenerationConfig;
  static const std::vector<Field<G>> fields = [] {
    std::vector<Field<G>> f;
    f.push_back(OptInt("bos_token_id", &G::bos_token_id).NonNegative());
    // gpt-oss: [200002, 199999, 200012] = <|return|>, <|endoftext|>, <|call|> (gpt-oss.md §1.3).
    f.push_back(TokenIds("eos_token_id", &G::eos_token_ids));
    f.push_back(OptInt("pad_token_id", &G::pad_token_id).NonNegative());
    f.push_back(Bool("do_sample", &G::do_sample).Default(false));
    f.push_back(OptNum("temperature", &G::temperature).NonNegative());
    f.push_back(OptNum("top_p", &G::top_p).UnitInterval());
    f.push_back(OptInt("top_k", &G::top_k).NonNegative());
    return f;
  }();
  return fields;
}

json ParseTopObject(const std::string& text, const std::string& source) {
  json obj = ParseJsonText(text, source);
  if (!obj.is_object()) Fail(source, ": top-level JSON value must be an object, got ", JsonKindName(obj));
  return obj;
}

}  // namespace

ModelConfig ParseModelConfig(const std::string& json_text, const std::string& source) {
  json obj = ParseTopObject(json_text, source);
  std::string model_type;
  if (const json* mt = Lookup(obj, "model_type"); mt != nullptr && mt->is_string()) {
    model_type = CanonicalModelType(mt->get<std::string>());
  }
  // A multimodal checkpoint (gemma3's Gemma3ForConditionalGeneration) nests its language model's
  // config under text_config; a text engine reads that and ignores the vision / audio towers.
  std::string multimodal_type;
  for (const auto& [outer, inner] : {std::pair<std::string_view, std::string_view>{"gemma3", "gemma3_text"}}) {
    if (model_type != outer) continue;
    const json* text = Lookup(obj, "text_config");
    if (text == nullptr || !text->is_object()) Fail(source, ": text_config: missing (a ", outer, " config nests its language model there)");
    json inner_obj = *text;
    if (const json* t = Lookup(inner_obj, "model_type"); t == nullptr) inner_obj["model_type"] = inner;
    // The token ids a multimodal config keeps at the top level.
    for (const char* key : {"bos_token_id", "eos_token_id", "pad_token_id"}) {
      if (!inner_obj.contains(key) && obj.contains(key)) inner_obj[key] = obj[key];
    }
    multimodal_type = model_type;
    obj = std::move(inner_obj);
    model_type = CanonicalModelType(obj["model_type"].is_string() ? obj["model_type"].get<std::string>() : "");
    if (model_type != inner) Fail(source, ": text_config.model_type: expected ", Quote(inner), ", got ", Quote(model_type));
  }
  const uint32_t arch = ArchBit(model_type);

  ModelConfig config;
  config.model_type = model_type;
  ReadFields(Fields(), obj, config, Ctx{&source, "", &obj, arch}, model_type);
  DeriveDefaults(config, obj, arch, source);
  CheckRelations(config, source);
  // Glm4MoeConfig rotates half of each head unless the file says otherwise (Rope reads the key).
  if (arch == kGlm4Moe && !obj.contains("partial_rotary_factor")) obj["partial_rotary_factor"] = 0.5;
  config.raw = std::move(obj);
  config.multimodal_type = multimodal_type;
  return config;
}

ModelConfig LoadModelConfig(const std::string& dir) {
  // A model is a directory or a GGUF file: anything else that exists is read as GGUF, so the
  // GGUF reader names what it is ("not a GGUF file", "truncated GGUF file: 3 bytes") instead of a
  // config.json looked for under a file ("x/config.json: Not a directory").
  std::error_code exists_ec;
  if (IsGgufPath(dir) || (fs::exists(dir, exists_ec) && !fs::is_directory(dir, exists_ec))) {
    const std::vector<std::unique_ptr<GgufFile>> set = OpenGgufSet(dir);
    return GgufModelConfig(*set.front(), set);
  }
  const fs::path root(ResolveModelDir(dir));
  const std::string path = (root / "config.json").string();
  ModelConfig config = ParseModelConfig(ReadBoundedFile(path, kMaxConfigBytes), path);
  // Older AutoAWQ checkpoints keep their settings in quant_config.json instead (quantization.md B.1).
  const fs::path legacy = root / "quant_config.json";
  std::error_code ec;
  if (config.quantization.quant_method.empty() && fs::exists(legacy, ec)) {
    const std::string legacy_path = legacy.string();
    const json obj = ParseTopObject(ReadBoundedFile(legacy_path, kMaxConfigBytes), legacy_path);
    config.quantization = ReadQuantization(obj, Ctx{&legacy_path, "", &obj, ArchBit(config.model_type)}, "awq");
  }
  return config;
}

nlohmann::json ModelConfigToJson(const ModelConfig& config) {
  return WriteFields(Fields(), config, config.raw, ArchBit(config.model_type));
}

// DeepSeek-V2/V3 (deepseek.md §1, §5): what the MLA and DeepSeekMoE blocks need of the config.
void ValidateDeepseek(const ModelConfig& c, const std::string& source) {
  const bool v3 = ArchBit(c.model_type) == kDeepseekV3;
  if (c.attention_bias) {
    Fail(source, ": attention_bias: true is not supported for ", c.model_type,
         " (no released checkpoint has attention biases)");
  }
  const std::string& method = c.topk_method;
  const bool grouped = method == "group_limited_greedy" || method == "noaux_tc";
  if (v3 ? method != "noaux_tc" : (method != "greedy" && method != "group_limited_greedy")) {
    Fail(source, ": topk_method: ", Quote(method), " is not supported for ", c.model_type, " (supported: ",
         v3 ? "noaux_tc" : "greedy, group_limited_greedy", ")");
  }
  for (const auto& [key, value] : {std::pair<const char*, int64_t>{"kv_lora_rank", c.kv_lora_rank},
                                   {"qk_nope_head_dim", c.qk_nope_head_dim},
                                   {"qk_rope_head_dim", c.qk_rope_head_dim},
                                   {"v_head_dim", c.v_head_dim},
                                   {"n_routed_experts", c.num_local_experts},
                                   {"num_experts_per_tok", c.num_experts_per_tok},
                                   {"moe_intermediate_size", c.moe_intermediate_size}}) {
    if (value <= 0) Fail(source, ": ", key, ": missing (required for model_type '", c.model_type, "')");
  }
  const int64_t E = c.num_local_experts;
  if (grouped) {
    if (c.n_group <= 0 || E % c.n_group != 0) {
      Fail(source, ": n_group: ", c.n_group, " must be positive and divide the ", E, " routed experts");
    }
    if (c.topk_group <= 0 || c.topk_group > c.n_group) {
      Fail(source, ": topk_group: ", c.topk_group, " must lie in [1, n_group ", c.n_group, "]");
    }
    // noaux_tc scores a group by its two best experts.
    if (method == "noaux_tc" && E / c.n_group < 2) {
      Fail(source, ": n_group: ", c.n_group, " groups of ", E / c.n_group, " expert leave no top-2 per group");
    }
    if (c.num_experts_per_tok > c.topk_group * (E / c.n_group)) {
      Fail(source, ": num_experts_per_tok: ", c.num_experts_per_tok, " exceeds the ", c.topk_group * (E / c.n_group),
           " experts of the topk_group groups");
    }
  }
  if (c.hidden_act != "silu") {
    Fail(source, ": hidden_act: ", Quote(c.hidden_act), " is not supported for ", c.model_type, " (supported: silu)");
  }
  const QuantizationConfig& q = c.quantization;
  if (!q.quant_method.empty() && q.quant_method != "fp8") {
    Fail(source, ": quantization_config.quant_method: ", Quote(q.quant_method), " is not supported for ",
         c.model_type, " (supported: fp8 block weights, or unquantized BF16, F16 or F32 weights)");
  }
  if (q.quant_method == "fp8") {
    const auto& block = q.weight_block_size;
    if (block.size() != 2 || block[0] <= 0 || block[1] <= 0) {
      Fail(source, ": quantization_config.weight_block_size: must be two positive integers [rows, columns]");
    }
    if (!q.fmt.empty() && q.fmt != "e4m3") {
      Fail(source, ": quantization_config.fmt: ", Quote(q.fmt), " is not supported (supported: e4m3)");
    }
  }
}

void ValidateModelConfig(const ModelConfig& config, const std::string& source) {
  if (config.model_type.empty()) Fail(source, ": model_type: missing");
  const std::vector<std::string_view>& supported = SupportedModelTypes();
  if (std::find(supported.begin(), supported.end(), config.model_type) == supported.end()) {
    std::string list;
    for (std::string_view t : supported) list += list.empty() ? std::string(t) : StrCat(", ", t);
    Fail(source, ": model_type: unsupported model_type ", Quote(config.model_type), " (supported: ", list, ")");
  }
  const uint32_t arch = ArchBit(config.model_type);
  const Ctx top{&source, "", &config.raw, arch};
  CheckFieldValues(Fields(), config, top);
  // Every required number must be set (a struct built in code has 0 where a file lacked a key).
  for (const auto& f : Fields()) {
    if (!(f.required_for & arch) || !f.number) continue;
    const auto v = f.number(config);
    if (!v) Fail(source, ": ", f.key, ": missing (required for model_type '", config.model_type, "')");
    if (!(*v > 0)) Fail(source, ": ", f.key, ": must be positive, got ", FormatNumber(*v));
  }
  if (config.rope_scaling) CheckFieldValues(RopeFields(), *config.rope_scaling, top.Child("rope_scaling"));
  CheckRelations(config, source);

  if (static_cast<int64_t>(config.layer_types.size()) != config.num_hidden_layers) {
    Fail(source, ": layer_types: has ", config.layer_types.size(), " entries but num_hidden_layers is ",
         config.num_hidden_layers);
  }
  if (config.head_dim % 2 != 0) Fail(source, ": head_dim: must be even for rotary embeddings, got ", config.head_dim);
  const std::string& method = config.quantization.quant_method;
  if (arch == kGptOss) {
    // gpt-oss.md §1, §3.
    if (config.rope_scaling && config.rope_scaling->rope_type != "yarn") {
      Fail(source, ": rope_scaling.rope_type: ", Quote(config.rope_scaling->rope_type),
           " is not supported for gpt_oss (supported: yarn, or no scaling)");
    }
    if (!method.empty() && method != "mxfp4") {
      Fail(source, ": quantization_config.quant_method: ", Quote(method),
           " is not supported for gpt_oss (supported: mxfp4, or unquantized)");
    }
  } else {
    // The dense families and Qwen3-MoE: SiLU-gated MLPs (dense-decoders.md §1, §6), Gemma's
    // tanh-approximated GELU; quantized checkpoints of them come with later weight formats.
    if (arch == kGemma3) {
      if (config.hidden_act != "gelu_pytorch_tanh") {
        Fail(source, ": hidden_activation: ", Quote(config.hidden_act), " is not supported for ", config.model_type,
             " (supported: gelu_pytorch_tanh)");
      }
      if (config.attn_logit_softcapping) {
        Fail(source, ": attn_logit_softcapping: attention soft-capping is not supported yet (Gemma 3 checkpoints have none)");
      }
      if (config.rope_scaling && config.rope_scaling->rope_type != "linear") {
        Fail(source, ": rope_scaling.rope_type: ", Quote(config.rope_scaling->rope_type),
             " is not supported for gemma3_text (supported: linear, or no scaling)");
      }
    } else if (config.hidden_act != "silu") {
      Fail(source, ": hidden_act: ", Quote(config.hidden_act), " is not supported for ", config.model_type,
           " (supported: silu)");
    }
    if (arch & kDeepseek) ValidateDeepseek(config, source);
    // int4 weights (model/formats/int4.h checks the scheme itself).
    if (!(arch & kDeepseek) && !method.empty() && method != "awq" && method != "compressed-tensors") {
      Fail(source, ": quantization_config.quant_method: ", Quote(method), " is not supported for ", config.model_type,
           " (supported: awq, compressed-tensors, or unquantized BF16, F16 or F32 weights)");
    }
    if (arch == kGlm4Moe) {
      const int64_t E = config.num_local_experts;
      if (E <= 0 || config.num_experts_per_tok <= 0 || config.moe_intermediate_size <= 0) {
        Fail(source, ": n_routed_experts: glm4_moe needs n_routed_experts, num_experts_per_tok and moe_intermediate_size");
      }
      if (config.n_group <= 0 || E % config.n_group != 0 || E / config.n_group < 2) {
        Fail(source, ": n_group: ", config.n_group, " must divide the ", E, " routed experts into groups of at least 2");
      }
      if (config.topk_group <= 0 || config.topk_group > config.n_group) {
        Fail(source, ": topk_group: ", config.topk_group, " must lie in [1, n_group ", config.n_group, "]");
      }
      if (config.num_experts_per_tok > config.topk_group * (E / config.n_group)) {
        Fail(source, ": num_experts_per_tok: ", config.num_experts_per_tok, " exceeds the experts of the topk_group groups");
      }
    }
    if (arch == kQwen3Moe && (config.num_local_experts <= 0 || config.num_experts_per_tok <= 0)) {
      Fail(source, ": num_experts: qwen3_moe needs experts and num_experts_per_tok");
    }
  }
  if (method == "mxfp4") {
    // MXFP4 blocks hold 32 weights along the reduction dimension (gpt-oss.md §2.3).
    if (config.hidden_size % 32 != 0)
      Fail(source, ": hidden_size: ", config.hidden_size, " is not a multiple of 32 (MXFP4 block size)");
    if (config.intermediate_size % 32 != 0) {
      Fail(source, ": intermediate_size: ", config.intermediate_size, " is not a multiple of 32 (MXFP4 block size)");
    }
  }
  auto check_id = [&](const char* key, int64_t id) {
    if (id >= config.vocab_size)
      Fail(source, ": ", key, ": token id ", id, " is outside the vocabulary (vocab_size ", config.vocab_size, ")");
  };
  if (config.bos_token_id) check_id("bos_token_id", *config.bos_token_id);
  if (config.pad_token_id) check_id("pad_token_id", *config.pad_token_id);
  for (const int64_t id : config.eos_token_ids) check_id("eos_token_id", id);
}

const std::vector<std::string_view>& SupportedModelTypes() {
  static const std::vector<std::string_view> types = {"deepseek_v2", "deepseek_v3", "gemma3_text", "glm4_moe", "gpt_oss",
                                                       "llama",       "mistral",     "phi3",        "qwen2",    "qwen3",
                                                       "qwen3_moe",   "smollm3"};
  return types;
}

GenerationConfig ParseGenerationConfig(const std::string& json_text, const std::string& source) {
  const json obj = ParseTopObject(json_text, source);
  GenerationConfig config;
  ReadFields(GenerationFields(), obj, config, Ctx{&source, "", &obj, 0}, "");
  return config;
}

GenerationConfig LoadGenerationConfig(const std::string& dir) {
  if (IsGgufPath(dir)) return GenerationConfig{};  // GGUF stores no sampling defaults
  const std::string path = (fs::path(ResolveModelDir(dir)) / "generation_config.json").string();
  std::error_code ec;
  if (!fs::exists(path, ec)) return GenerationConfig{};
  return ParseGenerationConfig(ReadBoundedFile(path, kMaxConfigBytes), path);
}

nlohmann::json GenerationConfigToJson(const GenerationConfig& config) {
  return WriteFields(GenerationFields(), config, json::object(), 0);
}

}  // namespace tessera
