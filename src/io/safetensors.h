// Safetensors: memory-mapped reading (one file, or a sharded directory through
// model.safetensors.index.json) and streaming writing.
//
// File layout: u64 little-endian header length N, N bytes of UTF-8 JSON
//   { name: {"dtype": "BF16", "shape": [..], "data_offsets": [begin, end]}, ...,
//     "__metadata__": {string: string} (optional) }
// then the data section; offsets are relative to the data section, [begin, end).
// Validation follows the reference implementation (ecosystem.md §4): header <= 100 MB and
// starting with '{', valid UTF-8 JSON (no duplicate keys, no NUL bytes), known dtypes (sub-byte
// F4/F6 and complex C64 are rejected by name), end - begin == numel * dtype size without
// overflow, offsets in range, no overlaps, the data section fully covered. Unknown keys inside a
// tensor entry are ignored, as the reference does. Tensors need not be aligned (MLX writes
// unpadded headers); callers that need alignment check it per tensor.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/dtype.h"
#include "core/mapped_file.h"

namespace tessera {

struct GgufHfTensors;

struct TensorInfo {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // [begin, end) relative to the data section
  uint64_t end = 0;
  // GGUF tensors (io/gguf_tensors.h): a block-quantized ggml type id (q8_0, q4_K, ...; dtype U8,
  // shape the logical [rows, cols] and each row its own blocks), or -1; and where the logical
  // rows are stored (row_order[r] = stored row of logical row r; empty when in order).
  int32_t ggml_type = -1;
  std::vector<int64_t> row_order;

  uint64_t numel() const;  // 1 for a scalar (empty shape)
  uint64_t nbytes() const { return end - begin; }
};

// A parsed header; the tensors are listed in header (JSON) order.
struct SafetensorsHeader {
  uint64_t data_offset = 0;  // 8 + N: where the data section starts in the file
  std::vector<TensorInfo> tensors;
  std::map<std::string, std::string> metadata;
};

// Parses and validates the header of a safetensors image of `size` bytes (only the first
// 8 + N bytes are read, plus `size` for range checks). `source` names the file in errors.
// Throws tessera::Error with a one-line message: "<source>: <problem>".
SafetensorsHeader ParseSafetensorsHeader(const uint8_t* data, size_t size, const std::string& source);

// A view of one tensor's bytes inside a mapped file. Valid while its file is open.
struct TensorView {
  const TensorInfo* info = nullptr;
  const uint8_t* data = nullptr;
  const std::string* file = nullptr;  // the file the tensor lives in

  const std::string& name() const { return info->name; }
  DType dtype() const { return info->dtype; }
  const std::vector<int64_t>& shape() const { return info->shape; }
  uint64_t numel() const { return info->numel(); }
  uint64_t nbytes() const { return info->nbytes(); }
};

class SafetensorsFile {
 public:
  // Maps and validates; throws tessera::Error naming the path and the problem.
  static SafetensorsFile Open(const std::string& path);

  const std::string& path() const { return file_.path(); }
  const std::vector<TensorInfo>& tensors() const { return header_.tensors; }
  const std::map<std::string, std::string>& metadata() const { return header_.metadata; }
  const TensorInfo* Find(std::string_view name) const;
  TensorView View(const TensorInfo& info) const;
  uint64_t file_size() const { return file_.size(); }

 private:
  MappedFile file_;
  SafetensorsHeader header_;
  std::unordered_map<std::string_view, size_t> by_name_;
};

// All weights of a model: a single .safetensors file, a directory holding model.safetensors, or
// a directory with model.safetensors.index.json whose weight_map names the shard of every tensor.
// Every shard named by the index must exist and hold exactly the tensors the index assigns to
// it: a missing shard, a tensor in the index but absent from its shard, a tensor in a shard that
// the index does not list (or assigns to another shard, e.g. a duplicate) are errors naming the
// file and the tensor. A hub-cache repository directory resolves through refs/main
// (io/model_dir.h); a snapshot directory of symlinks is read like any directory.
class WeightStore {
 public:
  // A checkpoint directory, a .safetensors file, or a GGUF file (or split set), whose tensors are
  // read under their Hugging Face names (io/gguf_tensors.h).
  static WeightStore Open(const std::string& path);

  // Tensor names, sorted.
  std::vector<std::string> names() const;
  std::optional<TensorView> Find(std::string_view name) const;
  // Throws "<path>: tensor '<name>' not found".
  TensorView Get(std::string_view name) const;
  size_t num_tensors() const { return index_.size(); }
  // A multimodal checkpoint (Gemma 3 4b+: the language model under "language_model.model." or
  // "model.language_model.", beside "vision_tower.*" and "multi_modal_projector.*") is read as its
  // language model: those tensors under the text model's names ("model.*", "lm_head.weight"),
  // the others set aside, by name, here.
  const std::vector<std::string>& set_aside() const { return set_aside_; }
  const std::vector<std::unique_ptr<SafetensorsFile>>& files() const { return files_; }
  const std::string& path() const { return path_; }

  // Out of line: GgufHfTensors is complete only in safetensors.cpp.
  WeightStore();
  WeightStore(WeightStore&&) noexcept;
  WeightStore& operator=(WeightStore&&) noexcept;
  ~WeightStore();

 private:
  std::string path_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::unique_ptr<GgufHfTensors> gguf_;
  std::unordered_map<std::string, TensorView> index_;
  std::vector<std::string> set_aside_;

  void UnwrapLanguageModel();
};

// ---- writing ---------------------------------------------------------------------------------

// Fills dst with exactly nbytes of a tensor's data (little-endian element bytes).
using TensorFiller = std::function<void(uint8_t* dst, size_t nbytes)>;

struct TensorToWrite {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  TensorFiller fill;  // called once, while the file is written, so data need not sit in memory
};

// Writes one safetensors file (tensors in the order given; header padded with spaces to a
// multiple of 8 bytes so that data starts aligned). Atomic: a temporary file is renamed into
// place. Throws tessera::Error on I/O failure or invalid input (duplicate names, bad shapes).
void WriteSafetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// Writes `tensors` into `dir` as one file `model.safetensors` when the total is at most
// `max_shard_bytes`, else as shards named like Hugging Face's gpt-oss converter
// (`model-00000-of-0000N.safetensors`, zero-based index, N = shard count - 1) plus
// `model.safetensors.index.json` ({"metadata": {"total_size": ...}, "weight_map": {...}}).
// Tensors keep their order and are never split across shards; packing is greedy (a new shard
// starts when the next tensor would push a non-empty shard past the limit). Every file carries
// __metadata__ {"format": "pt"} like transformers' save_pretrained. Writing model.safetensors
// removes a stale model.safetensors.index.json, which would otherwise take precedence. Returns
// the file names written (shards, then the index), relative to `dir`, which is created if needed.
std::vector<std::string> WriteShardedSafetensors(const std::string& dir,
                                                 const std::vector<TensorToWrite>& tensors,
                                                 uint64_t max_shard_bytes);

}  // namespace tessera
