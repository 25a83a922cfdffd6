#include "model/sparse_scheme.h"

#include <algorithm>
#include <array>
#include <charconv>

#include "core/error.h"
#include "io/json_util.h"
#include "model/quant_scheme.h"

namespace tessera {
namespace {

// The linear weights `tessera sparsify` prunes: decoder layers' attention and MLP projections
// (experts included), not the router, the embedding or lm_head.
bool SparsifiedModule(const std::string& module) {
  if (module.rfind("model.layers.", 0) != 0) return false;
  static constexpr std::array kEnds = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                                       "gate_proj",        "up_proj",          "down_proj"};
  return std::any_of(kEnds.begin(), kEnds.end(), [&](const char* end) {
    const std::string_view e(end);
    return module.size() >= e.size() && module.compare(module.size() - e.size(), e.size(), e) == 0;
  });
}

int PositiveInt(const nlohmann::json& v, const std::string& where) {
  if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > 16) Fail(where, ": must be an integer in 1..16");
  return v.get<int>();
}

void CheckPattern(const SparseScheme& s, const std::string& where) {
  if (!(s.kept >= 1 && s.kept < s.group && s.group <= 16)) {
    Fail(where, ": ", s.kept, ":", s.group, " is not an N:M pattern tessera runs (1 <= N < M <= 16, N kept)");
  }
}

std::vector<std::string> Strings(const nlohmann::json& obj, const char* key, const std::string& where) {
  std::vector<std::string> out;
  if (!obj.contains(key) || obj[key].is_null()) return out;
  if (!obj[key].is_array()) Fail(where, ".", key, ": must be a list of module names or patterns");
  for (const auto& v : obj[key]) {
    if (!v.is_string()) Fail(where, ".", key, ": must be a list of strings");
    out.push_back(v.get<std::string>());
  }
  return out;
}

SparseScheme FromCompressedTensors(const nlohmann::json& sc, const std::string& where) {
  if (!sc.is_object()) Fail(where, ": must be an object");
  SparseScheme s;
  s.compressed_tensors = true;
  const std::string format = sc.value("format", std::string("dense"));
  const std::string structure = sc.contains("sparsity_structure") && sc["sparsity_structure"].is_string()
                                    ? sc["sparsity_structure"].get<std::string>()
                                    : std::string();
  const size_t colon = structure.find(':');
  const auto parse = [&](std::string_view text, int& out) {
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
    return ec == std::errc() && end == text.data() + text.size();
  };
  if (colon == std::string::npos || !parse(std::string_view(structure).substr(0, colon), s.kept) ||
      !parse(std::string_view(structure).substr(colon + 1), s.group)) {
    Fail(where, ".sparsity_structure: ", Quote(structure), " is not supported (an N:M pattern such as \"2:4\"; ",
         "unstructured sparsity has no N:M kernels)");
  }
  CheckPattern(s, where + ".sparsity_structure");
  if (format == "sparse-24-bitmask") {
    if (s.kept != 2 || s.group != 4) Fail(where, ": format sparse-24-bitmask with sparsity_structure ", Quote(structure), " (it stores 2:4 only)");
    s.bitmask24 = true;
  } else if (format != "dense") {
    Fail(where, ".format: ", Quote(format), " is not supported (supported: dense, sparse-24-bitmask)");
  }
  s.targets = Strings(sc, "targets", where);
  s.ignore = Strings(sc, "ignore", where);
  if (s.targets.empty()) s.targets = {"Linear"};
  return s;
}

}  // namespace

bool SparseScheme::Sparse(const std::string& module) const {
  if (!compressed_tensors) {
    if (!module_names.empty()) return std::find(module_names.begin(), module_names.end(), module) != module_names.end();
    return SparsifiedModule(module);
  }
  return CompressedTensorsMatches(targets, ignore, module);
}

std::string SparseScheme::Describe() const {
  const std::string pattern = StrCat(kept, ":", group);
  if (!compressed_tensors) return pattern + " (tessera sparsify, dense with zeros)";
  return pattern + (bitmask24 ? " (compressed-tensors sparse-24-bitmask)" : " (compressed-tensors, dense with zeros)");
}

std::optional<SparseScheme> SparseSchemeOf(const ModelConfig& config, const std::string& source) {
  const nlohmann::json& raw = config.raw;
  if (!raw.is_object()) return std::nullopt;
  for (const char* parent : {"quantization_config", "compression_config"}) {
    if (raw.contains(parent) && raw[parent].is_object() && raw[parent].contains("sparsity_config") &&
        !raw[parent]["sparsity_config"].is_null()) {
      return FromCompressedTensors(raw[parent]["sparsity_config"], StrCat(source, ": ", parent, ".sparsity_config"));
    }
  }
  if (!raw.contains("tessera_sparsity")) return std::nullopt;
  const nlohmann::json& ts = raw["tessera_sparsity"];
  const std::string where = source + ": tessera_sparsity";
  if (!ts.is_object() || !ts.contains("kept") || !ts.contains("group")) Fail(where, ": needs \"kept\" and \"group\"");
  SparseScheme s;
  s.kept = PositiveInt(ts["kept"], where + ".kept");
  s.group = PositiveInt(ts["group"], where + ".group");
  CheckPattern(s, where);
  const std::string format = ts.value("format", std::string("dense"));
  if (format != "dense") Fail(where, ".format: ", Quote(format), " is not supported (supported: dense)");
  if (ts.contains("module_names")) s.module_names = Strings(ts, "module_names", where);
  return s;
}

Bitmask24Names Bitmask24NamesOf(const std::string& module) {
  return {module + ".compressed", module + ".bitmask", module + ".shape"};
}

}  // namespace tessera
