// The decoder's layers, shared by every architecture (architecture.h says which parts a family
// has): RMSNorm, attention (GQA, optional biases, q/k norm and sinks, sliding window, RoPE), the
// gated MLP and the mixture of experts with both router kinds. Implementations in
// src/model/layers/; every matmul goes through linear.h. Each function computes every row the
// same way whatever the number of rows in the call (batch invariance).
//
// Shapes for T rows: H = hidden_size, D = head_dim, nq / nkv = this rank's query / key-value heads,
// I = this rank's intermediate units (per expert on MoE layers).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "model/architecture.h"
#include "model/kv_cache.h"
#include "model/linear.h"
#include "model/rope.h"

namespace tessera {

// y = w * x / sqrt(mean(x^2) + eps) for each of the m rows of width n (HF's RMSNorm in float32:
// the normalisation in float32, then the weight; in float32 the order of the two is immaterial).
void RmsNorm(const float* x, const float* w, int64_t m, int64_t n, double eps, float* y);

struct AttentionWeights {
  bool sliding = false;
  bool rope = true;  // false: a NoPE layer (SmolLM3's no_rope_layers), q and k not rotated
  std::unique_ptr<LinearWeights> q, k, v;  // [nq D, H], [nkv D, H] x2 (this rank's rows)
  std::unique_ptr<LinearWeights> o;        // [H, nq D] (this rank's columns)
  // DeepSeek MLA (AttentionKind::kMla; MlaDims C, R, P, Vd, Q): q is [nq (P + R), H], or
  // [nq (P + R), Q] after q_a [Q, H] and its norm; k and v are unused; o is [H, nq Vd].
  std::unique_ptr<LinearWeights> q_a;       // or null (plain q_proj)
  std::vector<float> q_a_norm;              // [Q]
  std::unique_ptr<LinearWeights> kv_a;      // [C + R, H]: latent, then the shared rotary key
  std::vector<float> kv_a_norm;             // [C]
  std::unique_ptr<LinearWeights> absorb_k;  // nq x [C, P]: head h's W_UK^T (kv_b_proj rows h (P + Vd) ..+ P, transposed)
  std::unique_ptr<LinearWeights> absorb_v;  // nq x [Vd, C]: head h's W_UV (kv_b_proj rows h (P + Vd) + P ..+ Vd)
  std::unique_ptr<LinearWeights> kv_b;      // [nq (P + Vd), C] as stored: the naive form (MlaForm::kNaive) instead
  std::vector<float> bq, bk, bv, bo;       // empty when the projection has no bias
  std::vector<float> q_norm, k_norm;       // [D] per-head RMSNorm weights (Qwen3); empty otherwise
  // [nq] sink logits; -inf for architectures without sinks, which leaves the softmax unchanged.
  std::vector<float> sinks;
};

struct AttentionShape {
  int64_t heads = 0, kv_heads = 0, head_dim = 0;  // this rank's
  std::optional<int64_t> window;                  // sliding layers' window
  double eps = 1e-6;                              // q/k norm epsilon
};

// q [T, nq D], k, v [T, nkv D] = h [T, H] projected (biases included), in one dispatch.
void ProjectQkv(const AttentionWeights& w, const float* h, int64_t T, float* q, float* k, float* v);
// Attention of the T queries at positions [start, start + T) over the cache and the batch: q/k
// norm then RoPE (cos/sin rows rope_cs [T, 2 half]) applied in place, keys and values of the batch
// appended to `cache` at `layer`. out [T, nq D].
void Attend(const AttentionWeights& w, const AttentionShape& shape, const Rope& rope, int layer, float* q, float* k,
            const float* v, int64_t T, int64_t start, KvCache& cache, const float* rope_cs, float* out);

// The attention step of Attend after q/k norm and RoPE: q [T, nq D], k, v [T, nkv D] against the
// cache's positions and each other, softmax scale `scale`, the batch's rows appended to `cache`
// (a cache whose values are its keys, DeepSeek's latent cache, reads v as k). out [T, nq D].
void AttendCached(const AttentionWeights& w, const AttentionShape& shape, float scale, int layer, const float* q,
                  const float* k, const float* v, int64_t T, int64_t start, KvCache& cache, float* out);

// The rows of positions [start, start + T) of a cache layer that no batch row overwrites while it
// is read (full layers): k, v [T, kv_heads D] into the cache's element type (v unused when the
// cache's values are its keys).
void StoreCacheRows(KvCache& cache, int layer, const float* k, const float* v, int64_t T, int64_t start, int64_t D);
// The keys of positions [first, first + count) as the cache holds them, in float32: out
// [count, kv_heads D].
void ReadCacheRows(KvCache& cache, int layer, int64_t first, int64_t count, int64_t D, float* out);

// DeepSeek MLA (architecture.h AttentionKind::kMla, deepseek.md §2 and §4), in two steps so that a
// batch of sequences shares the projections. ProjectLatent: from h [T, H], the queries q
// [T, nq (P + R)] (through q_a, its RMSNorm and q, or q alone) and the latent rows latent
// [T, C + R] = [RMSNorm(c) | k_pe] (both norms with eps 1e-6, as HF hard-codes them).
void ProjectLatent(const AttentionWeights& w, const MlaDims& dims, int64_t heads, const float* h, int64_t T, float* q,
                   float* latent);
// AttendLatent: one sequence's rows at positions [start, start + T): RoPE on q_pe and k_pe
// (in place, cos/sin rows rope_cs), then the absorbed form: queries W_UK^T q_nope | q_pe attend
// over the cache's latent rows (one key/value head of C + R channels, values = keys), the first C
// channels of each head's result through W_UV; or, when w.kv_b is loaded, the naive form: every
// seen position's latent row decompressed by kv_b into per-head keys [k_nope | k_pe] and values,
// ordinary attention. out [T, nq Vd]. The latent rows are appended to `cache` (built from a config
// whose kv_lora_rank is set: Model::cache_config()).
void AttendLatent(const AttentionWeights& w, const MlaDims& dims, int64_t heads, const Rope& rope, int layer, float* q,
                  float* latent, int64_t T, int64_t start, KvCache& cache, const float* rope_cs, float* out);

// `count` gated MLPs (1 for a dense layer, a layer's experts for MoE): gate_up rows alternate
// gate, up (row 2i = gate_i, 2i + 1 = up_i), so one matrix read gives both.
struct GatedMlpWeights {
  std::unique_ptr<LinearWeights> gate_up;  // count x [2I, H]
  std::unique_ptr<LinearWeights> down;     // count x [H, I]
  std::vector<float> gate_up_bias;         // [count, 2I] or empty
  std::vector<float> down_bias;            // [count, H] or empty (rank 0's only under TP)
  Activation activation = Activation::kSilu;
  float limit = 0.0f;                      // swigluoai clamp
  int64_t intermediate() const { return down ? down->cols() : 0; }
};

// act [m, I] from gate_up outputs gu [m, 2I] (rows alternate gate, up).
void GatedActivation(const GatedMlpWeights& w, const float* gu, int64_t m, float* act);
// out [T, H] = down(act(gate_up(h))) of MLP 0: a dense layer.
// observe_act (may be empty): called with the gated activation [T, I] that down_proj reads.
void GatedMlp(const GatedMlpWeights& w, const float* h, int64_t T, float* out,
              const std::function<void(const float* act, int64_t rows, int64_t cols)>& observe_act = nullptr);

struct MoeWeights {
  RouterKind router_kind = RouterKind::kTopKThenSoftmax;
  bool norm_topk_prob = false;  // kSoftmaxThenTopK, kSigmoidNoauxTc: renormalise the k weights
  // DeepSeek (kSoftmaxGroupMax, kSigmoidNoauxTc): experts in `groups` contiguous groups of which
  // the best `topk_groups` are eligible (groups 0: no group limit), the weights times
  // routed_scale, the correction bias [E] added for the choice only (V3).
  int64_t groups = 0, topk_groups = 0;
  float routed_scale = 1.0f;
  std::vector<float> correction_bias;
  int64_t experts = 0, top_k = 0;  // all experts of the model
  std::unique_ptr<LinearWeights> router;  // [E, H]
  std::vector<float> router_bias;         // [E] or empty
  int64_t first_expert = 0;               // this rank holds experts [first_expert, first_expert + mlp.count)
  GatedMlpWeights mlp;                    // this rank's experts
  GatedMlpWeights shared;                 // DeepSeek's shared experts (one gated MLP), added to every token; or empty
};

struct MoeStats {
  int64_t experts_run = 0;            // distinct local experts that got rows
  std::vector<float>* router_logits;  // [T, E] written when non-null
};

// out [T, H] = the routed combination of this rank's experts (a partial sum under tensor
// parallelism: other ranks' slots contribute 0 here).
void Moe(const MoeWeights& w, const float* h, int64_t T, int64_t H, float* out, MoeStats& stats);

struct DecoderLayer {
  std::vector<float> input_norm, post_norm;  // [H]: before attention, before the MLP / MoE
  // Architecture::sandwich_norms (Gemma): the attention's and the MLP's outputs normalised before
  // their residual adds; empty otherwise.
  std::vector<float> attn_out_norm, ffn_out_norm;
  AttentionWeights attention;
  bool moe = false;
  GatedMlpWeights mlp;  // dense layers
  MoeWeights experts;   // MoE layers
};

}  // namespace tessera
