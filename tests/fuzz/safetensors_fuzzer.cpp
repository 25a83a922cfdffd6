// Fuzz target of the safetensors reader (issue 44 point 6): the header parser and the sharded
// checkpoint index. The input is split at fuzz::kSeparator lines:
//   - one part: a .safetensors file. ParseSafetensorsHeader reads it in memory, and when it
//     accepts it, the file is opened as a one-file checkpoint (WeightStore::Open) and every
//     tensor's first and last byte is read (a view outside the file is an ASan report);
//   - two to five parts: model.safetensors.index.json, then the shards, written as
//     model-0000k-of-0000N.safetensors (N = the number of shards) into a scratch directory that
//     WeightStore::Open reads as a sharded checkpoint: weight_map, shard names, which tensor
//     lives where.
// Seeds: tests/fuzz/corpus/safetensors (tests/data/io's files and its sharded checkpoint).
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_main.h"
#include "io/safetensors.h"

namespace {

using namespace tessera;

const fuzz::ScratchDir& Scratch() {
  static const fuzz::ScratchDir dir("safetensors");
  return dir;
}

volatile uint8_t g_sink = 0;

// Reads the first and last byte of every tensor (the loader reads them all).
void TouchAll(const WeightStore& store) {
  for (const std::string& name : store.names()) {
    const TensorView view = store.Get(name);
    if (view.nbytes() == 0) continue;
    g_sink = static_cast<uint8_t>(g_sink + view.data[0] + view.data[view.nbytes() - 1]);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::vector<std::string_view> parts = fuzz::Split(input, 5);
  if (parts.size() == 1) {
    bool parsed = false;
    fuzz::Guarded([&] {
      ParseSafetensorsHeader(data, size, "fuzz.safetensors");
      parsed = true;
    });
    if (!parsed) return 0;
    Scratch().Clear();
    const std::string path = Scratch().Write("model.safetensors", input);
    fuzz::Guarded([&] { TouchAll(WeightStore::Open(path)); });
    fuzz::Guarded([&] { TouchAll(WeightStore::Open(Scratch().str())); });  // the directory form
    return 0;
  }
  Scratch().Clear();
  Scratch().Write("model.safetensors.index.json", parts[0]);
  const size_t shards = parts.size() - 1;
  for (size_t k = 1; k <= shards; ++k) {
    char name[64];
    std::snprintf(name, sizeof(name), "model-%05zu-of-%05zu.safetensors", k, shards);
    Scratch().Write(name, parts[k]);
  }
  fuzz::Guarded([&] { TouchAll(WeightStore::Open(Scratch().str())); });
  return 0;
}
