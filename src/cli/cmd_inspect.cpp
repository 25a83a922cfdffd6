// `tessera inspect -m DIR`: what a model directory holds, checked against the gpt-oss tensor
// description (model/tensor_specs.h). Reads config.json and the safetensors headers only (the
// shards are mapped, their data is never touched), so it is instant even on gpt-oss-120b.
//
// Exit 2 with one line naming the first problem when a tensor is missing, unexpected, misshapen
// or of the wrong dtype, after the report (text or --json) has been printed.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/error.h"
#include "io/config.h"
#include "io/gguf.h"
#include "io/model_dir.h"
#include "io/safetensors.h"
#include "model/architecture.h"
#include "model/quant_scheme.h"
#include "model/tensor_specs.h"

namespace tessera::cli {

namespace {

struct InspectArgs {
  std::string model;
  bool json = false;
};

std::string HumanBytes(uint64_t bytes) {
  char buf[32];
  if (bytes >= 1000000000ull) std::snprintf(buf, sizeof(buf), "%.2f GB", bytes / 1e9);
  else if (bytes >= 1000000ull) std::snprintf(buf, sizeof(buf), "%.1f MB", bytes / 1e6);
  else if (bytes >= 1000ull) std::snprintf(buf, sizeof(buf), "%.1f kB", bytes / 1e3);
  else std::snprintf(buf, sizeof(buf), "%llu B", static_cast<unsigned long long>(bytes));
  return buf;
}

std::string HumanCount(uint64_t n) {
  char buf[32];
  if (n >= 1000000000ull) std::snprintf(buf, sizeof(buf), "%.2f B", n / 1e9);
  else if (n >= 1000000ull) std::snprintf(buf, sizeof(buf), "%.2f M", n / 1e6);
  else if (n >= 1000ull) std::snprintf(buf, sizeof(buf), "%.2f K", n / 1e3);
  else std::snprintf(buf, sizeof(buf), "%llu", static_cast<unsigned long long>(n));
  return buf;
}

// "model.layers.17.mlp.router.bias" -> ("model.layers.{}.mlp.router.bias", 17); other names -> -1.
std::pair<std::string, int64_t> SplitLayer(const std::string& name) {
  static const std::string kMarker = ".layers.";
  const size_t at = name.find(kMarker);
  if (at == std::string::npos) return {name, -1};
  const size_t begin = at + kMarker.size();
  size_t end = begin;
  while (end < name.size() && name[end] >= '0' && name[end] <= '9') ++end;
  if (end == begin || end == name.size() || name[end] != '.' || end - begin > 9) return {name, -1};
  return {name.substr(0, begin) + "{}" + name.substr(end), std::stoll(name.substr(begin, end - begin))};
}

// Sorted layer indices -> "0..23" or "0..3,5,7..9".
std::string FormatLayers(const std::vector<int64_t>& layers) {
  std::string out;
  for (size_t i = 0; i < layers.size();) {
    size_t j = i;
    while (j + 1 < layers.size() && layers[j + 1] == layers[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += std::to_string(layers[i]);
    if (j > i) out += StrCat(j == i + 1 ? "," : "..", layers[j]);
    i = j + 1;
  }
  return out;
}

// Tensors with the same name pattern (layer index removed), shape and dtype, in first-seen order.
struct TensorGroup {
  std::string pattern;
  std::vector<int64_t> shape;
  DType dtype;
  std::vector<int64_t> layers;  // empty for a global tensor
  uint64_t bytes = 0;

  std::string DisplayName() const {
    if (layers.empty()) return pattern;
    const size_t at = pattern.find("{}");
    return pattern.substr(0, at) + "{" + FormatLayers(layers) + "}" + pattern.substr(at + 2);
  }
  size_t count() const { return layers.empty() ? 1 : layers.size(); }
};

std::vector<TensorGroup> GroupTensors(const std::vector<TensorInfo>& tensors) {
  std::vector<TensorGroup> groups;
  std::map<std::string, size_t> index;  // pattern + shape + dtype -> group
  for (const TensorInfo& t : tensors) {
    auto [pattern, layer] = SplitLayer(t.name);
    const std::string key = StrCat(pattern, " ", ShapeToString(t.shape), " ", DTypeName(t.dtype));
    auto it = index.find(key);
    if (it == index.end() || layer < 0) {
      it = index.emplace(key + (layer < 0 ? "#" + t.name : ""), groups.size()).first;
      groups.push_back(TensorGroup{layer < 0 ? t.name : pattern, t.shape, t.dtype, {}, 0});
    }
    TensorGroup& g = groups[it->second];
    if (layer >= 0) g.layers.push_back(layer);
    g.bytes += t.nbytes();
  }
  for (TensorGroup& g : groups) std::sort(g.layers.begin(), g.layers.end());
  return groups;
}

// The role of a stored tensor: from the description when it has one, else guessed from the
// MXFP4 naming convention (`*_blocks` / `*_scales` of one-byte type) so parameter counts stay
// right for any checkpoint.
TensorKind KindOf(const TensorInfo& t, const std::unordered_map<std::string, const TensorSpec*>& specs) {
  if (auto it = specs.find(t.name); it != specs.end()) return it->second->kind;
  auto ends_with = [&](const char* suffix) {
    const std::string s(suffix);
    return t.name.size() >= s.size() && t.name.compare(t.name.size() - s.size(), s.size(), s) == 0;
  };
  if (DTypeSize(t.dtype) == 1 && ends_with("_blocks")) return TensorKind::kExpertBlocks;
  if (DTypeSize(t.dtype) == 1 && ends_with("_scales")) return TensorKind::kExpertScales;
  return TensorKind::kLinearWeight;
}

void RunInspect(const InspectArgs& args) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(args.model, ec)) Fail(args.model, ": no such file or directory");
  if (fs::is_regular_file(args.model, ec) && IsGgufPath(args.model)) return InspectGguf(args.model, args.json);
  const std::string path = ResolveModelDir(args.model);
  const bool is_dir = fs::is_directory(path, ec);
  const std::string config_path = (fs::path(path) / "config.json").string();

  std::optional<ModelConfig> config;
  if (is_dir && fs::exists(config_path, ec)) {
    config = LoadModelConfig(path);
    ValidateModelConfig(*config, config_path);
    LoadGenerationConfig(path);  // what loading reads too: a broken file is reported here as there
  }
  const WeightStore store = WeightStore::Open(path);

  std::vector<TensorSpec> specs;
  // Every model_type ValidateModelConfig accepts has an architecture row (model/architecture.h).
  const bool described = config.has_value();
  if (described) {
    RequireTensorsForCounts(*config, store, config_path);  // before the specs are listed
    specs = ModelTensorSpecs(*config, config_path);
  }
  const std::optional<Int4Scheme> int4 = described ? Int4SchemeOf(*config, config_path) : std::nullopt;
  const std::optional<SparseScheme> sparse = described ? SparseSchemeOf(*config, config_path) : std::nullopt;
  // Modules the sparse scheme covers, as the tensor list names them (.weight or .compressed).
  size_t sparse_modules = 0, pruned_mxfp4 = 0;  // the latter: gpt-oss expert stacks pruned in place
  for (const TensorSpec& s : specs) {
    if (sparse && s.kind == TensorKind::kExpertBlocks && sparse->Sparse(s.name.substr(0, s.name.size() - 7))) {
      ++pruned_mxfp4;
      continue;
    }
    const std::string module = s.name.substr(0, s.name.rfind('.'));
    const bool weight = s.kind == TensorKind::kNmValues ||
                        (s.name.size() > 7 && s.name.compare(s.name.size() - 7, 7, ".weight") == 0 &&
                         (s.kind == TensorKind::kLinearWeight || s.kind == TensorKind::kExpertLinear ||
                          s.kind == TensorKind::kRouterWeight || s.kind == TensorKind::kLmHead));
    if (sparse && weight && sparse->Sparse(module)) ++sparse_modules;
  }
  // What loading would refuse although every tensor matches (the same rule as Model::Load).
  const std::string blocker = described ? LoadBlocker(*config, config_path) : std::string();
  std::unordered_map<std::string, const TensorSpec*> spec_by_name;
  for (const TensorSpec& s : specs) spec_by_name.emplace(s.name, &s);

  // Tensors in description order, then any others by name.
  std::vector<TensorInfo> tensors;
  tensors.reserve(store.num_tensors());
  for (const TensorSpec& s : specs) {
    if (auto v = store.Find(s.name)) tensors.push_back(*v->info);
  }
  for (const std::string& name : store.names()) {
    if (!spec_by_name.count(name)) tensors.push_back(*store.Get(name).info);
  }

  uint64_t params = 0, expert_params = 0, tensor_bytes = 0, file_bytes = 0;
  uint64_t int4_modules = 0, int4_weights = 0, int4_bytes = 0;  // quant_scheme.h modules
  std::map<std::string, std::pair<size_t, uint64_t>> by_dtype;  // name -> (tensors, bytes)
  for (const TensorInfo& t : tensors) {
    const TensorKind kind = KindOf(t, spec_by_name);
    const uint64_t p = LogicalParameters(kind, t.numel());
    params += p;
    const bool expert = t.name.find(".experts.") != std::string::npos;
    if (kind == TensorKind::kExpertBlocks || kind == TensorKind::kExpertWeight ||
        kind == TensorKind::kExpertLinear || (kind == TensorKind::kInt4Codes && expert)) expert_params += p;
    if (kind == TensorKind::kInt4Codes) {
      ++int4_modules;
      int4_weights += p;
    }
    if (kind == TensorKind::kInt4Codes || kind == TensorKind::kInt4Zeros || kind == TensorKind::kInt4Scales) {
      int4_bytes += t.nbytes();
    }
    tensor_bytes += t.nbytes();
    auto& d = by_dtype[std::string(DTypeName(t.dtype))];
    d.first += 1;
    d.second += t.nbytes();
  }
  for (const auto& f : store.files()) file_bytes += f->file_size();
  const std::vector<TensorGroup> groups = GroupTensors(tensors);
  const std::vector<TensorProblem> problems = described ? CheckTensors(specs, store, &*config) : std::vector<TensorProblem>{};

  if (args.json) {
    nlohmann::json out;
    out["path"] = path;
    if (config) {
      const ModelConfig& c = *config;
      size_t sliding = 0;
      for (LayerType t : c.layer_types) sliding += t == LayerType::kSlidingAttention;
      out["config"] = {{"model_type", c.model_type},
                       {"architecture", ArchitectureOf(c, config_path).hf_class},
                       {"architectures", c.architectures},
                       {"num_hidden_layers", c.num_hidden_layers},
                       {"sliding_layers", sliding},
                       {"hidden_size", c.hidden_size},
                       {"intermediate_size", c.intermediate_size},
                       {"num_attention_heads", c.num_attention_heads},
                       {"num_key_value_heads", c.num_key_value_heads},
                       {"head_dim", c.head_dim},
                       {"num_local_experts", c.num_local_experts},
                       {"num_experts_per_tok", c.num_experts_per_tok},
                       {"vocab_size", c.vocab_size},
                       {"sliding_window", c.sliding_window ? nlohmann::json(*c.sliding_window) : nlohmann::json()},
                       {"rope_type", c.rope_scaling ? c.rope_scaling->rope_type : "default"},
                       {"quant_method", c.quantization.quant_method}};
      if (sparse) {
        out["sparsity"] = {{"scheme", sparse->Describe()}, {"modules", sparse_modules}, {"mxfp4_expert_stacks", pruned_mxfp4}};
      }
      if (int4 && int4_weights > 0) {
        out["int4"] = {{"scheme", int4->Describe()},
                       {"modules", int4_modules},
                       {"bits_per_weight_stored", 8.0 * int4_bytes / int4_weights}};
      }
    } else {
      out["config"] = nullptr;
    }
    nlohmann::json files = nlohmann::json::array();
    for (const auto& f : store.files()) {
      files.push_back({{"name", fs::path(f->path()).filename().string()}, {"bytes", f->file_size()}});
    }
    out["files"] = files;
    out["num_tensors"] = tensors.size();
    out["parameters"] = params;
    out["expert_parameters"] = expert_params;
    out["tensor_bytes"] = tensor_bytes;
    out["file_bytes"] = file_bytes;
    nlohmann::json dtypes = nlohmann::json::object();
    for (const auto& [name, d] : by_dtype) dtypes[name] = {{"tensors", d.first}, {"bytes", d.second}};
    out["dtypes"] = dtypes;
    nlohmann::json jgroups = nlohmann::json::array();
    for (const TensorGroup& g : groups) {
      jgroups.push_back({{"name", g.DisplayName()},
                         {"shape", g.shape},
                         {"dtype", DTypeName(g.dtype)},
                         {"count", g.count()},
                         {"bytes", g.bytes}});
    }
    out["tensors"] = jgroups;
    nlohmann::json jproblems = nlohmann::json::array();
    for (const TensorProblem& p : problems) jproblems.push_back(p.ToString());
    out["validation"] = {{"checked", described},
                         {"problems", jproblems},
                         {"loadable", described && problems.empty() && blocker.empty()}};
    // A path is bytes, not necessarily UTF-8: replaced (U+FFFD) rather than failing the dump.
    std::printf("%s\n", out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    std::printf("model: %s\n", path.c_str());
    if (config) {
      const ModelConfig& c = *config;
      std::string arch;
      for (const std::string& a : c.architectures) arch += (arch.empty() ? "" : ", ") + a;
      std::printf("architecture: %s (model_type %s)\n", arch.empty() ? "?" : arch.c_str(), c.model_type.c_str());
      size_t sliding = 0;
      for (LayerType t : c.layer_types) sliding += t == LayerType::kSlidingAttention;
      std::string layers = StrCat(c.num_hidden_layers);
      if (sliding > 0) {
        layers += StrCat(" (", sliding, " sliding window ", c.sliding_window.value_or(0), ", ",
                         c.layer_types.size() - sliding, " full)");
      }
      std::printf("layers: %s\n", layers.c_str());
      const Architecture& row = ArchitectureOf(c, config_path);
      if (row.attention == AttentionKind::kMla) {
        const MlaDims m = MlaDimsOf(c, config_path);
        std::printf("hidden: %lld, heads: %lld, MLA: q %s, latent %lld + rope %lld per token (cached), head q/k %lld + %lld, "
                    "v %lld\n",
                    static_cast<long long>(c.hidden_size), static_cast<long long>(c.num_attention_heads),
                    m.q_lora > 0 ? StrCat("lora ", m.q_lora).c_str() : "proj", static_cast<long long>(m.latent),
                    static_cast<long long>(m.rope), static_cast<long long>(m.nope), static_cast<long long>(m.rope),
                    static_cast<long long>(m.value));
      } else {
        std::printf("hidden: %lld, heads: %lld, kv heads: %lld, head_dim: %lld\n",
                    static_cast<long long>(c.hidden_size), static_cast<long long>(c.num_attention_heads),
                    static_cast<long long>(c.num_key_value_heads), static_cast<long long>(c.head_dim));
      }
      int64_t moe_layers = 0;
      for (int64_t l = 0; l < c.num_hidden_layers; ++l) moe_layers += PlanLayer(row, c, l).moe;
      std::printf("layout: %s%s%s%s%s\n", row.hf_class.data(), PlanLayer(row, c, 0).qkv_bias ? ", q/k/v biases" : "",
                  row.qk_norm ? ", q/k norm" : "", row.sinks ? ", attention sinks" : "",
                  c.tie_word_embeddings ? ", tied embeddings" : "");
      if (moe_layers > 0) {
        const int64_t expert_width = row.mlp == MlpKind::kGated || row.mlp == MlpKind::kMoe ? c.intermediate_size
                                                                                           : c.moe_intermediate_size;
        std::string router;
        switch (row.router) {
          case RouterKind::kTopKThenSoftmax: router = "top-k then softmax"; break;
          case RouterKind::kSoftmaxThenTopK: router = c.norm_topk_prob ? "softmax then top-k (renormalised)" : "softmax then top-k"; break;
          case RouterKind::kSoftmaxGroupMax:
          case RouterKind::kSigmoidNoauxTc:
            router = StrCat(row.router == RouterKind::kSoftmaxGroupMax ? "softmax" : "sigmoid + correction bias", ", ",
                            c.topk_method);
            if (c.topk_method != "greedy") router += StrCat(" (", c.topk_group, " of ", c.n_group, " groups)");
            if (row.router == RouterKind::kSigmoidNoauxTc && c.norm_topk_prob) router += ", renormalised";
            router += StrCat(", x ", c.routed_scaling_factor);
            break;
        }
        std::printf("experts: %lld, top-%lld, intermediate %lld, router %s, on %lld of %lld layers\n",
                    static_cast<long long>(c.num_local_experts), static_cast<long long>(c.num_experts_per_tok),
                    static_cast<long long>(expert_width), router.c_str(), static_cast<long long>(moe_layers),
                    static_cast<long long>(c.num_hidden_layers));
        if (row.shared_experts && c.n_shared_experts > 0) {
          std::printf("shared experts: %lld (intermediate %lld), dense layers: %lld (intermediate %lld)\n",
                      static_cast<long long>(c.n_shared_experts),
                      static_cast<long long>(c.n_shared_experts * c.moe_intermediate_size),
                      static_cast<long long>(c.num_hidden_layers - moe_layers), static_cast<long long>(c.intermediate_size));
        }
      } else {
        std::printf("intermediate: %lld\n", static_cast<long long>(c.intermediate_size));
      }
      std::printf("vocab: %lld, max positions: %lld\n", static_cast<long long>(c.vocab_size),
                  static_cast<long long>(c.max_position_embeddings));
      if (c.rope_scaling) {
        const RopeScaling& r = *c.rope_scaling;
        std::printf("rope: %s, theta %g, factor %g, original context %lld, truncate %s\n", r.rope_type.c_str(),
                    c.rope_theta, r.factor, static_cast<long long>(r.original_max_position_embeddings.value_or(0)),
                    r.truncate ? "true" : "false");
      } else {
        std::printf("rope: default, theta %g\n", c.rope_theta);
      }
      std::printf("quantization: %s\n",
                  c.quantization.quant_method.empty() ? "none" : c.quantization.quant_method.c_str());
      if (sparse) {
        std::printf("sparsity: %s; %zu modules, held as kept values + a bit per weight (--sparse off: dense)%s\n",
                    sparse->Describe().c_str(), sparse_modules,
                    pruned_mxfp4 ? StrCat("; ", pruned_mxfp4, " MXFP4 expert stacks pruned in place, held as MXFP4").c_str() : "");
      }
      if (int4 && int4_weights > 0) {
        // Held: the codes plus one zero byte and one f32 scale per group (model/formats/int4.cpp).
        std::string held;
        if (int4->group_size > 0) {
          char buf[32];
          std::snprintf(buf, sizeof(buf), ", %.2f as held", 4.0 + 40.0 / static_cast<double>(int4->group_size));
          held = buf;
        }
        std::printf("int4: %s; %llu modules, %.2f bits per weight as stored%s\n", int4->Describe().c_str(),
                    static_cast<unsigned long long>(int4_modules), 8.0 * int4_bytes / int4_weights, held.c_str());
      }
    } else {
      std::printf("config: none (no config.json)\n");
    }
    std::string file_list;
    for (const auto& f : store.files()) {
      file_list += (file_list.empty() ? "" : ", ") + fs::path(f->path()).filename().string();
    }
    std::printf("files: %zu (%s): %s\n", store.files().size(), HumanBytes(file_bytes).c_str(), file_list.c_str());
    std::printf("tensors: %zu\n", tensors.size());
    std::printf("parameters: %s (%llu; experts %s, other %s)\n", HumanCount(params).c_str(),
                static_cast<unsigned long long>(params), HumanCount(expert_params).c_str(),
                HumanCount(params - expert_params).c_str());
    std::printf("bytes by dtype:\n");
    for (const auto& [name, d] : by_dtype) {
      std::printf("  %-8s %6zu tensors  %s (%llu)\n", name.c_str(), d.first, HumanBytes(d.second).c_str(),
                  static_cast<unsigned long long>(d.second));
    }
    size_t name_width = 0, shape_width = 0;
    for (const TensorGroup& g : groups) {
      name_width = std::max(name_width, g.DisplayName().size());
      shape_width = std::max(shape_width, ShapeToString(g.shape).size());
    }
    std::printf("tensor summary:\n");
    for (const TensorGroup& g : groups) {
      const std::string count = g.layers.empty() ? "" : StrCat(" ×", g.count());
      std::printf("  %-*s  %-*s  %-4s%s\n", static_cast<int>(name_width), g.DisplayName().c_str(),
                  static_cast<int>(shape_width), ShapeToString(g.shape).c_str(),
                  std::string(DTypeName(g.dtype)).c_str(), count.c_str());
    }
    if (!described) {
      std::printf("validation: skipped (%s)\n",
                  config ? StrCat("no tensor description for model_type ", config->model_type).c_str()
                         : "no config.json");
    } else if (problems.empty() && !blocker.empty()) {
      std::printf("validation: %zu tensors match the %s description, but it cannot be loaded as it is: %s\n",
                  specs.size(), config->model_type.c_str(), blocker.c_str());
    } else if (problems.empty()) {
      std::printf("validation: ok (%zu tensors match the %s description)\n", specs.size(), config->model_type.c_str());
    } else {
      std::printf("validation: %zu problem%s\n", problems.size(), problems.size() == 1 ? "" : "s");
      for (const TensorProblem& p : problems) std::printf("  %s\n", p.ToString().c_str());
    }
  }
  std::fflush(stdout);
  RequireNoProblems(problems, path);
  if (!blocker.empty()) Fail(blocker);
}

}  // namespace

void RegisterInspect(CLI::App& app) {
  auto args = std::make_shared<InspectArgs>();
  auto* cmd = app.add_subcommand(
      "inspect", "describe a model directory (config, parameters, bytes per dtype, tensors) and check its tensors");
  cmd->add_option("-m,--model", args->model,
                  "model directory in Hugging Face layout, a single .safetensors file, or a GGUF file")
      ->required();
  cmd->add_flag("--json", args->json, "print the report as JSON");
  cmd->callback([args] { RunInspect(*args); });
}

}  // namespace tessera::cli
