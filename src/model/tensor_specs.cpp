#include "model/tensor_specs.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "core/error.h"
#include "io/gguf.h"
#include "io/json_util.h"
#include "kernels/mxfp4.h"
#include "model/architecture.h"
#include "model/quant_scheme.h"

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
    case TensorKind::kRouterCorrectionBias: return "router correction bias";
    case TensorKind::kExpertBlocks: return "mxfp4 blocks";
    case TensorKind::kExpertScales: return "mxfp4 scales";
    case TensorKind::kExpertBias: return "expert bias";
    case TensorKind::kExpertWeight: return "expert weight";
    case TensorKind::kExpertLinear: return "expert linear weight";
    case TensorKind::kLmHead: return "lm head";
    case TensorKind::kInt4Codes: return "int4 codes";
    case TensorKind::kInt4Zeros: return "int4 zero points";
    case TensorKind::kInt4Scales: return "int4 scales";
    case TensorKind::kInt4Shape: return "int4 shape";
    case TensorKind::kNmValues: return "2:4 kept values";
    case TensorKind::kNmBitmask: return "2:4 bitmask";
    case TensorKind::kNmShape: return "2:4 shape";
    case TensorKind::kFp8Scales: return "fp8 block scales";
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
  if (kind == TensorKind::kInt4Codes) return numel * 8;     // eight 4-bit codes per int32
  if (kind == TensorKind::kInt4Zeros || kind == TensorKind::kInt4Scales || kind == TensorKind::kInt4Shape) return 0;
  if (kind == TensorKind::kNmValues) return numel * 2;  // 2 of every 4 weights stored
  if (kind == TensorKind::kNmBitmask || kind == TensorKind::kNmShape || kind == TensorKind::kFp8Scales) return 0;
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

std::string LoadBlocker(const ModelConfig& config, const std::string& source) {
  if (ArchitectureOf(config, source).experts != ExpertLayout::kFusedInterleaved) return "";
  if (GptOssExpertFormat(config, source) == ExpertFormat::kMxfp4) return "";
  return StrCat(source, ": unquantized (dense) experts are not supported by this engine yet; convert them with "
                "`tessera quantize --to mxfp4` or use the MXFP4 checkpoint");
}

namespace {

// Largest dimension accepted from a config: keeps every element count far from overflow.
constexpr int64_t kMaxDim = int64_t{1} << 31;

int64_t RequireDim(const std::string& source, const char* key, int64_t value) {
  if (value <= 0 || value > kMaxDim) Fail(source, ": ", key, " ", value, " is out of range");
  return value;
}

}  // namespace

std::vector<TensorSpec> ModelTensorSpecs(const ModelConfig& config, const std::string& source) {
  const Architecture& arch = ArchitectureOf(config, source);
  const int64_t vocab = RequireDim(source, "vocab_size", config.vocab_size);
  const int64_t hidden = RequireDim(source, "hidden_size", config.hidden_size);
  const int64_t layers = RequireDim(source, "num_hidden_layers", config.num_hidden_layers);
  const int64_t heads = RequireDim(source, "num_attention_heads", config.num_attention_heads);
  const int64_t kv_heads = RequireDim(source, "num_key_value_heads", config.num_key_value_heads);
  const int64_t head_dim = RequireDim(source, "head_dim", config.head_dim);
  const bool mxfp4 = arch.experts == ExpertLayout::kFusedInterleaved &&
                     GptOssExpertFormat(config, source) == ExpertFormat::kMxfp4;
  const std::optional<Int4Scheme> int4 = Int4SchemeOf(config, source);
  const std::optional<Fp8Scheme> fp8 = Fp8SchemeOf(config);
  const std::optional<SparseScheme> sparse = SparseSchemeOf(config, source);
  if (int4 && sparse && sparse->bitmask24) {
    Fail(source, ": sparse-24-bitmask together with int4 weights is not supported (no int4 N:M format yet)");
  }
  const int64_t q_dim = heads * head_dim;  // sized from heads, never from hidden (Qwen3, gpt-oss)
  const int64_t kv_dim = kv_heads * head_dim;

  std::vector<TensorSpec> specs;
  auto add = [&](std::string name, DType dtype, std::vector<int64_t> shape, TensorKind kind, int layer) {
    specs.push_back(TensorSpec{std::move(name), dtype, std::move(shape), kind, layer});
  };
  constexpr DType kBF16 = DType::kBF16;
  constexpr DType kU8 = DType::kU8;

  add("model.embed_tokens.weight", kBF16, {vocab, hidden}, TensorKind::kEmbedding, -1);
  for (int64_t l = 0; l < layers; ++l) {
    const int li = static_cast<int>(l);
    const LayerPlan plan = PlanLayer(arch, config, l);
    const std::string p = StrCat("model.layers.", l, ".");
    auto linear = [&](const std::string& name, int64_t out, int64_t in, bool bias) {
      if (bias && arch.checkpoint_layer_order) add(p + name + ".bias", kBF16, {out}, TensorKind::kLinearBias, li);
      AddLinearSpecs(specs, int4, p + name, out, in, TensorKind::kLinearWeight, li, source, sparse, fp8);
      if (bias && !arch.checkpoint_layer_order) add(p + name + ".bias", kBF16, {out}, TensorKind::kLinearBias, li);
    };
    add(p + "input_layernorm.weight", kBF16, {hidden}, TensorKind::kNorm, li);
    if (arch.attention == AttentionKind::kMla) {
      const MlaDims mla = MlaDimsOf(config, source);
      const int64_t qk = mla.nope + mla.rope;
      if (mla.q_lora > 0) {
        linear("self_attn.q_a_proj", mla.q_lora, hidden, false);
        add(p + "self_attn.q_a_layernorm.weight", kBF16, {mla.q_lora}, TensorKind::kNorm, li);
        linear("self_attn.q_b_proj", heads * qk, mla.q_lora, false);
      } else {
        linear("self_attn.q_proj", heads * qk, hidden, false);
      }
      linear("self_attn.kv_a_proj_with_mqa", mla.latent + mla.rope, hidden, false);
      add(p + "self_attn.kv_a_layernorm.weight", kBF16, {mla.latent}, TensorKind::kNorm, li);
      linear("self_attn.kv_b_proj", heads * (mla.nope + mla.value), mla.latent, false);
      linear("self_attn.o_proj", hidden, heads * mla.value, false);
    } else if (arch.checkpoint_layer_order) {
      // gpt-oss index order: o, then the biases of q, k, v, then their weights.
      linear("self_attn.o_proj", hidden, q_dim, plan.o_bias);
      if (plan.qkv_bias) {
        add(p + "self_attn.q_proj.bias", kBF16, {q_dim}, TensorKind::kLinearBias, li);
        add(p + "self_attn.k_proj.bias", kBF16, {kv_dim}, TensorKind::kLinearBias, li);
        add(p + "self_attn.v_proj.bias", kBF16, {kv_dim}, TensorKind::kLinearBias, li);
      }
      linear("self_attn.q_proj", q_dim, hidden, false);
      linear("self_attn.k_proj", kv_dim, hidden, false);
      linear("self_attn.v_proj", kv_dim, hidden, false);
    } else if (arch.fused_qkv) {
      linear("self_attn.qkv_proj", q_dim + 2 * kv_dim, hidden, plan.qkv_bias);
      linear("self_attn.o_proj", hidden, q_dim, plan.o_bias);
    } else {
      linear("self_attn.q_proj", q_dim, hidden, plan.qkv_bias);
      linear("self_attn.k_proj", kv_dim, hidden, plan.qkv_bias);
      linear("self_attn.v_proj", kv_dim, hidden, plan.qkv_bias);
      linear("self_attn.o_proj", hidden, q_dim, plan.o_bias);
    }
    if (plan.qk_norm) {
      add(p + "self_attn.q_norm.weight", kBF16, {head_dim}, TensorKind::kNorm, li);
      add(p + "self_attn.k_norm.weight", kBF16, {head_dim}, TensorKind::kNorm, li);
    }
    if (arch.sinks) add(p + "self_attn.sinks", kBF16, {heads}, TensorKind::kAttentionSinks, li);
    const bool expert_width = arch.mlp == MlpKind::kMoeWhereSparse || arch.mlp == MlpKind::kMoeAfterDense;
    const int64_t inter = RequireDim(source, plan.moe && expert_width ? "moe_intermediate_size" : "intermediate_size",
                                     plan.intermediate);
    if (!plan.moe && arch.fused_gate_up) {
      linear("mlp.gate_up_proj", 2 * inter, hidden, plan.mlp_bias);
      linear("mlp.down_proj", hidden, inter, plan.mlp_bias);
    } else if (!plan.moe) {
      linear("mlp.gate_proj", inter, hidden, plan.mlp_bias);
      linear("mlp.up_proj", inter, hidden, plan.mlp_bias);
      linear("mlp.down_proj", hidden, inter, plan.mlp_bias);
    } else {
      const int64_t experts = RequireDim(source, "num_local_experts", config.num_local_experts);
      const std::string router = p + std::string(arch.router_name) + ".";
      if (arch.router_bias) add(router + "bias", kBF16, {experts}, TensorKind::kRouterBias, li);
      AddLinearSpecs(specs, int4, router.substr(0, router.size() - 1), experts, hidden, TensorKind::kRouterWeight, li,
                     source, sparse);
      if (arch.router_correction_bias) {
        add(router + "e_score_correction_bias", DType::kF32, {experts}, TensorKind::kRouterCorrectionBias, li);
      }
      const std::string e = p + "mlp.experts.";
      if (arch.experts == ExpertLayout::kPerExpert) {
        for (int64_t x = 0; x < experts; ++x) {
          const std::string ex = StrCat(e, x, ".");
          AddLinearSpecs(specs, int4, ex + "gate_proj", inter, hidden, TensorKind::kExpertLinear, li, source, sparse, fp8);
          AddLinearSpecs(specs, int4, ex + "up_proj", inter, hidden, TensorKind::kExpertLinear, li, source, sparse, fp8);
          AddLinearSpecs(specs, int4, ex + "down_proj", hidden, inter, TensorKind::kExpertLinear, li, source, sparse, fp8);
        }
      } else if (mxfp4) {
        // MXFP4 blocks run along the input dimension: H for gate_up, I for down.
        if (hidden % kMxfp4BlockSize != 0) {
          Fail(source, ": hidden_size ", hidden, " is not a multiple of the MXFP4 block size 32");
        }
        if (inter % kMxfp4BlockSize != 0) {
          Fail(source, ": intermediate_size ", inter, " is not a multiple of the MXFP4 block size 32");
        }
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
      if (plan.shared_intermediate > 0) {
        linear("mlp.shared_experts.gate_proj", plan.shared_intermediate, hidden, false);
        linear("mlp.shared_experts.up_proj", plan.shared_intermediate, hidden, false);
        linear("mlp.shared_experts.down_proj", hidden, plan.shared_intermediate, false);
      }
    }
    add(p + "post_attention_layernorm.weight", kBF16, {hidden}, TensorKind::kNorm, li);
    if (arch.sandwich_norms) {
      add(p + "pre_feedforward_layernorm.weight", kBF16, {hidden}, TensorKind::kNorm, li);
      add(p + "post_feedforward_layernorm.weight", kBF16, {hidden}, TensorKind::kNorm, li);
    }
  }
  add("model.norm.weight", kBF16, {hidden}, TensorKind::kNorm, -1);
  if (!config.tie_word_embeddings) {
    AddLinearSpecs(specs, int4, "lm_head", vocab, hidden, TensorKind::kLmHead, -1, source, sparse);
  }
  return specs;
}

std::vector<TensorSpec> CheckpointOrder(const ModelConfig& config, std::vector<TensorSpec> specs) {
  if (!ArchitectureOf(config).checkpoint_layer_order) return specs;
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
    case TensorKind::kInt4Codes:
    case TensorKind::kInt4Zeros:
      return stored == DType::kI32 || stored == DType::kU32;  // packed words, read as bits
    case TensorKind::kInt4Scales:
      return stored == DType::kF16 || stored == DType::kBF16 || stored == DType::kF32;
    case TensorKind::kInt4Shape:
    case TensorKind::kNmShape:
      return stored == DType::kI64 || stored == DType::kI32;
    case TensorKind::kNmBitmask:
      return stored == DType::kU8 || stored == DType::kI8;
    case TensorKind::kFp8Scales:
      return stored == DType::kF32;
    case TensorKind::kRouterCorrectionBias:  // F32 in DeepSeek's checkpoints; any float reads exactly
      return stored == DType::kF32 || stored == DType::kBF16 || stored == DType::kF16;
    default:
      // Float tensors: matrices go through the linear-weight formats (linear.h), which hold BF16,
      // F16 and F32 as stored; vectors are widened to float32 at load. All three convert exactly.
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
    // GGUF block types (q8_0, q4_K, ...) hold matrices: the ggml linear format reads them.
    const bool matrix = spec.kind == TensorKind::kLinearWeight || spec.kind == TensorKind::kEmbedding ||
                        spec.kind == TensorKind::kRouterWeight || spec.kind == TensorKind::kExpertLinear ||
                        spec.kind == TensorKind::kLmHead;
    if (t.ggml_type >= 0 && !matrix) {
      problems.push_back({TensorProblem::Type::kDType, spec.name,
                          StrCat("ggml type ", FindGgmlType(static_cast<uint32_t>(t.ggml_type))->name,
                                 ", expected a float type (only matrices may be block-quantized)")});
    } else if (t.ggml_type < 0 && !DTypeFits(spec, t.dtype)) {
      const bool any_float = spec.dtype == DType::kBF16 || spec.kind == TensorKind::kInt4Scales ||
                             spec.kind == TensorKind::kRouterCorrectionBias;
      const std::string expected = any_float ? std::string("BF16, F16 or F32") : std::string(DTypeName(spec.dtype));
      problems.push_back({TensorProblem::Type::kDType, spec.name,
                          StrCat("dtype ", DTypeName(t.dtype), ", expected ", expected)});
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

bool IgnoredCheckpointTensor(const ModelConfig& config, const std::string& name) {
  const nlohmann::json* mtp = config.raw.is_object() && config.raw.contains("num_nextn_predict_layers")
                                  ? &config.raw.at("num_nextn_predict_layers")
                                  : nullptr;
  if (mtp == nullptr || !mtp->is_number_integer() || mtp->get<int64_t>() <= 0) return false;
  const std::string prefix = "model.layers.";
  if (name.rfind(prefix, 0) != 0) return false;
  const size_t dot = name.find('.', prefix.size());
  if (dot == std::string::npos) return false;
  const std::string index = name.substr(prefix.size(), dot - prefix.size());
  if (index.empty() || index.find_first_not_of("0123456789") != std::string::npos || index.size() > 9) return false;
  const int64_t layer = std::stoll(index);
  return layer >= config.num_hidden_layers && layer < config.num_hidden_layers + mtp->get<int64_t>();
}

void RequireTensorsForCounts(const ModelConfig& config, const WeightStore& store, const std::string& source) {
  const Architecture& arch = ArchitectureOf(config, source);
  // The embedding, every layer's input_layernorm, and each expert's tensors of a MoE layer when
  // experts are stored one by one (at least one tensor each). No list is built: the loop only
  // counts, and stops as soon as the count passes what is stored.
  const uint64_t stored = store.num_tensors();
  uint64_t needed = 1;
  for (int64_t l = 0; l < config.num_hidden_layers && needed <= stored; ++l) {
    needed += 1;
    if (arch.experts == ExpertLayout::kPerExpert && config.num_local_experts > 0 && PlanLayer(arch, config, l).moe) {
      needed += static_cast<uint64_t>(config.num_local_experts);
    }
  }
  if (needed > stored) {
    Fail(source, ": num_hidden_layers ", config.num_hidden_layers,
         config.num_local_experts > 0 ? StrCat(" with ", config.num_local_experts, " experts") : std::string(),
         " needs more tensors than the ", stored, " of ", store.path(), " (the config does not describe these weights)");
  }
}

std::vector<TensorProblem> CheckTensors(const std::vector<TensorSpec>& specs, const WeightStore& store,
                                        const ModelConfig* config) {
  std::vector<TensorInfo> stored;
  stored.reserve(store.num_tensors());
  for (const std::string& name : store.names()) {
    if (config != nullptr && IgnoredCheckpointTensor(*config, name)) continue;
    stored.push_back(*store.Get(name).info);
    stored.back().name = name;  // the name the store reads it under (a multimodal checkpoint's unwrapped)
  }
  return CheckTensors(specs, stored);
}

void RequireNoProblems(const std::vector<TensorProblem>& problems, const std::string& source) {
  if (problems.empty()) return;
  std::string more;
  if (problems.size() > 1) more = StrCat(" (and ", problems.size() - 1, " more problems)");
  Fail(source, ": ", problems.front().ToString(), more);
}

}  // namespace tessera
