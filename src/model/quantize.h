// Checkpoint conversion: a gpt-oss directory whose MoE experts are dense (unquantized BF16, F16
// or F32 `mlp.experts.{gate_up,down}_proj` in HF's x @ W orientation, no quantization_config)
// -> the Hugging Face gpt-oss MXFP4 layout (`*_blocks` / `*_scales`, gpt-oss.md §2.3).
//
// `tessera quantize -m DIR --to mxfp4 --out DIR2` is this call. Per expert matrix, stored
// [E, in, out], the encoder (kernels/mxfp4.h, OCP MX v1.0: shared exponent from the block
// maximum, round half to even, saturation) writes
//   blocks [E, out, in/32, 16] (low nibble first)  and  scales [E, out, in/32]
// with the 32-weight blocks running along `in`, the reduction dimension. Every other tensor is
// copied byte for byte (dtype included); the result follows ModelTensorSpecs() of the output
// config, in CheckpointOrder() and sharded like the real checkpoints. config.json gains
// quantization_config {"quant_method": "mxfp4", "modules_to_not_convert": [...]} exactly as the
// real one (gpt-oss.md §1.1) and keeps every other key; the directory's other regular files
// (tokenizer.json, generation_config.json, chat template, ...) are copied unchanged.
//
// Round trip: quantizing the dequantized values of MXFP4 blocks whose largest code has magnitude
// 4 or 6 (what the encoder itself produces, and every block of a checkpoint made by it)
// reproduces them bit for bit, including -0 codes; other blocks come back with the same values
// on a smaller scale.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/config.h"
#include "io/safetensors.h"
#include "model/synth.h"

namespace tessera {

struct QuantizeOptions {
  std::string to = "mxfp4";  // the only target format
  // Replace the model files of a non-empty output directory (otherwise a non-empty DIR2 is an
  // error). The input directory is never a valid output.
  bool overwrite = false;
  uint64_t max_shard_bytes = kGptOssMaxShardBytes;
  // Called after each tensor with the output bytes written so far and the total.
  std::function<void(uint64_t done, uint64_t total)> progress;
};

struct QuantizeResult {
  std::vector<std::string> weight_files;  // .safetensors files written (the index not listed)
  std::vector<std::string> copied_files;  // other files copied from the input, sorted
  std::vector<std::string> skipped;       // input entries not copied (subdirectories as "name/",
                                          // anything not a regular file), sorted
  size_t num_tensors = 0;
  size_t quantized_matrices = 0;  // dense expert tensors turned into blocks + scales
  uint64_t input_bytes = 0;       // tensor bytes read
  uint64_t output_bytes = 0;      // tensor bytes written
  double seconds = 0.0;
};

// Converts `in_dir` (a gpt_oss directory with dense experts; a hub-cache repository directory
// resolves through refs/main) into `out_dir`. Everything about the input is checked before the
// output directory is touched: the target format, the config (an MXFP4 or other quantized
// checkpoint is refused), every tensor against the dense description, free disk space. Weights
// go first and config.json last, so a directory with config.json is complete; a non-finite expert
// weight (MXFP4 cannot hold NaN or inf) stops the conversion with an error naming the tensor and
// the element. Errors are one-line tessera::Errors naming the file or directory.
QuantizeResult QuantizeCheckpoint(const std::string& in_dir, const std::string& out_dir,
                                  const QuantizeOptions& options = {});

// Encodes one dense expert tensor, stored [E, in, out] in BF16, F16 or F32 (`dense`), into
// MXFP4 `blocks` [E, out, in/32, 16] and `scales` [E, out, in/32] (in % 32 == 0), in parallel on
// GlobalPool(). `blocks` may be null when only the scales are wanted. Throws a tessera::Error
// naming the tensor, its file and the [e, i, o] index of the first non-finite element.
void QuantizeDenseExperts(const TensorView& dense, uint8_t* blocks, uint8_t* scales);

// The output half shared by the converters (QuantizeCheckpoint, QuantizeToInt4): `dir`'s other
// regular files are copied, `tensors` written sharded (progress(done, total) after each) and
// config.json (`config_json`) last, after the output directory was planned (a non-empty one
// refused unless `overwrite`, which removes only the files written here) and its free space
// checked. The input directory is never a valid output.
struct ConvertedModel {
  std::vector<std::string> weight_files, copied_files, skipped;
  uint64_t output_bytes = 0;
};
ConvertedModel WriteConvertedModel(const std::string& dir, const std::string& out_dir, std::vector<TensorToWrite> tensors,
                                   const nlohmann::json& config_json, bool overwrite, uint64_t max_shard_bytes,
                                   const std::function<void(uint64_t, uint64_t)>& progress);
// Throws a one-line error when out_dir is in_dir (also through links).
void RequireDistinctDirs(const std::string& in_dir, const std::string& out_dir);
// What WriteConvertedModel will check of `out_dir`, checked before any loading or calibration
// (issue 44): distinct from `in_dir`, and absent, empty, or (with `overwrite`) a directory. Throws
// a one-line error naming out_dir; changes nothing.
void CheckConvertedOutputDir(const std::string& in_dir, const std::string& out_dir, bool overwrite);
// One line for a GGUF input: the converters read checkpoint directories.
void RefuseGguf(const std::string& in_dir, const std::string& what);

// The input checks of the dense-family converters (int4 quantizers, sparsify): `in_dir`
// resolved (hub caches through refs/main), `out_dir` checked first (CheckConvertedOutputDir), its
// config loaded and validated, gpt-oss ("`what` applies to the dense families") and quantized
// checkpoints refused.
struct DenseFamilyInput {
  std::string dir, config_path;
  ModelConfig config;
};
// gpt_oss_mxfp4: also accept gpt-oss with its MXFP4 experts (sparsify prunes their codes).
DenseFamilyInput OpenDenseFamilyInput(const std::string& in_dir, const std::string& out_dir, bool overwrite,
                                      const std::string& what, bool gpt_oss_mxfp4 = false);

// The quantization_config of the Hugging Face gpt-oss checkpoints (gpt-oss.md §1.1).
QuantizationConfig GptOssMxfp4QuantizationConfig();

}  // namespace tessera
