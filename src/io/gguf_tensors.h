// The Hugging Face tensors a llama.cpp GGUF file holds (issue 30 point 2): one rule per GGUF tensor
// name (gguf-py's tensor map, as convert_hf_to_gguf.py writes it) naming its Hugging Face tensor,
// with llama.cpp's own layout changes undone, so that everything after WeightStore reads a GGUF
// model as it reads a checkpoint directory:
//   - `llama` q/k rows: the converter permutes each head's rows from HF's two halves to
//     interleaved pairs (LlamaModel.permute: GGUF row h D + 2 i + j = HF row h D + j D/2 + i);
//     the HF rows are given back as TensorInfo::row_order (no copy; a bias is copied back);
//   - stacked experts [E, out, in] (`ffn_{gate,up,down}_exps`): Qwen3-MoE's per-expert tensors
//     are slices of them; gpt-oss's MXFP4 experts are repacked into the checkpoint's layout
//     (gate and up rows interleaved, `_blocks` [E, out, in/32, 16] with elements 2i, 2i+1 in
//     byte i, `_scales` [E, out, in/32]) and their gate/up biases interleaved likewise
//     (gpt-oss.md §2.3; the ggml MXFP4 block is a scale byte and 16 bytes whose byte j holds
//     elements j and j + 16).
//   - `deepseek2` kv_b_proj, which the converter splits into attn_k_b (each head's key rows
//     transposed) and attn_v_b for llama.cpp's absorbed MLA, merged back (decoded to float32
//     when quantized); attn_kv_b of older files maps as it is.
// Block-quantized ggml types (q8_0, q4_K, ...) keep their bytes: TensorInfo::ggml_type names the
// type and the dtype is U8. A split set (`name-00001-of-00003.gguf`) is read as one file.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "core/buffer.h"
#include "io/gguf.h"
#include "io/safetensors.h"

namespace tessera {

struct GgufHfTensor {
  const TensorInfo* info;
  const uint8_t* data;
  const std::string* file;
};

struct GgufHfTensors {
  std::vector<std::unique_ptr<GgufFile>> files;  // the split set in order (one file usually)
  std::deque<TensorInfo> infos;
  std::deque<ByteBuffer> owned;  // repacked tensors (read once by the loader, like mapped ones)
  std::vector<GgufHfTensor> tensors;
};

// The files of the set `path` belongs to: itself, or every `-0000k-of-0000N.gguf` sibling when its
// name has that form (each checked to carry split.no k - 1 and split.count N when present).
std::vector<std::unique_ptr<GgufFile>> OpenGgufSet(const std::string& path);

// Maps every tensor of the set to its Hugging Face tensor (rules above). A tensor without a rule
// for the file's architecture is a one-line error naming it.
GgufHfTensors MapGgufTensors(std::vector<std::unique_ptr<GgufFile>> files);

}  // namespace tessera
