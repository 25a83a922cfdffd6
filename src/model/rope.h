// Rotary position embeddings built from a model config, computed as Hugging Face transformers
// 4.57.1 does (modeling_rope_utils.py, ROPE_INIT_FUNCTIONS) in float32, so inverse frequencies,
// attention factors and cos/sin tables match the reference to float rounding.
//
// Types (../shared/reference/rope.md): "default" (§2), "linear" (§3), "dynamic" NTK (§4), "yarn"
// (§5: beta_fast/beta_slow, truncate, attention_factor, mscale/mscale_all_dim) including gpt-oss's
// NTK-by-parts with concentration (§6: yarn with truncate false), "llama3" (§8) and "longrope"
// (short/long factors, attention factor sqrt(1 + ln(factor) / ln(original context))).
//
// DeepSeek (model_type deepseek_v2 / deepseek_v3, §7): the same yarn frequencies and cos/sin factor
// mscale(factor, mscale) / mscale(factor, mscale_all_dim); pairs interleaved (`rope_interleave`,
// default true); the softmax scale is qk_head_dim^-0.5 times mscale(factor, mscale_all_dim)^2; and
// cos/sin tables pad rows to a multiple of 128 columns as tpu-inference's
// DeepseekScalingRotaryEmbedding does.
//
// Rotated width: int(head_dim * partial_rotary_factor) (HF); the first rotary_dim channels of a
// head rotate, the rest pass through (vLLM's partial-rotary convention, rope.md §1).
//
// Sequence-length dependence: "dynamic" and "longrope" frequencies depend on the sequence length
// L = (largest position id in the call) + 1. Frequencies(L) gives HF's result for one L;
// RopeFrequencyTracker reproduces HF's stateful `dynamic_rope_update` across calls (dynamic NTK
// grows with the longest L seen and resets once L falls back under max_position_embeddings; keys
// already cached keep the rotation they were given, as in HF).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "io/config.h"
#include "kernels/kernels.h"

namespace tessera {

struct RopeFrequencies {
  std::vector<float> inv_freq;    // [rotary_dim / 2], float32 as HF keeps it
  float attention_factor = 1.0f;  // multiplies cos and sin
};

class Rope {
 public:
  Rope() = default;  // an empty rope (rotary_dim 0); models hold the one FromConfig builds
  // Builds the rope of `config`. Throws tessera::Error naming `source` for an unknown rope type,
  // factor <= 0, yarn without original_max_position_embeddings, llama3/longrope parameters
  // missing or of the wrong length, or head sizes that do not fit (odd or zero rotary width,
  // partial_rotary_factor outside (0, 1], DeepSeek qk_rope_head_dim disagreeing with head_dim).
  static Rope FromConfig(const ModelConfig& config, const std::string& source);

  const std::string& type() const { return type_; }  // resolved rope type ("yarn", ...)
  bool deepseek() const { return deepseek_; }
  int64_t head_dim() const { return head_dim_; }
  int64_t rotary_dim() const { return rotary_dim_; }
  int64_t half() const { return rotary_dim_ / 2; }
  int64_t max_position_embeddings() const { return max_position_embeddings_; }
  RopePairing pairing() const { return pairing_; }
  // Whether Frequencies() depends on the sequence length (dynamic, longrope).
  bool length_dependent() const { return type_ == "dynamic" || type_ == "longrope"; }

  // The softmax scale for q.k that models use: HF's `scaling`, float(qk_dim^-0.5) with qk_dim
  // the query/key head width (DeepSeek: qk_nope_head_dim + qk_rope_head_dim, times
  // mscale(factor, mscale_all_dim)^2 when mscale_all_dim is nonzero).
  float attention_scale() const { return attention_scale_; }

  // HF's frequencies at init (no sequence length): for dynamic those of max_position_embeddings,
  // for longrope the short factors.
  const RopeFrequencies& frequencies() const { return initial_; }
  // HF's rope_init_fn for a call whose largest position id is seq_len - 1. Dynamic: the initial
  // frequencies when seq_len <= max_position_embeddings, else base rescaled for seq_len (in
  // float32, as HF's runtime update computes it from a tensor). Longrope: long factors when
  // seq_len > original_max_position_embeddings, else short. Other types: frequencies().
  RopeFrequencies Frequencies(int64_t seq_len) const;

  // cos/sin rows for each position: row t of `cs` ([positions.size(), cs_stride], cs_stride >=
  // rotary_dim) holds cos(float(p) * inv_freq[i]) * attention_factor for i < half, then the sines.
  // The angle is rounded to float32 first, as HF's float32 matmul of positions and frequencies.
  void CosSin(const RopeFrequencies& freqs, std::span<const int64_t> positions, float* cs,
              int64_t cs_stride) const;
  // Same for the consecutive positions [start, start + count).
  void CosSin(const RopeFrequencies& freqs, int64_t start, int64_t count, float* cs,
              int64_t cs_stride) const;

  // Row width of a cos/sin table: rotary_dim rounded up to 128 for DeepSeek (tpu-inference's lane
  // padding), else to 16 floats (one 64-byte line) so rows stay aligned for vector loads.
  int64_t table_stride() const;
  // Positions a precomputed table covers by default: DeepSeek original_max_position_embeddings *
  // factor (tpu-inference), otherwise max_position_embeddings.
  int64_t table_positions() const { return table_positions_; }
  // [positions, table_stride()] table of the initial frequencies, padding columns zero.
  std::vector<float> Table(int64_t positions) const;

  // Rotates q or k in place: `tokens` x `heads` vectors, vector (t, h) at
  // x + t * token_stride + h * head_stride, with cos/sin row t at cs + t * cs_stride (CosSin's
  // layout). Uses ActiveKernels().rope_apply.
  void Apply(float* x, int64_t tokens, int64_t heads, int64_t token_stride, int64_t head_stride,
             const float* cs, int64_t cs_stride) const;

 private:
  RopeFrequencies Compute(int64_t seq_len) const;

  std::string type_ = "default";
  bool deepseek_ = false;
  int64_t head_dim_ = 0;
  int64_t rotary_dim_ = 0;
  RopePairing pairing_ = RopePairing::kSplitHalf;
  float attention_scale_ = 1.0f;
  double base_ = 10000.0;
  int64_t max_position_embeddings_ = 0;
  int64_t original_max_ = 0;  // yarn / llama3 / longrope original context
  int64_t table_positions_ = 0;
  RopeScaling scaling_;
  RopeFrequencies initial_;
};

// HF's `dynamic_rope_update` state for one model: call Update with each forward call's sequence
// length (largest position id + 1) and rotate that call's q and k with the result.
//   dynamic: recomputed when seq_len exceeds the longest length seen so far; reset to the initial
//            frequencies when seq_len < max_position_embeddings after having grown past it.
//   longrope: long factors while seq_len > original_max_position_embeddings, short otherwise.
//   others: always the initial frequencies.
class RopeFrequencyTracker {
 public:
  explicit RopeFrequencyTracker(const Rope& rope);
  const RopeFrequencies& Update(int64_t seq_len);
  const RopeFrequencies& current() const { return current_; }

 private:
  const Rope* rope_;
  int64_t max_seq_len_cached_;
  int64_t original_max_seq_len_;
  RopeFrequencies current_;
};

}  // namespace tessera
