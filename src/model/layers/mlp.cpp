// The gated MLP and the mixture of experts (layers.h).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <optional>

#include "core/profile.h"
#include "core/thread_pool.h"
#include "kernels/moe_ops.h"
#include "model/layers.h"

namespace tessera {

void GatedActivation(const GatedMlpWeights& w, const float* gu, int64_t m, float* act) {
  const ProfileScope scope("activation");
  const int64_t I = w.intermediate();
  if (w.activation == Activation::kSwigluOai) {
    // swigluoai: gate clamped above only, up clamped to [-limit, limit], (up + 1) (gpt-oss.md §3.5.2).
    const float limit = w.limit;
    constexpr float kAlpha = 1.702f;
    GlobalPool().ParallelFor(static_cast<size_t>(m), 4, [&](size_t begin, size_t end) {
      for (size_t i = begin * I; i < end * I; ++i) {
        const float g = std::min(gu[2 * i], limit);
        const float u = std::clamp(gu[2 * i + 1], -limit, limit);
        const float glu = g * (1.0f / (1.0f + std::exp(-g * kAlpha)));
        act[i] = (u + 1.0f) * glu;
      }
    });
  } else if (w.activation == Activation::kGeluTanh) {
    // gelu_pytorch_tanh(gate) * up (Gemma): 0.5 g (1 + tanh(sqrt(2 / pi) (g + 0.044715 g^3))), as
    // PyTorch's tanh-approximate GELU computes it in float32.
    constexpr float kSqrt2OverPi = 0.7978845608028654f, kCoeff = 0.044715f;
    GlobalPool().ParallelFor(static_cast<size_t>(m), 4, [&](size_t begin, size_t end) {
      for (size_t i = begin * I; i < end * I; ++i) {
        const float g = gu[2 * i];
        const float inner = kSqrt2OverPi * (g + kCoeff * g * g * g);
        act[i] = 0.5f * g * (1.0f + std::tanh(inner)) * gu[2 * i + 1];
      }
    });
  } else {
    // silu(gate) * up (dense-decoders.md §1: hidden_act "silu").
    GlobalPool().ParallelFor(static_cast<size_t>(m), 4, [&](size_t begin, size_t end) {
      for (size_t i = begin * I; i < end * I; ++i) {
        const float g = gu[2 * i];
        act[i] = g / (1.0f + std::exp(-g)) * gu[2 * i + 1];
      }
    });
  }
}

namespace {

// The calling thread's gate/up and activation buffers, grown to n floats and kept: every element
// is written before it is read, so old contents never matter, and a long prefill does not fault
// in fresh pages of a large allocation (59 MB of gate/up rows for 512 tokens of llama-3.1-8b) in
// every layer.
thread_local std::vector<float> tls_gate_up, tls_act;

float* Reused(std::vector<float>& buffer, size_t n) {
  if (buffer.size() < n) buffer.resize(n);
  return buffer.data();
}

}  // namespace

void GatedMlp(const GatedMlpWeights& w, const float* h, int64_t T, float* out,
              const std::function<void(const float* act, int64_t rows, int64_t cols)>& observe_act) {
  const int64_t I = w.intermediate(), H = w.down->rows();
  auto bias = [](const std::vector<float>& b) { return b.empty() ? nullptr : b.data(); };
  if (I == 0) {
    // An empty tensor-parallel slice: the down bias (rank 0's) or nothing.
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t i = 0; i < H; ++i) out[t * H + i] = w.down_bias.empty() ? 0.0f : w.down_bias[i];
    }
    return;
  }
  float* gu = Reused(tls_gate_up, static_cast<size_t>(T * 2 * I));
  float* act = Reused(tls_act, static_cast<size_t>(T * I));
  Q8Activations hq, actq;
  Multiply(*w.gate_up, h, static_cast<size_t>(T), hq, bias(w.gate_up_bias), gu);
  GatedActivation(w, gu, T, act);
  if (observe_act) observe_act(act, T, I);
  Multiply(*w.down, act, static_cast<size_t>(T), actq, bias(w.down_bias), out);
}

namespace {

// Indices of the k largest of score[0, n), descending, the lower index first on ties (torch.topk
// on CPU), into order[0, k) (order holds n entries).
void TopK(const float* score, int64_t n, int64_t k, int32_t* order) {
  std::iota(order, order + n, 0);
  std::partial_sort(order, order + k, order + n, [&](int32_t a, int32_t b) {
    return score[a] > score[b] || (score[a] == score[b] && a < b);
  });
}

// DeepSeek's group limit (deepseek.md §5): experts in `groups` contiguous groups, each scored by
// its maximum (V2) or the sum of its two best (V3); experts outside the topk_groups best groups
// get 0.0 (HF's masked_fill value, not -inf).
void MaskGroups(const MoeWeights& w, float* score, std::vector<float>& group_score, std::vector<int32_t>& group_order) {
  const int64_t E = w.experts, G = w.groups, per = E / G;
  group_score.resize(G);
  group_order.resize(G);
  for (int64_t g = 0; g < G; ++g) {
    const float* s = score + g * per;
    if (w.router_kind == RouterKind::kSigmoidNoauxTc) {
      float best = -INFINITY, second = -INFINITY;  // torch.topk(2).sum(): the larger first
      for (int64_t e = 0; e < per; ++e) {
        if (s[e] > best) {
          second = best;
          best = s[e];
        } else if (s[e] > second) {
          second = s[e];
        }
      }
      group_score[g] = best + second;
    } else {
      group_score[g] = *std::max_element(s, s + per);
    }
  }
  TopK(group_score.data(), G, w.topk_groups, group_order.data());
  std::vector<bool> kept(G, false);
  for (int64_t j = 0; j < w.topk_groups; ++j) kept[group_order[j]] = true;
  for (int64_t g = 0; g < G; ++g) {
    if (!kept[g]) std::fill(score + g * per, score + (g + 1) * per, 0.0f);
  }
}

// Chosen experts and their weights for each token's K slots, by the row's router kind.
void Route(const MoeWeights& w, const float* logits, int64_t T, int32_t* chosen, float* weight) {
  const ProfileScope scope("moe routing");
  const int64_t E = w.experts, K = w.top_k;
  std::vector<int32_t> order(E), group_order;
  std::vector<float> probs(E), choice(E), group_score;
  for (int64_t t = 0; t < T; ++t) {
    const float* r = logits + t * E;
    const float* score = r;  // what the weights are taken from
    const float* pick = r;   // what the experts are chosen by
    switch (w.router_kind) {
      case RouterKind::kTopKThenSoftmax: break;
      case RouterKind::kSoftmaxThenTopK:
      case RouterKind::kSoftmaxGroupMax: {
        // Qwen3-MoE, DeepSeek-V2: softmax over all E in float32, then top-k of the probabilities.
        const float mx = *std::max_element(r, r + E);
        float sum = 0.0f;
        for (int64_t e = 0; e < E; ++e) sum += probs[e] = std::exp(r[e] - mx);
        for (int64_t e = 0; e < E; ++e) probs[e] /= sum;
        score = pick = probs.data();
        if (w.groups > 0) {
          choice.assign(probs.begin(), probs.end());
          MaskGroups(w, choice.data(), group_score, group_order);
          score = pick = choice.data();  // V2 takes the weights from the masked scores
        }
        break;
      }
      case RouterKind::kSigmoidNoauxTc: {
        // DeepSeek-V3: sigmoid scores; the choice on scores + correction bias (group-masked).
        for (int64_t e = 0; e < E; ++e) probs[e] = 1.0f / (1.0f + std::exp(-r[e]));
        for (int64_t e = 0; e < E; ++e) choice[e] = probs[e] + (w.correction_bias.empty() ? 0.0f : w.correction_bias[e]);
        if (w.groups > 0) MaskGroups(w, choice.data(), group_score, group_order);
        score = probs.data();
        pick = choice.data();
        break;
      }
    }
    TopK(pick, E, K, order.data());
    float sum = 0.0f;
    for (int64_t j = 0; j < K; ++j) {
      chosen[t * K + j] = order[j];
      if (w.router_kind == RouterKind::kTopKThenSoftmax) {
        // gpt-oss: softmax over the k chosen logits (gpt-oss.md §3.5.1).
        weight[t * K + j] = std::exp(score[order[j]] - score[order[0]]);
      } else {
        weight[t * K + j] = score[order[j]];
      }
      sum += weight[t * K + j];
    }
    switch (w.router_kind) {
      case RouterKind::kTopKThenSoftmax:
        for (int64_t j = 0; j < K; ++j) weight[t * K + j] /= sum;
        break;
      case RouterKind::kSoftmaxThenTopK:
        if (w.norm_topk_prob) {
          for (int64_t j = 0; j < K; ++j) weight[t * K + j] /= sum;
        }
        break;
      case RouterKind::kSoftmaxGroupMax:  // HF's V2 gate never renormalises
        for (int64_t j = 0; j < K; ++j) weight[t * K + j] *= w.routed_scale;
        break;
      case RouterKind::kSigmoidNoauxTc:
        for (int64_t j = 0; j < K; ++j) {
          if (w.norm_topk_prob) weight[t * K + j] /= sum + 1e-20f;
          weight[t * K + j] *= w.routed_scale;
        }
        break;
    }
  }
}

// out [T, H] = the routed combination of this rank's experts.
void RoutedExperts(const MoeWeights& w, const float* h, int64_t T, int64_t H, float* out, MoeStats& stats) {
  const GatedMlpWeights& mlp = w.mlp;
  const int64_t E = w.experts, K = w.top_k, I = mlp.intermediate();
  const int64_t S = T * K;  // (token, slot) pairs
  Q8Activations hq;  // h quantized once for the router and the experts (q8 formats)
  std::vector<float> router(T * E);
  Multiply(*w.router, h, static_cast<size_t>(T), hq, w.router_bias.empty() ? nullptr : w.router_bias.data(),
           router.data());
  if (stats.router_logits) stats.router_logits->assign(router.begin(), router.end());
  std::vector<int32_t> chosen(S);
  std::vector<float> weight(S);
  Route(w, router.data(), T, chosen.data(), weight.data());

  // Sort the slots by expert (counting sort, slot order kept within an expert): expert e owns
  // rows [offsets[e], offsets[e + 1]) of the sorted buffers, so each expert's weights are
  // streamed once for all its tokens, and all experts run as one ragged grouped matmul.
  // With tensor parallelism only this rank's experts [first, first + NE) run: the other slots get
  // no row (row_of_slot -1) and weight 0 in the combine, which makes them contribute exactly 0,
  // and the ranks' partial sums are added by the caller.
  std::optional<ProfileScope> dispatch(std::in_place, "moe dispatch");  // sorting and gathering the rows
  const int64_t NE = mlp.gate_up->count(), first = w.first_expert;
  std::vector<int64_t> offsets(NE + 1, 0);
  auto local = [&](int64_t s) { return chosen[s] - first; };  // local expert id, in range or not
  for (int64_t s = 0; s < S; ++s) {
    if (local(s) >= 0 && local(s) < NE) ++offsets[local(s) + 1];
  }
  for (int64_t e = 0; e < NE; ++e) offsets[e + 1] += offsets[e];
  const int64_t rows = offsets[NE];
  int64_t experts_used = 0;  // each one's weights are read once
  for (int64_t e = 0; e < NE; ++e) experts_used += offsets[e + 1] > offsets[e];
  stats.experts_run += experts_used;
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

  // Expert inputs in sorted order, in the form gate_up reads: f32 rows, or q8 rows (h quantized
  // once, rows copied).
  std::vector<float> xs;
  Q8Activations xq;
  if (!mlp.gate_up->needs_q8()) {
    xs.resize(rows * H);
    for (int64_t s = 0; s < S; ++s) {
      if (row_of_slot[s] >= 0) std::memcpy(&xs[row_of_slot[s] * H], h + (s / K) * H, H * sizeof(float));
    }
  } else {
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
  }

  // One grouped matmul: y[rows of e, n] = x[rows of e, k] . W_e^T + bias_e for every expert.
  auto grouped = [&](const LinearWeights& weights, const std::vector<float>& bias, const float* x,
                     const Q8Activations& q, float* y) {
    const int64_t n = weights.rows(), k = weights.cols();
    const ProfileScope scope("moe experts", LinearFormatName(weights.format()), static_cast<double>(experts_used) * weights.BytesPerMatrix());
    const std::vector<ExpertChunk> chunks = ExpertChunks(offsets, static_cast<size_t>(n));
    GlobalPool().Run(chunks.size(), [&](size_t i, int) {
      const ExpertChunk& ch = chunks[i];
      const int64_t row = offsets[ch.expert], m = offsets[ch.expert + 1] - row;
      Q8Rows xr{};
      if (weights.needs_q8()) {
        const size_t nb = k / kQ8Block;
        xr = Q8Rows{&q.q[row * k], &q.d[row * nb], &q.sum[row * nb]};
      }
      const float* b = bias.empty() ? nullptr : &bias[ch.expert * n];
      weights.Multiply(ch.expert, x + row * k, &xr, m, ch.begin, ch.end, b, y + row * n, n);
    });
  };

  dispatch.reset();
  std::vector<float> ys(rows * H);
  if (I == 0) {
    // An empty intermediate slice (tensor-parallel experts, fewer blocks than ranks): each row is
    // its expert's down bias (zero except on rank 0).
    for (int64_t e = 0; e < NE; ++e) {
      for (int64_t row = offsets[e]; row < offsets[e + 1]; ++row) {
        for (int64_t i = 0; i < H; ++i) ys[row * H + i] = mlp.down_bias.empty() ? 0.0f : mlp.down_bias[e * H + i];
      }
    }
  } else {
    std::vector<float> gu(rows * 2 * I);
    grouped(*mlp.gate_up, mlp.gate_up_bias, xs.data(), xq, gu.data());
    std::vector<float> act(rows * I);
    GatedActivation(mlp, gu.data(), rows, act.data());
    Q8Activations actq;
    if (mlp.down->needs_q8()) {
      const ProfileScope quantize("quantize", "q8");
      QuantizeQ8(act.data(), rows, I, I, actq);
    }
    grouped(*mlp.down, mlp.down_bias, act.data(), actq, ys.data());
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
  const ProfileScope combine("moe combine");
  GatherReduce(ys.data(), rows, H, row_of_slot.data(), weight.data(), T, K, H, out, H);
}

}  // namespace

void Moe(const MoeWeights& w, const float* h, int64_t T, int64_t H, float* out, MoeStats& stats) {
  RoutedExperts(w, h, T, H, out, stats);
  if (!w.shared.gate_up) return;
  // DeepSeek's shared experts: one gated MLP on every token, added after the routed sum.
  std::vector<float> shared(static_cast<size_t>(T * H));
  GatedMlp(w.shared, h, T, shared.data());
  const ProfileScope scope("residual");
  for (int64_t i = 0; i < T * H; ++i) out[i] += shared[i];
}

}  // namespace tessera
