// The Hugging Face config that a GGUF file's metadata describes (issue 30 point 2): one row per
// llama.cpp architecture name (`general.architecture`) naming its model_type, and one table of
// `<arch>.*` keys shared by all rows, so that the result goes through the same ParseModelConfig
// and checks as a config.json. Values llama.cpp does not store are the family's fixed values
// (gpt-oss: SwiGLU limit 7, YaRN without truncation, sliding attention on even layers).
#pragma once

#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/config.h"
#include "io/gguf.h"

namespace tessera {

// llama.cpp's name of a general.file_type value (llama_model_ftype_name: "Q4_K - Medium",
// "Q8_0", "MXFP4 MoE", ...), or "" for a value it does not name.
std::string_view GgufFileTypeName(uint64_t file_type);
// The label llama-bench prints for the file: "<arch> <size> <file type>" ("llama 8B Q4_K - Medium"),
// size the parameter count rounded as llama.cpp's model size names are (8.03 B -> "8B").
std::string GgufModelLabel(const GgufFile& file, uint64_t parameters);

// config.json's content for the file; a one-line error naming the file and the key for an
// architecture without a row, a missing required key, or what cannot be represented yet
// (Llama 3 rope scaling stored only as the rope_freqs tensor).
// Tensors the metadata refers to (the embedding, rope_freqs, ...) are looked up in `file` and then
// in the other files of its split set, if any.
nlohmann::json GgufConfigJson(const GgufFile& file, const std::vector<std::unique_ptr<GgufFile>>& split = {});
// The same, parsed and checked as any config.json.
ModelConfig GgufModelConfig(const GgufFile& file, const std::vector<std::unique_ptr<GgufFile>>& split = {});

}  // namespace tessera
