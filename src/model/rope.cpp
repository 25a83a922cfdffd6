#include "model/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/error.h"

namespace tessera {
namespace {

constexpr const char* kRopeTypes[] = {"default", "linear", "dynamic", "yarn", "longrope", "llama3"};

// HF's get_mscale / yarn_get_mscale: 0.1 * m * ln(s) + 1, and 1 for s <= 1 (rope.md §5).
double GetMscale(double scale, double mscale) {
  return scale <= 1.0 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

// Exponents float(2i) / float(d) for i < d/2, as `torch.arange(0, d, 2).float() / d`.
std::vector<float> Exponents(int64_t dim) {
  std::vector<float> out(dim / 2);
  for (int64_t i = 0; i < dim / 2; ++i) out[i] = static_cast<float>(2 * i) / static_cast<float>(dim);
  return out;
}

// base ** exponents in float32 (torch promotes a Python base to the tensor's float32).
std::vector<float> PosFreqs(float base, int64_t dim) {
  std::vector<float> out = Exponents(dim);
  for (float& e : out) e = std::pow(base, e);
  return out;
}

const nlohmann::json* RawKey(const ModelConfig& c, const char* key) {
  if (!c.raw.is_object()) return nullptr;
  auto it = c.raw.find(key);
  return it == c.raw.end() || it->is_null() ? nullptr : &*it;
}

double RawNumber(const ModelConfig& c, const char* key, const std::string& source) {
  const nlohmann::json* v = RawKey(c, key);
  if (!v->is_number()) Fail(source, ": ", key, ": must be a number, got ", v->dump());
  return v->get<double>();
}

int64_t RoundUp(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

}  // namespace

Rope Rope::FromConfig(const ModelConfig& config, const std::string& source) {
  Rope r;
  r.type_ = config.rope_scaling ? config.rope_scaling->rope_type : "default";
  if (std::find(std::begin(kRopeTypes), std::end(kRopeTypes), r.type_) == std::end(kRopeTypes)) {
    Fail(source, ": rope_scaling.rope_type: unknown rope type '", r.type_,
         "' (expected default, linear, dynamic, yarn, longrope or llama3)");
  }
  if (config.rope_scaling) r.scaling_ = *config.rope_scaling;
  const RopeScaling& rs = r.scaling_;
  r.deepseek_ = config.model_type.rfind("deepseek", 0) == 0;
  r.base_ = config.rope_theta;
  if (!(r.base_ > 0.0) || !std::isfinite(r.base_)) Fail(source, ": rope_theta: must be positive, got ", r.base_);
  r.max_position_embeddings_ = config.max_position_embeddings;

  // Head sizes.
  r.head_dim_ = config.head_dim;
  if (r.head_dim_ <= 0) Fail(source, ": head_dim: must be positive for RoPE, got ", r.head_dim_);
  if (r.deepseek_) {
    if (RawKey(config, "qk_rope_head_dim") == nullptr) Fail(source, ": qk_rope_head_dim: missing (required for DeepSeek RoPE)");
    const double rope_dim = RawNumber(config, "qk_rope_head_dim", source);
    if (rope_dim != static_cast<double>(r.head_dim_)) {
      Fail(source, ": qk_rope_head_dim ", rope_dim, " disagrees with head_dim ", r.head_dim_,
           " (DeepSeek rotates qk_rope_head_dim channels)");
    }
  }
  double partial = 1.0;
  if (RawKey(config, "partial_rotary_factor") != nullptr) {
    partial = RawNumber(config, "partial_rotary_factor", source);
    if (!(partial > 0.0 && partial <= 1.0)) {
      Fail(source, ": partial_rotary_factor: must be in (0, 1], got ", partial);
    }
  }
  // HF: dim = int(head_dim * partial_rotary_factor), truncated.
  r.rotary_dim_ = static_cast<int64_t>(static_cast<double>(r.head_dim_) * partial);
  if (r.rotary_dim_ <= 0 || r.rotary_dim_ % 2 != 0) {
    Fail(source, ": rotary width ", r.rotary_dim_, " (head_dim ", r.head_dim_, " x partial_rotary_factor ", partial,
         ") must be positive and even");
  }
  if (const nlohmann::json* v = RawKey(config, "rope_interleave")) {
    if (!v->is_boolean()) Fail(source, ": rope_interleave: must be true or false, got ", v->dump());
    r.pairing_ = v->get<bool>() ? RopePairing::kInterleaved : RopePairing::kSplitHalf;
  } else {
    // DeepseekV3Config defaults rope_interleave to true; the reference rotates complex pairs.
    r.pairing_ = r.deepseek_ ? RopePairing::kInterleaved : RopePairing::kSplitHalf;
  }

  // Scaling parameters.
  const std::string& type = r.type_;
  if (type != "default" && !(rs.factor > 0.0 && std::isfinite(rs.factor))) {
    Fail(source, ": rope_scaling.factor: must be positive, got ", rs.factor);
  }
  if (type == "dynamic" && r.max_position_embeddings_ <= 0) {
    Fail(source, ": max_position_embeddings: must be positive for dynamic RoPE, got ", r.max_position_embeddings_);
  }
  if (type == "yarn" || (type == "llama3" && rs.freq_factors.empty())) {
    if (!rs.original_max_position_embeddings || *rs.original_max_position_embeddings <= 0) {
      Fail(source, ": rope_scaling.original_max_position_embeddings: missing (required for rope type '", type, "')");
    }
    r.original_max_ = *rs.original_max_position_embeddings;
  }
  if (type == "yarn" && rs.attention_factor && !(*rs.attention_factor > 0.0)) {
    Fail(source, ": rope_scaling.attention_factor: must be positive, got ", *rs.attention_factor);
  }
  if (type == "llama3" && !rs.freq_factors.empty()) {
    if (static_cast<int64_t>(rs.freq_factors.size()) * 2 != r.rotary_dim_) {
      Fail(source, ": rope_scaling.freq_factors: ", rs.freq_factors.size(), " entries for ", r.rotary_dim_,
           " rotated dimensions (one per pair)");
    }
  } else if (type == "llama3") {
    if (!rs.low_freq_factor || !rs.high_freq_factor) {
      Fail(source, ": rope_scaling: low_freq_factor and high_freq_factor are required for rope type 'llama3'");
    }
    if (!(*rs.high_freq_factor > *rs.low_freq_factor) || !(*rs.low_freq_factor > 0.0)) {
      Fail(source, ": rope_scaling: llama3 needs 0 < low_freq_factor < high_freq_factor, got ", *rs.low_freq_factor,
           " and ", *rs.high_freq_factor);
    }
  }
  if (type == "longrope") {
    // HF reads the top-level original_max_position_embeddings (Phi-3) and then takes the scaling
    // factor as max_position_embeddings / original; without it the original context is
    // rope_scaling's value or max_position_embeddings, and the factor the configured one.
    if (const nlohmann::json* v = RawKey(config, "original_max_position_embeddings")) {
      r.original_max_ = static_cast<int64_t>(RawNumber(config, "original_max_position_embeddings", source));
      if (r.original_max_ <= 0) Fail(source, ": original_max_position_embeddings: must be positive, got ", v->dump());
      r.scaling_.factor = static_cast<double>(r.max_position_embeddings_) / static_cast<double>(r.original_max_);
    } else {
      r.original_max_ = rs.original_max_position_embeddings.value_or(r.max_position_embeddings_);
    }
    if (r.original_max_ <= 0) Fail(source, ": longrope needs a positive original_max_position_embeddings");
    const size_t want = static_cast<size_t>(r.rotary_dim_ / 2);
    for (const auto* list : {&rs.short_factor, &rs.long_factor}) {
      const char* name = list == &rs.short_factor ? "short_factor" : "long_factor";
      if (list->size() != want) {
        Fail(source, ": rope_scaling.", name, ": has ", list->size(), " entries, expected rotary_dim / 2 = ", want);
      }
      for (double f : *list) {
        if (!(f > 0.0) || !std::isfinite(f)) Fail(source, ": rope_scaling.", name, ": entries must be positive, got ", f);
      }
    }
  }

  // Softmax scale (HF `self.scaling`; DeepSeek-V3 MLA.__init__ / DeepseekV3Attention).
  double qk_dim = static_cast<double>(r.head_dim_);
  if (r.deepseek_) {
    if (RawKey(config, "qk_nope_head_dim") == nullptr) Fail(source, ": qk_nope_head_dim: missing (required for DeepSeek attention)");
    const double nope = RawNumber(config, "qk_nope_head_dim", source);
    if (!(nope >= 0.0)) Fail(source, ": qk_nope_head_dim: must be >= 0, got ", nope);
    qk_dim += nope;
  }
  // Gemma: query_pre_attn_scalar ** -0.5 (families-2026.md "Pitfalls"), not head_dim's.
  if (config.query_pre_attn_scalar) qk_dim = *config.query_pre_attn_scalar;
  double scale = std::pow(qk_dim, -0.5);
  if (r.deepseek_ && config.rope_scaling && rs.mscale_all_dim.value_or(0.0) != 0.0) {
    const double m = GetMscale(rs.factor, *rs.mscale_all_dim);
    scale = scale * m * m;
  }
  r.attention_scale_ = static_cast<float>(scale);

  r.table_positions_ = r.max_position_embeddings_;
  if (r.deepseek_ && type == "yarn") {
    r.table_positions_ = static_cast<int64_t>(static_cast<double>(r.original_max_) * rs.factor);
  }
  r.initial_ = r.Compute(0);
  return r;
}

RopeFrequencies Rope::Compute(int64_t seq_len) const {
  const int64_t dim = rotary_dim_;
  const std::vector<float> expo = Exponents(dim);
  const RopeScaling& rs = scaling_;
  RopeFrequencies out;
  out.inv_freq.resize(dim / 2);
  const float base_f = static_cast<float>(base_);

  if (type_ == "default" || type_ == "linear" || type_ == "llama3") {
    for (int64_t i = 0; i < dim / 2; ++i) out.inv_freq[i] = 1.0f / std::pow(base_f, expo[i]);
  }
  if (type_ == "linear") {
    for (float& f : out.inv_freq) f /= static_cast<float>(rs.factor);
  } else if (type_ == "dynamic") {
    const double exponent = static_cast<double>(dim) / static_cast<double>(dim - 2);
    float new_base;
    if (seq_len > max_position_embeddings_) {
      // HF's runtime update passes seq_len as a tensor, so the rescaled base is float32 arithmetic.
      const float f = static_cast<float>(rs.factor);
      float t = f * static_cast<float>(seq_len);
      t = t / static_cast<float>(max_position_embeddings_);
      t = t - static_cast<float>(rs.factor - 1.0);
      const float p = static_cast<float>(std::pow(static_cast<double>(t), exponent));
      new_base = base_f * p;
    } else {
      // At init (seq_len = max_position_embeddings) the same formula runs on Python floats.
      const double m = static_cast<double>(max_position_embeddings_);
      const double t = rs.factor * m / m - (rs.factor - 1.0);
      new_base = static_cast<float>(base_ * std::pow(t, exponent));
    }
    for (int64_t i = 0; i < dim / 2; ++i) out.inv_freq[i] = 1.0f / std::pow(new_base, expo[i]);
  } else if (type_ == "yarn") {
    const double factor = rs.factor;
    const double l0 = static_cast<double>(original_max_);
    if (rs.attention_factor) {
      out.attention_factor = static_cast<float>(*rs.attention_factor);
    } else if (rs.mscale.value_or(0.0) != 0.0 && rs.mscale_all_dim.value_or(0.0) != 0.0) {
      // HF tests truthiness, so a zero mscale falls through to get_mscale(factor).
      out.attention_factor = static_cast<float>(GetMscale(factor, *rs.mscale) / GetMscale(factor, *rs.mscale_all_dim));
    } else {
      out.attention_factor = static_cast<float>(GetMscale(factor, 1.0));
    }
    // HF reads beta_fast/beta_slow with `or`, so 0 means the default.
    const double beta_fast = rs.beta_fast != 0.0 ? rs.beta_fast : 32.0;
    const double beta_slow = rs.beta_slow != 0.0 ? rs.beta_slow : 1.0;
    const double d = static_cast<double>(dim);
    auto correction_dim = [&](double rotations) {
      return (d * std::log(l0 / (rotations * 2 * std::numbers::pi))) / (2 * std::log(base_));
    };
    double low = correction_dim(beta_fast), high = correction_dim(beta_slow);
    if (rs.truncate) {
      low = std::floor(low);
      high = std::ceil(high);
    }
    low = std::max(low, 0.0);
    high = std::min(high, d - 1);
    if (low == high) high += 0.001;
    const std::vector<float> pos_freqs = PosFreqs(base_f, dim);
    const float low_f = static_cast<float>(low), span_f = static_cast<float>(high - low);
    for (int64_t i = 0; i < dim / 2; ++i) {
      const float ramp = std::clamp((static_cast<float>(i) - low_f) / span_f, 0.0f, 1.0f);
      const float extrapolation_factor = 1.0f - ramp;
      const float extrapolation = 1.0f / pos_freqs[i];
      const float interpolation = 1.0f / (static_cast<float>(factor) * pos_freqs[i]);
      out.inv_freq[i] = interpolation * (1.0f - extrapolation_factor) + extrapolation * extrapolation_factor;
    }
  } else if (type_ == "longrope") {
    const std::vector<double>& ext = seq_len > original_max_ ? rs.long_factor : rs.short_factor;
    for (int64_t i = 0; i < dim / 2; ++i) {
      out.inv_freq[i] = 1.0f / (static_cast<float>(ext[i]) * std::pow(base_f, expo[i]));
    }
    if (rs.attention_factor) {
      out.attention_factor = static_cast<float>(*rs.attention_factor);
    } else if (rs.factor > 1.0) {
      out.attention_factor = static_cast<float>(
          std::sqrt(1.0 + std::log(rs.factor) / std::log(static_cast<double>(original_max_))));
    }
  } else if (type_ == "llama3" && !rs.freq_factors.empty()) {
    // llama.cpp: theta = pos base^(-2i/d) / factor_i.
    for (size_t i = 0; i < out.inv_freq.size(); ++i) out.inv_freq[i] /= static_cast<float>(rs.freq_factors[i]);
  } else if (type_ == "llama3") {
    // float32 tensor arithmetic with the Python scalars rounded to float, as HF computes it.
    const double l0 = static_cast<double>(original_max_);
    const double lo = *rs.low_freq_factor, hi = *rs.high_freq_factor;
    const float low_wavelen = static_cast<float>(l0 / lo), high_wavelen = static_cast<float>(l0 / hi);
    const float factor = static_cast<float>(rs.factor);
    const float two_pi = static_cast<float>(2 * std::numbers::pi);
    for (float& f : out.inv_freq) {
      const float wavelen = two_pi / f;
      const float scaled = wavelen > low_wavelen ? f / factor : f;
      const float smooth = (static_cast<float>(l0) / wavelen - static_cast<float>(lo)) / static_cast<float>(hi - lo);
      const float smoothed = (1.0f - smooth) * scaled / factor + smooth * scaled;
      const bool medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
      f = medium ? smoothed : scaled;
    }
  }
  return out;
}

RopeFrequencies Rope::Frequencies(int64_t seq_len) const {
  if (type_ == "dynamic" && seq_len > max_position_embeddings_) return Compute(seq_len);
  if (type_ == "longrope" && seq_len > original_max_) return Compute(seq_len);
  return initial_;
}

void Rope::CosSin(const RopeFrequencies& freqs, std::span<const int64_t> positions, float* cs,
                  int64_t cs_stride) const {
  const int64_t h = half();
  TESSERA_CHECK(static_cast<int64_t>(freqs.inv_freq.size()) == h && cs_stride >= 2 * h);
  for (size_t t = 0; t < positions.size(); ++t) {
    float* cos = cs + static_cast<int64_t>(t) * cs_stride;
    float* sin = cos + h;
    const float p = static_cast<float>(positions[t]);
    for (int64_t i = 0; i < h; ++i) {
      const float angle = p * freqs.inv_freq[i];
      cos[i] = static_cast<float>(std::cos(static_cast<double>(angle))) * freqs.attention_factor;
      sin[i] = static_cast<float>(std::sin(static_cast<double>(angle))) * freqs.attention_factor;
    }
  }
}

void Rope::CosSin(const RopeFrequencies& freqs, int64_t start, int64_t count, float* cs, int64_t cs_stride) const {
  std::vector<int64_t> positions(std::max<int64_t>(count, 0));
  for (int64_t t = 0; t < count; ++t) positions[t] = start + t;
  CosSin(freqs, positions, cs, cs_stride);
}

int64_t Rope::table_stride() const { return RoundUp(rotary_dim_, deepseek_ ? 128 : 16); }

std::vector<float> Rope::Table(int64_t positions) const {
  const int64_t stride = table_stride();
  std::vector<float> table(std::max<int64_t>(positions, 0) * stride, 0.0f);
  CosSin(initial_, 0, positions, table.data(), stride);
  return table;
}

void Rope::Apply(float* x, int64_t tokens, int64_t heads, int64_t token_stride, int64_t head_stride,
                 const float* cs, int64_t cs_stride) const {
  ActiveKernels().rope_apply(x, tokens, heads, token_stride, head_stride, cs, cs_stride, half(), pairing_);
}

RopeFrequencyTracker::RopeFrequencyTracker(const Rope& rope)
    : rope_(&rope),
      max_seq_len_cached_(rope.max_position_embeddings()),
      original_max_seq_len_(rope.max_position_embeddings()),
      current_(rope.frequencies()) {}

const RopeFrequencies& RopeFrequencyTracker::Update(int64_t seq_len) {
  if (rope_->type() == "dynamic") {
    if (seq_len > max_seq_len_cached_) {
      current_ = rope_->Frequencies(seq_len);
      max_seq_len_cached_ = seq_len;
    }
    if (seq_len < original_max_seq_len_ && max_seq_len_cached_ > original_max_seq_len_) {
      current_ = rope_->frequencies();
      max_seq_len_cached_ = original_max_seq_len_;
    }
  } else if (rope_->type() == "longrope") {
    current_ = rope_->Frequencies(seq_len);
  }
  return current_;
}

}  // namespace tessera
