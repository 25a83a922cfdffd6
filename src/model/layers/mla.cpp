// DeepSeek Multi-head Latent Attention (layers.h ProjectLatent / AttendLatent), in the absorbed
// form of ../shared/reference/deepseek.md §4: per head h, with W_UK_h and W_UV_h the key and value
// halves of kv_b_proj's rows for h,
//   score_h(t) = scale (q_nope_h . W_UK_h c(t) + q_pe_h . k_pe(t)) = scale ([W_UK_h^T q_nope_h | q_pe_h] . [c(t) | k_pe(t)])
//   o_h = sum_t p_h(t) W_UV_h c(t) = W_UV_h (sum_t p_h(t) c(t)),
// so every head attends over the same cached row [c | k_pe] per position (one key/value head of
// C + R channels whose values are its keys) and the cache holds C + R values per position
// instead of nq (P + R + Vd). Exact algebra: the result equals HF's decompressed form up to
// rounding (tests/deepseek_golden_test.cpp holds it to transformers).
#include <algorithm>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/profile.h"
#include "model/layers.h"

namespace tessera {
namespace {

// q_a_layernorm and kv_a_layernorm: HF builds them with the RMSNorm default, not rms_norm_eps.
constexpr double kLatentNormEps = 1e-6;

// Rows [t][col0, col0 + width) of a [T, stride] matrix into a contiguous [T, width] one.
void GatherColumns(const float* x, int64_t T, int64_t stride, int64_t col0, int64_t width, float* out) {
  for (int64_t t = 0; t < T; ++t) std::memcpy(out + t * width, x + t * stride + col0, static_cast<size_t>(width) * sizeof(float));
}

// The naive form (MlaForm::kNaive, deepseek.md §2 steps 3-6) for rotated q [T, heads (P + R)] and
// the batch's rotated latent rows: the rows are appended to the cache, every seen position's row
// (as the cache holds it) is decompressed by kv_b into per-head keys [k_nope | k_pe] and values,
// and the heads attend as ordinary multi-head attention of head size D = max(P + R, Vd) (the
// shorter of keys and values zero-padded, which changes no dot product) through a float32
// scratch cache.
void AttendDecompressed(const AttentionWeights& w, const MlaDims& dims, int64_t heads, float scale, int layer,
                        const float* q, const float* latent, int64_t T, int64_t start, KvCache& cache, float* out) {
  const int64_t C = dims.latent, R = dims.rope, P = dims.nope, Vd = dims.value, width = dims.cache_width();
  const int64_t qk = P + R, D = std::max(qk, Vd), N = start + T, per_head = P + Vd;
  StoreCacheRows(cache, layer, latent, latent, T, start, width);
  std::vector<float> rows(static_cast<size_t>(N * width)), c(static_cast<size_t>(N * C));
  ReadCacheRows(cache, layer, 0, N, width, rows.data());
  GatherColumns(rows.data(), N, width, 0, C, c.data());
  std::vector<float> kv(static_cast<size_t>(N * heads * per_head));
  Q8Activations cq;
  Multiply(*w.kv_b, c.data(), static_cast<size_t>(N), cq, nullptr, kv.data());
  // Per-head keys and values of every position, [N, heads, D].
  std::vector<float> keys(static_cast<size_t>(N * heads * D), 0.0f), values(keys.size(), 0.0f);
  for (int64_t pos = 0; pos < N; ++pos) {
    for (int64_t h = 0; h < heads; ++h) {
      float* key = &keys[(pos * heads + h) * D];
      const float* decompressed = &kv[(pos * heads + h) * per_head];
      std::memcpy(key, decompressed, static_cast<size_t>(P) * sizeof(float));
      std::memcpy(key + P, &rows[pos * width + C], static_cast<size_t>(R) * sizeof(float));
      std::memcpy(&values[(pos * heads + h) * D], decompressed + P, static_cast<size_t>(Vd) * sizeof(float));
    }
  }
  std::vector<float> queries(static_cast<size_t>(T * heads * D), 0.0f);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t h = 0; h < heads; ++h) {
      std::memcpy(&queries[(t * heads + h) * D], q + (t * heads + h) * qk, static_cast<size_t>(qk) * sizeof(float));
    }
  }
  // A one-layer float32 cache of `heads` key/value heads holding positions [0, start).
  ModelConfig scratch_config;
  scratch_config.num_hidden_layers = 1;
  scratch_config.num_attention_heads = scratch_config.num_key_value_heads = heads;
  scratch_config.head_dim = D;
  scratch_config.max_position_embeddings = N;
  scratch_config.layer_types = {LayerType::kFullAttention};
  KvCache scratch(scratch_config, N, KvType::kF32, 0);
  scratch.BeginAppend(0, N);
  for (int64_t pos = 0; pos < start; ++pos) {
    for (int64_t h = 0; h < heads; ++h) {
      const size_t bytes = static_cast<size_t>(D) * sizeof(float);
      std::memcpy(scratch.KeySlot(0, pos) + h * scratch.HeadStride(0), &keys[(pos * heads + h) * D], bytes);
      std::memcpy(scratch.ValueSlot(0, pos) + h * scratch.HeadStride(0), &values[(pos * heads + h) * D], bytes);
    }
  }
  scratch.Extend(start);
  std::vector<float> padded(static_cast<size_t>(T * heads * D));
  const AttentionShape shape{heads, heads, D, std::nullopt, kLatentNormEps};
  AttendCached(w, shape, scale, 0, queries.data(), &keys[start * heads * D], &values[start * heads * D], T, start,
               scratch, padded.data());
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t h = 0; h < heads; ++h) {
      std::memcpy(out + (t * heads + h) * Vd, &padded[(t * heads + h) * D], static_cast<size_t>(Vd) * sizeof(float));
    }
  }
}

}  // namespace

void ProjectLatent(const AttentionWeights& w, const MlaDims& dims, int64_t heads, const float* h, int64_t T, float* q,
                   float* latent) {
  const int64_t C = dims.latent, width = dims.cache_width();
  std::vector<float> ckv(static_cast<size_t>(T * width));
  Q8Activations hq;  // h quantized once for both projections (q8 formats)
  if (w.q_a) {
    const int64_t rank = w.q_a->rows();
    std::vector<float> qa(static_cast<size_t>(T * rank));
    const LinearOutput first[] = {{w.q_a.get(), 0, nullptr, qa.data()}, {w.kv_a.get(), 0, nullptr, ckv.data()}};
    MultiplyGroup(first, h, static_cast<size_t>(T), hq);
    RmsNorm(qa.data(), w.q_a_norm.data(), T, rank, kLatentNormEps, qa.data());
    Q8Activations qaq;
    Multiply(*w.q, qa.data(), static_cast<size_t>(T), qaq, nullptr, q);
  } else {
    const LinearOutput both[] = {{w.q.get(), 0, nullptr, q}, {w.kv_a.get(), 0, nullptr, ckv.data()}};
    MultiplyGroup(both, h, static_cast<size_t>(T), hq);
  }
  TESSERA_CHECK(w.q->rows() == heads * (dims.nope + dims.rope));
  // [RMSNorm(c) | k_pe]: k_pe is not normalised (deepseek.md §2 step 2).
  std::vector<float> c(static_cast<size_t>(T * C));
  GatherColumns(ckv.data(), T, width, 0, C, c.data());
  RmsNorm(c.data(), w.kv_a_norm.data(), T, C, kLatentNormEps, c.data());
  for (int64_t t = 0; t < T; ++t) {
    std::memcpy(latent + t * width, &c[t * C], static_cast<size_t>(C) * sizeof(float));
    std::memcpy(latent + t * width + C, &ckv[t * width + C], static_cast<size_t>(dims.rope) * sizeof(float));
  }
}

void AttendLatent(const AttentionWeights& w, const MlaDims& dims, int64_t heads, const Rope& rope, int layer, float* q,
                  float* latent, int64_t T, int64_t start, KvCache& cache, const float* rope_cs, float* out) {
  const int64_t C = dims.latent, R = dims.rope, P = dims.nope, Vd = dims.value;
  const int64_t qk = P + R, width = dims.cache_width();
  {
    // The rotary channels: the last R of each query head and of the latent row (interleaved pairs
    // for every released checkpoint; the rope's pairing says which).
    const ProfileScope scope("rope");
    const int64_t cs_stride = 2 * rope.half();
    rope.Apply(q + P, T, heads, heads * qk, qk, rope_cs, cs_stride);
    rope.Apply(latent + C, T, 1, width, width, rope_cs, cs_stride);
  }
  if (w.kv_b) {
    AttendDecompressed(w, dims, heads, rope.attention_scale(), layer, q, latent, T, start, cache, out);
    return;
  }
  // Absorbed queries [T, heads, C + R]: W_UK_h^T q_nope_h, then q_pe_h. The per-head inputs and
  // results go through [heads, T, *] buffers: one dispatch for every head's matrix.
  std::vector<float> absorbed(static_cast<size_t>(T * heads * width));
  std::vector<float> gathered(static_cast<size_t>(heads * T * std::max(P, C)));
  for (int64_t h = 0; h < heads; ++h) GatherColumns(q, T, heads * qk, h * qk, P, &gathered[h * T * P]);
  MultiplyEach(*w.absorb_k, gathered.data(), static_cast<size_t>(T), absorbed.data(), static_cast<size_t>(width),
               static_cast<size_t>(heads * width));
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t h = 0; h < heads; ++h) {
      std::memcpy(&absorbed[(t * heads + h) * width + C], q + (t * heads + h) * qk + P, static_cast<size_t>(R) * sizeof(float));
    }
  }
  // Every head against the one latent head (values = keys); the last R channels of each head's
  // result (weighted rotary keys) are not used.
  std::vector<float> mixed(static_cast<size_t>(T * heads * width));
  const AttentionShape shape{heads, 1, width, std::nullopt, kLatentNormEps};
  AttendCached(w, shape, rope.attention_scale(), layer, absorbed.data(), latent, latent, T, start, cache, mixed.data());
  for (int64_t h = 0; h < heads; ++h) GatherColumns(mixed.data(), T, heads * width, h * width, C, &gathered[h * T * C]);
  MultiplyEach(*w.absorb_v, gathered.data(), static_cast<size_t>(T), out, static_cast<size_t>(Vd),
               static_cast<size_t>(heads * Vd));
}

}  // namespace tessera
