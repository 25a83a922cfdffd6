// Command-line options that choose how a model's weights are held and multiplied
// (model/model.h ModelOptions), shared by every subcommand that loads a model.
#pragma once

#include <istream>
#include <string>

#include <CLI/CLI.hpp>

#include "model/model.h"

namespace tessera::cli {

struct ModelArgs {
  std::string precision;
  std::string dense = "bf16";
  int exact_layers = 0;
  int tp = 1;
  std::string tp_experts = "tensor";
  std::string sparse = "on";
  std::string mla = "absorbed";
};

// Adds --precision (default `default_precision`), --dense, --exact-layers, --tp, --tp-experts,
// --sparse and --mla to `cmd`.
void AddModelOptions(CLI::App* cmd, ModelArgs& args, const char* default_precision);
// With --tp P > 1 this joins the MPI job (which must have P ranks) and silences stdout on every
// rank but 0, so the job prints one copy of the output (errors still reach stderr).
ModelOptions ToModelOptions(const ModelArgs& args);
// A value every rank of a --tp job agrees on: rank 0's (identity without --tp).
uint64_t AgreeAcrossRanks(const ModelOptions& options, uint64_t value);
// std::getline on rank 0, its result and line given to every rank of a --tp job (mpirun connects
// stdin to rank 0 only); plain std::getline without --tp.
bool ReadLineAcrossRanks(const ModelOptions& options, std::istream& in, std::string& line);
// Whether this process prints what the job prints once (rank 0, or no --tp).
bool PrintsForTheJob(const ModelOptions& options);

}  // namespace tessera::cli
