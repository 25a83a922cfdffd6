#include "model/gpt_oss_weights.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "core/error.h"
#include "io/json_util.h"
#include "kernels/mxfp4.h"

namespace tessera {

std::string_view TensorKindName(TensorKind kind) {
  switch (kind) {
    case TensorKind::kEmbedding: return "embedding";
    case TensorKind::kNorm: return "norm";
    case TensorKind::kLinearWeight: return "linear weight";
    case TensorKind::kLinearBias: return "linear bias";
    case TensorKind::kAttentionSinks: return "attention sinks";
    case TensorKind::kRouterWeight: return "router weight";
    case TensorKind::kRouterBias: return "router bias";
    case TensorKind::kExpertBlocks: return "mxfp4 blocks";
    case TensorKind::kExpertScales: return "mxfp4 scales";
    case TensorKind::kExpertBias: return "expert bias";
    case TensorKind::kExpertWeight: return "expert weight";
    case TensorKind::kLmHead: return "lm head";
  }
  return "?";
}

uint64_t TensorSpec::numel() const {
  uint64_t n = 1;
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

uint64_t LogicalParameters(TensorKind kind, uint64_t numel) {
  if (kind == TensorKind::kExpertBlocks) return numel * 2;  // two E2M1 codes per byte
  if (kind == TensorKind::kExpertScales) return 0;          // part of the block encoding
  return numel;
}

uint64_t TensorSpec::parameters() const { return LogicalParameters(kind, numel()); }

ExpertFormat GptOssExpertFormat(const ModelConfig& config, const std::string& source) {
  const std::string& method = config.quantization.quant_method;
  if (method == "mxfp4") return ExpertFormat::kMxfp4;
  if (method.empty()) return ExpertFormat::kDense;
  Fail(source, ": quantization_config.quant_method '", method,
       "' is not supported for gpt_oss (expected mxfp4 or no quantization_config)");
}

std::string GptOssLoadBlocker(const ModelConfig& config, const std::string& source) {
  if (GptOssExpertFormat(config, source) == ExpertFormat::kMxfp4) return "";
  return StrCat(source, ": unquantized (dense) experts are not supported by this engine yet; convert them with "
                "`tessera quantize --to mxfp4` or use the MXFP4 checkpoint");
}

namespace {

// Largest dimension accepted from a config: keeps every element count far from overflow.
constexpr int64_t kMaxDim = int64_t{1} << 31;

int64_t RequireDim(const std::string& source, const char* key, int64_t value) {
  if (value <= 0 || value > kMaxDim) Fail(source, ": ", key, " ", value, " is out of range for gpt_oss");
  return value;
}

}  // namespace

std::vector<TensorSpec> GptOssTensorSpecs(const ModelConfig& config, const std::string& source) {
  if (config.model_type != "gpt_oss") {
    Fail(source, ": model_type '", config.model_type, "' is not gpt_oss");
  }
  const int64_t vocab = RequireDim(source, "vocab_size", config.vocab_size);
  const int64_t hidden = RequireDim(source, "hidden_size", config.hidden_size);
  const int64_t inter = RequireDim(source, "intermediate_size", config.intermediate_size);
  const int64_t layers = RequireDim(source, "num_hidden_layers", config.num_hidden_layers);
  const int64_t heads = RequireDim(source, "num_attention_heads", config.num_attention_heads);
  const int64_t kv_heads = RequireDim(source, "num_key_value_heads", config.num_key_value_heads);
  const int64_t head_dim = RequireDim(source, "head_dim", config.head_dim);
  const int64_t experts = RequireDim(source, "num_local_experts", config.num_local_experts);
  const ExpertFormat format = GptOssExpertFormat(config, source);
  if (format == ExpertFormat::kMxfp4) {
    // MXFP4 blocks run along the input dimension: H for gate_up, I for down.
    if (hidden % kMxfp4BlockSize != 0) {
      Fail(source, ": hidden_size ", hidden, " is not a multiple of the MXFP4 block size 32");
    }
    if (inter % kMxfp4BlockSize != 0) {
      Fail(source, ": intermediate_size ", inter, " is not a multiple of the MXFP4 block size 32");
    }
  }
  const int64_t q_dim = heads * head_dim;  // 4096 in both real sizes (head_dim is read, never H/Nq)
  const int64_t kv_dim = kv_heads * head_dim;
  const bool bias = config.attention_bias;

  std::vector<TensorSpec> specs;
  auto add = [&](std::string name, DType dtype, std::vector<int64_t> shape, TensorKind kind, int layer) {
    specs.push_back(TensorSpec{std::move(name), dtype, std::move(shape), kind, layer});
  };
  constexpr DType kBF16 = DType::kBF16;
  constexpr DType kU8 = DType::kU8;

  add("model.embed_tokens.weight", kBF16, {vocab, hidden}, TensorKind::kEmbedding, -1);
  for (int64_t l = 0; l < layers; ++l) {
    const int li = static_cast<int>(l);
    const std::string p = StrCat("model.layers.", l, ".");
    add(p + "input_layernorm.weight", kBF16, {hidden}, TensorKind::kNorm, li);
    if (bias) add(p + "self_attn.o_proj.bias", kBF16, {hidden}, TensorKind::kLinearBias, li);
    add(p + "self_attn.o_proj.weight", kBF16, {hidden, q_dim}, TensorKind::kLinearWeight, li);
    if (bias) {
      add(p + "self_attn.q_proj.bias", kBF16, {q_dim}, TensorKind::kLinearBias, li);
      add(p + "self_attn.k_proj.bias", kBF16, {kv_dim}, TensorKind::kLinearBias, li);
      add(p + "self_attn.v_proj.bias", kBF16, {kv_dim}, TensorKind::kLinearBias, li);
    }
    add(p + "self_attn.q_proj.weight", kBF16, {q_dim, hidden}, TensorKind::kLinearWeight, li);
    add(p + "self_attn.k_proj.weight", kBF16, {kv_dim, hidden}, TensorKind::kLinearWeight, li);
    add(p + "self_attn.v_proj.weight", kBF16, {kv_dim, hidden}, TensorKind::kLinearWeight, li);
    add(p + "self_attn.sinks", kBF16, {heads}, TensorKind::kAttentionSinks, li);
    add(p + "mlp.router.bias", kBF16, {experts}, TensorKind::kRouterBias, li);
    add(p + "mlp.router.weight", kBF16, {experts, hidden}, TensorKind::kRouterWeight, li);
    const std::string e = p + "mlp.experts.";
    if (format == ExpertFormat::kMxfp4) {
      add(e + "gate_up_proj_bias", kBF16, {experts, 2 * inter}, TensorKind::kExpertBias, li);
      add(e + "gate_up_proj_blocks", kU8, {experts, 2 * inter, hidden / kMxfp4BlockSize, kMxfp4BlockBytes},
          TensorKind::kExpertBlocks, li);
      add(e + "gate_up_proj_scales", kU8, {experts, 2 * inter, hidden / kMxfp4BlockSize},
          TensorKind::kExpertScales, li);
      add(e + "down_proj_bias", kBF16, {experts, hidden}, TensorKind::kExpertBias, li);
      add(e + "down_proj_blocks", kU8, {experts, hidden, inter / kMxfp4BlockSize, kMxfp4BlockBytes},
          TensorKind::kExpertBlocks, li);
      add(e + "down_proj_scales", kU8, {experts, hidden, inter / kMxfp4BlockSize},
          TensorKind::kExpertScales, li);
    } else {
      // HF GptOssExperts parameters, x @ W orientation (gpt-oss.md §2.3, last bullets).
      add(e + "gate_up_proj", kBF16, {experts, hidden, 2 * inter}, TensorKind::kExpertWeight, li);
      add(e + "gate_up_proj_bias", kBF16, {experts, 2 * inter}, TensorKind::kExpertBias, li);
      add(e + "down_proj", kBF16, {experts, inter, hidden}, TensorKind::kExpertWeight, li);
      add(e + "down_proj_bias", kBF16, {experts, hidden}, TensorKind::kExpertBias, li);
    }
    add(p + "post_attention_layernorm.weight", kBF16, {hidden}, TensorKind::kNorm, li);
  }
  add("model.norm.weight", kBF16, {hidden}, TensorKind::kNorm, -1);
  if (!config.tie_word_embeddings) add("lm_head.weight", kBF16, {vocab, hidden}, TensorKind::kLmHead, -1);
  return specs;
}

std::vector<TensorSpec> GptOssCheckpointOrder(std::vector<TensorSpec> specs) {
  // Layer tensors first, layers compared as decimal strings; global tensors keep their relative
  // order (embed_tokens, norm, lm_head) after all layers. Stable, so per-layer order is kept.
  auto key = [](const TensorSpec& s) {
    return s.layer < 0 ? std::make_pair(1, std::string()) : std::make_pair(0, std::to_string(s.layer));
  };
  std::stable_sort(specs.begin(), specs.end(),
                   [&](const TensorSpec& a, const TensorSpec& b) { return key(a) < key(b); });
  return specs;
}

// ---- checking ------------------------------------------------------------------------------

std::string ShapeToString(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

std::string TensorProblem::ToString() const {
  switch (type) {
    case Type::kMissing: return StrCat("missing tensor ", Quote(name));
    case Type::kUnexpected: return StrCat("unexpected tensor ", Quote(name));
    case Type::kShape:
    case Type::kDType: return StrCat("tensor ", Quote(name), ": ", detail);
  }
  return name;
}

bool DTypeFits(const TensorSpec& spec, DType stored) {
  switch (spec.kind) {
    case TensorKind::kExpertBlocks:
    case TensorKind::kExpertScales:
      return DTypeSize(stored) == 1;
    case TensorKind::kEmbedding:
    case TensorKind::kLinearWeight:
    case TensorKind::kRouterWeight:
    case TensorKind::kLmHead:
      return stored == spec.dtype;
    default:
      if (spec.dtype == DType::kBF16) {
        return stored == DType::kBF16 || stored == DType::kF16 || stored == DType::kF32;
      }
      return stored == spec.dtype;
  }
}

std::vector<TensorProblem> CheckTensors(const std::vector<TensorSpec>& specs,
                                        const std::vector<TensorInfo>& stored) {
  std::unordered_map<std::string_view, const TensorInfo*> by_name;
  for (const TensorInfo& t : stored) by_name.emplace(t.name, &t);
  std::vector<TensorProblem> problems;
  std::unordered_set<std::string_view> described;
  for (const TensorSpec& spec : specs) {
    described.insert(spec.name);
    const auto it = by_name.find(spec.name);
    if (it == by_name.end()) {
      problems.push_back({TensorProblem::Type::kMissing, spec.name, ""});
      continue;
    }
    const TensorInfo& t = *it->second;
    if (t.shape != spec.shape) {
      problems.push_back({TensorProblem::Type::kShape, spec.name,
                          StrCat("shape ", ShapeToString(t.shape), ", expected ", ShapeToString(spec.shape))});
    }
    if (!DTypeFits(spec, t.dtype)) {
      const bool matrix = spec.dtype == DType::kBF16 && (t.dtype == DType::kF16 || t.dtype == DType::kF32);
      problems.push_back({TensorProblem::Type::kDType, spec.name,
                          StrCat("dtype ", DTypeName(t.dtype), ", expected ", DTypeName(spec.dtype),
                                 matrix ? " (the matrix kernels read BF16; convert the checkpoint to BF16)" : "")});
    }
  }
  std::vector<std::string> unexpected;
  for (const TensorInfo& t : stored) {
    if (!described.count(t.name)) unexpected.push_back(t.name);
  }
  std::sort(unexpected.begin(), unexpected.end());
  for (std::string& name : unexpected) problems.push_back({TensorProblem::Type::kUnexpected, std::move(name), ""});
  return problems;
}

std::vector<TensorProblem> CheckTensors(const std::vector<TensorSpec>& specs, const WeightStore& store) {
  std::vector<TensorInfo> stored;
  stored.reserve(store.num_tensors());
  for (const std::string& name : store.names()) stored.push_back(*store.Get(name).info);
  return CheckTensors(specs, stored);
}

void RequireNoProblems(const std::vector<TensorProblem>& problems, const std::string& source) {
  if (problems.empty()) return;
  std::string more;
  if (problems.size() > 1) more = StrCat(" (and ", problems.size() - 1, " more problems)");
  Fail(source, ": ", problems.front().ToString(), more);
}

}  // namespace tessera
