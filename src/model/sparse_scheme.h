// Which linear modules of a checkpoint follow an N:M pattern, and how they are stored, from
// config.json (one description that the tensor list, `inspect`, the loader and the writers share;
// ../shared/reference/sparsity.md):
//   tessera_sparsity {"kept", "group", "method", "format": "dense"}: `tessera sparsify`'s output,
//     every linear weight of the decoder layers (q/k/v/o, gate/up/down, experts; not the router,
//     the embedding or lm_head) in the dense-with-zeros form, or those its "module_names" lists.
//     gpt-oss's MXFP4 experts may be pruned too; they stay MXFP4 (no sparse MXFP4 format).
//   compressed-tensors sparsity_config (under quantization_config, or compression_config in older
//     checkpoints) {"format", "sparsity_structure": "N:M", "targets", "ignore"}: the modules its
//     targets match ("Linear": every linear module; "re:" patterns as Python's re.match) minus
//     `ignore`. format "dense": the weights are stored dense with zeros (published 2:4 models such
//     as Sparse-Llama-3.1-8B-2of4); "sparse-24-bitmask": <module>.compressed [out, in/2] (the kept
//     values in row-major order), <module>.bitmask U8 [out, ceil(in/8)] (numpy packbits, little
//     bit order: bit c % 8 of byte c / 8 = column c kept) and <module>.shape [2, 1] (compressed-
//     tensors' Sparse24BitMaskCompressor; exactly 2 of every 4 columns flagged).
// A pattern that does not hold in the stored weights is a one-line error at load naming the
// tensor, its row and its group; sparse-bitmask (unstructured) and other formats are refused.
// Modules an int4 scheme (quant_scheme.h) quantizes run the int4 formats dense (a pruned model
// quantized to int4 keeps its zeros, but there is no int4 N:M format yet).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "io/config.h"
#include "io/safetensors.h"
#include "model/linear.h"
#include "model/tensor_specs.h"

namespace tessera {

struct SparseScheme {
  int kept = 2, group = 4;
  bool bitmask24 = false;  // compressed-tensors sparse-24-bitmask tensors, else dense with zeros
  bool compressed_tensors = false;
  std::vector<std::string> targets, ignore;  // compressed-tensors
  std::vector<std::string> module_names;     // tessera_sparsity's explicit list (else every linear)

  bool Sparse(const std::string& module) const;
  // "2:4 (tessera sparsify, dense with zeros)" (inspect and bench labels).
  std::string Describe() const;
};

// The scheme of a checkpoint, nullopt for a dense one; throws tessera::Error naming `source` for
// sparsity tessera cannot load.
std::optional<SparseScheme> SparseSchemeOf(const ModelConfig& config, const std::string& source = "config.json");

// The compressed-tensors tensor names of one sparse-24-bitmask module.
struct Bitmask24Names {
  std::string values, bitmask, shape;
};
Bitmask24Names Bitmask24NamesOf(const std::string& module);

}  // namespace tessera
