// The --spec flags of the subcommands that decode (generate, chat, serve): n-gram speculative
// decoding (engine/speculative.h), parsed into SpecOptions with one-line errors naming the flags.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "engine/ngram.h"
#include "engine/speculative.h"

namespace tessera::cli {

struct SpecArgs {
  std::string method = "none";
  int64_t k = kDefaultSpecK;
  int64_t min_n = kDefaultNgramMinN;
  int64_t max_n = kDefaultNgramMaxN;
  bool fixed_k = false;
  // Which flags were given (set by AddSpecOptions).
  CLI::Option* k_opt = nullptr;
  CLI::Option* min_n_opt = nullptr;
  CLI::Option* max_n_opt = nullptr;
  CLI::Option* fixed_k_opt = nullptr;
};

// Adds --spec, --spec-k, --spec-min-n, --spec-max-n and --spec-fixed-k to `cmd`.
void AddSpecOptions(CLI::App* cmd, SpecArgs& args);
// The options the flags give. When only one of --spec-min-n / --spec-max-n is given, the other
// keeps its default unless the two would cross; then it takes the given value (as vLLM sets the
// missing one to the given one). --spec-* without --spec ngram is an error.
SpecOptions ParseSpecArgs(const SpecArgs& args);

}  // namespace tessera::cli
