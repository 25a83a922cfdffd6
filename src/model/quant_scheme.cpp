#include "model/quant_scheme.h"

#include <algorithm>
#include <regex>

#include "core/error.h"
#include "io/json_util.h"

namespace tessera {
namespace {

// compressed-tensors matches a "re:" pattern with Python's re.match: anchored at the start only.
bool MatchesPattern(const std::string& pattern, const std::string& module) {
  if (pattern.rfind("re:", 0) != 0) return false;
  try {
    return std::regex_search(module, std::regex(pattern.substr(3)), std::regex_constants::match_continuous);
  } catch (const std::regex_error&) {
    Fail("compressed-tensors config: pattern ", Quote(pattern), " is not a valid regular expression");
  }
}

Int4Scheme AutoAwqScheme(const QuantizationConfig& q, const std::string& source) {
  if (q.bits.value_or(4) != 4) {
    Fail(source, ": quantization_config.bits: ", *q.bits, " is not supported (AWQ int4 only)");
  }
  if (!q.version.empty() && q.version != "gemm") {
    Fail(source, ": quantization_config.version: ", Quote(q.version),
         " is not supported (supported: gemm, AutoAWQ's default layout)");
  }
  Int4Scheme s;
  s.layout = Int4Layout::kAutoAwqGemm;
  s.group_size = q.group_size.value_or(128);
  s.zero_points = true;  // WQLinear_GEMM always stores qzeros; zero_point false has them too
  s.not_converted = q.modules_to_not_convert;
  return s;
}

Int4Scheme PackQuantizedScheme(const QuantizationConfig& q, const std::string& source) {
  const std::string where = source + ": quantization_config";
  if (q.config_groups.empty()) Fail(where, ".config_groups: missing or empty");
  const QuantGroup& g = q.config_groups.front();
  for (const QuantGroup& other : q.config_groups) {
    const std::string key = StrCat(where, ".config_groups.", other.name);
    const std::string format = other.format.empty() ? q.format : other.format;
    if (format != "pack-quantized") {
      Fail(key, ".format: ", Quote(format), " is not supported (supported: pack-quantized int4)");
    }
    if (other.num_bits.value_or(0) != 4) Fail(key, ".weights.num_bits: must be 4 (int4 weights only)");
    if (other.type != "int") Fail(key, ".weights.type: ", Quote(other.type), " is not supported (supported: int)");
    if (other.strategy != "group" && other.strategy != "channel") {
      Fail(key, ".weights.strategy: ", Quote(other.strategy), " is not supported (supported: group, channel)");
    }
    if (other.strategy == "group" && !other.group_size) Fail(key, ".weights.group_size: missing for strategy group");
    if (!other.actorder.empty()) Fail(key, ".weights.actorder: ", Quote(other.actorder), " is not supported (g_idx)");
    if (other.dynamic.value_or(false)) Fail(key, ".weights.dynamic: dynamic weight quantization is not supported");
    if (other.quantized_activations) Fail(key, ": activation quantization is not supported (weight-only int4 only)");
    const bool same = other.strategy == g.strategy && other.group_size == g.group_size &&
                      other.symmetric.value_or(true) == g.symmetric.value_or(true);
    if (!same) Fail(key, ": differs from ", g.name, " (one int4 scheme per checkpoint is supported)");
  }
  Int4Scheme s;
  s.layout = Int4Layout::kPackQuantized;
  s.group_size = g.strategy == "channel" ? -1 : *g.group_size;
  s.zero_points = !g.symmetric.value_or(true);
  for (const QuantGroup& other : q.config_groups) s.targets.insert(s.targets.end(), other.targets.begin(), other.targets.end());
  s.ignore = q.ignore;
  return s;
}

}  // namespace

bool Int4Scheme::Quantizes(const std::string& module) const {
  if (layout == Int4Layout::kAutoAwqGemm) {
    if (module == "lm_head") return false;
    return std::none_of(not_converted.begin(), not_converted.end(),
                        [&](const std::string& key) { return module.find(key) != std::string::npos; });
  }
  return CompressedTensorsMatches(targets, ignore, module);
}

bool CompressedTensorsMatches(const std::vector<std::string>& targets, const std::vector<std::string>& ignore,
                              const std::string& module) {
  for (const std::string& entry : ignore) {
    if (entry == module || MatchesPattern(entry, module)) return false;
  }
  // Every module tessera describes here is an nn.Linear.
  return std::any_of(targets.begin(), targets.end(),
                     [&](const std::string& t) { return t == "Linear" || t == module || MatchesPattern(t, module); });
}

std::string Int4Scheme::Describe() const {
  const std::string group = group_size < 0 ? std::string("one group per row") : StrCat("group ", group_size);
  if (layout == Int4Layout::kAutoAwqGemm) return StrCat("AutoAWQ GEMM int4, ", group);
  return StrCat("compressed-tensors int4 (", zero_points ? "asymmetric" : "symmetric", "), ", group);
}

std::optional<Int4Scheme> Int4SchemeOf(const ModelConfig& config, const std::string& source) {
  const QuantizationConfig& q = config.quantization;
  if (q.quant_method == "awq") return AutoAwqScheme(q, source);
  if (q.quant_method == "compressed-tensors") {
    // A sparsity-only compressed-tensors config (model/sparse_scheme.h) quantizes nothing.
    if (q.config_groups.empty() && SparseSchemeOf(config, source)) return std::nullopt;
    return PackQuantizedScheme(q, source);
  }
  return std::nullopt;
}

nlohmann::json Int4QuantizationConfigJson(const Int4Scheme& scheme) {
  using json = nlohmann::json;
  if (scheme.layout == Int4Layout::kAutoAwqGemm) {
    // transformers' AwqConfig fields as AutoAWQ writes them.
    return json{{"quant_method", "awq"}, {"bits", 4},          {"group_size", scheme.group_size},
                {"zero_point", true},    {"version", "gemm"}, {"modules_to_not_convert", nullptr}};
  }
  const json weights = {{"num_bits", 4},
                        {"type", "int"},
                        {"symmetric", !scheme.zero_points},
                        {"strategy", scheme.group_size < 0 ? "channel" : "group"},
                        {"group_size", scheme.group_size < 0 ? json(nullptr) : json(scheme.group_size)},
                        {"dynamic", false},
                        {"actorder", nullptr}};
  return json{{"quant_method", "compressed-tensors"},
              {"format", "pack-quantized"},
              {"quantization_status", "compressed"},
              {"ignore", json::array({"lm_head"})},
              {"config_groups",
               {{"group_0",
                 {{"targets", json::array({"Linear"})},
                  {"format", "pack-quantized"},
                  {"weights", weights},
                  {"input_activations", nullptr},
                  {"output_activations", nullptr}}}}}};
}

Int4TensorNames Int4Names(const Int4Scheme& scheme, const std::string& module) {
  if (scheme.layout == Int4Layout::kAutoAwqGemm) {
    return {module + ".qweight", scheme.zero_points ? module + ".qzeros" : std::string(), module + ".scales", ""};
  }
  return {module + ".weight_packed", scheme.zero_points ? module + ".weight_zero_point" : std::string(),
          module + ".weight_scale", module + ".weight_shape"};
}

bool Fp8Scheme::Quantizes(const std::string& module) const {
  if (module.rfind("model.layers.", 0) != 0) return false;  // embeddings and lm_head stay 16-bit
  const std::string router = ".mlp.gate";
  if (module.size() >= router.size() && module.compare(module.size() - router.size(), router.size(), router) == 0) {
    return false;  // DeepSeek's router is a plain parameter, never converted
  }
  for (const std::string& kept : not_converted) {
    if (module.find(kept) != std::string::npos) return false;
  }
  return true;
}

std::optional<Fp8Scheme> Fp8SchemeOf(const ModelConfig& config) {
  const QuantizationConfig& q = config.quantization;
  if (q.quant_method != "fp8") return std::nullopt;
  Fp8Scheme s;
  if (q.weight_block_size.size() == 2) {
    s.block_rows = q.weight_block_size[0];
    s.block_cols = q.weight_block_size[1];
  }
  s.not_converted = q.modules_to_not_convert;
  return s;
}

void AddLinearSpecs(std::vector<TensorSpec>& specs, const std::optional<Int4Scheme>& scheme,
                    const std::string& module, int64_t out, int64_t in, TensorKind kind, int layer,
                    const std::string& source, const std::optional<SparseScheme>& sparse,
                    const std::optional<Fp8Scheme>& fp8) {
  if (fp8 && fp8->Quantizes(module)) {
    if (fp8->block_rows <= 0 || fp8->block_cols <= 0) Fail(source, ": quantization_config.weight_block_size: must be positive");
    const int64_t block_rows = (out + fp8->block_rows - 1) / fp8->block_rows;
    const int64_t block_cols = (in + fp8->block_cols - 1) / fp8->block_cols;
    specs.push_back(TensorSpec{module + ".weight", DType::kF8E4M3, {out, in}, kind, layer});
    specs.push_back(TensorSpec{module + ".weight_scale_inv", DType::kF32, {block_rows, block_cols}, TensorKind::kFp8Scales,
                               layer, {out, in}});
    return;
  }
  if (sparse && sparse->bitmask24 && sparse->Sparse(module)) {
    const Bitmask24Names names = Bitmask24NamesOf(module);
    if (in % 4 != 0) Fail(source, ": tensor '", names.values, "': ", in, " input features are not a multiple of 4 (2:4)");
    specs.push_back(TensorSpec{names.values, DType::kBF16, {out, in / 2}, TensorKind::kNmValues, layer, {out, in}});
    specs.push_back(TensorSpec{names.bitmask, DType::kU8, {out, (in + 7) / 8}, TensorKind::kNmBitmask, layer, {out, in}});
    specs.push_back(TensorSpec{names.shape, DType::kI64, {2, 1}, TensorKind::kNmShape, layer, {out, in}});
    return;
  }
  if (!scheme || !scheme->Quantizes(module)) {
    specs.push_back(TensorSpec{module + ".weight", DType::kBF16, {out, in}, kind, layer});
    return;
  }
  const Int4TensorNames names = Int4Names(*scheme, module);
  const int64_t group = scheme->GroupFor(in);
  if (in % group != 0) {
    Fail(source, ": tensor '", names.codes, "': group_size ", group, " does not divide its ", in, " input features");
  }
  if (group % 8 != 0) {
    Fail(source, ": tensor '", names.codes, "': group_size ", group, " is not a multiple of 8 (tessera's int4 layout)");
  }
  const int64_t groups = in / group;
  if (scheme->layout == Int4Layout::kAutoAwqGemm) {
    if (out % 8 != 0) {
      Fail(source, ": tensor '", names.codes, "': ", out, " output features are not a multiple of 8 (AWQ packs 8 per word)");
    }
    specs.push_back(TensorSpec{names.codes, DType::kI32, {in, out / 8}, TensorKind::kInt4Codes, layer, {out, in}});
    specs.push_back(TensorSpec{names.zeros, DType::kI32, {groups, out / 8}, TensorKind::kInt4Zeros, layer, {out, in}});
    specs.push_back(TensorSpec{names.scales, DType::kF16, {groups, out}, TensorKind::kInt4Scales, layer, {out, in}});
    return;
  }
  specs.push_back(TensorSpec{names.codes, DType::kI32, {out, in / 8}, TensorKind::kInt4Codes, layer, {out, in}});
  specs.push_back(TensorSpec{names.scales, DType::kBF16, {out, groups}, TensorKind::kInt4Scales, layer, {out, in}});
  if (scheme->zero_points) {
    specs.push_back(TensorSpec{names.zeros, DType::kI32, {(out + 7) / 8, groups}, TensorKind::kInt4Zeros, layer, {out, in}});
  }
  specs.push_back(TensorSpec{names.shape, DType::kI64, {2}, TensorKind::kInt4Shape, layer, {out, in}});
}

LinearSource ModuleSource(const WeightStore& store, const std::optional<Int4Scheme>& scheme, const std::string& module,
                          int64_t row0, int64_t rows, int64_t col0, int64_t cols,
                          const std::optional<SparseScheme>& sparse, const std::optional<Fp8Scheme>& fp8) {
  if (fp8 && fp8->Quantizes(module)) {
    const TensorView codes = store.Get(module + ".weight"), scales = store.Get(module + ".weight_scale_inv");
    const int64_t out = codes.shape()[0], in = codes.shape()[1];
    if (cols < 0) cols = in - col0;
    if (col0 % fp8->block_cols != 0 || ((col0 + cols) % fp8->block_cols != 0 && col0 + cols != in)) {
      Fail("tensor '", codes.name(), "': columns [", col0, ", ", col0 + cols, ") are not whole FP8 blocks of ",
           fp8->block_cols);
    }
    LinearSource s = LinearSource::Tensor(codes.name(), DType::kF8E4M3, codes.data, 1, out, in, row0, rows, col0, cols);
    s.fp8_block_cols = fp8->block_cols;
    const int64_t scale_cols = scales.shape()[1];
    for (int64_t r = row0; r < row0 + s.rows; ++r) {
      s.row_scales.push_back(scales.data + ((r / fp8->block_rows) * scale_cols + col0 / fp8->block_cols) * sizeof(float));
    }
    s.mapped.push_back({scales.data, scales.nbytes()});
    return s;
  }
  // int4 modules run the int4 formats even when pruned (their zeros stay exact zeros): there is
  // no int4 N:M format yet.
  const bool int4 = scheme && scheme->Quantizes(module);
  const bool nm = sparse && sparse->Sparse(module) && !int4;
  if (nm && sparse->bitmask24) {
    const Bitmask24Names names = Bitmask24NamesOf(module);
    const TensorView values = store.Get(names.values), bitmask = store.Get(names.bitmask);
    const int64_t out = values.shape()[0], in = values.shape()[1] * 2;
    return LinearSource::Bitmask24Module(names.values, values.dtype(), values.data, bitmask.data, out, in,
                                         {{values.data, values.nbytes()}, {bitmask.data, bitmask.nbytes()}}, row0, rows,
                                         col0, cols);
  }
  if (!scheme || !scheme->Quantizes(module)) {
    LinearSource s = LinearSource::View(store.Get(module + ".weight"), row0, rows, col0, cols);
    if (nm) s.nm_kept = sparse->kept, s.nm_group = sparse->group;
    return s;
  }
  const Int4TensorNames names = Int4Names(*scheme, module);
  const TensorView codes = store.Get(names.codes), scales = store.Get(names.scales);
  Int4Stored stored;
  stored.layout = scheme->layout;
  const bool awq = scheme->layout == Int4Layout::kAutoAwqGemm;
  stored.in = awq ? codes.shape()[0] : codes.shape()[1] * 8;
  stored.out = awq ? codes.shape()[1] * 8 : codes.shape()[0];
  stored.group = scheme->GroupFor(stored.in);
  stored.codes = codes.data;
  stored.scales = scales.data;
  stored.scale_dtype = scales.dtype();
  std::vector<std::pair<const uint8_t*, size_t>> mapped = {{codes.data, codes.nbytes()}, {scales.data, scales.nbytes()}};
  if (!names.zeros.empty()) {
    const TensorView zeros = store.Get(names.zeros);
    stored.zeros = zeros.data;
    mapped.emplace_back(zeros.data, zeros.nbytes());
  }
  const int64_t ncols = cols < 0 ? stored.in - col0 : cols;
  if (col0 % stored.group != 0 || ncols % stored.group != 0) {
    Fail(store.Get(names.codes).file ? *store.Get(names.codes).file : std::string("checkpoint"), ": tensor '",
         names.codes, "': columns [", col0, ", ", col0 + ncols, ") split its quantization groups of ", stored.group,
         " (tensor parallelism must give each rank whole groups)");
  }
  return LinearSource::Int4Module(names.codes, stored, std::move(mapped), row0, rows, col0, ncols);
}

}  // namespace tessera
