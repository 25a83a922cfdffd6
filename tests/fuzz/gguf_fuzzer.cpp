// Fuzz target of the GGUF reader and what reads a GGUF model's metadata (issue 44 point 6): the
// input is one .gguf file. It goes through ParseGgufHeader in memory; when that accepts it, the
// bytes are written to a scratch file and read as the CLI reads a model file: GgufFile::Open,
// GGUF-to-config (GgufModelConfig, ValidateModelConfig, GgufModelLabel), the tensor-name mapping
// to Hugging Face tensors (OpenGgufSet, MapGgufTensors: llama q/k row orders, stacked and MXFP4
// experts, DeepSeek's kv_b merge) with every mapped tensor's first and last byte read (so that a
// view outside its file is an ASan report), and the GGUF vocabulary as a tokenizer
// (GgufTokenizerConfig, Tokenizer::FromModelDir) encoding and decoding a short fixed text. No
// model forward runs: each input costs at most a few parses of a file of -max_len bytes.
// Seeds: tests/fuzz/corpus/gguf (gguf-py's fixture; small model files of each architecture
// written by tools/make_fuzz_seeds.py).
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_main.h"
#include "io/config.h"
#include "io/gguf.h"
#include "io/gguf_config.h"
#include "io/gguf_tensors.h"
#include "tokenizer/gguf_vocab.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_config.h"

namespace {

using namespace tessera;

const fuzz::ScratchDir& Scratch() {
  static const fuzz::ScratchDir dir("gguf");
  return dir;
}

// Reads the first and last byte of a tensor the mapping hands out (the loader would read all).
volatile uint8_t g_sink = 0;
void Touch(const uint8_t* data, uint64_t nbytes) {
  if (nbytes == 0) return;
  g_sink = static_cast<uint8_t>(g_sink + data[0] + data[nbytes - 1]);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The in-memory parser first: most mutations end here, without touching the disk.
  bool parsed = false;
  bool split_named = false;
  fuzz::Guarded([&] {
    const GgufHeader header = ParseGgufHeader(data, size, "fuzz.gguf");
    parsed = true;
    for (const auto& [key, value] : header.metadata) split_named = split_named || key == "split.count";
  });
  if (!parsed) return 0;

  // A file carrying split.* keys is named as a one-file split set, so OpenGgufSet checks them.
  Scratch().Clear();
  const std::string path = Scratch().Write(split_named ? "fuzz-00001-of-00001.gguf" : "fuzz.gguf",
                                           std::string_view(reinterpret_cast<const char*>(data), size));
  std::unique_ptr<GgufFile> file;
  fuzz::Guarded([&] { file = GgufFile::Open(path); });
  if (!file) return 0;

  fuzz::Guarded([&] {
    const ModelConfig config = GgufModelConfig(*file);
    ValidateModelConfig(config, path);
    GgufModelLabel(*file, static_cast<uint64_t>(config.hidden_size) * static_cast<uint64_t>(config.vocab_size));
  });
  fuzz::Guarded([&] {
    const GgufHfTensors mapped = MapGgufTensors(OpenGgufSet(path));
    for (const GgufHfTensor& t : mapped.tensors) Touch(t.data, t.info->nbytes());
  });
  fuzz::Guarded([&] {
    GgufTokenizerConfig(*file);
    const Tokenizer tokenizer = Tokenizer::FromModelDir(path);
    const std::vector<int32_t> ids = tokenizer.EncodeWithTemplate("Hello world, 123 <s> \xc3\xa9t\xc3\xa9\n\tdef f():");
    tokenizer.Decode(ids);
    tokenizer.Decode(ids, /*skip_special_tokens=*/true);
  });
  return 0;
}
