#include "model/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/error.h"

namespace tessera {
namespace {

// pos_freqs[i] = base ** (float(2i) / d) in float32, as `base ** (torch.arange(0, d, 2).float() / d)`.
std::vector<float> PosFreqs(double base, int64_t dim) {
  std::vector<float> out(dim / 2);
  for (int64_t i = 0; i < dim / 2; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(dim);
    out[i] = std::pow(static_cast<float>(base), exponent);
  }
  return out;
}

double YarnMscale(double scale, double mscale) {
  return scale <= 1.0 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

}  // namespace

RopeFrequencies ComputeRopeFrequencies(const ModelConfig& config, const std::string& source) {
  const int64_t dim = config.head_dim;
  if (dim <= 0 || dim % 2 != 0) Fail(source, ": head_dim ", dim, " must be positive and even for RoPE");
  const double base = config.rope_theta;
  const std::vector<float> pos_freqs = PosFreqs(base, dim);
  RopeFrequencies out;
  out.inv_freq.resize(dim / 2);
  const std::string type = config.rope_scaling ? config.rope_scaling->rope_type : "default";

  if (type == "default" || type == "linear") {
    const float factor = type == "linear" ? static_cast<float>(config.rope_scaling->factor) : 1.0f;
    for (int64_t i = 0; i < dim / 2; ++i) out.inv_freq[i] = 1.0f / pos_freqs[i] / factor;
    return out;
  }
  if (type == "yarn") {
    const RopeScaling& rs = *config.rope_scaling;
    const double factor = rs.factor;
    const double l0 = static_cast<double>(
        rs.original_max_position_embeddings.value_or(config.max_position_embeddings));
    if (rs.attention_factor) {
      out.attention_factor = static_cast<float>(*rs.attention_factor);
    } else if (rs.mscale.value_or(0.0) != 0.0 && rs.mscale_all_dim.value_or(0.0) != 0.0) {
      out.attention_factor =
          static_cast<float>(YarnMscale(factor, *rs.mscale) / YarnMscale(factor, *rs.mscale_all_dim));
    } else {
      out.attention_factor = static_cast<float>(YarnMscale(factor, 1.0));
    }
    // HF reads beta_fast/beta_slow with `or`, so 0 means the default.
    const double beta_fast = rs.beta_fast != 0.0 ? rs.beta_fast : 32.0;
    const double beta_slow = rs.beta_slow != 0.0 ? rs.beta_slow : 1.0;
    auto correction_dim = [&](double rotations) {
      return (dim * std::log(l0 / (rotations * 2 * std::numbers::pi))) / (2 * std::log(base));
    };
    double low = correction_dim(beta_fast), high = correction_dim(beta_slow);
    if (rs.truncate) {
      low = std::floor(low);
      high = std::ceil(high);
    }
    low = std::max(low, 0.0);
    high = std::min(high, static_cast<double>(dim - 1));
    if (low == high) high += 0.001;
    const float low_f = static_cast<float>(low), span_f = static_cast<float>(high - low);
    for (int64_t i = 0; i < dim / 2; ++i) {
      const float ramp = std::clamp((static_cast<float>(i) - low_f) / span_f, 0.0f, 1.0f);
      const float extrapolation_factor = 1.0f - ramp;
      const float extrapolation = 1.0f / pos_freqs[i];
      const float interpolation = 1.0f / (static_cast<float>(factor) * pos_freqs[i]);
      out.inv_freq[i] = interpolation * (1.0f - extrapolation_factor) + extrapolation * extrapolation_factor;
    }
    return out;
  }
  Fail(source, ": rope_scaling.rope_type '", type, "' is not supported by this engine yet (supported: default, linear, yarn)");
}

void RopeCosSin(const RopeFrequencies& rope, int64_t pos, float* out_cos, float* out_sin) {
  const float p = static_cast<float>(pos);
  for (size_t i = 0; i < rope.inv_freq.size(); ++i) {
    const float angle = p * rope.inv_freq[i];
    out_cos[i] = static_cast<float>(std::cos(static_cast<double>(angle))) * rope.attention_factor;
    out_sin[i] = static_cast<float>(std::sin(static_cast<double>(angle))) * rope.attention_factor;
  }
}

void ApplyRopeSplitHalf(float* x, const float* cos, const float* sin, int64_t half) {
  for (int64_t i = 0; i < half; ++i) {
    const float a = x[i], b = x[i + half];
    x[i] = a * cos[i] - b * sin[i];
    x[i + half] = b * cos[i] + a * sin[i];
  }
}

}  // namespace tessera
