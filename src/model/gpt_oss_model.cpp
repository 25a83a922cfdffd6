#include "model/gpt_oss_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "core/dtype.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "io/model_dir.h"
#include "kernels/kernels.h"
#include "kernels/moe_ops.h"
#include "kernels/parallel_matmul.h"
#include "model/gpt_oss_weights.h"

namespace tessera {

// Pointers into the mapped checkpoint (matrices) and float32 copies (vectors) of one layer.
struct GptOssModel::Layer {
  bool sliding = false;
  std::vector<float> input_norm, post_norm;  // [H]
  const uint16_t* wq = nullptr;              // [Nq*D, H] bf16
  const uint16_t* wk = nullptr;              // [Nkv*D, H]
  const uint16_t* wv = nullptr;              // [Nkv*D, H]
  const uint16_t* wo = nullptr;              // [H, Nq*D]
  std::vector<float> bq, bk, bv, bo;
  std::vector<float> sinks;                  // [Nq]
  const uint16_t* router_w = nullptr;        // [E, H]
  std::vector<float> router_b;               // [E]
  const uint8_t* gate_up_codes = nullptr;    // [E, 2I, H/32, 16]
  const uint8_t* gate_up_scales = nullptr;   // [E, 2I, H/32]
  std::vector<float> gate_up_bias;           // [E, 2I], rows alternate gate, up
  const uint8_t* down_codes = nullptr;       // [E, H, I/32, 16]
  const uint8_t* down_scales = nullptr;      // [E, H, I/32]
  std::vector<float> down_bias;              // [E, H]
};

namespace {

std::vector<float> ToF32(const TensorView& t) {
  std::vector<float> out(t.numel());
  const size_t size = DTypeSize(t.dtype());
  for (size_t i = 0; i < out.size(); ++i) out[i] = ElementToF32(t.dtype(), t.data + i * size);
  return out;
}

const uint16_t* Bf16Matrix(const TensorView& t, const std::string& source) {
  if (t.dtype() != DType::kBF16) {
    Fail(source, ": tensor '", t.name(), "' is ", DTypeName(t.dtype()),
         "; tessera reads linear weights as BF16 (convert the checkpoint to BF16)");
  }
  // bf16 loads need 2-byte alignment; safetensors does not promise it (ecosystem.md §4).
  if (reinterpret_cast<uintptr_t>(t.data) % alignof(uint16_t) != 0) {
    Fail(source, ": tensor '", t.name(), "' is not 2-byte aligned in its file");
  }
  return reinterpret_cast<const uint16_t*>(t.data);
}

inline float LoadKv(const uint16_t* p, int64_t i) { return Bf16ToF32(p[i]); }
inline float LoadKv(const float* p, int64_t i) { return p[i]; }
inline void StoreKv(uint16_t* p, int64_t i, float v) { p[i] = F32ToBf16(v); }
inline void StoreKv(float* p, int64_t i, float v) { p[i] = v; }

}  // namespace

void RmsNorm(const float* x, const float* w, int64_t m, int64_t n, double eps, float* y) {
  for (int64_t r = 0; r < m; ++r) {
    const float* xr = x + r * n;
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(xr[i]) * xr[i];
    const float inv = static_cast<float>(1.0 / std::sqrt(sum / n + eps));
    float* yr = y + r * n;
    for (int64_t i = 0; i < n; ++i) yr[i] = w[i] * (xr[i] * inv);
  }
}

GptOssModel::~GptOssModel() = default;

std::unique_ptr<GptOssModel> GptOssModel::Load(const std::string& path) {
  std::unique_ptr<GptOssModel> model(new GptOssModel());
  const std::string dir = ResolveModelDir(path);
  model->path_ = dir;
  model->config_ = LoadModelConfig(dir);
  const std::string config_path = dir + "/config.json";
  ValidateModelConfig(model->config_, config_path);
  const ModelConfig& c = model->config_;
  if (GptOssExpertFormat(c, config_path) != ExpertFormat::kMxfp4) {
    Fail(config_path, ": unquantized (dense BF16) experts are not supported by this engine yet; "
         "use the MXFP4 checkpoint");
  }
  model->generation_config_ = LoadGenerationConfig(dir);
  model->store_ = WeightStore::Open(path);
  const WeightStore& store = model->store_;
  const std::vector<TensorSpec> specs = GptOssTensorSpecs(c, config_path);
  RequireNoProblems(CheckTensors(specs, store), dir);
  for (const TensorSpec& s : specs) {
    model->weight_bytes_ += store.Get(s.name).nbytes();
    model->parameters_ += s.parameters();
  }
  model->rope_ = Rope::FromConfig(c, config_path);

  model->embed_ = Bf16Matrix(store.Get("model.embed_tokens.weight"), dir);
  model->lm_head_ = Bf16Matrix(store.Get(c.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight"), dir);
  model->final_norm_ = ToF32(store.Get("model.norm.weight"));
  model->layers_.resize(c.num_hidden_layers);
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    Layer& L = model->layers_[l];
    const std::string p = StrCat("model.layers.", l, ".");
    auto get = [&](const char* name) { return store.Get(p + name); };
    L.sliding = c.layer_types[l] == LayerType::kSlidingAttention;
    L.input_norm = ToF32(get("input_layernorm.weight"));
    L.post_norm = ToF32(get("post_attention_layernorm.weight"));
    L.wq = Bf16Matrix(get("self_attn.q_proj.weight"), dir);
    L.wk = Bf16Matrix(get("self_attn.k_proj.weight"), dir);
    L.wv = Bf16Matrix(get("self_attn.v_proj.weight"), dir);
    L.wo = Bf16Matrix(get("self_attn.o_proj.weight"), dir);
    if (c.attention_bias) {
      L.bq = ToF32(get("self_attn.q_proj.bias"));
      L.bk = ToF32(get("self_attn.k_proj.bias"));
      L.bv = ToF32(get("self_attn.v_proj.bias"));
      L.bo = ToF32(get("self_attn.o_proj.bias"));
    }
    L.sinks = ToF32(get("self_attn.sinks"));
    L.router_w = Bf16Matrix(get("mlp.router.weight"), dir);
    L.router_b = ToF32(get("mlp.router.bias"));
    L.gate_up_codes = get("mlp.experts.gate_up_proj_blocks").data;
    L.gate_up_scales = get("mlp.experts.gate_up_proj_scales").data;
    L.gate_up_bias = ToF32(get("mlp.experts.gate_up_proj_bias"));
    L.down_codes = get("mlp.experts.down_proj_blocks").data;
    L.down_scales = get("mlp.experts.down_proj_scales").data;
    L.down_bias = ToF32(get("mlp.experts.down_proj_bias"));
  }
  return model;
}

void GptOssModel::Attention(int layer, const float* h, int64_t T, int64_t start, KvCache& cache,
                            const std::vector<float>& rope_cs, float* out) const {
  const ModelConfig& c = config_;
  const Layer& L = layers_[layer];
  const int64_t H = c.hidden_size, D = c.head_dim, Nq = c.num_attention_heads, Nkv = c.num_key_value_heads;
  const int64_t group = Nq / Nkv;
  std::vector<float> q(T * Nq * D), k(T * Nkv * D), v(T * Nkv * D);
  MatmulBf16(h, T, H, L.wq, Nq * D, L.bq.empty() ? nullptr : L.bq.data(), q.data());
  MatmulBf16(h, T, H, L.wk, Nkv * D, L.bk.empty() ? nullptr : L.bk.data(), k.data());
  MatmulBf16(h, T, H, L.wv, Nkv * D, L.bv.empty() ? nullptr : L.bv.data(), v.data());
  const int64_t cs_stride = 2 * rope_.half();
  rope_.Apply(q.data(), T, Nq, Nq * D, D, rope_cs.data(), cs_stride);
  rope_.Apply(k.data(), T, Nkv, Nkv * D, D, rope_cs.data(), cs_stride);

  auto run = [&](auto elem_tag) {
    using Elem = decltype(elem_tag);
    const int64_t row = Nkv * D;
    // The batch's keys and values in the cache's element type, so a position reads the same
    // values whether it came from this call or from the cache (batch-size invariance).
    std::vector<Elem> kb(T * row), vb(T * row);
    for (int64_t i = 0; i < T * row; ++i) {
      StoreKv(kb.data(), i, k[i]);
      StoreKv(vb.data(), i, v[i]);
    }
    auto key_row = [&](int64_t pos) -> const Elem* {
      return pos >= start ? &kb[(pos - start) * row] : reinterpret_cast<const Elem*>(cache.KeyRow(layer, pos));
    };
    auto value_row = [&](int64_t pos) -> const Elem* {
      return pos >= start ? &vb[(pos - start) * row] : reinterpret_cast<const Elem*>(cache.ValueRow(layer, pos));
    };
    const int64_t window = L.sliding ? c.sliding_window.value_or(start + T) : start + T;
    const float scale = rope_.attention_scale();
    ThreadPool& pool = GlobalPool();
    std::vector<std::vector<float>> scratch(pool.num_threads());
    pool.Run(static_cast<size_t>(T * Nq), [&](size_t task, int thread) {
      const int64_t t = static_cast<int64_t>(task) / Nq, hd = static_cast<int64_t>(task) % Nq;
      const int64_t pos = start + t, kvh = hd / group;
      // Sliding layers see the `window` positions ending at the query itself (HF:
      // kv_idx > q_idx - sliding_window); full layers see every earlier position.
      const int64_t first = std::max<int64_t>(0, pos - window + 1);
      const int64_t n = pos - first + 1;
      std::vector<float>& scores = scratch[thread];
      scores.resize(n);
      const float* qv = &q[(t * Nq + hd) * D];
      float max_score = L.sinks[hd];
      for (int64_t j = 0; j < n; ++j) {
        const Elem* kr = key_row(first + j) + kvh * D;
        float dot = 0.0f;
        for (int64_t d = 0; d < D; ++d) dot += qv[d] * LoadKv(kr, d);
        scores[j] = dot * scale;
        max_score = std::max(max_score, scores[j]);
      }
      // The sink is one more logit in the softmax with no value vector (gpt-oss.md §3.4.6).
      float denom = std::exp(L.sinks[hd] - max_score);
      for (int64_t j = 0; j < n; ++j) {
        scores[j] = std::exp(scores[j] - max_score);
        denom += scores[j];
      }
      float* o = out + (t * Nq + hd) * D;
      std::fill(o, o + D, 0.0f);
      for (int64_t j = 0; j < n; ++j) {
        const float p = scores[j] / denom;
        const Elem* vr = value_row(first + j) + kvh * D;
        for (int64_t d = 0; d < D; ++d) o[d] += p * LoadKv(vr, d);
      }
    });
    // Keep what the next calls need: every position for full layers, the newest `capacity`
    // for a sliding ring (older ones would be overwritten by later ones in this batch anyway).
    const int64_t first_kept = std::max<int64_t>(start, start + T - cache.capacity(layer));
    for (int64_t pos = first_kept; pos < start + T; ++pos) {
      std::memcpy(cache.KeyRow(layer, pos), &kb[(pos - start) * row], row * sizeof(Elem));
      std::memcpy(cache.ValueRow(layer, pos), &vb[(pos - start) * row], row * sizeof(Elem));
    }
  };
  if (cache.type() == KvType::kBF16) {
    run(uint16_t{});
  } else {
    run(float{});
  }
}

void GptOssModel::Moe(int layer, const float* h, int64_t T, float* out) const {
  const ModelConfig& c = config_;
  const Layer& L = layers_[layer];
  const int64_t H = c.hidden_size, I = c.intermediate_size, E = c.num_local_experts, K = c.num_experts_per_tok;
  const float limit = static_cast<float>(c.swiglu_limit);
  constexpr float kAlpha = 1.702f;

  // Router: top-k of the biased logits (descending, lower id first on ties as torch.topk on
  // CPU), then softmax over those k only (gpt-oss.md §3.5.1).
  std::vector<float> router(T * E);
  MatmulBf16(h, T, H, L.router_w, E, L.router_b.data(), router.data());
  std::vector<int32_t> chosen(T * K);
  std::vector<float> weight(T * K);
  std::vector<int32_t> order(E);
  for (int64_t t = 0; t < T; ++t) {
    const float* r = &router[t * E];
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + K, order.end(),
                      [&](int32_t a, int32_t b) { return r[a] > r[b] || (r[a] == r[b] && a < b); });
    const float top = r[order[0]];
    float sum = 0.0f;
    for (int64_t j = 0; j < K; ++j) {
      chosen[t * K + j] = order[j];
      weight[t * K + j] = std::exp(r[order[j]] - top);
      sum += weight[t * K + j];
    }
    for (int64_t j = 0; j < K; ++j) weight[t * K + j] /= sum;
  }

  // Group the T*K (token, slot) pairs by expert so each expert's weights are streamed once for
  // all its tokens; results land in per-slot rows and are combined in slot order below.
  std::vector<std::vector<int64_t>> slots_of(E);
  for (int64_t s = 0; s < T * K; ++s) slots_of[chosen[s]].push_back(s);
  std::vector<float> slot_out(T * K * H);
  const int64_t gu_row_bytes = H / 2, gu_scale_row = H / 32, dn_row_bytes = I / 2, dn_scale_row = I / 32;
  std::vector<float> x, gu, act, y;
  for (int64_t e = 0; e < E; ++e) {
    const auto& slots = slots_of[e];
    const int64_t m = static_cast<int64_t>(slots.size());
    if (m == 0) continue;
    x.resize(m * H);
    for (int64_t i = 0; i < m; ++i) std::memcpy(&x[i * H], h + (slots[i] / K) * H, H * sizeof(float));
    gu.resize(m * 2 * I);
    MatmulMxfp4(x.data(), m, H, L.gate_up_codes + e * 2 * I * gu_row_bytes, L.gate_up_scales + e * 2 * I * gu_scale_row,
                2 * I, &L.gate_up_bias[e * 2 * I], gu.data());
    // swigluoai: gate clamped above only, up clamped to [-limit, limit], (up + 1) (§3.5.2).
    act.resize(m * I);
    for (int64_t i = 0; i < m * I; ++i) {
      const float g = std::min(gu[2 * i], limit);
      const float u = std::clamp(gu[2 * i + 1], -limit, limit);
      const float glu = g * (1.0f / (1.0f + std::exp(-g * kAlpha)));
      act[i] = (u + 1.0f) * glu;
    }
    y.resize(m * H);
    MatmulMxfp4(act.data(), m, I, L.down_codes + e * H * dn_row_bytes, L.down_scales + e * H * dn_scale_row, H,
                &L.down_bias[e * H], y.data());
    for (int64_t i = 0; i < m; ++i) std::memcpy(&slot_out[slots[i] * H], &y[i * H], H * sizeof(float));
  }
  // Combine: out[t] = sum_j weight[t, j] * slot_out[t K + j], summed in slot order j = 0..K-1
  // (kernels.h gather_reduce: the same bits for every T and thread split, which batch invariance
  // needs). slot_out is already in token order, so the gather index is the identity.
  std::vector<int32_t> slot_index(T * K);
  std::iota(slot_index.begin(), slot_index.end(), 0);
  GatherReduce(slot_out.data(), T * K, H, slot_index.data(), weight.data(), T, K, H, out, H);
}

void GptOssModel::Forward(std::span<const int32_t> tokens, int64_t start, KvCache& cache, LogitsMode mode,
                          std::vector<float>& logits) const {
  const ModelConfig& c = config_;
  const int64_t T = static_cast<int64_t>(tokens.size());
  if (start < 0 || start > cache.length()) {
    Fail("forward at position ", start, " but the KV cache holds ", cache.length(), " positions");
  }
  if (start + T > cache.context()) {
    Fail("sequence of ", start + T, " tokens exceeds the context size ", cache.context(),
         " (raise it with -c, up to max_position_embeddings ", c.max_position_embeddings, ")");
  }
  for (int32_t id : tokens) {
    if (id < 0 || id >= c.vocab_size) Fail("token id ", id, " is outside the vocabulary [0, ", c.vocab_size, ")");
  }
  if (start < cache.length()) cache.Truncate(start);
  if (T == 0) {
    logits.clear();
    return;
  }
  const int64_t H = c.hidden_size, D = c.head_dim, Nq = c.num_attention_heads;
  const KernelTable& kt = ActiveKernels();

  std::vector<float> x(T * H), h(T * H), attn(T * Nq * D), delta(T * H);
  for (int64_t t = 0; t < T; ++t) kt.convert_bf16_f32(embed_ + static_cast<int64_t>(tokens[t]) * H, &x[t * H], H);
  // cos/sin rows [T, 2 * half] for positions [start, start + T), shared by every layer.
  std::vector<float> rope_cs(T * 2 * rope_.half());
  rope_.CosSin(rope_.Frequencies(start + T), start, T, rope_cs.data(), 2 * rope_.half());

  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const Layer& L = layers_[l];
    RmsNorm(x.data(), L.input_norm.data(), T, H, c.rms_norm_eps, h.data());
    Attention(static_cast<int>(l), h.data(), T, start, cache, rope_cs, attn.data());
    MatmulBf16(attn.data(), T, Nq * D, L.wo, H, L.bo.empty() ? nullptr : L.bo.data(), delta.data());
    for (int64_t i = 0; i < T * H; ++i) x[i] += delta[i];
    RmsNorm(x.data(), L.post_norm.data(), T, H, c.rms_norm_eps, h.data());
    Moe(static_cast<int>(l), h.data(), T, delta.data());
    for (int64_t i = 0; i < T * H; ++i) x[i] += delta[i];
  }
  cache.Extend(start + T);

  if (mode == LogitsMode::kNone) {
    logits.clear();
    return;
  }
  const int64_t rows = mode == LogitsMode::kAll ? T : 1;
  const float* last = &x[(T - rows) * H];
  RmsNorm(last, final_norm_.data(), rows, H, c.rms_norm_eps, h.data());
  logits.resize(rows * c.vocab_size);
  MatmulBf16(h.data(), rows, H, lm_head_, c.vocab_size, nullptr, logits.data());
}

}  // namespace tessera
