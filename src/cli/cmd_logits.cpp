// `tessera logits`: float32 logits of one prefill over given token ids, as a .npy file.
#include <cstdio>
#include <memory>
#include <sstream>

#include "cli/commands.h"
#include "cli/model_options.h"
#include "core/error.h"
#include "io/npy.h"
#include "model/model.h"

namespace tessera::cli {
namespace {

std::vector<int32_t> ParseIds(const std::string& text) {
  std::vector<int32_t> ids;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || v < 0 || v > INT32_MAX) {
      Fail("--ids: '", item, "' is not a token id (expected comma-separated non-negative integers)");
    }
    ids.push_back(static_cast<int32_t>(v));
  }
  if (ids.empty()) Fail("--ids: no token ids given");
  return ids;
}

struct LogitsArgs {
  std::string model;
  std::string ids;
  std::string out;
  std::string kv_type = "f32";
  ModelArgs model_args;
};

void RunLogits(const LogitsArgs& args) {
  const std::vector<int32_t> ids = ParseIds(args.ids);
  const ModelOptions options = ToModelOptions(args.model_args);
  const auto model = Model::Load(args.model, options);
  KvCache cache(model->cache_config(), static_cast<int64_t>(ids.size()), ParseKvType(args.kv_type));
  std::vector<float> logits;
  model->Forward(ids, 0, cache, LogitsMode::kAll, logits);
  const int64_t V = model->vocab_size(), n = static_cast<int64_t>(ids.size());
  if (!args.out.empty()) {
    if (options.tp && options.tp->rank() != 0) return;  // every rank holds the same logits; rank 0 writes
    WriteNpyF32(args.out, {n, V}, logits.data());
    std::printf("wrote %s: float32 [%lld, %lld]\n", args.out.c_str(), static_cast<long long>(n),
                static_cast<long long>(V));
    return;
  }
  // Without --out: per position, the argmax and its logit, one JSON object per line.
  for (int64_t t = 0; t < n; ++t) {
    const float* row = &logits[t * V];
    int64_t best = 0;
    for (int64_t v = 1; v < V; ++v) best = row[v] > row[best] ? v : best;
    std::printf("{\"position\": %lld, \"id\": %d, \"argmax\": %lld, \"logit\": %.9g}\n",
                static_cast<long long>(t), ids[t], static_cast<long long>(best), row[best]);
  }
}

}  // namespace

void RegisterLogits(CLI::App& app) {
  auto args = std::make_shared<LogitsArgs>();
  auto* cmd = app.add_subcommand("logits", "float32 logits [n, vocab] of one prefill of the given ids");
  cmd->add_option("-m,--model", args->model, "Hugging Face model directory")->required();
  cmd->add_option("--ids", args->ids, "comma-separated token ids, e.g. 200006,17360,200008")->required();
  cmd->add_option("--out", args->out, "write the logits here as a .npy file (float32, C order)");
  cmd->add_option("--kv-type", args->kv_type, "KV cache element type: f32 (exact, default), bf16 or int8")
      ->check(CLI::IsMember({"f32", "bf16", "int8"}));
  AddModelOptions(cmd, args->model_args, "exact");
  cmd->callback([args] { RunLogits(*args); });
}

}  // namespace tessera::cli
