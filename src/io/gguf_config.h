// The Hugging Face config that a GGUF file's metadata describes (issue 30 point 2): one row per
// llama.cpp architecture name (`general.architecture`) naming its model_type, and one table of
// `<arch>.*` keys shared by all rows, so that the result goes through the same ParseModelConfig
// and checks as a config.json. Values llama.cpp does not store are the family's fixed values
// (gpt-oss: SwiGLU limit 7, YaRN without truncation, sliding attention on even layers).
#pragma once

#include <nlohmann/json.hpp>

#include "io/config.h"
#include "io/gguf.h"

namespace tessera {

// config.json's content for the file; a one-line error naming the file and the key for an
// architecture without a row, a missing required key, or what cannot be represented yet
// (Llama 3 rope scaling stored only as the rope_freqs tensor).
nlohmann::json GgufConfigJson(const GgufFile& file);
// The same, parsed and checked as any config.json.
ModelConfig GgufModelConfig(const GgufFile& file);

}  // namespace tessera
