#include "model/gpt_oss_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <type_traits>

#include "core/dtype.h"
#include "core/buffer.h"
#include "core/error.h"
#include "core/fail_point.h"
#include "core/mapped_file.h"
#include "core/thread_pool.h"
#include "io/model_dir.h"
#include "kernels/kernels.h"
#include "kernels/moe_ops.h"
#include "kernels/mxfp4.h"
#include "kernels/parallel_matmul.h"
#include "model/gpt_oss_weights.h"

namespace tessera {

// A dense weight W[n, k]: BF16, or (DenseWeights::kInt8) its int8 copy in the q8 layout made at
// load. The BF16 rows are copied out of the mapped checkpoint into our own huge-page buffer
// (OwnBf16Weights) and the mapped pages released: the page cache holds file pages as 4 KiB pages,
// and streaming the 2.4 GB of dense weights per token through them cost ~15 % of decode speed in
// TLB misses (docs/BENCHMARKS.md).
struct GptOssModel::DenseMatrix {
  const uint16_t* bf16 = nullptr;  // [n, k], into bf16_owned once owned
  ByteBuffer bf16_owned;
  ByteBuffer int8_values;          // kernels/q8.h int8 layout, empty unless quantized
  std::vector<float> int8_scales;  // [n padded to 16]
  int64_t n = 0, k = 0;
  bool is_int8() const { return int8_values.size() != 0; }
};

// MXFP4 expert weights of one projection for all E experts: the checkpoint's blocks/scales in
// place (exact path, and the fast path's exact layers), or the q8 layout (fast path), expert e's
// matrix at e * (bytes per expert).
struct ExpertMatrices {
  const uint8_t* codes = nullptr;   // exact: [E, n, k/32, 16]; fast: E x Q8Mxfp4CodeBytes(n, k)
  const uint8_t* scales = nullptr;  // exact: [E, n, k/32];     fast: E x Q8Mxfp4ScaleBytes(n, k)
  ByteBuffer q8_codes, q8_scales;   // owners of the fast layout
  ByteBuffer own_codes, own_scales; // owners of the exact layout when sliced (tensor-parallel experts)
  int64_t n = 0, k = 0;
  size_t code_stride() const { return q8_codes.size() ? Q8Mxfp4CodeBytes(n, k) : n * k / 2; }
  size_t scale_stride() const { return q8_codes.size() ? Q8Mxfp4ScaleBytes(n, k) : n * k / 32; }
};

// Pointers into the mapped checkpoint (matrices) and float32 copies (vectors) of one layer.
struct GptOssModel::Layer {
  bool sliding = false;
  std::vector<float> input_norm, post_norm;  // [H]
  DenseMatrix wq, wk, wv;                    // [Nq*D, H], [Nkv*D, H], [Nkv*D, H]
  DenseMatrix wo;                            // [H, nq*D] (this rank's columns)
  std::vector<float> bq, bk, bv, bo;
  std::vector<float> sinks;                  // [Nq]
  DenseMatrix router;                        // [E, H]
  std::vector<float> router_b;               // [E]
  ExpertMatrices gate_up;                    // [E] x [2I, H], rows alternate gate, up
  std::vector<float> gate_up_bias;           // [E, 2I]
  ExpertMatrices down;                       // [E] x [H, I]
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

// Replaces m (E checkpoint-layout MXFP4 matrices [n, k/32, 16] + scales [n, k/32] at m.codes /
// m.scales, in the mapping) by rows [r0, r0 + nr) and blocks [b0, b0 + nb) of each, copied into
// m.own_codes / m.own_scales; the mapped pages are released.
void SliceExperts(ExpertMatrices& m, int64_t E, int64_t r0, int64_t nr, int64_t b0, int64_t nb) {
  const int64_t kb = m.k / kMxfp4BlockSize;  // blocks per source row
  m.own_codes = ByteBuffer(E * nr * nb * kMxfp4BlockBytes);
  m.own_scales = ByteBuffer(E * nr * nb);
  for (int64_t e = 0; e < E; ++e) {
    for (int64_t row = 0; row < nr; ++row) {
      const int64_t src = (e * m.n + r0 + row) * kb + b0, dst = (e * nr + row) * nb;
      std::memcpy(m.own_codes.data() + dst * kMxfp4BlockBytes, m.codes + src * kMxfp4BlockBytes,
                  nb * kMxfp4BlockBytes);
      std::memcpy(m.own_scales.data() + dst, m.scales + src, nb);
    }
  }
  ReleaseMappedRange(m.codes, E * m.n * kb * kMxfp4BlockBytes);
  ReleaseMappedRange(m.scales, E * m.n * kb);
  m.codes = m.own_codes.data();
  m.scales = m.own_scales.data();
  m.n = nr;
  m.k = nb * kMxfp4BlockSize;
}

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

std::unique_ptr<GptOssModel> GptOssModel::Load(const std::string& path, const ModelOptions& options) {
  std::unique_ptr<GptOssModel> model(new GptOssModel());
  const std::string dir = ResolveModelDir(path);
  model->path_ = dir;
  model->config_ = LoadModelConfig(dir);
  const std::string config_path = dir + "/config.json";
  ValidateModelConfig(model->config_, config_path);
  const ModelConfig& c = model->config_;
  if (const std::string blocker = GptOssLoadBlocker(c, config_path); !blocker.empty()) Fail(blocker);
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

  model->options_ = options;
  if (options.dense == DenseWeights::kInt8 && options.precision != Precision::kFast) {
    Fail("int8 dense weights need the fast precision (int8 activations); the exact path reads BF16");
  }
  if (options.exact_layers < 0 || options.exact_layers > c.num_hidden_layers) {
    Fail(config_path, ": exact layers ", options.exact_layers, " must lie in [0, ", c.num_hidden_layers,
         "] (the model's layers)");
  }
  // This rank's shard (model/tensor_parallel.h), checked before anything is read.
  const int64_t Nq = c.num_attention_heads, Nkv = c.num_key_value_heads, E = c.num_local_experts;
  const int64_t D = c.head_dim, H = c.hidden_size, V = c.vocab_size;
  const int64_t P = options.tp ? options.tp->size() : 1, r = options.tp ? options.tp->rank() : 0;
  if (P > 1) {
    if (Nq % P != 0) Fail(config_path, ": tensor parallel degree ", P, " does not divide the ", Nq, " attention heads");
    if (Nkv % P != 0 && P % Nkv != 0) {
      Fail(config_path, ": tensor parallel degree ", P, " and the ", Nkv,
           " key/value heads: one must divide the other (heads are split, or shared heads replicated)");
    }
    if (options.tp_experts == TpExperts::kExpert && E % P != 0) {
      Fail(config_path, ": tensor parallel degree ", P, " does not divide the ", E,
           " experts (expert-parallel experts; the default tensor-parallel experts do not need it)");
    }
  }
  model->tp_rank_ = static_cast<int>(r);
  model->tp_size_ = static_cast<int>(P);
  model->nq_ = Nq / P;
  const int64_t q0 = r * model->nq_;
  model->nkv_ = Nkv % P == 0 ? Nkv / P : 1;
  const int64_t kv0 = Nkv % P == 0 ? r * model->nkv_ : q0 / (Nq / Nkv);
  // Experts: whole experts per rank, or every expert's intermediate units [i0, i0 + ni) in whole
  // MXFP4 blocks (the down projection's contracting blocks), split as evenly as the blocks allow
  // (gpt-oss-20b at P = 4: 23/22/23/22 of 90; a rank may get none on tiny models).
  const bool tensor_experts = P > 1 && options.tp_experts == TpExperts::kTensor;
  model->ne_ = tensor_experts ? E : E / P;
  model->e0_ = tensor_experts ? 0 : r * model->ne_;
  const int64_t I = c.intermediate_size, IB = I / kMxfp4BlockSize;
  const int64_t i0 = tensor_experts ? IB * r / P * kMxfp4BlockSize : 0;
  const int64_t ni = tensor_experts ? IB * (r + 1) / P * kMxfp4BlockSize - i0 : I;
  const bool vocab_parallel = P > 1 && V % P == 0;
  model->nv_ = vocab_parallel ? V / P : V;
  model->cache_config_ = c;
  model->cache_config_.num_attention_heads = model->nq_;
  model->cache_config_.num_key_value_heads = model->nkv_;

  // Rows [row0, row0 + rows) of a BF16 matrix.
  auto dense = [&](const TensorView& t, int64_t row0 = 0, int64_t rows = -1) {
    DenseMatrix m;
    m.k = t.shape()[1];
    m.n = rows < 0 ? t.shape()[0] : rows;
    m.bf16 = Bf16Matrix(t, dir) + row0 * m.k;
    return m;
  };
  auto slice = [](std::vector<float> v, int64_t begin, int64_t count) {
    return std::vector<float>(v.begin() + begin, v.begin() + begin + count);
  };
  model->embed_ = Bf16Matrix(store.Get("model.embed_tokens.weight"), dir);
  model->lm_head_ = std::make_unique<DenseMatrix>(
      dense(store.Get(c.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight"), r * model->nv_,
            vocab_parallel ? model->nv_ : -1));
  model->final_norm_ = ToF32(store.Get("model.norm.weight"));
  model->layers_.resize(c.num_hidden_layers);
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    Layer& L = model->layers_[l];
    const std::string p = StrCat("model.layers.", l, ".");
    auto get = [&](const char* name) { return store.Get(p + name); };
    L.sliding = c.layer_types[l] == LayerType::kSlidingAttention;
    L.input_norm = ToF32(get("input_layernorm.weight"));
    L.post_norm = ToF32(get("post_attention_layernorm.weight"));
    L.wq = dense(get("self_attn.q_proj.weight"), q0 * D, model->nq_ * D);
    L.wk = dense(get("self_attn.k_proj.weight"), kv0 * D, model->nkv_ * D);
    L.wv = dense(get("self_attn.v_proj.weight"), kv0 * D, model->nkv_ * D);
    L.wo = dense(get("self_attn.o_proj.weight"));
    if (P > 1) {
      // o_proj is row-parallel: this rank's input columns [q0 D, (q0 + nq) D) of every row,
      // copied so the kernels see a dense [H, nq D] matrix; the full rows are then released.
      const int64_t cols = model->nq_ * D, full = Nq * D;
      L.wo.bf16_owned = ByteBuffer(H * cols * sizeof(uint16_t));
      uint16_t* dst = L.wo.bf16_owned.as<uint16_t>();
      for (int64_t row = 0; row < H; ++row) {
        std::memcpy(dst + row * cols, L.wo.bf16 + row * full + q0 * D, cols * sizeof(uint16_t));
      }
      ReleaseMappedRange(L.wo.bf16, H * full * sizeof(uint16_t));
      L.wo.bf16 = dst;
      L.wo.k = cols;
    }
    if (c.attention_bias) {
      L.bq = slice(ToF32(get("self_attn.q_proj.bias")), q0 * D, model->nq_ * D);
      L.bk = slice(ToF32(get("self_attn.k_proj.bias")), kv0 * D, model->nkv_ * D);
      L.bv = slice(ToF32(get("self_attn.v_proj.bias")), kv0 * D, model->nkv_ * D);
      L.bo = ToF32(get("self_attn.o_proj.bias"));
    }
    L.sinks = slice(ToF32(get("self_attn.sinks")), q0, model->nq_);
    L.router = dense(get("mlp.router.weight"));
    L.router_b = ToF32(get("mlp.router.bias"));
    L.gate_up.n = 2 * I;
    L.gate_up.k = H;
    L.gate_up.codes = get("mlp.experts.gate_up_proj_blocks").data + model->e0_ * (2 * I * H / 2);
    L.gate_up.scales = get("mlp.experts.gate_up_proj_scales").data + model->e0_ * (2 * I * H / 32);
    L.gate_up_bias = slice(ToF32(get("mlp.experts.gate_up_proj_bias")), model->e0_ * 2 * I, model->ne_ * 2 * I);
    L.down.n = H;
    L.down.k = I;
    L.down.codes = get("mlp.experts.down_proj_blocks").data + model->e0_ * (H * I / 2);
    L.down.scales = get("mlp.experts.down_proj_scales").data + model->e0_ * (H * I / 32);
    L.down_bias = slice(ToF32(get("mlp.experts.down_proj_bias")), model->e0_ * H, model->ne_ * H);
    if (tensor_experts) {
      // gate_up rows alternate gate, up: units [i0, i0 + ni) are rows [2 i0, 2 (i0 + ni)).
      SliceExperts(L.gate_up, E, 2 * i0, 2 * ni, 0, H / kMxfp4BlockSize);
      SliceExperts(L.down, E, 0, H, i0 / kMxfp4BlockSize, ni / kMxfp4BlockSize);
      std::vector<float> bias(E * 2 * ni);
      for (int64_t e = 0; e < E; ++e) {
        std::copy_n(&L.gate_up_bias[e * 2 * I + 2 * i0], 2 * ni, &bias[e * 2 * ni]);
      }
      L.gate_up_bias = std::move(bias);
      // The ranks' partial sums are added: the down bias counts once, on rank 0.
      if (r != 0) std::fill(L.down_bias.begin(), L.down_bias.end(), 0.0f);
    }
  }
  if (options.precision == Precision::kFast) model->LoadFastWeights();
  model->OwnBf16Weights();
  return model;
}

void GptOssModel::LoadFastWeights() {
  const ModelConfig& c = config_;
  const int64_t E = ne_;  // this rank's experts
  // MXFP4 experts -> q8 layout, one expert matrix per task; each checkpoint tensor's pages are
  // released once all its experts are repacked, so at most one tensor is resident twice.
  auto repack = [&](ExpertMatrices& m, const std::string& name) {
    const size_t code_bytes = Q8Mxfp4CodeBytes(m.n, m.k), scale_bytes = Q8Mxfp4ScaleBytes(m.n, m.k);
    m.q8_codes = ByteBuffer(E * code_bytes);
    m.q8_scales = ByteBuffer(E * scale_bytes);
    std::vector<int64_t> bad(E, -1);
    // A tensor-parallel rank may hold an empty slice (fewer intermediate blocks than ranks).
    if (m.n * m.k != 0) GlobalPool().Run(static_cast<size_t>(E), [&](size_t e, int) {
      size_t row = 0;
      if (!PackMxfp4ForQ8(m.codes + e * (m.n * m.k / 2), m.scales + e * (m.n * m.k / 32), m.n, m.k,
                          m.q8_codes.data() + e * code_bytes, m.q8_scales.data() + e * scale_bytes, &row)) {
        bad[e] = static_cast<int64_t>(row);
      }
    });
    for (int64_t e = 0; e < E; ++e) {
      if (bad[e] >= 0) {
        Fail(path_, ": tensor '", name, "_scales' has scale byte 255 (NaN) in expert ", e0_ + e, " row ", bad[e],
             "; the fast path cannot represent it (use --precision exact)");
      }
    }
    if (m.own_codes.size() != 0 || E * m.n * m.k == 0) {
      m.own_codes = ByteBuffer();
      m.own_scales = ByteBuffer();
    } else {
      ReleaseMappedRange(m.codes, E * m.n * m.k / 2);
      ReleaseMappedRange(m.scales, E * m.n * m.k / 32);
    }
    m.codes = m.q8_codes.data();
    m.scales = m.q8_scales.data();
  };
  auto quantize = [&](DenseMatrix& m, const std::string& name) {
    if (m.k % static_cast<int64_t>(kQ8Block) != 0) {
      Fail(path_, ": tensor '", name, "' has rows of ", m.k, " values, not a multiple of ", kQ8Block,
           "; int8 dense weights need that (use --dense bf16)");
    }
    m.int8_values = ByteBuffer(Q8Int8Bytes(m.n, m.k));
    m.int8_scales.resize(Q8PaddedColumns(m.n));
    // Row blocks in parallel: each task quantizes whole 16-row groups into its own bytes.
    const size_t groups = Q8PaddedColumns(m.n) / kQ8Group;
    std::vector<int64_t> bad(groups, -1);
    GlobalPool().ParallelFor(groups, 64, [&](size_t begin, size_t end) {
      const size_t rows_begin = begin * kQ8Group, rows_end = std::min<size_t>(end * kQ8Group, m.n);
      size_t row = 0;
      if (!QuantizeBf16ToQ8Int8(m.bf16 + rows_begin * m.k, rows_end - rows_begin, m.k,
                                m.int8_values.data() + rows_begin * m.k, &m.int8_scales[rows_begin], &row)) {
        bad[begin] = static_cast<int64_t>(rows_begin + row);
      }
    });
    for (int64_t b : bad) {
      if (b >= 0) Fail(path_, ": tensor '", name, "' row ", b, " holds NaN or inf; it cannot be quantized to int8");
    }
  };
  // The first exact_layers layers keep their weights as stored and run the exact kernels.
  for (int64_t l = options_.exact_layers; l < c.num_hidden_layers; ++l) {
    Layer& L = layers_[l];
    const std::string p = StrCat("model.layers.", l, ".");
    repack(L.gate_up, p + "mlp.experts.gate_up_proj");
    repack(L.down, p + "mlp.experts.down_proj");
    if (options_.dense == DenseWeights::kInt8) {
      quantize(L.wq, p + "self_attn.q_proj.weight");
      quantize(L.wk, p + "self_attn.k_proj.weight");
      quantize(L.wv, p + "self_attn.v_proj.weight");
      quantize(L.wo, p + "self_attn.o_proj.weight");
      quantize(L.router, p + "mlp.router.weight");
      for (DenseMatrix* m : {&L.wq, &L.wk, &L.wv, &L.wo, &L.router}) DropBf16(*m);
    }
  }
  if (options_.dense == DenseWeights::kInt8) {
    quantize(*lm_head_, "lm_head.weight");
    // A tied lm_head is also the embedding table, which stays mapped.
    if (c.tie_word_embeddings) {
      lm_head_->bf16 = nullptr;
    } else {
      DropBf16(*lm_head_);
    }
  }
}

void GptOssModel::DropBf16(DenseMatrix& m) {
  if (m.bf16_owned.size() == 0) ReleaseMappedRange(m.bf16, m.n * m.k * sizeof(uint16_t));
  m.bf16_owned = ByteBuffer();
  m.bf16 = nullptr;
}

void GptOssModel::OwnBf16Weights() {
  auto own = [](DenseMatrix& m) {
    if (m.bf16 == nullptr || m.bf16_owned.size() != 0) return;
    const size_t bytes = m.n * m.k * sizeof(uint16_t);
    m.bf16_owned = ByteBuffer(bytes);
    std::memcpy(m.bf16_owned.data(), m.bf16, bytes);
    ReleaseMappedRange(m.bf16, bytes);
    m.bf16 = m.bf16_owned.as<uint16_t>();
  };
  for (Layer& L : layers_) {
    for (DenseMatrix* m : {&L.wq, &L.wk, &L.wv, &L.wo, &L.router}) own(*m);
  }
  // A tied lm_head is also the embedding table (rows read from the mapping): leave it there.
  if (!config_.tie_word_embeddings) own(*lm_head_);
}

double GptOssModel::DecodeBytes(int64_t position, size_t kv_element_bytes) const {
  const ModelConfig& c = config_;
  auto dense = [](const DenseMatrix& m) {
    return m.is_int8() ? static_cast<double>(m.n * m.k + m.n * sizeof(float)) : 2.0 * m.n * m.k;
  };
  // MXFP4 expert matrix [n, k]: k/2 code bytes and k/32 scale bytes per row, in both layouts.
  auto expert = [](const ExpertMatrices& m) { return static_cast<double>(m.n) * (m.k / 2 + m.k / 32); };
  double bytes = dense(*lm_head_) + 2.0 * c.hidden_size;
  const double kv_row = 2.0 * c.num_key_value_heads * c.head_dim * kv_element_bytes;  // key + value
  for (const Layer& L : layers_) {
    bytes += dense(L.wq) + dense(L.wk) + dense(L.wv) + dense(L.wo) + dense(L.router);
    // Expert-parallel ranks read, on average, the K ne_ / E of a token's experts they hold.
    const double experts = static_cast<double>(c.num_experts_per_tok) * ne_ / c.num_local_experts;
    bytes += experts * (expert(L.gate_up) + expert(L.down));
    const int64_t window = L.sliding ? c.sliding_window.value_or(position + 1) : position + 1;
    bytes += kv_row * static_cast<double>(std::min(position + 1, window));
  }
  return bytes;
}

void GptOssModel::Dense(const DenseMatrix& w, const float* x, int64_t T, Q8Activations& xq, const float* bias,
                        float* y) const {
  const DenseOutput out[] = {{&w, bias, y}};
  DenseGroup(out, x, T, xq);
}

void GptOssModel::DenseGroup(std::span<const DenseOutput> outs, const float* x, int64_t T, Q8Activations& xq) const {
  // Column offsets of each matrix in the concatenation; q8 kernels need them on 16-column
  // boundaries (a column range must start a packed group), else run the matrices one by one.
  std::vector<size_t> offset(outs.size() + 1, 0);
  bool aligned = true;
  for (size_t i = 0; i < outs.size(); ++i) {
    offset[i + 1] = offset[i] + outs[i].w->n;
    aligned = aligned && offset[i] % kQ8Group == 0 && outs[i].w->is_int8() == outs[0].w->is_int8();
  }
  if (!aligned) {
    for (const DenseOutput& o : outs) Dense(*o.w, x, T, xq, o.bias, o.y);
    return;
  }
  const bool int8 = outs[0].w->is_int8();
  if (int8 && xq.k == 0) QuantizeQ8(x, T, outs[0].w->k, outs[0].w->k, xq);  // first int8 matrix that reads x
  TESSERA_CHECK(!int8 || (xq.m == static_cast<size_t>(T) && xq.k == static_cast<size_t>(outs[0].w->k)));
  const KernelTable& kt = ActiveKernels();
  const Q8Rows rows = int8 ? xq.rows() : Q8Rows{};
  ParallelColumns(offset.back(), [&](size_t begin, size_t end) {
    for (size_t i = 0; i < outs.size(); ++i) {
      const size_t b = std::max(begin, offset[i]), e = std::min(end, offset[i + 1]);
      if (b >= e) continue;
      const DenseMatrix& w = *outs[i].w;
      if (int8) {
        kt.matmul_q8_int8(rows, T, w.k, w.int8_values.data(), w.int8_scales.data(), b - offset[i], e - offset[i],
                          outs[i].bias, outs[i].y, w.n);
      } else {
        kt.matmul_bf16(x, T, w.k, w.bf16, b - offset[i], e - offset[i], outs[i].bias, outs[i].y, w.n);
      }
    }
  });
}

void GptOssModel::ProjectQkv(const Layer& L, const float* h, int64_t T, float* q, float* k, float* v) const {
  // q, k and v in one dispatch: the small k/v matrices alone would not keep both threads busy.
  Q8Activations hq;  // h quantized once for the three projections (int8 dense weights only)
  const DenseOutput qkv[] = {{&L.wq, L.bq.empty() ? nullptr : L.bq.data(), q},
                             {&L.wk, L.bk.empty() ? nullptr : L.bk.data(), k},
                             {&L.wv, L.bv.empty() ? nullptr : L.bv.data(), v}};
  DenseGroup(qkv, h, T, hq);
}

void GptOssModel::Attention(int layer, float* q, float* k, const float* v, int64_t T, int64_t start,
                            KvCache& cache, const float* rope_cs, float* out) const {
  const ModelConfig& c = config_;
  const Layer& L = layers_[layer];
  // This rank's heads (all of them without tensor parallelism); local query head i reads local
  // key/value head i / group in both sharding cases (model/tensor_parallel.h).
  const int64_t D = c.head_dim, Nq = nq_, Nkv = nkv_;
  const int64_t group = Nq / Nkv;
  const int64_t cs_stride = 2 * rope_.half();
  rope_.Apply(q, T, Nq, Nq * D, D, rope_cs, cs_stride);
  rope_.Apply(k, T, Nkv, Nkv * D, D, rope_cs, cs_stride);

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
    // Row pointers of every position some query of this batch sees, [lo, start + T).
    const int64_t lo = std::max<int64_t>(0, start - window + 1);
    std::vector<const Elem*> krows(start + T - lo), vrows(start + T - lo);
    for (int64_t pos = lo; pos < start + T; ++pos) {
      krows[pos - lo] = key_row(pos);
      vrows[pos - lo] = value_row(pos);
    }
    const KernelTable& kt = ActiveKernels();
    ThreadPool& pool = GlobalPool();
    // One task per (token, key/value head, slice of its query heads): the heads of a GQA group
    // share the rows' loads in the kernel (attend_group_*, each head's bits as if alone), and the
    // group is sliced only when there would otherwise be fewer than 4 tasks per thread (decode).
    int64_t slice = group;
    while (slice % 2 == 0 && T * Nkv * (group / slice) < 4 * static_cast<int64_t>(pool.num_threads())) slice /= 2;
    const int64_t slices = group / slice;
    std::vector<std::vector<float>> scratch(pool.num_threads());
    pool.Run(static_cast<size_t>(T * Nkv * slices), [&](size_t task, int thread) {
      const int64_t t = static_cast<int64_t>(task) / (Nkv * slices);
      const int64_t kvh = static_cast<int64_t>(task) / slices % Nkv;
      const int64_t hd = kvh * group + static_cast<int64_t>(task) % slices * slice;  // first query head
      const int64_t pos = start + t;
      // Sliding layers see the `window` positions ending at the query itself (HF:
      // kv_idx > q_idx - sliding_window); full layers see every earlier position.
      const int64_t first = std::max<int64_t>(0, pos - window + 1);
      const int64_t n = pos - first + 1;
      std::vector<float>& scores = scratch[thread];
      scores.resize(slice * n);
      const float* qv = &q[(t * Nq + hd) * D];
      float* o = out + (t * Nq + hd) * D;
      if constexpr (std::is_same_v<Elem, uint16_t>) {
        kt.attend_group_bf16(qv, D, slice, D, &krows[first - lo], &vrows[first - lo], kvh * D, n, scale, &L.sinks[hd],
                             scores.data(), o, D);
      } else {
        kt.attend_group_f32(qv, D, slice, D, &krows[first - lo], &vrows[first - lo], kvh * D, n, scale, &L.sinks[hd],
                            scores.data(), o, D);
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
  const KernelTable& kt = ActiveKernels();
  // I: this rank's intermediate units (all of them unless tensor-parallel experts).
  const int64_t H = c.hidden_size, I = L.down.k, E = c.num_local_experts, K = c.num_experts_per_tok;
  const int64_t S = T * K;  // (token, slot) pairs
  const float limit = static_cast<float>(c.swiglu_limit);
  constexpr float kAlpha = 1.702f;
  // Each expert projection runs the kernels of the layout it is held in: q8 (repacked at load,
  // int8 activations) or the checkpoint's MXFP4 (exact, float32 activations).
  const bool q8_gate_up = L.gate_up.q8_codes.size() != 0, q8_down = L.down.q8_codes.size() != 0;

  // Router: top-k of the biased logits (descending, lower id first on ties as torch.topk on
  // CPU), then softmax over those k only (gpt-oss.md §3.5.1).
  Q8Activations hq;  // h quantized once for the router (int8) and the experts (q8)
  std::vector<float> router(T * E);
  Dense(L.router, h, T, hq, L.router_b.data(), router.data());
  if (options_.record_router_logits) {
    // Layers run in order 0 .. L-1 within one Forward, so layer 0 starts the call's record.
    if (layer == 0) router_logits_.assign(c.num_hidden_layers * T * E, 0.0f);
    std::copy(router.begin(), router.end(), router_logits_.begin() + layer * T * E);
  }
  std::vector<int32_t> chosen(S);
  std::vector<float> weight(S);
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

  // Sort the slots by expert (counting sort, slot order kept within an expert): expert e owns
  // rows [offsets[e], offsets[e + 1]) of the sorted buffers, so each expert's weights are
  // streamed once for all its tokens, and all experts run as one ragged grouped matmul.
  // With tensor parallelism only this rank's experts [e0_, e0_ + ne_) run: the other slots get
  // no row (row_of_slot -1) and weight 0 in the combine, which makes them contribute exactly 0,
  // and the ranks' partial sums are added by the caller.
  const int64_t NE = ne_;
  std::vector<int64_t> offsets(NE + 1, 0);
  auto local = [&](int64_t s) { return chosen[s] - e0_; };  // local expert id, in range or not
  for (int64_t s = 0; s < S; ++s) {
    if (local(s) >= 0 && local(s) < NE) ++offsets[local(s) + 1];
  }
  for (int64_t e = 0; e < NE; ++e) offsets[e + 1] += offsets[e];
  const int64_t rows = offsets[NE];
  for (int64_t e = 0; e < NE; ++e) experts_run_ += offsets[e + 1] > offsets[e];
  std::vector<int32_t> row_of_slot(S, -1);  // sorted row of each slot: the combine's gather index
  {
    std::vector<int64_t> next(offsets.begin(), offsets.end() - 1);
    for (int64_t s = 0; s < S; ++s) {
      if (local(s) >= 0 && local(s) < NE) row_of_slot[s] = static_cast<int32_t>(next[local(s)]++);
    }
  }
  if (rows == 0) {
    std::fill(out, out + T * H, 0.0f);
    return;
  }

  // Expert inputs in sorted order: f32 rows (exact) or q8 rows (q8 layout, h quantized once).
  std::vector<float> xs;
  Q8Activations xq;
  if (q8_gate_up) {
    if (hq.k == 0) QuantizeQ8(h, T, H, H, hq);
    const size_t nb = H / kQ8Block;
    xq.m = rows;
    xq.k = H;
    xq.q.resize(rows * H);
    xq.d.resize(rows * nb);
    xq.sum.resize(rows * nb);
    for (int64_t s = 0; s < S; ++s) {
      const int64_t t = s / K, r = row_of_slot[s];
      if (r < 0) continue;
      std::memcpy(&xq.q[r * H], &hq.q[t * H], H);
      std::memcpy(&xq.d[r * nb], &hq.d[t * nb], nb * sizeof(float));
      std::memcpy(&xq.sum[r * nb], &hq.sum[t * nb], nb * sizeof(int32_t));
    }
  } else {
    xs.resize(rows * H);
    for (int64_t s = 0; s < S; ++s) {
      if (row_of_slot[s] >= 0) std::memcpy(&xs[row_of_slot[s] * H], h + (s / K) * H, H * sizeof(float));
    }
  }

  // One grouped matmul: y[rows of e, n] = x[rows of e, k] . W_e^T + bias_e for every expert.
  auto grouped = [&](const ExpertMatrices& w, const std::vector<float>& bias, const float* x,
                     const Q8Activations& q, float* y) {
    const std::vector<ExpertChunk> chunks = ExpertChunks(offsets, w.n);
    GlobalPool().Run(chunks.size(), [&](size_t i, int) {
      const ExpertChunk& ch = chunks[i];
      const int64_t row = offsets[ch.expert], m = offsets[ch.expert + 1] - row;
      const uint8_t* codes = w.codes + ch.expert * w.code_stride();
      const uint8_t* scales = w.scales + ch.expert * w.scale_stride();
      const float* b = &bias[ch.expert * w.n];
      float* yr = y + row * w.n;
      if (w.q8_codes.size() != 0) {
        const size_t nb = w.k / kQ8Block;
        const Q8Rows xr{&q.q[row * w.k], &q.d[row * nb], &q.sum[row * nb]};
        kt.matmul_q8_mxfp4(xr, m, w.k, codes, scales, ch.begin, ch.end, b, yr, w.n);
      } else {
        kt.matmul_mxfp4(x + row * w.k, m, w.k, codes, scales, ch.begin, ch.end, b, yr, w.n);
      }
    });
  };

  std::vector<float> ys(rows * H);
  if (I == 0) {
    // An empty intermediate slice (tensor-parallel experts, fewer blocks than ranks): each row is
    // its expert's down bias (zero except on rank 0).
    for (int64_t e = 0; e < NE; ++e) {
      for (int64_t row = offsets[e]; row < offsets[e + 1]; ++row) {
        std::copy_n(&L.down_bias[e * H], H, &ys[row * H]);
      }
    }
  } else {
    std::vector<float> gu(rows * 2 * I);
    grouped(L.gate_up, L.gate_up_bias, xs.data(), xq, gu.data());
    // swigluoai: gate clamped above only, up clamped to [-limit, limit], (up + 1) (§3.5.2).
    std::vector<float> act(rows * I);
    GlobalPool().ParallelFor(rows, 4, [&](size_t begin, size_t end) {
      for (size_t i = begin * I; i < end * I; ++i) {
        const float g = std::min(gu[2 * i], limit);
        const float u = std::clamp(gu[2 * i + 1], -limit, limit);
        const float glu = g * (1.0f / (1.0f + std::exp(-g * kAlpha)));
        act[i] = (u + 1.0f) * glu;
      }
    });
    Q8Activations actq;
    if (q8_down) QuantizeQ8(act.data(), rows, I, I, actq);
    grouped(L.down, L.down_bias, act.data(), actq, ys.data());
  }

  // Combine: out[t] = sum_j weight[t, j] * ys[row_of_slot[t K + j]], summed in slot order
  // j = 0..K-1 (kernels.h gather_reduce: the same bits for every T and thread split, which batch
  // invariance needs). Another rank's slots: weight 0 on row 0, skipped by the kernel.
  if (rows < S) {
    for (int64_t s = 0; s < S; ++s) {
      if (row_of_slot[s] < 0) {
        row_of_slot[s] = 0;
        weight[s] = 0.0f;
      }
    }
  }
  GatherReduce(ys.data(), rows, H, row_of_slot.data(), weight.data(), T, K, H, out, H);
}

void GptOssModel::Forward(std::span<const int32_t> tokens, int64_t start, KvCache& cache, LogitsMode mode,
                          std::vector<float>& logits) const {
  const ForwardSequence one{tokens, start, &cache, mode, &logits};
  ForwardBatch(std::span<const ForwardSequence>(&one, 1));
}

void GptOssModel::ForwardBatch(std::span<const ForwardSequence> batch) const {
  const ModelConfig& c = config_;
  // Every sequence is checked before anything changes.
  for (size_t i = 0; i < batch.size(); ++i) {
    const ForwardSequence& s = batch[i];
    TESSERA_CHECK(s.cache != nullptr && s.logits != nullptr);
    const int64_t T = static_cast<int64_t>(s.tokens.size());
    if (s.start < 0 || s.start > s.cache->length()) {
      Fail("forward at position ", s.start, " but the KV cache holds ", s.cache->length(), " positions");
    }
    if (s.start + T > s.cache->context()) {
      Fail("sequence of ", s.start + T, " tokens exceeds the context size ", s.cache->context(),
           " (raise it with -c, up to max_position_embeddings ", c.max_position_embeddings, ")");
    }
    for (int32_t id : s.tokens) {
      if (id < 0 || id >= c.vocab_size) Fail("token id ", id, " is outside the vocabulary [0, ", c.vocab_size, ")");
    }
    for (size_t j = 0; j < i; ++j) {
      if (batch[j].cache == s.cache) Fail("a batched forward got the same KV cache for sequences ", j, " and ", i);
    }
  }
  std::vector<SequenceRows> rows_of;
  // The rows whose logits are wanted, in batch order (one lm_head pass over all of them), and
  // the vectors they go to with their row counts.
  std::vector<int64_t> wanted;
  std::vector<std::pair<std::vector<float>*, int64_t>> receivers;
  int64_t T = 0;
  for (const ForwardSequence& s : batch) {
    if (s.start < s.cache->length()) s.cache->Truncate(s.start);
    const int64_t n = static_cast<int64_t>(s.tokens.size());
    if (n == 0 || s.mode == LogitsMode::kNone) s.logits->clear();
    if (n == 0) continue;
    rows_of.push_back({T, n, s.start, s.cache});
    if (s.mode != LogitsMode::kNone) {
      const int64_t first = s.mode == LogitsMode::kAll ? T : T + n - 1;
      for (int64_t row = first; row < T + n; ++row) wanted.push_back(row);
      receivers.push_back({s.logits, T + n - first});
    }
    T += n;
  }
  if (T == 0) return;
  const int64_t H = c.hidden_size, V = c.vocab_size, P = tp_size_;
  const KernelTable& kt = ActiveKernels();
  TensorParallelGroup* tp = options_.tp.get();
  // Prefill of one sequence the ranks can split evenly runs sequence-parallel (each rank keeps
  // T / P token rows of the residual stream between the fused collectives); decode, uneven and
  // batched calls keep every row on every rank.
  const bool sp = P > 1 && rows_of.size() == 1 && T % P == 0 && T >= 2 * P;
  const int64_t row0 = sp ? tp_rank_ * (T / P) : 0, own = sp ? T / P : T;

  // The batch's token ids in row order (sequences without tokens contribute none).
  std::vector<int32_t> ids;
  ids.reserve(T);
  for (const ForwardSequence& s : batch) ids.insert(ids.end(), s.tokens.begin(), s.tokens.end());
  std::vector<float> x(T * H);
  for (int64_t t = 0; t < own; ++t) {
    kt.convert_bf16_f32(embed_ + static_cast<int64_t>(ids[row0 + t]) * H, &x[t * H], H);
  }
  // cos/sin rows [T, 2 * half]: each sequence's rows at its positions, shared by every layer.
  const int64_t cs_width = 2 * rope_.half();
  std::vector<float> rope_cs(T * cs_width);
  for (const SequenceRows& r : rows_of) {
    rope_.CosSin(rope_.Frequencies(r.start + r.rows), r.start, r.rows, &rope_cs[r.row0 * cs_width], cs_width);
  }
  experts_run_ = 0;
  // The layers write the new positions' rows into the caches as they go (a sliding ring
  // overwrites older positions' slots); only a complete pass commits them, and a failure partway
  // (an MPI error, an allocation) tells every cache which rows may have been touched.
  for (const SequenceRows& r : rows_of) r.cache->BeginAppend(r.start, r.start + r.rows);
  try {
    Layers(x.data(), T, rows_of, rope_cs.data(), sp);
  } catch (...) {
    for (const SequenceRows& r : rows_of) r.cache->AbortAppend(r.start, r.start + r.rows);
    throw;
  }
  last_experts_per_layer_ = static_cast<double>(experts_run_) / static_cast<double>(c.num_hidden_layers);
  for (const SequenceRows& r : rows_of) r.cache->Extend(r.start + r.rows);

  if (sp) {
    std::vector<float> all(T * H);
    tp->AllGather(x.data(), own * H, all.data());
    x.swap(all);
  }
  if (wanted.empty()) return;
  const int64_t rows = static_cast<int64_t>(wanted.size());
  // With one sequence wanting logits (every unbatched call) they are written in place.
  std::vector<float> batched;
  std::vector<float>& out = receivers.size() == 1 ? *receivers.front().first : batched;
  out.resize(rows * V);
  std::vector<float> picked(rows * H), h(rows * H);
  for (int64_t i = 0; i < rows; ++i) std::memcpy(&picked[i * H], &x[wanted[i] * H], H * sizeof(float));
  RmsNorm(picked.data(), final_norm_.data(), rows, H, c.rms_norm_eps, h.data());
  Q8Activations hq;
  if (nv_ == V) {
    Dense(*lm_head_, h.data(), rows, hq, nullptr, out.data());
  } else {
    // Vocabulary-parallel lm_head: each rank has nv_ = V / P rows; gather [P][rows][nv_] and
    // interleave into [rows][V].
    std::vector<float> part(rows * nv_), gathered(P * rows * nv_);
    Dense(*lm_head_, h.data(), rows, hq, nullptr, part.data());
    tp->AllGather(part.data(), part.size(), gathered.data());
    for (int64_t p = 0; p < P; ++p) {
      for (int64_t t = 0; t < rows; ++t) {
        std::memcpy(&out[t * V + p * nv_], &gathered[(p * rows + t) * nv_], nv_ * sizeof(float));
      }
    }
  }
  if (receivers.size() == 1) return;
  // Hand each sequence its rows.
  int64_t taken = 0;
  for (const auto& [logits, n] : receivers) {
    logits->assign(out.begin() + taken * V, out.begin() + (taken + n) * V);
    taken += n;
  }
}

void GptOssModel::Layers(float* x, int64_t T, std::span<const SequenceRows> sequences, const float* rope_cs,
                         bool sp) const {
  const ModelConfig& c = config_;
  const int64_t H = c.hidden_size, D = c.head_dim, P = tp_size_;
  TensorParallelGroup* tp = options_.tp.get();
  const int64_t own = sp ? T / P : T;  // rows of x on this rank
  const int64_t nq = nq_ * D, nkv = nkv_ * D, nqkv = nq + 2 * nkv;
  std::vector<float> h(T * H), q(T * nq), k(T * nkv), v(T * nkv), attn(T * nq), delta(T * H), qkv, moe_in;
  if (sp) {
    qkv.resize(T * nqkv);
    moe_in.resize(T * H);
  }
  auto add_rows = [&](const float* d, const float* bias) {
    for (int64_t t = 0; t < own; ++t) {
      if (bias) {
        for (int64_t i = 0; i < H; ++i) x[t * H + i] += d[t * H + i] + bias[i];
      } else {
        for (int64_t i = 0; i < H; ++i) x[t * H + i] += d[t * H + i];
      }
    }
  };

  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const Layer& L = layers_[l];
    const float* bo = L.bo.empty() ? nullptr : L.bo.data();
    RmsNorm(x, L.input_norm.data(), own, H, c.rms_norm_eps, h.data());
    if (sp) {
      // Column-parallel q | k | v over the all-gathered token rows, overlapped with the gather.
      const TensorParallelGroup::LocalGemm gemm = [&](const float* xr, size_t m, float* y, size_t ldy) {
        Q8Activations xq;
        const std::pair<const DenseMatrix*, const std::vector<float>*> parts[] = {
            {&L.wq, &L.bq}, {&L.wk, &L.bk}, {&L.wv, &L.bv}};
        size_t col = 0;
        for (const auto& [w, b] : parts) {
          const float* bias = b->empty() ? nullptr : b->data();
          if (w->is_int8()) {
            if (xq.k == 0) QuantizeQ8(xr, m, H, H, xq);
            MatmulQ8Int8(xq, w->int8_values.data(), w->int8_scales.data(), w->n, bias, y + col, ldy);
          } else {
            MatmulBf16(xr, m, H, w->bf16, w->n, bias, y + col, ldy);
          }
          col += w->n;
        }
      };
      tp->AllGatherMatmul(h.data(), own, H, nqkv, gemm, qkv.data());
      for (int64_t t = 0; t < T; ++t) {
        std::memcpy(&q[t * nq], &qkv[t * nqkv], nq * sizeof(float));
        std::memcpy(&k[t * nkv], &qkv[t * nqkv + nq], nkv * sizeof(float));
        std::memcpy(&v[t * nkv], &qkv[t * nqkv + nq + nkv], nkv * sizeof(float));
      }
    } else {
      ProjectQkv(L, h.data(), T, q.data(), k.data(), v.data());
    }
    const int64_t cs_width = 2 * rope_.half();
    for (const SequenceRows& r : sequences) {
      Attention(static_cast<int>(l), &q[r.row0 * nq], &k[r.row0 * nkv], &v[r.row0 * nkv], r.rows, r.start, *r.cache,
                &rope_cs[r.row0 * cs_width], &attn[r.row0 * nq]);
    }
    FailPoint("forward.after_attention");  // tests: a failure once some rings hold uncommitted rows

    // o_proj: row-parallel partial products reduced across ranks, its bias added once after.
    Q8Activations attn_q;
    if (P == 1) {
      Dense(L.wo, attn.data(), T, attn_q, bo, delta.data());
      add_rows(delta.data(), nullptr);
    } else if (sp) {
      const TensorParallelGroup::LocalGemm gemm = [&](const float* xr, size_t m, float* y, size_t ldy) {
        if (L.wo.is_int8()) {
          Q8Activations xq;
          QuantizeQ8(xr, m, nq, nq, xq);
          MatmulQ8Int8(xq, L.wo.int8_values.data(), L.wo.int8_scales.data(), H, nullptr, y, ldy);
        } else {
          MatmulBf16(xr, m, nq, L.wo.bf16, H, nullptr, y, ldy);
        }
      };
      tp->MatmulReduceScatter(attn.data(), T, nq, H, gemm, delta.data());
      add_rows(delta.data(), bo);
    } else {
      Dense(L.wo, attn.data(), T, attn_q, nullptr, delta.data());
      tp->AllReduceSum(delta.data(), T * H);
      add_rows(delta.data(), bo);
    }

    RmsNorm(x, L.post_norm.data(), own, H, c.rms_norm_eps, h.data());
    if (sp) {
      // MoE over every token (this rank's experts or expert slices): gather the rows,
      // reduce-scatter the partial sums.
      tp->AllGather(h.data(), own * H, moe_in.data());
      Moe(static_cast<int>(l), moe_in.data(), T, delta.data());
      std::vector<float> mine(own * H);
      tp->ReduceScatterSum(delta.data(), T * H, mine.data());
      add_rows(mine.data(), nullptr);
    } else {
      Moe(static_cast<int>(l), h.data(), T, delta.data());
      if (P > 1) tp->AllReduceSum(delta.data(), T * H);
      add_rows(delta.data(), nullptr);
    }
  }
}

}  // namespace tessera
