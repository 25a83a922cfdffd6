// A gpt-oss checkpoint that copies: every layer's output is zeroed (o_proj and the experts' down
// projection, weights and biases), so the residual stream is the token's embedding, and lm_head
// is the embedding table, so the logit of the input token dominates (|e|^2 against random dot
// products) and greedy decoding repeats the last prompt token. Speculative tests use it to get
// accepted drafts from a random model; the attention and expert paths still run in full.
#pragma once

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/safetensors.h"

namespace tessera::test {

inline bool EndsWithName(const std::string& name, const char* suffix) {
  const size_t n = std::strlen(suffix);
  return name.size() >= n && name.compare(name.size() - n, n, suffix) == 0;
}

// Writes the copying variant of the single-file checkpoint in `src_dir` into `out_dir` (created;
// the other files of src_dir are copied as they are).
inline void WriteCopyingModel(const std::string& src_dir, const std::string& out_dir) {
  namespace fs = std::filesystem;
  fs::create_directories(out_dir);
  for (const auto& entry : fs::directory_iterator(src_dir)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file() && name != "model.safetensors") {
      fs::copy_file(entry.path(), fs::path(out_dir) / name, fs::copy_options::overwrite_existing);
    }
  }
  const WeightStore source = WeightStore::Open(src_dir);
  const TensorView embed = source.Get("model.embed_tokens.weight");
  std::vector<TensorToWrite> tensors;
  for (const std::string& name : source.names()) {
    const TensorView t = name == "lm_head.weight" ? embed : source.Get(name);
    const bool zero = EndsWithName(name, "self_attn.o_proj.weight") || EndsWithName(name, "self_attn.o_proj.bias") ||
                      EndsWithName(name, "mlp.experts.down_proj_blocks") ||
                      EndsWithName(name, "mlp.experts.down_proj_bias");
    const TensorView shape_of = source.Get(name);
    tensors.push_back({name, shape_of.dtype(), shape_of.shape(), [t, zero](uint8_t* dst, size_t n) {
                         if (zero) {
                           std::memset(dst, 0, n);
                         } else {
                           std::memcpy(dst, t.data, n);
                         }
                       }});
  }
  WriteSafetensors((fs::path(out_dir) / "model.safetensors").string(), tensors);
}

}  // namespace tessera::test
