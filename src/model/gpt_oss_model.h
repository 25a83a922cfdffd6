// The gpt-oss forward pass on CPU, in float32 activations, exactly as Hugging Face transformers
// computes it in float32 eager mode (../shared/reference/gpt-oss.md §3):
//   embeddings -> per layer [RMSNorm -> attention (q/k/v/o biases, GQA, split-half YaRN RoPE,
//   per-head sinks in the softmax denominator, sliding window on sliding layers) -> residual ->
//   RMSNorm -> MoE (router top-k then softmax over the k, swigluoai experts from MXFP4 weights,
//   weighted combine) -> residual] -> final RMSNorm -> lm_head.
//
// Weights are used in place from the memory-mapped checkpoint: BF16 matrices and MXFP4 expert
// blocks are read by the kernels directly (no converted copy); only norms, biases and sinks
// (a few MB) are widened to float32 at load. Every row of every result is computed the same way
// whatever the number of tokens in the call, so decoding token by token and verifying several
// tokens in one call give the same logits.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "io/config.h"
#include "io/safetensors.h"
#include "model/kv_cache.h"
#include "model/rope.h"

namespace tessera {

enum class LogitsMode { kNone, kLast, kAll };

class GptOssModel {
 public:
  // Loads `path` (a Hugging Face gpt-oss directory, or a .safetensors file beside config.json).
  // Checks every tensor against the gpt-oss description and throws tessera::Error naming the
  // directory and the first problem (missing / misshapen tensor, unsupported architecture).
  static std::unique_ptr<GptOssModel> Load(const std::string& path);
  ~GptOssModel();

  const ModelConfig& config() const { return config_; }
  const GenerationConfig& generation_config() const { return generation_config_; }
  const std::string& path() const { return path_; }
  int64_t vocab_size() const { return config_.vocab_size; }
  // Bytes of the checkpoint's tensors (what is mapped).
  uint64_t weight_bytes() const { return weight_bytes_; }
  // Logical parameter count (MXFP4 codes count 2 weights per byte).
  uint64_t parameters() const { return parameters_; }

  // Runs `tokens` at positions [start, start + T) against `cache`, which must hold at least
  // `start` positions; positions >= start already in the cache are dropped first (roll back).
  // Appends the new positions to the cache. Logits, float32: kLast -> [vocab] for the last
  // token, kAll -> [T, vocab] row-major. Throws tessera::Error for an id outside the vocabulary
  // or when start + T exceeds the cache's context.
  void Forward(std::span<const int32_t> tokens, int64_t start, KvCache& cache, LogitsMode mode,
               std::vector<float>& logits) const;

 private:
  struct Layer;
  GptOssModel() = default;
  void Attention(int layer, const float* h, int64_t T, int64_t start, KvCache& cache,
                 const std::vector<float>& rope_cs, float* out) const;
  void Moe(int layer, const float* h, int64_t T, float* out) const;

  std::string path_;
  ModelConfig config_;
  GenerationConfig generation_config_;
  WeightStore store_;
  Rope rope_;
  uint64_t weight_bytes_ = 0;
  uint64_t parameters_ = 0;

  const uint16_t* embed_ = nullptr;    // [V, H] bf16
  const uint16_t* lm_head_ = nullptr;  // [V, H] bf16
  std::vector<float> final_norm_;      // [H]
  std::vector<Layer> layers_;
};

// y = w * x / sqrt(mean(x^2) + eps) for each of the m rows of width n (HF GptOssRMSNorm in
// float32: the weight multiplies after normalisation).
void RmsNorm(const float* x, const float* w, int64_t m, int64_t n, double eps, float* y);

}  // namespace tessera
