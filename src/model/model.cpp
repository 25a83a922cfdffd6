// Model::Forward / ForwardBatch: the layers of model/layers.h over one or several sequences,
// with tensor parallelism (model/tensor_parallel.h). Loading is model_load.cpp.
#include "model/model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>

#include "core/dtype.h"
#include "core/error.h"
#include "core/fail_point.h"
#include "core/profile.h"
#include "core/thread_pool.h"
#include "io/ggml_quants.h"
#include "kernels/kernels.h"

namespace tessera {

void Model::Forward(std::span<const int32_t> tokens, int64_t start, KvCache& cache, LogitsMode mode,
                          std::vector<float>& logits) const {
  const ForwardSequence one{tokens, start, &cache, mode, &logits};
  ForwardBatch(std::span<const ForwardSequence>(&one, 1));
}

void Model::ForwardBatch(std::span<const ForwardSequence> batch, const std::function<bool()>& stop) const {
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
  // Everything of the pass that no inner scope claims (copies, residual adds, bookkeeping).
  const ProfileScope forward_scope("other");
  const int64_t H = c.hidden_size, V = c.vocab_size, P = tp_size_;
  const KernelTable& kt = ActiveKernels();
  TensorParallelGroup* tp = options_.tp.get();
  // Prefill of one sequence the ranks can split evenly runs sequence-parallel (each rank keeps
  // T / P token rows of the residual stream between the fused collectives); decode, uneven and
  // batched calls keep every row on every rank.
  // (DeepSeek's MLA projects and attends on replicated rows: its latent rows are every rank's.)
  const bool sp = P > 1 && rows_of.size() == 1 && T % P == 0 && T >= 2 * P && arch_->attention != AttentionKind::kMla;
  const int64_t row0 = sp ? tp_rank_ * (T / P) : 0, own = sp ? T / P : T;

  // The batch's token ids in row order (sequences without tokens contribute none).
  std::vector<int32_t> ids;
  ids.reserve(T);
  for (const ForwardSequence& s : batch) ids.insert(ids.end(), s.tokens.begin(), s.tokens.end());
  std::vector<float> x(T * H);
  const size_t embed_row = embed_row_bytes_;
  std::optional<ProfileScope> embed_scope(std::in_place, "embedding", "", static_cast<double>(own * embed_row));
  for (int64_t t = 0; t < own; ++t) {
    const uint8_t* row = embed_ + static_cast<size_t>(ids[row0 + t]) * embed_row;
    if (embed_ggml_type_ >= 0) {
      DequantizeGgmlRow(static_cast<uint32_t>(embed_ggml_type_), row, &x[t * H], static_cast<size_t>(H));
    } else if (embed_dtype_ == DType::kBF16) {
      kt.convert_bf16_f32(reinterpret_cast<const uint16_t*>(row), &x[t * H], H);
    } else {
      for (int64_t i = 0; i < H; ++i) x[t * H + i] = ElementToF32(embed_dtype_, row + i * DTypeSize(embed_dtype_));
    }
    if (embed_scale_ != 1.0f) {
      for (int64_t i = 0; i < H; ++i) x[t * H + i] *= embed_scale_;
    }
  }
  // cos/sin rows [T, 2 * half]: each sequence's rows at its positions, shared by every layer.
  embed_scope.reset();
  const int64_t cs_width = 2 * rope_.half();
  std::vector<float> rope_cs(T * cs_width), local_cs(local_rope_used_ ? T * cs_width : 0);
  {
    const ProfileScope rope_scope("rope");
    for (const SequenceRows& r : rows_of) {
      // Dynamic NTK / longrope follow HF's per-call frequency update, tracked per sequence.
      rope_.CosSin(r.cache->RopeFrequenciesFor(rope_, r.start + r.rows), r.start, r.rows,
                   &rope_cs[r.row0 * cs_width], cs_width);
      if (local_rope_used_) {
        local_rope_.CosSin(local_rope_.frequencies(), r.start, r.rows, &local_cs[r.row0 * cs_width], cs_width);
      }
    }
  }
  experts_run_ = 0;
  // The layers write the new positions' rows into the caches as they go (a sliding ring
  // overwrites older positions' slots); only a complete pass commits them, and a failure partway
  // (an MPI error, an allocation) tells every cache which rows may have been touched.
  for (const SequenceRows& r : rows_of) r.cache->BeginAppend(r.start, r.start + r.rows);
  try {
    Layers(x.data(), T, rows_of, rope_cs.data(), local_rope_used_ ? local_cs.data() : nullptr, sp,
           tp_size_ == 1 ? stop : std::function<bool()>());
  } catch (...) {
    for (const SequenceRows& r : rows_of) r.cache->AbortAppend(r.start, r.start + r.rows);
    throw;
  }
  // Averaged over the MoE layers, as the cost model counts them.
  last_experts_per_layer_ = moe_layers_ > 0 ? static_cast<double>(experts_run_) / static_cast<double>(moe_layers_) : 0.0;
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
  const ProfileLinearCategory lm_head_category("lm_head");
  if (nv_ == V) {
    Multiply(*lm_head_, h.data(), static_cast<size_t>(rows), hq, nullptr, out.data());
  } else {
    // Vocabulary-parallel lm_head: each rank has nv_ = V / P rows; gather [P][rows][nv_] and
    // interleave into [rows][V].
    std::vector<float> part(rows * nv_), gathered(P * rows * nv_);
    Multiply(*lm_head_, h.data(), static_cast<size_t>(rows), hq, nullptr, part.data());
    tp->AllGather(part.data(), part.size(), gathered.data());
    for (int64_t p = 0; p < P; ++p) {
      for (int64_t t = 0; t < rows; ++t) {
        std::memcpy(&out[t * V + p * nv_], &gathered[(p * rows + t) * nv_], nv_ * sizeof(float));
      }
    }
  }
  if (c.final_logit_softcapping) {
    // logits = cap * tanh(logits / cap) in float32 (HF: final_logit_softcapping, Gemma 2 and
    // Gemma 3 configs that set it).
    const float cap = static_cast<float>(*c.final_logit_softcapping);
    for (float& v : out) v = std::tanh(v / cap) * cap;
  }
  if (receivers.size() == 1) return;
  // Hand each sequence its rows.
  int64_t taken = 0;
  for (const auto& [logits, n] : receivers) {
    logits->assign(out.begin() + taken * V, out.begin() + (taken + n) * V);
    taken += n;
  }
}

void Model::Layers(float* x, int64_t T, std::span<const SequenceRows> sequences, const float* rope_cs,
                   const float* local_cs, bool sp, const std::function<bool()>& stop) const {
  const ModelConfig& c = config_;
  const int64_t H = c.hidden_size, D = c.head_dim, P = tp_size_;
  TensorParallelGroup* tp = options_.tp.get();
  const int64_t own = sp ? T / P : T;  // rows of x on this rank
  const int64_t nq = nq_ * D, nkv = nkv_ * D, nqkv = nq + 2 * nkv;
  // DeepSeek MLA: queries of nope + rope channels per head, one latent row per token, values of
  // v_head_dim per head into o_proj.
  const bool mla = arch_->attention == AttentionKind::kMla;
  const int64_t attn_width = mla ? nq_ * mla_.value : nq;
  const int64_t mla_q_width = nq_ * (mla_.nope + mla_.rope), latent_width = mla_.cache_width();
  std::vector<float> h(T * H), q(mla ? T * mla_q_width : T * nq), k(mla ? 0 : T * nkv), v(mla ? 0 : T * nkv),
      latent(T * latent_width), attn(T * attn_width), delta(T * H), qkv, ffn_in;
  if (sp) {
    qkv.resize(T * nqkv);
    ffn_in.resize(T * H);
  }
  // Sandwich norms (Gemma): the branch's output rows normalised by `norm` before the add.
  auto add_rows = [&](float* d, const float* bias, const std::vector<float>& norm) {
    if (!norm.empty()) {
      if (bias) {
        for (int64_t t = 0; t < own; ++t) {
          for (int64_t i = 0; i < H; ++i) d[t * H + i] += bias[i];
        }
        bias = nullptr;
      }
      RmsNorm(d, norm.data(), own, H, c.rms_norm_eps, d);
    }
    const ProfileScope scope("residual");
    // Rows over the pool (elementwise: any split gives the same bits); one row stays here.
    const size_t grain = static_cast<size_t>(std::max<int64_t>(1, 16384 / H));
    GlobalPool().ParallelFor(static_cast<size_t>(own), grain, [&](size_t begin, size_t end) {
      for (int64_t t = static_cast<int64_t>(begin); t < static_cast<int64_t>(end); ++t) {
        if (bias) {
          for (int64_t i = 0; i < H; ++i) x[t * H + i] += d[t * H + i] + bias[i];
        } else {
          for (int64_t i = 0; i < H; ++i) x[t * H + i] += d[t * H + i];
        }
      }
    });
  };
  AttentionShape shape{nq_, nkv_, D, c.sliding_window, c.rms_norm_eps};

  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    if (stop && stop()) throw ForwardCancelled();
    const DecoderLayer& L = layers_[l];
    const AttentionWeights& A = L.attention;
    const float* bo = A.bo.empty() ? nullptr : A.bo.data();
    RmsNorm(x, L.input_norm.data(), own, H, c.rms_norm_eps, h.data());
    const LinearInputObserver& observe = options_.observe_linear_inputs;
    const bool observed = observe && P == 1 && !L.moe;
    if (observed) observe(static_cast<int>(l), LinearInput::kQkv, h.data(), T, H);
    const int64_t cs_width = 2 * rope_.half();
    if (mla) {
      ProjectLatent(A, mla_, nq_, h.data(), T, q.data(), latent.data());
      for (const SequenceRows& r : sequences) {
        AttendLatent(A, mla_, nq_, rope_, static_cast<int>(l), &q[r.row0 * mla_q_width], &latent[r.row0 * latent_width],
                     r.rows, r.start, *r.cache, &rope_cs[r.row0 * cs_width], &attn[r.row0 * attn_width]);
      }
    } else if (sp) {
      // Column-parallel q | k | v over the all-gathered token rows, overlapped with the gather.
      const TensorParallelGroup::LocalGemm gemm = [&](const float* xr, size_t m, float* y, size_t ldy) {
        Q8Activations xq;
        auto bias = [](const std::vector<float>& b) { return b.empty() ? nullptr : b.data(); };
        const LinearOutput parts[] = {{A.q.get(), 0, bias(A.bq), y, ldy},
                                      {A.k.get(), 0, bias(A.bk), y + nq, ldy},
                                      {A.v.get(), 0, bias(A.bv), y + nq + nkv, ldy}};
        MultiplyGroup(parts, xr, m, xq);
      };
      tp->AllGatherMatmul(h.data(), own, H, nqkv, gemm, qkv.data());
      for (int64_t t = 0; t < T; ++t) {
        std::memcpy(&q[t * nq], &qkv[t * nqkv], nq * sizeof(float));
        std::memcpy(&k[t * nkv], &qkv[t * nqkv + nq], nkv * sizeof(float));
        std::memcpy(&v[t * nkv], &qkv[t * nqkv + nq + nkv], nkv * sizeof(float));
      }
    }
    if (!mla) {
      if (!sp) ProjectQkv(A, h.data(), T, q.data(), k.data(), v.data());
      // Gemma 3's sliding layers rotate with their own base.
      const bool local = local_cs != nullptr && A.sliding;
      const Rope& rope = local ? local_rope_ : rope_;
      const float* cs = local ? local_cs : rope_cs;
      for (const SequenceRows& r : sequences) {
        Attend(A, shape, rope, static_cast<int>(l), &q[r.row0 * nq], &k[r.row0 * nkv], &v[r.row0 * nkv], r.rows,
               r.start, *r.cache, &cs[r.row0 * cs_width], &attn[r.row0 * nq]);
      }
    }
    FailPoint("forward.after_attention");  // tests: a failure once some rings hold uncommitted rows

    // o_proj: row-parallel partial products reduced across ranks, its bias added once after.
    Q8Activations attn_q;
    if (observed) observe(static_cast<int>(l), LinearInput::kO, attn.data(), T, attn_width);
    if (P == 1) {
      Multiply(*A.o, attn.data(), static_cast<size_t>(T), attn_q, bo, delta.data());
      add_rows(delta.data(), nullptr, L.attn_out_norm);
    } else if (sp) {
      const TensorParallelGroup::LocalGemm gemm = [&](const float* xr, size_t m, float* y, size_t ldy) {
        Q8Activations xq;
        Multiply(*A.o, xr, m, xq, nullptr, y, 0, ldy);
      };
      tp->MatmulReduceScatter(attn.data(), T, attn_width, H, gemm, delta.data());
      add_rows(delta.data(), bo, L.attn_out_norm);
    } else {
      Multiply(*A.o, attn.data(), static_cast<size_t>(T), attn_q, nullptr, delta.data());
      tp->AllReduceSum(delta.data(), T * H);
      add_rows(delta.data(), bo, L.attn_out_norm);
    }
    if (stop && stop()) throw ForwardCancelled();  // also between attention and the MLP / MoE

    RmsNorm(x, L.post_norm.data(), own, H, c.rms_norm_eps, h.data());
    if (sp) {
      // The MLP or MoE over every token (this rank's units or experts): gather the rows,
      // reduce-scatter the partial sums.
      tp->AllGather(h.data(), own * H, ffn_in.data());
      FeedForward(static_cast<int>(l), ffn_in.data(), T, delta.data());
      std::vector<float> mine(own * H);
      tp->ReduceScatterSum(delta.data(), T * H, mine.data());
      add_rows(mine.data(), nullptr, L.ffn_out_norm);
    } else if (observed) {
      observe(static_cast<int>(l), LinearInput::kGateUp, h.data(), T, H);
      GatedMlp(L.mlp, h.data(), T, delta.data(), [&](const float* act, int64_t rows, int64_t cols) {
        observe(static_cast<int>(l), LinearInput::kDown, act, rows, cols);
      });
      add_rows(delta.data(), nullptr, L.ffn_out_norm);
    } else {
      FeedForward(static_cast<int>(l), h.data(), T, delta.data());
      if (P > 1) tp->AllReduceSum(delta.data(), T * H);
      add_rows(delta.data(), nullptr, L.ffn_out_norm);
    }
  }
}

void Model::FeedForward(int layer, const float* h, int64_t T, float* out) const {
  const DecoderLayer& L = layers_[layer];
  if (!L.moe) {
    GatedMlp(L.mlp, h, T, out);
    return;
  }
  const ModelConfig& c = config_;
  std::vector<float> logits;
  MoeStats stats{0, options_.record_router_logits ? &logits : nullptr};
  Moe(L.experts, h, T, c.hidden_size, out, stats);
  experts_run_ += stats.experts_run;
  if (options_.record_router_logits) {
    // Layers run in order 0 .. L-1 within one Forward, so layer 0 starts the call's record.
    const int64_t E = c.num_local_experts;
    if (layer == 0 || router_logits_.size() != static_cast<size_t>(c.num_hidden_layers * T * E)) {
      router_logits_.assign(c.num_hidden_layers * T * E, 0.0f);
    }
    std::copy(logits.begin(), logits.end(), router_logits_.begin() + layer * T * E);
  }
}

}  // namespace tessera
