// `tessera perplexity -m DIR -f FILE [-c CTX] [--stride S] [--json]`: perplexity of a text file in
// fixed-length windows (engine/perplexity.h, transformers' strided method; llama.cpp's
// llama-perplexity reports the same quantities). The file is tokenized as it is (no chat
// rendering, no BOS). Progress on stderr, one line per window; the result on stdout.
// --compare-exact also loads the checkpoint on the exact path and reports, over the same windows,
// KL(exact || this run) and the top-1 agreement (llama.cpp's --kl-divergence, without its logits
// file: both models are resident, so it needs twice the memory). --compare-model DIR does the
// same against another checkpoint of the same vocabulary, on its exact path: a quantized model
// against the original it was made from, which measures what quantization lost even where the
// perplexity difference is within its noise.
#include <cstdio>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/model_options.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "engine/perplexity.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace tessera::cli {
namespace {

struct PerplexityArgs {
  std::string model;
  std::string file;
  int64_t context = 512;
  int64_t stride = 0;
  std::string kv_type = "f32";
  bool json = false;
  bool compare_exact = false;
  std::string compare_model;
  ModelArgs model_args;
};

void RunPerplexity(const PerplexityArgs& a) {
  // Everything that can be checked before the (slow) load is.
  if (a.context < 2) Fail("perplexity: -c ", a.context, " must be at least 2");
  if (a.stride > a.context) Fail("perplexity: --stride ", a.stride, " exceeds the window length ", a.context);
  const std::string text = ReadFile(a.file);
  const ModelOptions options = ToModelOptions(a.model_args);
  const auto model = Model::Load(a.model, options);
  if (a.compare_exact && !a.compare_model.empty()) Fail("perplexity: --compare-exact and --compare-model exclude each other");
  std::unique_ptr<Model> exact;
  if (a.compare_exact || !a.compare_model.empty()) {
    ModelOptions exact_options = options;
    exact_options.precision = Precision::kExact;
    exact_options.dense = DenseWeights::kBf16;
    exact_options.exact_layers = 0;
    exact = Model::Load(a.compare_exact ? a.model : a.compare_model, exact_options);
    if (exact->config().vocab_size != model->config().vocab_size) {
      Fail("perplexity: --compare-model ", a.compare_model, " has a vocabulary of ", exact->config().vocab_size,
           " tokens, ", a.model, " one of ", model->config().vocab_size);
    }
  }
  const Tokenizer tokenizer = Tokenizer::FromModelDir(model->path());
  const std::vector<int32_t> tokens = tokenizer.Encode(text);
  if (tokens.size() < 2) Fail(a.file, ": ", tokens.size(), " token(s); perplexity needs at least 2");
  const bool prints = PrintsForTheJob(options);
  PerplexityOptions po{
      .context = a.context, .stride = a.stride, .kv_type = ParseKvType(a.kv_type), .reference = exact.get()};
  const PerplexityResult r = EvaluatePerplexity(*model, tokens, po, [&](int64_t done, int64_t total,
                                                                          const PerplexityResult& so_far) {
    if (!prints) return;
    std::fprintf(stderr, "[%lld/%lld] %lld tokens scored, ppl %.4f +/- %.4f, %.1f tokens/s\n",
                 static_cast<long long>(done), static_cast<long long>(total), static_cast<long long>(so_far.scored),
                 so_far.perplexity(), so_far.perplexity_stderr(), so_far.tokens_per_second());
  });
  if (!prints) return;
  if (a.json) {
    nlohmann::json out = {{"file", a.file},
                                {"tokens", r.tokens},
                                {"scored", r.scored},
                                {"windows", r.windows},
                                {"context", a.context},
                                {"stride", a.stride == 0 ? a.context : a.stride},
                                {"mean_nll", r.mean_nll},
                                {"nll_stderr", r.nll_stderr},
                                {"perplexity", r.perplexity()},
                                {"perplexity_stderr", r.perplexity_stderr()},
                                {"seconds", r.seconds},
                                {"tokens_per_second", r.tokens_per_second()}};
    if (exact) out[a.compare_exact ? "vs_exact" : "vs_model"] = {{"mean_kl", r.mean_kl}, {"max_kl", r.max_kl}, {"top1_agreement", r.top1_agreement}};
    std::printf("%s\n", out.dump().c_str());
    return;
  }
  std::printf("perplexity: %.4f +/- %.4f (mean NLL %.6f +/- %.6f nats) over %lld tokens of %lld, %lld windows of "
              "%lld, %.1f tokens/s\n",
              r.perplexity(), r.perplexity_stderr(), r.mean_nll, r.nll_stderr, static_cast<long long>(r.scored),
              static_cast<long long>(r.tokens), static_cast<long long>(r.windows), static_cast<long long>(a.context),
              r.tokens_per_second());
  if (exact) {
    std::printf("against %s: mean KL %.6f nats, max KL %.6f, top-1 agreement %.2f %%\n",
                a.compare_exact ? "the exact path" : a.compare_model.c_str(), r.mean_kl,
                r.max_kl, 100.0 * r.top1_agreement);
  }
}

}  // namespace

void RegisterPerplexity(CLI::App& app) {
  auto args = std::make_shared<PerplexityArgs>();
  auto* cmd = app.add_subcommand("perplexity", "perplexity of a text file, in fixed-length windows");
  cmd->add_option("-m,--model", args->model, "Hugging Face model directory")->required();
  cmd->add_option("-f,--file", args->file, "text file to evaluate (tokenized as it is)")->required();
  cmd->add_option("-c,--ctx-size", args->context, "window length in tokens")->capture_default_str();
  cmd->add_option("--stride", args->stride,
                  "tokens between window starts (default: the window length, disjoint windows); each window scores "
                  "only the tokens the previous one did not")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--kv-type", args->kv_type, "KV cache element type: f32 (default), bf16 or int8")
      ->check(CLI::IsMember({"f32", "bf16", "int8"}));
  cmd->add_flag("--json", args->json, "print the result as one JSON object");
  cmd->add_flag("--compare-exact", args->compare_exact,
                "also run the checkpoint on the exact path over the same windows and report KL(exact || this run) "
                "and the top-1 agreement (holds both models in memory)");
  cmd->add_option("--compare-model", args->compare_model,
                  "also run another checkpoint of the same vocabulary (the original of a quantized model) on the "
                  "exact path over the same windows and report KL(that || this run) and the top-1 agreement");
  AddModelOptions(cmd, args->model_args, "fast");
  cmd->callback([args] { RunPerplexity(*args); });
}

}  // namespace tessera::cli
