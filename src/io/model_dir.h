// Model directory resolution shared by the weight and config loaders.
//
// A model is given as a directory in Hugging Face layout (config.json, generation_config.json,
// model.safetensors or model-*-of-*.safetensors + model.safetensors.index.json). A revision
// directory of the HF hub cache (`models--org--name/snapshots/<rev>/`, whose files are symlinks
// into ../../blobs) is such a directory already. The cache's repository directory itself
// (`models--org--name/`) is accepted too: its `refs/main` names the snapshot to use
// (ecosystem.md §4: "Accept a directory in HF layout, including a revision directory of the HF
// hub cache").
#pragma once

#include <string>

namespace tessera {

// Returns `path` unchanged unless it is a hub-cache repository directory (it holds `refs/main`
// and `snapshots/` but no config.json), in which case it returns `<path>/snapshots/<rev>` for the
// revision `refs/main` names. Throws "<path>: ..." when that revision is malformed or missing.
std::string ResolveModelDir(const std::string& path);

}  // namespace tessera
