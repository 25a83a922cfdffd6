// `tessera inspect -m FILE.gguf`: a GGUF file's header (io/gguf.h) — version, architecture,
// metadata (arrays summarised by type and length), parameters, bytes and bits per weight by ggml
// type, tensors grouped over blocks ("blk.{}.attn_q.weight ×32"). Only the header is read.
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/error.h"
#include "io/gguf.h"
#include "io/gguf_config.h"
#include "io/json_util.h"

namespace tessera::cli {
namespace {

// A value as one short line: strings quoted and cut, arrays as "[string × 151936]".
std::string Summary(const GgufValue& v) {
  if (v.type == GgufType::kArray) return StrCat("[", GgufTypeName(v.element), " × ", v.size(), "]");
  if (const auto* s = std::get_if<std::string>(&v.value)) return Quote(*s, 60);
  if (const auto* u = std::get_if<uint64_t>(&v.value)) return std::to_string(*u);
  if (const auto* i = std::get_if<int64_t>(&v.value)) return std::to_string(*i);
  if (const auto* d = std::get_if<double>(&v.value)) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.9g", *d);
    return buf;
  }
  return std::get<bool>(v.value) ? "true" : "false";
}

nlohmann::json ToJson(const GgufValue& v) {
  if (v.type == GgufType::kArray) return {{"type", GgufTypeName(v.element)}, {"length", v.size()}};
  return std::visit(
      [](const auto& x) -> nlohmann::json {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::string>) {
          return Quote(x, 200);  // escaped: metadata is untrusted text
        } else if constexpr (std::is_same_v<T, uint64_t> || std::is_same_v<T, int64_t> || std::is_same_v<T, double> ||
                             std::is_same_v<T, bool>) {
          return x;
        } else {
          return nullptr;
        }
      },
      v.value);
}

// "blk.17.attn_q.weight" -> ("blk.{}.attn_q.weight", 17); other names -> (name, -1).
std::pair<std::string, int64_t> SplitBlock(const std::string& name) {
  if (name.rfind("blk.", 0) != 0) return {name, -1};
  const size_t end = name.find('.', 4);
  if (end == std::string::npos || end == 4) return {name, -1};
  int64_t block = 0;
  for (size_t i = 4; i < end; ++i) {
    if (name[i] < '0' || name[i] > '9') return {name, -1};
    block = block * 10 + (name[i] - '0');
    if (block > 1000000) return {name, -1};
  }
  return {"blk.{}" + name.substr(end), block};
}

std::string Dims(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += StrCat(i ? ", " : "", shape[i]);
  return out + "]";
}

}  // namespace

void InspectGguf(const std::string& path, bool json) {
  const auto file = GgufFile::Open(path);
  const GgufValue* arch = file->Find("general.architecture");
  const std::string architecture =
      arch != nullptr && arch->type == GgufType::kString ? std::get<std::string>(arch->value) : "";
  uint64_t params = 0, bytes = 0;
  std::map<std::string, std::pair<uint64_t, uint64_t>> by_type;  // name -> (values, bytes)
  std::map<std::string, size_t> type_tensors;
  struct Group {
    std::string name, type;
    std::vector<int64_t> shape;
    size_t count = 0;
  };
  std::vector<Group> groups;
  std::map<std::string, size_t> group_of;
  for (const GgufTensorInfo& t : file->tensors()) {
    params += t.numel();
    bytes += t.nbytes;
    auto& [values, type_bytes] = by_type[std::string(t.type->name)];
    values += t.numel();
    type_bytes += t.nbytes;
    ++type_tensors[std::string(t.type->name)];
    auto [pattern, block] = SplitBlock(t.name);
    const std::string key = StrCat(pattern, "|", t.type->name, "|", Dims(t.shape()));
    auto [it, fresh] = group_of.emplace(key, groups.size());
    if (fresh) groups.push_back(Group{block >= 0 ? pattern : t.name, std::string(t.type->name), t.shape(), 0});
    ++groups[it->second].count;
  }
  if (json) {
    nlohmann::json out;
    out["path"] = path;
    out["format"] = "gguf";
    out["version"] = file->version();
    out["alignment"] = file->alignment();
    out["architecture"] = Quote(architecture, 200);
    out["parameters"] = params;
    if (file->Find("general.file_type") != nullptr) out["file_type"] = GgufFileTypeName(file->GetUint("general.file_type"));
    out["tensor_bytes"] = bytes;
    out["file_bytes"] = file->file_size();
    for (const auto& [key, value] : file->metadata()) out["metadata"][Quote(key, 200)] = ToJson(value);
    for (const auto& [name, vb] : by_type) {
      out["bytes_by_type"][name] = {{"tensors", type_tensors[name]}, {"values", vb.first}, {"bytes", vb.second},
                                    {"bits_per_weight", vb.first ? 8.0 * static_cast<double>(vb.second) / static_cast<double>(vb.first) : 0.0}};
    }
    for (const Group& g : groups) {
      out["tensors"].push_back({{"name", Quote(g.name, 200)}, {"type", g.type}, {"shape", g.shape}, {"count", g.count}});
    }
    try {
      GgufModelConfig(*file);
      out["config"] = GgufConfigJson(*file);
    } catch (const Error& e) {
      out["config_error"] = e.what();
    }
    // A path is bytes, not necessarily UTF-8: replaced (U+FFFD) rather than failing the dump.
    std::printf("%s\n", out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    std::fflush(stdout);
    return;
  }
  std::printf("model: %s\n", path.c_str());
  std::printf("format: GGUF v%u (alignment %u), %zu metadata keys, %zu tensors\n", file->version(), file->alignment(),
              file->metadata().size(), file->tensors().size());
  std::printf("architecture: %s\n", architecture.empty() ? "(general.architecture missing)" : Quote(architecture).c_str());
  if (file->Find("general.file_type") != nullptr && !GgufFileTypeName(file->GetUint("general.file_type")).empty()) {
    std::printf("file type: %s (llama-bench: %s)\n", std::string(GgufFileTypeName(file->GetUint("general.file_type"))).c_str(),
                GgufModelLabel(*file, params).c_str());
  }
  std::printf("metadata:\n");
  for (const auto& [key, value] : file->metadata()) std::printf("  %s = %s\n", Quote(key).c_str(), Summary(value).c_str());
  std::printf("parameters: %llu, tensor bytes %llu (%.3f bits per weight), file %llu bytes\n",
              static_cast<unsigned long long>(params), static_cast<unsigned long long>(bytes),
              params ? 8.0 * static_cast<double>(bytes) / static_cast<double>(params) : 0.0,
              static_cast<unsigned long long>(file->file_size()));
  std::printf("bytes by type:\n");
  for (const auto& [name, vb] : by_type) {
    std::printf("  %-8s %6zu tensors  %llu bytes  %.3f bits per weight\n", name.c_str(), type_tensors[name],
                static_cast<unsigned long long>(vb.second),
                vb.first ? 8.0 * static_cast<double>(vb.second) / static_cast<double>(vb.first) : 0.0);
  }
  size_t name_width = 0;
  for (const Group& g : groups) name_width = std::max(name_width, Quote(g.name).size());
  std::printf("tensor summary (shapes outermost first, as Hugging Face writes them):\n");
  for (const Group& g : groups) {
    const std::string count = g.count > 1 ? StrCat(" ×", g.count) : "";
    std::printf("  %-*s  %-20s  %-7s%s\n", static_cast<int>(name_width), Quote(g.name).c_str(), Dims(g.shape).c_str(),
                g.type.c_str(), count.c_str());
  }
  // The config the metadata describes, checked as a config.json would be.
  try {
    const ModelConfig c = GgufModelConfig(*file);
    std::string line = StrCat(c.model_type, ": hidden ", c.hidden_size, ", layers ", c.num_hidden_layers, ", heads ",
                              c.num_attention_heads, " (kv ", c.num_key_value_heads, ", head ", c.head_dim, "), vocab ",
                              c.vocab_size, ", context ", c.max_position_embeddings, ", rope theta ", c.rope_theta);
    if (c.num_local_experts > 0) line += StrCat(", experts ", c.num_experts_per_tok, " of ", c.num_local_experts);
    if (c.rope_scaling) line += StrCat(", rope ", c.rope_scaling->rope_type, " x", c.rope_scaling->factor);
    std::printf("config: %s\n", line.c_str());
  } catch (const Error& e) {
    std::printf("config: not read (%s)\n", e.what());
  }
  std::printf("loading: every command takes the file (-m FILE.gguf); the exact path multiplies the types as stored, "
              "the fast path runs q8_0, q4_0, q4_K, q5_K and q6_K against int8 activations\n");
  std::fflush(stdout);
}

}  // namespace tessera::cli
