// Model::Load: the config, the architecture row, the tensor check, this rank's shard, and every
// matrix as a LinearWeights (model/linear.h) in the format ChooseLinearFormat picks.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "core/dtype.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "core/thread_pool.h"
#include "io/gguf.h"
#include "io/model_dir.h"
#include "kernels/mxfp4.h"
#include "kernels/nm_linear.h"
#include "model/model.h"
#include "model/quant_scheme.h"
#include "model/tensor_specs.h"

namespace tessera {
namespace {

std::vector<float> ToF32(const TensorView& t) {
  std::vector<float> out(t.numel());
  const size_t size = DTypeSize(t.dtype());
  for (size_t i = 0; i < out.size(); ++i) out[i] = ElementToF32(t.dtype(), t.data + i * size);
  return out;
}

// An RMSNorm weight as the layers use it: (offset + w) in float32 (Gemma's 1 + w; 0 elsewhere).
std::vector<float> NormWeight(const TensorView& t, float offset) {
  std::vector<float> w = ToF32(t);
  if (offset != 0.0f) {
    for (float& x : w) x += offset;
  }
  return w;
}

std::vector<float> Slice(const std::vector<float>& v, int64_t begin, int64_t count) {
  return std::vector<float>(v.begin() + begin, v.begin() + begin + count);
}

// Entries [begin, begin + count) of a gate and an up bias, interleaved gate_0, up_0, gate_1, ...:
// the gated MLP's gate_up layout (layers.h).
std::vector<float> Interleave(const std::vector<float>& gate, const std::vector<float>& up, int64_t begin,
                              int64_t count) {
  std::vector<float> out;
  out.reserve(static_cast<size_t>(2 * count));
  for (int64_t i = begin; i < begin + count; ++i) {
    out.push_back(gate[i]);
    out.push_back(up[i]);
  }
  return out;
}

}  // namespace

Model::~Model() = default;

std::unique_ptr<Model> Model::Load(const std::string& path, const ModelOptions& options) {
  std::unique_ptr<Model> model(new Model());
  const std::string dir = ResolveModelDir(path);
  model->path_ = dir;
  model->config_ = LoadModelConfig(dir);
  // A GGUF file is its own config (io/gguf_config.h).
  const std::string config_path = IsGgufPath(dir) ? dir : dir + "/config.json";
  ValidateModelConfig(model->config_, config_path);
  const ModelConfig& c = model->config_;
  model->arch_ = &ArchitectureOf(c, config_path);
  model->int4_ = Int4SchemeOf(c, config_path);
  model->sparse_ = SparseSchemeOf(c, config_path);
  model->fp8_ = Fp8SchemeOf(c);
  if (const std::string blocker = LoadBlocker(c, config_path); !blocker.empty()) Fail(blocker);
  model->generation_config_ = LoadGenerationConfig(dir);
  model->store_ = WeightStore::Open(path);
  if (!model->store_.set_aside().empty()) {
    model->load_note_ = StrCat(dir, " is a ", c.multimodal_type.empty() ? "multimodal" : c.multimodal_type,
                               " checkpoint: its language model runs; the other ", model->store_.set_aside().size(),
                               " tensors (vision / audio towers, projector: ", model->store_.set_aside().front(),
                               ", ...) are out of scope for a text engine");
  }
  RequireTensorsForCounts(c, model->store_, config_path);  // before the specs are listed
  const std::vector<TensorSpec> specs = ModelTensorSpecs(c, config_path);
  RequireNoProblems(CheckTensors(specs, model->store_, &c), dir);
  for (const TensorSpec& s : specs) {
    model->weight_bytes_ += model->store_.Get(s.name).nbytes();
    model->parameters_ += s.parameters();
  }
  model->rope_ = Rope::FromConfig(c, config_path);
  if (c.rope_local_base_freq > 0) {
    ModelConfig local = c;
    local.rope_theta = c.rope_local_base_freq;
    local.rope_scaling.reset();
    model->local_rope_ = Rope::FromConfig(local, config_path);
    model->local_rope_used_ = true;
  }
  if (model->arch_->embed_scale) model->embed_scale_ = static_cast<float>(std::sqrt(static_cast<double>(c.hidden_size)));

  model->options_ = options;
  if (options.dense == DenseWeights::kInt8 && options.precision != Precision::kFast) {
    Fail("int8 dense weights need the fast precision (int8 activations); the exact path reads the weights as stored");
  }
  if (options.exact_layers < 0 || options.exact_layers > c.num_hidden_layers) {
    Fail(config_path, ": exact layers ", options.exact_layers, " must lie in [0, ", c.num_hidden_layers,
         "] (the model's layers)");
  }
  // This rank's shard (model/tensor_parallel.h), checked before anything is read.
  const int64_t Nq = c.num_attention_heads, Nkv = c.num_key_value_heads, E = c.num_local_experts;
  const int64_t P = options.tp ? options.tp->size() : 1, r = options.tp ? options.tp->rank() : 0;
  const bool has_moe = model->arch_->mlp != MlpKind::kGated && E > 0;
  if (P > 1) {
    if (Nq % P != 0) Fail(config_path, ": tensor parallel degree ", P, " does not divide the ", Nq, " attention heads");
    if (Nkv % P != 0 && P % Nkv != 0) {
      Fail(config_path, ": tensor parallel degree ", P, " and the ", Nkv,
           " key/value heads: one must divide the other (heads are split, or shared heads replicated)");
    }
    if (has_moe && options.tp_experts == TpExperts::kExpert && E % P != 0) {
      Fail(config_path, ": tensor parallel degree ", P, " does not divide the ", E,
           " experts (expert-parallel experts; the default tensor-parallel experts do not need it)");
    }
  }
  if (model->arch_->attention == AttentionKind::kMla) {
    model->mla_ = MlaDimsOf(c, config_path);
  }
  model->tp_rank_ = static_cast<int>(r);
  model->tp_size_ = static_cast<int>(P);
  model->nq_ = Nq / P;
  model->nkv_ = Nkv % P == 0 ? Nkv / P : 1;
  const bool tensor_experts = P > 1 && options.tp_experts == TpExperts::kTensor;
  model->ne_ = has_moe ? (tensor_experts || P == 1 ? E : E / P) : 0;
  model->e0_ = has_moe && !tensor_experts ? r * model->ne_ : 0;
  const int64_t V = c.vocab_size;
  model->nv_ = P > 1 && V % P == 0 ? V / P : V;
  model->cache_config_ = c;
  model->cache_config_.num_attention_heads = model->nq_;
  model->cache_config_.num_key_value_heads = model->nkv_;
  model->LoadWeights();
  return model;
}

void Model::LoadWeights() {
  const ModelConfig& c = config_;
  const Architecture& arch = *arch_;
  const WeightStore& store = store_;
  const int64_t D = c.head_dim, H = c.hidden_size, V = c.vocab_size, E = c.num_local_experts;
  const int64_t P = tp_size_, r = tp_rank_;
  const int64_t q0 = r * nq_;
  const int64_t kv0 = c.num_key_value_heads % P == 0 ? r * nkv_ : q0 / (c.num_attention_heads / c.num_key_value_heads);
  const bool fast = options_.precision == Precision::kFast;
  const bool int8 = options_.dense == DenseWeights::kInt8;
  const bool tensor_experts = P > 1 && options_.tp_experts == TpExperts::kTensor;
  // Units [i0, i0 + ni) of an intermediate dimension of I: whole 32-wide blocks where I allows
  // (MXFP4 and the q8 formats need them), split as evenly as the blocks allow (gpt-oss-20b at
  // P = 4: 23/22/23/22 of 90 blocks; a rank may get none on tiny models).
  // int4 down projections (split along their input, I) need whole quantization groups too.
  const int64_t unit_block = int4_ && int4_->group_size > 0 ? std::lcm<int64_t>(kMxfp4BlockSize, int4_->group_size)
                                                             : kMxfp4BlockSize;
  auto units = [&](int64_t I, bool split) -> std::pair<int64_t, int64_t> {
    if (!split) return {0, I};
    const int64_t block = I % unit_block == 0 ? unit_block : I % kMxfp4BlockSize == 0 ? kMxfp4BlockSize : 1;
    const int64_t blocks = I / block;
    const int64_t begin = blocks * r / P * block;
    return {begin, blocks * (r + 1) / P * block - begin};
  };
  auto view = [&](const std::string& name) { return store.Get(name); };
  auto load = [&](const LinearSource& source, const LinearPolicy& policy, bool borrow = false) {
    return LoadLinear(source, ChooseLinearFormat(source, policy), path_, borrow);
  };
  // Rows [row0, row0 + rows) and columns [col0, col0 + cols) of linear module `module` (its
  // .weight, or its int4 tensors: quant_scheme.h).
  auto matrix = [&](const std::string& module, int64_t row0 = 0, int64_t rows = -1, int64_t col0 = 0,
                    int64_t cols = -1) { return ModuleSource(store, int4_, module, row0, rows, col0, cols, sparse_, fp8_); };
  // Matrices stored alike (one dtype, or all int4): the sources of one LinearWeights.
  auto same_kind = [&](const LinearSource& a, const LinearSource& b) {
    if (a.int4() != b.int4() || (!a.int4() && a.dtype != b.dtype) || a.ggml_type != b.ggml_type) {
      auto kind = [](const LinearSource& s) {
        if (s.int4()) return std::string("int4");
        if (s.ggml_type >= 0) return std::string(FindGgmlType(static_cast<uint32_t>(s.ggml_type))->name);
        return std::string(DTypeName(s.dtype));
      };
      Fail(path_, ": tensors '", a.name, "' and '", b.name, "' must be stored alike (", kind(a), " vs ", kind(b), ")");
    }
    if (!a.SameSparsity(b)) {
      Fail(path_, ": tensors '", a.name, "' and '", b.name, "' must follow the same N:M pattern and storage (",
           a.nm_group > 0 ? NmPatternName(a.nm_kept, a.nm_group) : std::string("dense"), " vs ",
           b.nm_group > 0 ? NmPatternName(b.nm_kept, b.nm_group) : std::string("dense"), ")");
    }
  };
  // Gate and up rows of units [i0, i0 + ni), interleaved, for `experts` modules named by `name_of`.
  auto gate_up = [&](int64_t experts, const std::function<std::string(int64_t, const char*)>& name_of, int64_t i0,
                     int64_t ni) {
    LinearSource s;
    for (int64_t e = 0; e < experts; ++e) {
      const LinearSource g = matrix(name_of(e, "gate_proj"), i0, ni), u = matrix(name_of(e, "up_proj"), i0, ni);
      same_kind(g, u);
      LinearSource both = LinearSource::Interleave(g, u);
      if (e == 0) {
        s = std::move(both);
        continue;
      }
      same_kind(s, both);
      s.Append(both);
    }
    return s;
  };

  const std::string embed_name = "model.embed_tokens.weight";
  const TensorView embed = view(embed_name);
  // The embedding table in memory of its own (huge pages where the kernel gives them), the mapped
  // pages released: decode reads one row per token, and a row of a mapping whose pages the page
  // cache has dropped (a checkpoint larger than the free memory) faults in from disk, milliseconds
  // per token (docs/BENCHMARKS.md, DeepSeek-V2-Lite). A tied lm_head reads this copy.
  embed_copy_ = ByteBuffer(embed.nbytes());
  constexpr size_t kCopyChunk = size_t{1} << 22;
  GlobalPool().ParallelFor((embed.nbytes() + kCopyChunk - 1) / kCopyChunk, 1, [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) {
      const size_t at = i * kCopyChunk, n = std::min<size_t>(kCopyChunk, embed.nbytes() - at);
      std::memcpy(embed_copy_.data() + at, embed.data + at, n);
    }
  });
  ReleaseMappedRange(embed.data, embed.nbytes());
  embed_ = embed_copy_.data();
  embed_dtype_ = embed.dtype();
  embed_ggml_type_ = embed.info->ggml_type;
  embed_row_bytes_ = embed.nbytes() / static_cast<size_t>(V);
  {
    // Vocabulary-parallel lm_head rows; tied, they are the embedding table's copy (borrowed).
    LinearSource s = c.tie_word_embeddings
                         ? LinearSource::View(TensorView{embed.info, embed_, embed.file}, r * nv_, nv_ == V ? -1 : nv_)
                         : matrix("lm_head", r * nv_, nv_ == V ? -1 : nv_);
    s.shared = c.tie_word_embeddings;
    lm_head_ = load(s, LinearPolicy{fast, int8, options_.sparse_kernels}, c.tie_word_embeddings);
  }
  const float offset = arch.norm_offset - static_cast<float>(c.stored_norm_offset);
  final_norm_ = NormWeight(view("model.norm.weight"), offset);
  layers_.resize(c.num_hidden_layers);
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    DecoderLayer& L = layers_[l];
    const LayerPlan plan = PlanLayer(arch, c, l);
    const std::string p = StrCat("model.layers.", l, ".");
    // The first exact_layers layers keep their weights as stored and run the exact kernels.
    const LinearPolicy policy = l >= options_.exact_layers ? LinearPolicy{fast, int8, options_.sparse_kernels}
                                                           : LinearPolicy{false, false, options_.sparse_kernels};
    L.input_norm = NormWeight(view(p + "input_layernorm.weight"), offset);
    if (arch.sandwich_norms) {
      L.attn_out_norm = NormWeight(view(p + "post_attention_layernorm.weight"), offset);
      L.post_norm = NormWeight(view(p + "pre_feedforward_layernorm.weight"), offset);
      L.ffn_out_norm = NormWeight(view(p + "post_feedforward_layernorm.weight"), offset);
    } else {
      L.post_norm = NormWeight(view(p + "post_attention_layernorm.weight"), offset);
    }

    AttentionWeights& A = L.attention;
    A.sliding = plan.sliding;
    A.rope = c.no_rope_layers.empty() || c.no_rope_layers[static_cast<size_t>(l)] != 0;
    if (arch.attention == AttentionKind::kMla) {
      LoadLatentAttention(p, policy, A);
    } else {
      if (arch.fused_qkv) {
        // Phi-3: rows q [Nq D] | k [Nkv D] | v [Nkv D] of one qkv_proj; this rank's rows of each.
        const std::string qkv = p + "self_attn.qkv_proj";
        const int64_t Nq = c.num_attention_heads, Nkv = c.num_key_value_heads;
        A.q = load(matrix(qkv, q0 * D, nq_ * D), policy);
        A.k = load(matrix(qkv, (Nq + kv0) * D, nkv_ * D), policy);
        A.v = load(matrix(qkv, (Nq + Nkv + kv0) * D, nkv_ * D), policy);
      } else {
        A.q = load(matrix(p + "self_attn.q_proj", q0 * D, nq_ * D), policy);
        A.k = load(matrix(p + "self_attn.k_proj", kv0 * D, nkv_ * D), policy);
        A.v = load(matrix(p + "self_attn.v_proj", kv0 * D, nkv_ * D), policy);
      }
      // o_proj is row-parallel: this rank's input columns [q0 D, (q0 + nq) D) of every row.
      A.o = load(matrix(p + "self_attn.o_proj", 0, -1, q0 * D, nq_ * D), policy);
      if (plan.qkv_bias) {
        A.bq = Slice(ToF32(view(p + "self_attn.q_proj.bias")), q0 * D, nq_ * D);
        A.bk = Slice(ToF32(view(p + "self_attn.k_proj.bias")), kv0 * D, nkv_ * D);
        A.bv = Slice(ToF32(view(p + "self_attn.v_proj.bias")), kv0 * D, nkv_ * D);
      }
      if (plan.o_bias) A.bo = ToF32(view(p + "self_attn.o_proj.bias"));
      if (plan.qk_norm) {
        A.q_norm = NormWeight(view(p + "self_attn.q_norm.weight"), offset);
        A.k_norm = NormWeight(view(p + "self_attn.k_norm.weight"), offset);
      }
      A.sinks = arch.sinks ? Slice(ToF32(view(p + "self_attn.sinks")), q0, nq_)
                           : std::vector<float>(nq_, -std::numeric_limits<float>::infinity());
    }

    L.moe = plan.moe;
    const int64_t I = plan.intermediate;
    GatedMlpWeights& mlp = plan.moe ? L.experts.mlp : L.mlp;
    mlp.activation = plan.moe ? arch.expert_activation : arch.mlp_activation;
    mlp.limit = static_cast<float>(c.swiglu_limit);
    if (!plan.moe) {
      // Dense MLP, tensor-parallel over intermediate units (gate/up rows, down's columns).
      const auto [i0, ni] = units(I, P > 1);
      auto name_of = [&](int64_t, const char* proj) { return StrCat(p, "mlp.", proj); };
      if (arch.fused_gate_up) {
        // Phi-3: rows gate [I] | up [I] of one gate_up_proj, interleaved as the layers read them.
        const LinearSource g = matrix(p + "mlp.gate_up_proj", i0, ni), u = matrix(p + "mlp.gate_up_proj", I + i0, ni);
        mlp.gate_up = load(LinearSource::Interleave(g, u), policy);
      } else {
        mlp.gate_up = load(gate_up(1, name_of, i0, ni), policy);
      }
      mlp.down = load(matrix(p + "mlp.down_proj", 0, -1, i0, ni), policy);
      if (plan.mlp_bias) {
        mlp.gate_up_bias = Interleave(ToF32(view(p + "mlp.gate_proj.bias")), ToF32(view(p + "mlp.up_proj.bias")), i0, ni);
        // The ranks' partial sums are added: the down bias counts once, on rank 0.
        if (r == 0) mlp.down_bias = ToF32(view(p + "mlp.down_proj.bias"));
      }
      continue;
    }
    MoeWeights& M = L.experts;
    M.router_kind = arch.router;
    M.norm_topk_prob = c.norm_topk_prob;
    M.experts = E;
    M.top_k = c.num_experts_per_tok;
    M.first_expert = e0_;
    const std::string router = p + std::string(arch.router_name);
    M.router = load(matrix(router), policy);
    if (arch.router_bias) M.router_bias = ToF32(view(router + ".bias"));
    if (arch.router_correction_bias) M.correction_bias = ToF32(view(router + ".e_score_correction_bias"));
    // DeepSeek's group-limited choice (deepseek.md §5); V2's "greedy" ignores n_group.
    M.groups = c.topk_method == "group_limited_greedy" || c.topk_method == "noaux_tc" ? c.n_group : 0;
    M.topk_groups = c.topk_group;
    M.routed_scale = static_cast<float>(c.routed_scaling_factor);
    if (plan.shared_intermediate > 0) {
      // Split over the ranks like a dense MLP (its units' gate/up rows, down's columns).
      const auto [s0, ns] = units(plan.shared_intermediate, P > 1);
      auto name_of = [&](int64_t, const char* proj) { return StrCat(p, "mlp.shared_experts.", proj); };
      M.shared.gate_up = load(gate_up(1, name_of, s0, ns), policy);
      M.shared.down = load(matrix(p + "mlp.shared_experts.down_proj", 0, -1, s0, ns), policy);
    }
    const auto [i0, ni] = units(I, tensor_experts);
    if (arch.experts == ExpertLayout::kPerExpert) {
      auto name_of = [&](int64_t e, const char* proj) { return StrCat(p, "mlp.experts.", e0_ + e, ".", proj); };
      mlp.gate_up = load(gate_up(ne_, name_of, i0, ni), policy);
      LinearSource down;
      for (int64_t e = 0; e < ne_; ++e) {
        LinearSource one = matrix(name_of(e, "down_proj"), 0, -1, i0, ni);
        if (e == 0) {
          down = std::move(one);
          continue;
        }
        same_kind(down, one);
        down.Append(one);
      }
      mlp.down = load(down, policy);
      continue;
    }
    // gpt-oss: MXFP4 [E, out, in/32, 16] blocks + [E, out, in/32] scales; rows of gate_up
    // alternate gate, up, so units [i0, i0 + ni) are rows [2 i0, 2 (i0 + ni)).
    const std::string e = p + "mlp.experts.";
    auto experts = [&](const std::string& name, int64_t n, int64_t k, int64_t row0, int64_t rows, int64_t col0,
                       int64_t cols) {
      const TensorView codes = view(name + "_blocks"), scales = view(name + "_scales");
      return LinearSource::Mxfp4Tensor(name + "_blocks", codes.data + e0_ * (n * k / 2),
                                       scales.data + e0_ * (n * k / kMxfp4BlockSize), ne_, n, k, row0, rows, col0, cols);
    };
    // The exact path reads whole experts in place from the mapping.
    mlp.gate_up = load(experts(e + "gate_up_proj", 2 * I, H, 2 * i0, 2 * ni, 0, H), policy, !policy.fast);
    mlp.down = load(experts(e + "down_proj", H, I, 0, H, i0, ni), policy, !policy.fast);
    const std::vector<float> gu_bias = ToF32(view(e + "gate_up_proj_bias"));
    for (int64_t x = e0_; x < e0_ + ne_; ++x) {
      mlp.gate_up_bias.insert(mlp.gate_up_bias.end(), gu_bias.begin() + x * 2 * I + 2 * i0,
                              gu_bias.begin() + x * 2 * I + 2 * (i0 + ni));
    }
    mlp.down_bias = Slice(ToF32(view(e + "down_proj_bias")), e0_ * H, ne_ * H);
    // The ranks' partial sums are added: the down bias counts once, on rank 0.
    if (tensor_experts && r != 0) std::fill(mlp.down_bias.begin(), mlp.down_bias.end(), 0.0f);
  }
  moe_layers_ = std::count_if(layers_.begin(), layers_.end(), [](const DecoderLayer& L) { return L.moe; });
}

void Model::LoadLatentAttention(const std::string& p, const LinearPolicy& policy, AttentionWeights& A) {
  const WeightStore& store = store_;
  const MlaDims& m = mla_;
  // Tensor parallelism: this rank's heads [q0, q0 + nq_) — their query rows, kv_b rows and o_proj
  // columns —; the latent projection (and so the latent cache) is every rank's.
  const int64_t q0 = tp_rank_ * nq_, qk = m.nope + m.rope, per_head = m.nope + m.value;
  auto load = [&](const std::string& module, int64_t row0 = 0, int64_t rows = -1, int64_t col0 = 0, int64_t cols = -1) {
    const LinearSource source = ModuleSource(store, int4_, module, row0, rows, col0, cols, sparse_, fp8_);
    return LoadLinear(source, ChooseLinearFormat(source, policy), path_);
  };
  if (m.q_lora > 0) {
    A.q_a = load(p + "self_attn.q_a_proj");
    A.q_a_norm = ToF32(store.Get(p + "self_attn.q_a_layernorm.weight"));
    A.q = load(p + "self_attn.q_b_proj", q0 * qk, nq_ * qk);
  } else {
    A.q = load(p + "self_attn.q_proj", q0 * qk, nq_ * qk);
  }
  A.kv_a = load(p + "self_attn.kv_a_proj_with_mqa");
  A.kv_a_norm = ToF32(store.Get(p + "self_attn.kv_a_layernorm.weight"));
  A.o = load(p + "self_attn.o_proj", 0, -1, q0 * m.value, nq_ * m.value);
  A.sinks.assign(static_cast<size_t>(nq_), -std::numeric_limits<float>::infinity());
  if (options_.mla == MlaForm::kNaive) {
    A.kv_b = load(p + "self_attn.kv_b_proj", q0 * per_head, nq_ * per_head);
    return;
  }
  // kv_b_proj [nq (P + Vd), C]: head h's key rows (W_UK_h [P, C]) then its value rows (W_UV_h
  // [Vd, C]). The query side needs W_UK_h^T [C, P]: a transposed copy in the stored dtype (exact).
  const std::string kv_b = p + "self_attn.kv_b_proj.weight";
  const TensorView stored = store.Get(kv_b);
  const size_t elem = DTypeSize(stored.dtype());
  const int64_t C = m.latent;
  std::vector<uint8_t> transposed(static_cast<size_t>(nq_ * C * m.nope) * elem);
  for (int64_t h = 0; h < nq_; ++h) {
    for (int64_t c = 0; c < C; ++c) {
      for (int64_t d = 0; d < m.nope; ++d) {
        std::memcpy(&transposed[((h * C + c) * m.nope + d) * elem],
                    stored.data + (((q0 + h) * per_head + d) * C + c) * elem, elem);
      }
    }
  }
  LinearSource keys = LinearSource::Tensor(kv_b + " (W_UK^T)", stored.dtype(), transposed.data(), nq_, C, m.nope);
  // FP8 kv_b (DeepSeek-V3): the transposed codes keep their weights' scales, block (b_r, b_c) of
  // the stored matrix becoming block (b_c, b_r). Row c of head h's W_UK^T holds stored rows
  // h (P + Vd) + d, d < P, whose scale changes at the stored row blocks' boundaries; those fall
  // on multiples of width = gcd(block_rows, P + Vd) from every head's first row, so the row takes
  // one scale per `width` columns (DeepSeek-V3: 128, a block per half head; a small model whose
  // blocks span several heads: fewer), from stored column block c / block_cols.
  const bool fp8 = stored.dtype() == DType::kF8E4M3;
  std::vector<float> key_scales;
  const TensorView scales = fp8 ? store.Get(p + "self_attn.kv_b_proj.weight_scale_inv") : TensorView{};
  if (fp8) {
    const int64_t block_rows = fp8_->block_rows, block_cols = fp8_->block_cols;
    const int64_t width = std::gcd(block_rows, per_head);
    const int64_t per_row = (m.nope + width - 1) / width, scale_cols = scales.shape()[1];
    key_scales.resize(static_cast<size_t>(nq_ * C * per_row));
    for (int64_t h = 0; h < nq_; ++h) {
      for (int64_t c = 0; c < C; ++c) {
        for (int64_t b = 0; b < per_row; ++b) {
          const int64_t stored_block_row = ((q0 + h) * per_head + b * width) / block_rows;
          float s;
          std::memcpy(&s, scales.data + (stored_block_row * scale_cols + c / block_cols) * sizeof(float), sizeof(float));
          key_scales[static_cast<size_t>((h * C + c) * per_row + b)] = s;
        }
      }
    }
    keys.fp8_block_cols = width;
    for (int64_t row = 0; row < nq_ * C; ++row) {
      keys.row_scales.push_back(reinterpret_cast<const uint8_t*>(&key_scales[static_cast<size_t>(row * per_row)]));
    }
  }
  A.absorb_k = LoadLinear(keys, ChooseLinearFormat(keys, policy), path_);
  LinearSource values;
  values.name = kv_b + " (W_UV)";
  values.dtype = stored.dtype();
  values.count = nq_;
  values.rows = m.value;
  values.cols = C;
  for (int64_t h = 0; h < nq_; ++h) {
    for (int64_t r = 0; r < m.value; ++r) {
      const int64_t row = (q0 + h) * per_head + m.nope + r;
      values.row_data.push_back(stored.data + (row * C) * elem);
      if (fp8) values.row_scales.push_back(scales.data + (row / fp8_->block_rows) * scales.shape()[1] * sizeof(float));
    }
  }
  if (fp8) values.fp8_block_cols = fp8_->block_cols;
  values.mapped = {{stored.data, stored.nbytes()}};
  A.absorb_v = LoadLinear(values, ChooseLinearFormat(values, policy), path_);
}

template <typename F>
void Model::ForEachMatrixOfAToken(const F& visit) const {
  const ModelConfig& c = config_;
  visit(*lm_head_, 1.0);
  for (const DecoderLayer& L : layers_) {
    const AttentionWeights& A = L.attention;
    for (const LinearWeights* w : {A.q_a.get(), A.q.get(), A.k.get(), A.v.get(), A.kv_a.get(), A.kv_b.get(), A.o.get()}) {
      if (w != nullptr) visit(*w, 1.0);
    }
    // MLA's per-head absorption matrices: every head's, every token.
    for (const LinearWeights* w : {A.absorb_k.get(), A.absorb_v.get()}) {
      if (w != nullptr) visit(*w, static_cast<double>(w->count()));
    }
    if (L.moe) {
      // Expert-parallel ranks read, on average, the K ne_ / E of a token's experts they hold.
      const double experts = static_cast<double>(c.num_experts_per_tok) * ne_ / c.num_local_experts;
      visit(*L.experts.router, 1.0);
      visit(*L.experts.mlp.gate_up, experts);
      visit(*L.experts.mlp.down, experts);
      if (L.experts.shared.gate_up) {
        visit(*L.experts.shared.gate_up, 1.0);
        visit(*L.experts.shared.down, 1.0);
      }
    } else {
      visit(*L.mlp.gate_up, 1.0);
      visit(*L.mlp.down, 1.0);
    }
  }
}

std::string Model::LinearFormatsInUse() const {
  std::vector<std::pair<double, LinearFormat>> bytes;
  double total = 0.0;
  ForEachMatrixOfAToken([&](const LinearWeights& w, double times) {
    const double b = times * w.BytesPerMatrix();
    total += b;
    for (auto& [sum, format] : bytes) {
      if (format == w.format()) {
        sum += b;
        return;
      }
    }
    bytes.emplace_back(b, w.format());
  });
  std::sort(bytes.begin(), bytes.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::string out;
  for (const auto& [sum, format] : bytes) {
    out += StrCat(out.empty() ? "" : ", ", LinearFormatName(format), " ",
                  static_cast<int>(std::lround(100.0 * sum / std::max(total, 1.0))), " %");
  }
  return out;
}

double Model::DecodeBytes(int64_t position, std::optional<KvType> kv) const {
  const ModelConfig& c = config_;
  double bytes = static_cast<double>(embed_row_bytes_);  // the embedding row
  ForEachMatrixOfAToken([&](const LinearWeights& w, double times) { bytes += times * w.BytesPerMatrix(); });
  if (!kv) return bytes;
  // One position's key and value rows in one layer of this rank's cache (KvCache's layout).
  const double kv_row = static_cast<double>(KvCache::BytesFor(cache_config_, 1, *kv, 0)) / c.num_hidden_layers;
  for (const DecoderLayer& L : layers_) {
    const int64_t window = L.attention.sliding ? c.sliding_window.value_or(position + 1) : position + 1;
    bytes += kv_row * static_cast<double>(std::min(position + 1, window));
  }
  return bytes;
}

double Model::MatmulFlopsPerToken() const {
  double total = 0.0;
  ForEachMatrixOfAToken(
      [&](const LinearWeights& w, double times) { total += times * 2.0 * static_cast<double>(w.rows() * w.cols()); });
  return total;
}

}  // namespace tessera
