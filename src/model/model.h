// The decoder forward pass on CPU, in float32 activations, exactly as Hugging Face transformers
// computes it in float32 eager mode, for every architecture of model/architecture.h (gpt-oss:
// ../shared/reference/gpt-oss.md §3; Llama, Mistral, Qwen2, Qwen3, Qwen3-MoE:
// dense-decoders.md §1-3):
//   embeddings -> per layer [RMSNorm -> attention -> residual -> RMSNorm -> gated MLP or MoE ->
//   residual] -> final RMSNorm -> lm_head, the layers of model/layers.h built from the
//   architecture row and the config.
//
// Weights: every matrix is a LinearWeights (model/linear.h) in the format ChooseLinearFormat
// picks from its stored dtype and the precision options: as stored on the exact path (MXFP4
// experts read in place from the mapping, float matrices copied once into huge-page buffers),
// repacked or quantized at load on the fast path; tensor parallelism keeps only this rank's
// slices; one resident copy of each weight in every case. Norms, biases and sinks are widened to
// float32 at load. Every row of every result is computed the same way whatever the number of
// tokens in the call, so decoding token by token and verifying several tokens in one call give
// the same logits.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/buffer.h"
#include "core/error.h"
#include "io/config.h"
#include "io/safetensors.h"
#include "model/layers.h"
#include "model/architecture.h"
#include "model/kv_cache.h"
#include "model/quant_scheme.h"
#include "model/rope.h"
#include "model/tensor_parallel.h"

namespace tessera {

enum class LogitsMode { kNone, kLast, kAll };

class KvCache;

// Model::ForwardBatch's `stop` ended the pass between two layers.
class ForwardCancelled : public Error {
 public:
  ForwardCancelled() : Error("the forward pass was cancelled") {}
};

// One sequence's part of a batched forward pass (Model::ForwardBatch): its tokens at
// positions [start, start + tokens.size()) against its own cache, and where its logits go.
struct ForwardSequence {
  std::span<const int32_t> tokens;
  int64_t start = 0;
  KvCache* cache = nullptr;
  LogitsMode mode = LogitsMode::kLast;
  std::vector<float>* logits = nullptr;  // kLast: [vocab]; kAll: [T, vocab]; kNone: cleared
};

// kExact: float32 activations through the exact kernels (kernels.h matmul_bf16 / f16 / f32 /
// mxfp4), weights as stored: the path the golden tests hold to the reference. kFast: MXFP4
// experts are repacked at load into the q8 layout and multiplied against int8 activations
// (kernels/q8.h), except in the first ModelOptions::exact_layers layers; accuracy cost in
// docs/ACCURACY.md.
enum class Precision { kExact, kFast };
// Float matrices (attention, dense MLPs, Qwen experts, routers, lm_head): kBf16 keeps them as
// stored (bf16, f16 or f32), kInt8 quantizes them at load (per-row scales; kFast only). The
// embedding table stays as stored (it is read a row at a time).
enum class DenseWeights { kBf16, kInt8 };

// How the MoE experts are split over tensor-parallel ranks (model/tensor_parallel.h). kTensor:
// every rank holds a 1/P slice (whole 32-wide MXFP4 blocks) of every expert's intermediate
// dimension; kExpert: rank r holds experts [r E/P, (r+1) E/P) whole. Both end in the same
// reduction of partial [T, H] sums; tensor slices balance the ranks' weight traffic whatever the
// routing (bench/expert_split_bench.cpp, docs/BENCHMARKS.md: 1.3x / 1.9x faster decode at P = 2 /
// 4), so they are the default.
enum class TpExperts { kTensor, kExpert };

// How DeepSeek's MLA attends (deepseek.md §4; layers.h AttendLatent): kAbsorbed over the latent
// rows with kv_b_proj folded into the query and the output (the cache's bytes once per head
// group: decode's form), kNaive by decompressing every position's per-head keys and values
// (transformers' form: fewer operations per query-key pair, kv_b_proj over every position
// per call). Every call of a model uses the one form, so results stay batch-invariant; the two
// agree to rounding (tests/deepseek_golden_test.cpp).
enum class MlaForm { kAbsorbed, kNaive };

// The inputs of a dense layer's linear modules, as the quantizer's calibration sees them
// (model/quantize_int4.h): kQkv the input-normed rows (q, k, v), kO the attention output (o_proj),
// kGateUp the post-attention-normed rows (gate, up), kDown the gated activation (down_proj).
enum class LinearInput : uint8_t { kQkv, kO, kGateUp, kDown };
using LinearInputObserver =
    std::function<void(int layer, LinearInput site, const float* x, int64_t rows, int64_t cols)>;

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
  // Called during Forward with the inputs of every dense layer's linear modules (one process,
  // no tensor parallelism); empty: nothing is called.
  LinearInputObserver observe_linear_inputs = nullptr;
  // Modules the checkpoint records as N:M sparse (model/sparse_scheme.h) run the sparse kernels
  // (nm-bf16, nm-int8 under --dense int8); false holds dense-with-zeros ones dense (the A/B
  // baseline; bitmask-compressed ones stay sparse).
  bool sparse_kernels = true;
  MlaForm mla = MlaForm::kAbsorbed;  // DeepSeek models only
};

class Model {
 public:
  // Loads `path` (a Hugging Face model directory, or a .safetensors file beside config.json).
  // Checks every tensor against the architecture's description and throws tessera::Error naming
  // the directory and the first problem (missing / misshapen tensor, unsupported architecture).
  static std::unique_ptr<Model> Load(const std::string& path, const ModelOptions& options = {});
  ~Model();

  // The checkpoint's int4 modules (model/quant_scheme.h), when it has any.
  const std::optional<Int4Scheme>& int4_scheme() const { return int4_; }
  // The checkpoint's N:M sparse modules (model/sparse_scheme.h), when it has any.
  const std::optional<SparseScheme>& sparse_scheme() const { return sparse_; }
  const ModelConfig& config() const { return config_; }
  const Rope& rope() const { return rope_; }
  // A line the commands print after loading ("" when nothing to say): the parts of a multimodal
  // checkpoint that are not run.
  const std::string& load_note() const { return load_note_; }
  const Architecture& architecture() const { return *arch_; }
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
  // every dense matrix (attention, MLP, router, lm_head) and the embedding row once, on MoE
  // layers top_k experts' gate_up and down, and the keys and values the attention reads
  // (min(position + 1, window) rows on sliding layers, position + 1 on full ones) in a cache of
  // type `kv` (as KvCache stores them: one latent row per position for MLA; none: weights only). Norms and
  // biases (a few KB per layer) are left out. The decode roofline is measured read bandwidth / this.
  double DecodeBytes(int64_t position, std::optional<KvType> kv = std::nullopt) const;
  // The formats a decode step's matrices are held in, with their share of its weight bytes,
  // largest first: "nm-bf16 78 %, bf16 22 %" (bench labels, tests).
  std::string LinearFormatsInUse() const;
  // Multiply-add operations x 2 of the matmuls one token runs: every dense matrix, on MoE layers
  // top_k experts' (this rank's share), lm_head; attention's scores and values are left out (a
  // few percent at the prefill lengths benchmarks use). The prefill ceiling divides by it.
  double MatmulFlopsPerToken() const;
  // Distinct experts (this rank's) the last Forward ran per layer, averaged over the MoE layers: the
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
  // `stop` (may be empty) is asked before each layer; when it says true the pass ends there,
  // as a failure does (the caches as AbortAppend leaves them), with ForwardCancelled: a server
  // stops a long prefill whose clients have gone. Not asked under tensor parallelism (every
  // rank must run the same layers).
  void ForwardBatch(std::span<const ForwardSequence> batch, const std::function<bool()>& stop = {}) const;

 private:
  Model() = default;
  void LoadWeights();  // model_load.cpp
  // DeepSeek MLA weights of the layer whose tensors start with `prefix` (model_load.cpp).
  void LoadLatentAttention(const std::string& prefix, const LinearPolicy& policy, AttentionWeights& attention);
  // Rows [row0, row0 + rows) of a batched pass belong to one sequence at `start` in `cache`.
  struct SequenceRows {
    int64_t row0, rows, start;
    KvCache* cache;
  };
  // Runs the layers on replicated activations x [T, H] (reductions by all-reduce) or, when
  // `sequence_parallel` (one sequence only), on this rank's token rows x [T / P, H] (fused
  // collectives). rope_cs: [T, 2 half], each sequence's rows at its own positions.
  // local_cs: the cos/sin rows of local_rope_ (sliding layers) when the model has one, else null.
  void Layers(float* x, int64_t T, std::span<const SequenceRows> sequences, const float* rope_cs,
              const float* local_cs, bool sequence_parallel, const std::function<bool()>& stop) const;
  // out [T, H] = the layer's MLP or MoE of h (this rank's partial sum under tensor parallelism).
  void FeedForward(int layer, const float* h, int64_t T, float* out) const;
  // visit(matrix, times) for every matrix one decode step multiplies, `times` the matrices of it
  // a token reads on average (experts: top_k of E, this rank's share): what DecodeBytes and
  // MatmulFlopsPerToken count.
  template <typename F>
  void ForEachMatrixOfAToken(const F& visit) const;

  std::string path_;
  ModelOptions options_;
  ModelConfig config_;
  ModelConfig cache_config_;
  // This rank's shard (model/tensor_parallel.h); the whole model when options_.tp is null.
  int tp_rank_ = 0, tp_size_ = 1;
  int64_t nq_ = 0, nkv_ = 0;  // local query / key-value heads
  int64_t e0_ = 0, ne_ = 0;   // local experts [e0_, e0_ + ne_) on MoE layers
  int64_t moe_layers_ = 0;    // layers with experts (Qwen3-MoE may keep dense ones)
  int64_t nv_ = 0;            // local lm_head rows (vocabulary-parallel) or the whole vocabulary
  // Statistics of the last Forward (Forward is not called concurrently on one model).
  mutable int64_t experts_run_ = 0;
  mutable double last_experts_per_layer_ = 0.0;
  mutable std::vector<float> router_logits_;  // [layers, T, E] when options_.record_router_logits
  GenerationConfig generation_config_;
  WeightStore store_;
  Rope rope_;
  std::string load_note_;
  // Gemma 3's sliding layers: their own base (rope_local_base_freq), unscaled; type "default"
  // and rotary width 0 when the model has one rope for all layers.
  Rope local_rope_;
  bool local_rope_used_ = false;
  float embed_scale_ = 1.0f;  // Architecture::embed_scale: sqrt(hidden_size) in float32
  uint64_t weight_bytes_ = 0;
  uint64_t parameters_ = 0;

  const Architecture* arch_ = nullptr;
  MlaDims mla_;  // DeepSeek MLA sizes (zero for the other attention kinds)
  std::optional<Int4Scheme> int4_;  // the checkpoint's int4 modules (quant_scheme.h), if any
  std::optional<SparseScheme> sparse_;  // its N:M sparse modules (sparse_scheme.h), if any
  std::optional<Fp8Scheme> fp8_;        // its FP8 block-scaled modules (DeepSeek-V3), if any
  const uint8_t* embed_ = nullptr;  // [V, H] in embed_dtype_: embed_copy_'s bytes
  ByteBuffer embed_copy_;
  DType embed_dtype_ = DType::kBF16;
  int32_t embed_ggml_type_ = -1;  // a GGUF block type (rows decoded per token), or -1
  size_t embed_row_bytes_ = 0;
  std::unique_ptr<LinearWeights> lm_head_;  // [V or V / P, H]
  std::vector<float> final_norm_;           // [H]
  std::vector<DecoderLayer> layers_;
};

}  // namespace tessera
