// Subcommands of the `tessera` binary. Each Register* adds its subcommand, options and callback
// to the app; the callback throws tessera::Error for bad input (main turns it into exit code 2).
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace tessera::cli {

void RegisterInfo(CLI::App& app);
void RegisterTokenize(CLI::App& app);  // tokenize and detokenize
void RegisterInspect(CLI::App& app);
void RegisterSynth(CLI::App& app);
void RegisterQuantize(CLI::App& app);
void RegisterSparsify(CLI::App& app);
void RegisterLogits(CLI::App& app);
void RegisterPerplexity(CLI::App& app);
void RegisterBench(CLI::App& app);
void RegisterGenerate(CLI::App& app);  // generate and chat
void RegisterServe(CLI::App& app);

// inspect of a GGUF file (inspect_gguf.cpp).
void InspectGguf(const std::string& path, bool json);

}  // namespace tessera::cli
