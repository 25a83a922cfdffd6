// The gpt-oss forward pass on CPU, in float32 activations, exactly as Hugging Face transformers
// computes it in float32 eager mode (../shared/reference/gpt-oss.md §3):
//   embeddings -> per layer [RMSNorm -> attention (q/k/v/o biases, GQA, split-half YaRN RoPE,
//   per-head sinks in the softmax denominator, sliding window on sliding layers) -> residual ->
//   RMSNorm -> MoE (router top-k then softmax over the k, swigluoai experts from MXFP4 weights,
//   weighted combine) -> residual] -> final RMSNorm -> lm_head.
//
// Weights: the exact path reads the MXFP4 expert blocks in place from the memory-mapped
// checkpoint; BF16 matrices are copied once into huge-page buffers (the mapped pages released),
// the fast path repacks the experts (and with --dense int8 quantizes the BF16 matrices) at load,
// and tensor parallelism keeps only this rank's slices; one resident copy of each weight in every
// case. Norms, biases and sinks (a few MB) are widened to float32 at load. Every row of every result is computed the same way
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
#include "kernels/q8.h"
#include "model/tensor_parallel.h"
#include "model/kv_cache.h"
#include "model/rope.h"

namespace tessera {

enum class LogitsMode { kNone, kLast, kAll };

class KvCache;

// One sequence's part of a batched forward pass (GptOssModel::ForwardBatch): its tokens at
// positions [start, start + tokens.size()) against its own cache, and where its logits go.
struct ForwardSequence {
  std::span<const int32_t> tokens;
  int64_t start = 0;
  KvCache* cache = nullptr;
  LogitsMode mode = LogitsMode::kLast;
  std::vector<float>* logits = nullptr;  // kLast: [vocab]; kAll: [T, vocab]; kNone: cleared
};

// kExact: float32 activations through the exact kernels (kernels.h matmul_bf16 / matmul_mxfp4),
// weights used in place from the mapped checkpoint: the path the golden tests hold to the
// reference. kFast: the MXFP4 experts are repacked at load into the q8 layout and multiplied
// against int8 activations (kernels/q8.h), except in the first ModelOptions::exact_layers
// layers; accuracy cost in docs/ACCURACY.md.
enum class Precision { kExact, kFast };
// Attention projections, router and lm_head: kBf16 as stored, or kInt8 (per-row scales,
// quantized at load; kFast only). The embedding table stays BF16 (it is read a row at a time).
enum class DenseWeights { kBf16, kInt8 };

// How the MoE experts are split over tensor-parallel ranks (model/tensor_parallel.h). kTensor:
// every rank holds a 1/P slice (whole 32-wide MXFP4 blocks) of every expert's intermediate
// dimension; kExpert: rank r holds experts [r E/P, (r+1) E/P) whole. Both end in the same
// reduction of partial [T, H] sums; tensor slices balance the ranks' weight traffic whatever the
// routing (bench/expert_split_bench.cpp, docs/BENCHMARKS.md: 1.3x / 1.9x faster decode at P = 2 /
// 4), so they are the default.
enum class TpExperts { kTensor, kExpert };

struct ModelOptions {
  Precision precision = Precision::kExact;
  DenseWeights dense = DenseWeights::kBf16;
  // Tensor parallelism (model/tensor_parallel.h): this process is rank tp->rank() of
  // tp->size() and loads only its shard; nullptr = the whole model in this process.
  std::shared_ptr<TensorParallelGroup> tp = nullptr;
  TpExperts tp_experts = TpExperts::kTensor;
  // kFast only: the first `exact_layers` layers run as on the exact path (float32 activations,
  // BF16 attention and router, MXFP4 experts decoded exactly; their weights stay as stored), the
  // rest as fast. Quantization noise injected in the first layers passes through every later
  // one, so on checkpoints that amplify perturbations it costs the most (docs/ACCURACY.md);
  // lm_head follows `dense` regardless.
  int64_t exact_layers = 0;
  // Keep every layer's router logits of the last Forward (last_forward_router_logits), for the
  // accuracy diagnostics of tests/gpt_oss_accuracy_sweep_test.cpp; off, nothing is kept.
  bool record_router_logits = false;
};

class GptOssModel {
 public:
  // Loads `path` (a Hugging Face gpt-oss directory, or a .safetensors file beside config.json).
  // Checks every tensor against the gpt-oss description and throws tessera::Error naming the
  // directory and the first problem (missing / misshapen tensor, unsupported architecture).
  static std::unique_ptr<GptOssModel> Load(const std::string& path, const ModelOptions& options = {});
  ~GptOssModel();

  const ModelConfig& config() const { return config_; }
  const ModelOptions& options() const { return options_; }
  // The configuration KV caches for this model must be built from: config() with this rank's
  // attention and key/value head counts (the same as config() without tensor parallelism).
  const ModelConfig& cache_config() const { return cache_config_; }
  const GenerationConfig& generation_config() const { return generation_config_; }
  const std::string& path() const { return path_; }
  int64_t vocab_size() const { return config_.vocab_size; }
  // Bytes of the checkpoint's tensors (what is mapped).
  uint64_t weight_bytes() const { return weight_bytes_; }
  // Logical parameter count (MXFP4 codes count 2 weights per byte).
  uint64_t parameters() const { return parameters_; }
  // Bytes one decode step at `position` must read from memory in this model's weight formats:
  // every dense matrix (attention, router, lm_head) and the embedding row once, top_k experts'
  // gate_up and down (codes, scales) per layer, and the keys and values the attention reads
  // (min(position + 1, window) rows on sliding layers, position + 1 on full ones) at
  // `kv_element_bytes` each. Norms and biases (a few KB per layer) are left out. The decode
  // roofline is measured read bandwidth / this.
  double DecodeBytes(int64_t position, size_t kv_element_bytes) const;
  // Distinct experts (this rank's) the last Forward ran per layer, averaged over the layers: the
  // expert weights it streamed, which the speculative-decoding cost model compares with.
  double last_forward_experts_per_layer() const { return last_experts_per_layer_; }
  // With ModelOptions::record_router_logits: the biased router logits the last Forward chose
  // its experts from, [layers, T, experts] row-major (T = tokens of that call); empty otherwise.
  const std::vector<float>& last_forward_router_logits() const { return router_logits_; }

  // Runs `tokens` at positions [start, start + T) against `cache`, which must hold at least
  // `start` positions; positions >= start already in the cache are dropped first (roll back).
  // Appends the new positions to the cache. Logits, float32: kLast -> [vocab] for the last
  // token, kAll -> [T, vocab] row-major. Throws tessera::Error for an id outside the vocabulary
  // or when start + T exceeds the cache's context.
  void Forward(std::span<const int32_t> tokens, int64_t start, KvCache& cache, LogitsMode mode,
               std::vector<float>& logits) const;
  // Several sequences in one pass, each with its own cache (distinct caches): their rows share
  // every weight matrix's single read (dense projections, the MoE's experts, lm_head), and
  // attention runs per sequence. Each sequence gets bit for bit what Forward gives it alone
  // (the kernels are batch-invariant). Checks every sequence as Forward does before any work; a
  // failure partway leaves every cache as KvCache::AbortAppend describes. This is what a server
  // decodes its running sequences with, one step at a time.
  void ForwardBatch(std::span<const ForwardSequence> batch) const;

 private:
  struct Layer;
  struct DenseMatrix;
  GptOssModel() = default;
  void LoadFastWeights();
  // Copies the BF16 dense weights still in the mapping into huge-page buffers (DenseMatrix).
  void OwnBf16Weights();
  // Frees a dense matrix's BF16 (owned copy or mapped pages) once it is held as int8.
  void DropBf16(DenseMatrix& m);
  // y[T, n] = x[T, k] . W^T + bias through W's path (BF16 exact or q8 int8); xq: x quantized
  // (kernels/q8.h), made here on first use when W needs it and xq is empty.
  void Dense(const DenseMatrix& w, const float* x, int64_t T, Q8Activations& xq, const float* bias,
             float* y) const;
  // Several matrices that read the same x, as one column-parallel dispatch.
  struct DenseOutput {
    const DenseMatrix* w;
    const float* bias;
    float* y;
  };
  void DenseGroup(std::span<const DenseOutput> outs, const float* x, int64_t T, Q8Activations& xq) const;
  // Projections of h [T, H] to this rank's q [T, nq D], k, v [T, nkv D] (biases included).
  void ProjectQkv(const Layer& L, const float* h, int64_t T, float* q, float* k, float* v) const;
  // Attention of the T queries (RoPE applied here, in place, with cos/sin rows rope_cs [T, 2 half])
  // over the cache and the batch; keys and values of the batch are appended to the cache.
  // out [T, nq D].
  void Attention(int layer, float* q, float* k, const float* v, int64_t T, int64_t start, KvCache& cache,
                 const float* rope_cs, float* out) const;
  // Rows [row0, row0 + rows) of a batched pass belong to one sequence at `start` in `cache`.
  struct SequenceRows {
    int64_t row0, rows, start;
    KvCache* cache;
  };
  // Runs the layers on replicated activations x [T, H] (reductions by all-reduce) or, when
  // `sequence_parallel` (one sequence only), on this rank's token rows x [T / P, H] (fused
  // collectives). rope_cs: [T, 2 half], each sequence's rows at its own positions.
  void Layers(float* x, int64_t T, std::span<const SequenceRows> sequences, const float* rope_cs,
              bool sequence_parallel) const;
  void Moe(int layer, const float* h, int64_t T, float* out) const;

  std::string path_;
  ModelOptions options_;
  ModelConfig config_;
  ModelConfig cache_config_;
  // This rank's shard (model/tensor_parallel.h); the whole model when options_.tp is null.
  int tp_rank_ = 0, tp_size_ = 1;
  int64_t nq_ = 0, nkv_ = 0;  // local query / key-value heads
  int64_t e0_ = 0, ne_ = 0;   // local experts [e0_, e0_ + ne_)
  int64_t nv_ = 0;            // local lm_head rows (vocabulary-parallel) or the whole vocabulary
  // Statistics of the last Forward (Forward is not called concurrently on one model).
  mutable int64_t experts_run_ = 0;
  mutable double last_experts_per_layer_ = 0.0;
  mutable std::vector<float> router_logits_;  // [layers, T, E] when options_.record_router_logits
  GenerationConfig generation_config_;
  WeightStore store_;
  Rope rope_;
  uint64_t weight_bytes_ = 0;
  uint64_t parameters_ = 0;

  const uint16_t* embed_ = nullptr;  // [V, H] bf16
  std::unique_ptr<DenseMatrix> lm_head_;  // [V, H]
  std::vector<float> final_norm_;      // [H]
  std::vector<Layer> layers_;
};

// y = w * x / sqrt(mean(x^2) + eps) for each of the m rows of width n (HF GptOssRMSNorm in
// float32: the weight multiplies after normalisation).
void RmsNorm(const float* x, const float* w, int64_t m, int64_t n, double eps, float* y);

}  // namespace tessera
