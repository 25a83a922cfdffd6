// Synthetic gpt-oss models: a complete Hugging Face directory with deterministic random weights.
//
// `tessera synth --preset NAME --out DIR` writes config.json, generation_config.json,
// tokenizer.json, tokenizer_config.json, special_tokens_map.json and the weights (MXFP4 experts
// as *_blocks / *_scales, BF16 elsewhere), one tensor at a time through ModelTensorSpecs() (the
// single description of the tensor set). Presets:
//   tiny          hidden 64, intermediate 96, 4 layers (sliding, full, ...), 4 heads of 32 (so
//                 head_dim != hidden / heads), 2 KV heads, 8 experts top-4, sliding window 16,
//                 the real o200k_harmony vocabulary (201088) so the real tokenizer works; ~52 MB
//   gpt-oss-20b   the real config (../shared/reference/gpt-oss.md §1.1): 459 tensors, 13.76 GB
//   gpt-oss-120b  the real config: 687 tensors, 65.25 GB
//
// Values (why they are plausible; the forward pass must stay finite and non-degenerate):
//   - A counter-based generator: the value at element i of tensor `name` is a function of
//     (seed, name, i) only (SplitMix64 finalizer over a per-tensor key plus the index), so output
//     is identical for any thread count, shard size or tensor order.
//   - "Normal" draws are Irwin-Hall sums of four 16-bit uniforms, rescaled to unit variance:
//     close to Gaussian, bounded by +-3.46 sigma, one hash per element.
//   - Linear and router weights: std 1/sqrt(fan_in), so a unit-RMS input (what RMSNorm feeds
//     every projection) gives outputs of unit variance: attention logits of std ~1-2 after the
//     0.125 scale and YaRN's 1.35^2, router logits of std ~1, SwiGLU gates mostly inside the
//     clamp at 7. For H = 2880 this is 0.0186, close to the checkpoint's initializer_range 0.02.
//   - MXFP4 experts: uniform random E2M1 codes (E[code^2] = 8.5625) with E8M0 scale bytes
//     c - 1, c, c + 1 uniformly per block, c chosen so the decoded std is 1/sqrt(fan_in) within a
//     factor sqrt(2) (c = 119 for fan_in 2880; 122 for 64 or 96).
//   - Norm weights 1 + 0.02 z; embeddings 0.02 z (rows are normed right away); biases 0.02 z;
//     attention sinks z (moderate, comparable to the scores); lm_head 2/sqrt(H) z (logits of
//     std ~2: sampling is neither uniform nor one-hot).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/tensor_specs.h"

namespace tessera {

// Greedy shard limit: with tensors in CheckpointOrder() it reproduces the real
// gpt-oss-20b shard assignment (3 files, shards starting at model.layers.18.self_attn.q_proj.weight
// and model.layers.6.mlp.experts.gate_up_proj_blocks) and the 15 files of gpt-oss-120b.
inline constexpr uint64_t kGptOssMaxShardBytes = 4'800'000'000;

// "tiny", "gpt-oss-20b", "gpt-oss-120b".
const std::vector<std::string>& SynthPresetNames();
// The preset's config.json. For the real sizes it equals the Hub file key for key (written with
// sorted keys and 2-space indent, as HF does). Throws tessera::Error for an unknown name.
nlohmann::json SynthPresetConfigJson(std::string_view preset);
// The same architecture cut to its first `layers` decoder layers (1 <= layers <= the config's):
// num_hidden_layers, the per-layer lists (layer_types) and the layer indices (mlp_only_layers,
// max_window_layers) follow; every other dimension stays. A quick stand-in with the real per-layer
// shapes (attention against depth, a layer's decode bytes) that loads and prefills in a fraction
// of the time. Throws tessera::Error for a count out of range.
nlohmann::json ShallowerConfig(nlohmann::json config, int64_t layers);
// generation_config.json of gpt-oss (gpt-oss.md §1.3): bos 199998, eos [200002, 199999, 200012],
// pad 199999, do_sample true.
nlohmann::json GptOssGenerationConfigJson();

// Distribution of one tensor's values (see the header comment).
struct SynthInit {
  float mean = 0.0f;          // float tensors: mean + std * z
  float std = 0.0f;
  uint8_t scale_center = 0;   // kExpertScales: bytes are scale_center - 1 .. scale_center + 1
};
SynthInit SynthInitFor(const TensorSpec& spec);

// Writes the `nbytes` bytes of `spec` (nbytes == spec.nbytes()) for `seed` into dst, in parallel
// on GlobalPool(). Blocks are uniform random bytes; floats are little-endian BF16/F16/F32 values.
void FillSyntheticTensor(const TensorSpec& spec, uint64_t seed, uint8_t* dst, size_t nbytes);

struct SynthOptions {
  nlohmann::json config_json;  // the config.json to write (a preset or a variant of one)
  uint64_t seed = 0;
  uint64_t max_shard_bytes = kGptOssMaxShardBytes;
  // Replace the model files of a non-empty directory (otherwise a non-empty DIR is an error).
  bool overwrite = false;
  // Called after each tensor with the bytes written so far and the total.
  std::function<void(uint64_t done, uint64_t total)> progress;
};

struct SynthResult {
  std::vector<std::string> weight_files;  // the .safetensors file names (the index is not listed)
  size_t num_tensors = 0;
  uint64_t tensor_bytes = 0;
  uint64_t parameters = 0;
  double seconds = 0.0;
};

// Validates the config and checks free disk space (statvfs, counting the files an overwrite
// removes) before touching the file system, then writes the directory. Weights go first and
// config.json last, so a directory with config.json is complete. A non-empty DIR is an error
// unless options.overwrite, which removes only the files synth itself writes (config and
// tokenizer JSON, model.safetensors, model-*.safetensors, the index). Errors are one-line
// tessera::Errors naming DIR.
SynthResult WriteSyntheticModel(const std::string& dir, const SynthOptions& options);

}  // namespace tessera
