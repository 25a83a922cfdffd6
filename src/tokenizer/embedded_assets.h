// Files compiled into the binary, so that `tessera synth` and the demo need nothing beside it.
#pragma once

#include <string>
#include <string_view>

namespace tessera {

// The o200k_harmony tokenizer.json (gpt-oss), decompressed on first use (about 12 MB).
const std::string& EmbeddedTokenizerJson();
// Its tokenizer_config.json, as shipped with gpt-oss.
std::string_view EmbeddedTokenizerConfigJson();

}  // namespace tessera
