// Command-line options that choose how a model's weights are held and multiplied
// (model/gpt_oss_model.h ModelOptions), shared by every subcommand that loads a model.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "model/gpt_oss_model.h"

namespace tessera::cli {

struct ModelArgs {
  std::string precision;
  std::string dense = "bf16";
};

// Adds --precision (default `default_precision`) and --dense to `cmd`.
void AddModelOptions(CLI::App* cmd, ModelArgs& args, const char* default_precision);
ModelOptions ToModelOptions(const ModelArgs& args);

}  // namespace tessera::cli
