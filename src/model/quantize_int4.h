// tessera's own int4 quantizers for the dense families (issue 16 point 4): an unquantized
// Llama / Mistral / Qwen2 / Qwen3 checkpoint -> an int4 checkpoint in the AutoAWQ GEMM or the
// compressed-tensors pack-quantized form (model/quant_scheme.h), every linear module of the
// decoder layers quantized per group of G inputs, lm_head and the embedding left as stored.
//
// `tessera quantize -m DIR --to int4-rtn | awq [--group G] [--format autoawq|compressed-tensors]
// [--calib FILE --samples N] --out DIR2` is this call.
//
// Quantization of a group (AutoAWQ's `pseudo_quantize_tensor`, quantization.md B.8 step 4):
// s = max(max - min, 1e-5) / 15, z = clamp(-round(min / s), 0, 15), q = clamp(round(w / s) + z,
// 0, 15), with s rounded first to the stored scale dtype (fp16 for AutoAWQ, bf16 for
// compressed-tensors) so that the stored (q - z) s is the nearest grid point of the stored scale.
//
// int4-rtn: that alone (the round-to-nearest baseline).
// awq (Lin et al., AutoAWQ's quantizer.py / scale.py, quantization.md B.8): calibration text
// (FILE, tokenized with the model's tokenizer, N windows of 512 tokens) runs through the engine's
// own exact forward once; per layer, from each linear module's recorded inputs:
//   1. scale search per group of modules sharing an input, over the ratios a = i/20, i < 20:
//      s = x_mean^a / (w_mean^(1-a) + 1e-4), clamped at 1e-4 and normalised by sqrt(max s min s)
//      (x_mean: mean |x| per input channel; w_mean: mean over output rows of |w| / its group's
//      max |w|), each module's weight fake-quantized as Q(W diag(s)) diag(1/s), keeping the s of
//      least mean squared error of the judged output:
//        input_layernorm -> q, k, v   judged on the q, k, v outputs (AutoAWQ judges the whole
//                                     attention block; the projections are what tessera records)
//        v_proj -> o_proj             only when their shapes match (no GQA), on o's output
//        post_attention_layernorm -> gate, up   on the MLP's output (down unquantized)
//        up_proj -> down_proj         on down's output
//      and folded as AutoAWQ does: the norm weight (or v's / up's rows and bias) divided by s,
//      the modules' input columns multiplied by s; the recorded inputs are divided by s too.
//      Unlike AutoAWQ, s = 1 (plain round to nearest) is a candidate as well, so the search never
//      does worse than RTN on its own loss;
//   2. clip search for every module but q and k: per output row and group, the largest
//      magnitude shrunk by (1 - i/20), i < 10, keeping the one whose fake-quantized group gives
//      the least error on the group's partial dot products over up to 512 recorded rows; the
//      weights are clamped to it;
//   3. the quantization above.
// Folded norm weights and biases are written as float32 (exact: no second rounding of the model).
// MoE layers take int4-rtn even under awq (their experts' inputs are not recorded).
//
// Progress (layer, elapsed, estimate of the time left) goes to stderr through `progress`; the
// output directory follows quantize.h's rules: checked before anything is written, weights
// first and config.json last, temporary files removed on errors and signals.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "model/quant_scheme.h"
#include "model/quantize.h"

namespace tessera {

struct Int4QuantizeOptions {
  bool awq = false;  // false: round to nearest
  Int4Layout layout = Int4Layout::kAutoAwqGemm;
  int64_t group_size = 128;
  std::string calib_file;  // awq: calibration text
  int64_t samples = 128;   // awq: windows of kWindow tokens from the calibration text
  int64_t window = 512;
  bool overwrite = false;
  uint64_t max_shard_bytes = kGptOssMaxShardBytes;
  std::function<void(const std::string& line)> progress;  // one status line at a time
};

struct Int4QuantizeResult {
  std::vector<std::string> weight_files;
  size_t num_tensors = 0;
  size_t quantized_modules = 0;
  int64_t calibration_tokens = 0;
  uint64_t output_bytes = 0;
  double seconds = 0.0;
};

Int4QuantizeResult QuantizeToInt4(const std::string& in_dir, const std::string& out_dir,
                                  const Int4QuantizeOptions& options);

}  // namespace tessera
