// Rotary position embedding frequencies from a model config, computed as Hugging Face
// transformers does (modeling_rope_utils.py) in float32, so cos/sin match the reference.
//
// Supported here: "default", "linear" and "yarn" (including gpt-oss's unfloored correction range,
// `truncate: false`, and the attention factor applied to both cos and sin). Formulas:
// ../shared/reference/rope.md §2, §3, §5, §6.
#pragma once

#include <cstdint>
#include <vector>

#include "io/config.h"

namespace tessera {

struct RopeFrequencies {
  std::vector<float> inv_freq;   // [rotary_dim / 2], float32 as HF keeps it
  float attention_factor = 1.0f;  // multiplies cos and sin
};

// Throws tessera::Error naming `source` for a rope type this engine cannot compute yet.
RopeFrequencies ComputeRopeFrequencies(const ModelConfig& config, const std::string& source);

// cos/sin for one position: out_cos[i] = cos(float(pos) * inv_freq[i]) * attention_factor, the
// angle rounded to float32 first as HF's float32 matmul of positions and frequencies does.
void RopeCosSin(const RopeFrequencies& rope, int64_t pos, float* out_cos, float* out_sin);

// Rotates one head in place with split-half (NeoX) pairing: (x[i], x[i + d/2]) for i < d/2,
// d = 2 * inv_freq.size().
void ApplyRopeSplitHalf(float* x, const float* cos, const float* sin, int64_t half);

}  // namespace tessera
