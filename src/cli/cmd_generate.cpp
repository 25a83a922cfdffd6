// `tessera generate` and `tessera chat`.
//
// generate: by default the prompt becomes a user turn in the model's chat format — harmony for
// gpt-oss (with the default system message; the final channel is streamed to stdout), the
// directory's own chat template for the other families (engine/chat_template.h; the <think>
// block of Qwen3 and DeepSeek-R1 is the analysis) — and the reply is streamed as it is generated; --raw feeds the text as
// is and streams the decoded output. --json prints one object instead:
//   {"text", "analysis", "raw_text", "tokens", "prompt_tokens", "finish_reason", "seed",
//    "timings": {"prefill_ms", "decode_ms", "prefill_tok_s", "decode_tok_s"}}
// plus, with --spec ngram, "spec": {"proposed", "accepted", "acceptance_rate",
// "mean_accepted_len", "verify_steps", "decode_steps", "method", "k", "min_n", "max_n"}.
// chat: an interactive loop over stdin lines; the conversation is kept and re-rendered each
// turn, and the KV cache reuses the common prefix. "/analysis" toggles showing the chain of
// thought, "/reset" clears the history, "/exit" (or end of input) quits. Under --tp every rank
// runs every turn; rank 0 reads stdin (mpirun connects it to rank 0 only) and prints.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <iostream>
#include <memory>
#include <random>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/model_options.h"
#include "cli/spec_options.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "engine/chat_template.h"
#include "engine/generator.h"
#include "engine/harmony.h"
#include "engine/think_splitter.h"
#include "engine/sampler.h"
#include "engine/speculative.h"
#include "tokenizer/tokenizer.h"

namespace tessera::cli {
namespace {

struct RunArgs {
  std::string model;
  std::string prompt;
  int64_t n_predict = 256;
  float temperature = 1.0f;  // gpt-oss model card: temperature 1.0, top_p 1.0
  int64_t top_k = 0;
  float top_p = 1.0f;
  float min_p = 0.0f;
  int64_t seed = -1;
  int64_t context = 0;  // 0: kDefaultContext, or the model's max_position_embeddings if smaller
  std::string kv_type = "bf16";
  std::string reasoning = "medium";
  std::string developer;
  std::string system;  // chat-template families: the system message
  bool no_think = false;
  bool raw = false;
  bool json = false;
  std::string chat_template;  // --chat-template FILE|NAME ("": the model's)
  bool show_analysis = false;
  ModelArgs model_args;
  SpecArgs spec;  // --spec flags
};

void AddRunOptions(CLI::App* cmd, RunArgs& a) {
  cmd->add_option("-m,--model", a.model, "Hugging Face model directory (gpt-oss, Llama, Mistral, Qwen2/3, Qwen3-MoE)")
      ->required();
  cmd->add_option("-n,--predict", a.n_predict, "most tokens to generate per reply (-1: until a stop token)")
      ->capture_default_str()->check(CLI::Range(int64_t{-1}, int64_t{1} << 30));
  cmd->add_option("--temp", a.temperature, "sampling temperature (0: greedy)")
      ->capture_default_str()->check(CLI::Range(0.0f, 100.0f));
  cmd->add_option("--top-k", a.top_k, "keep the k most likely tokens (0: off)")
      ->capture_default_str()->check(CLI::Range(int64_t{0}, int64_t{1} << 30));
  cmd->add_option("--top-p", a.top_p, "nucleus sampling mass (1: off)")->capture_default_str();
  cmd->add_option("--min-p", a.min_p, "drop tokens below min-p times the top probability (0: off)")
      ->capture_default_str();
  cmd->add_option("-s,--seed", a.seed, "sampling seed (-1: random; the seed used is reported)")
      ->capture_default_str();
  cmd->add_option("-c,--ctx-size", a.context,
                  "context size in tokens (prompt + generated; default 4096, or the model's max_position_embeddings "
                  "if smaller)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  cmd->add_option("--kv-type", a.kv_type, "KV cache element type: bf16, f32 (exact) or int8")
      ->capture_default_str()->check(CLI::IsMember({"bf16", "f32", "int8"}));
  cmd->add_option("--reasoning", a.reasoning, "reasoning effort in the system message: low, medium, high")
      ->capture_default_str()->check(CLI::IsMember({"low", "medium", "high"}));
  cmd->add_option("--developer", a.developer, "gpt-oss: developer instructions (what other tools call the system prompt)");
  cmd->add_option("--system", a.system, "chat-template families: the system message");
  cmd->add_option("--chat-template", a.chat_template,
                  "chat template: a .jinja file, or a name (chatml, or a Hub template `tessera info --chat-templates` lists); "
                  "default: the model's, else ChatML");
  cmd->add_flag("--raw", a.raw, "no chat format: the text is fed as it is and the reply printed raw");
  cmd->add_flag("--no-think", a.no_think, "Qwen3: render the prompt with enable_thinking false");
  cmd->add_flag("--show-analysis", a.show_analysis, "also print the analysis channel / <think> block (chain of thought; Qwen3, DeepSeek-R1)");
  AddModelOptions(cmd, a.model_args, "fast");
  AddSpecOptions(cmd, a.spec);
}

constexpr int64_t kDefaultContext = 4096;

struct Session {
  std::unique_ptr<Model> model;
  Tokenizer tokenizer;
  std::unique_ptr<HarmonyEncoding> harmony;    // gpt-oss
  std::optional<ChatTemplate> chat_template;  // the other families (unless --raw)
  std::unique_ptr<Generator> generator;
  SamplingParams sampling;
  SpecOptions spec;
};

Session Open(const RunArgs& a) {
  const SpecOptions spec = ParseSpecArgs(a.spec);  // before the (slow) load
  if (a.raw && !a.chat_template.empty()) Fail("--raw and --chat-template exclude each other");
  if (!a.chat_template.empty()) ChatTemplate::FromOption(a.chat_template, "");  // a bad file or name: before the load
  const ModelOptions options = ToModelOptions(a.model_args);
  auto model = Model::Load(a.model, options);
  if (!model->load_note().empty() && PrintsForTheJob(options)) std::fprintf(stderr, "tessera: note: %s\n", model->load_note().c_str());
  Tokenizer tokenizer = Tokenizer::FromModelDir(model->path());
  Session s{std::move(model), std::move(tokenizer), nullptr, std::nullopt, nullptr, {}, spec};
  if (s.model->config().model_type == "gpt_oss" && !a.raw) {
    if (!a.chat_template.empty()) Fail("--chat-template: gpt-oss speaks harmony (engine/harmony.h), not a Jinja template");
    s.harmony = std::make_unique<HarmonyEncoding>(s.tokenizer);
  } else if (!a.raw) {
    // The directory's template (ChatML when it has none, with a warning) or --chat-template's.
    s.chat_template = ChatTemplate::FromOption(a.chat_template, s.model->path());
    if (!s.chat_template->warning().empty() && PrintsForTheJob(options)) {
      std::fprintf(stderr, "tessera: warning: %s\n", s.chat_template->warning().c_str());
    }
  }
  int64_t context = a.context;
  if (context == 0) {
    const int64_t max_positions = s.model->config().max_position_embeddings;
    context = max_positions > 0 ? std::min(kDefaultContext, max_positions) : kDefaultContext;
  }
  s.generator = std::make_unique<Generator>(*s.model, context, ParseKvType(a.kv_type));
  s.sampling.temperature = a.temperature;
  s.sampling.top_k = a.top_k;
  s.sampling.top_p = a.top_p;
  s.sampling.min_p = a.min_p;
  // Every rank of a --tp job samples from the same logits and must draw the same numbers.
  s.sampling.seed = AgreeAcrossRanks(options, a.seed >= 0 ? static_cast<uint64_t>(a.seed) : std::random_device{}());
  ValidateSamplingParams(s.sampling);
  return s;
}

// gpt-oss stops on <|return|>, <|call|> and <|endoftext|> (generation_config.json), never on
// <|end|>, which only closes the analysis message (gpt-oss.md §4.4).
// Chat-template families: generation_config.json's eos ids, config.json's, and the template's
// turn-end tokens (dense-decoders.md §8.5: Qwen's config eos alone misses <|endoftext|>).
StopCondition MakeStop(const Session& s, int64_t n_predict) {
  StopCondition stop = StopCondition::FromGenerationConfig(s.model->generation_config(), n_predict);
  if (s.harmony && stop.stop_tokens().empty()) stop.AddStopTokens(s.harmony->AssistantStopTokens());
  if (s.chat_template) {
    stop.AddStopTokens(s.chat_template->StopTokenIds(s.tokenizer, s.model->generation_config().eos_token_ids,
                                                     s.model->config().eos_token_ids));
  }
  if (!s.harmony && !s.chat_template && stop.stop_tokens().empty()) {
    std::vector<int32_t> eos;
    for (int64_t id : s.model->config().eos_token_ids) eos.push_back(static_cast<int32_t>(id));
    stop.AddStopTokens(eos);
  }
  return stop;
}

ChatMessage TextMessage(std::string role, std::string content) {
  ChatMessage m;
  m.role = std::move(role);
  m.content = std::move(content);
  return m;
}

HarmonyDelta Delta(HarmonyPart part, std::string text) {
  HarmonyDelta d;
  d.part = part;
  d.text = std::move(text);
  return d;
}

// The conversation of one prompt in a family's chat format.
std::vector<ChatMessage> TemplateConversation(const RunArgs& a, const std::string& user) {
  std::vector<ChatMessage> messages;
  if (!a.system.empty()) messages.push_back(TextMessage("system", a.system));
  messages.push_back(TextMessage("user", user));
  return messages;
}

ChatOptions TemplateOptions(const RunArgs& a) {
  ChatOptions options;
  options.enable_thinking = !a.no_think;
  return options;
}

const char* FinishReason(const GenerationResult& r) {
  switch (r.reason) {
    case StopCondition::Reason::kStopToken: return "stop";
    case StopCondition::Reason::kLength: return "length";
    case StopCondition::Reason::kNone: return "context";
  }
  return "stop";
}

void PrintTimings(const GenerationResult& r, const SpecOptions& spec) {
  const GenerationTimings& t = r.timings;
  std::fprintf(stderr, "\nprompt eval time = %10.2f ms / %5lld tokens (%8.2f ms per token, %8.2f tokens per second)\n",
               t.prefill_ms, static_cast<long long>(t.prefilled_tokens),
               t.prefilled_tokens ? t.prefill_ms / t.prefilled_tokens : 0.0, t.prefill_tok_s());
  const long long steps = t.generated_tokens > 1 ? t.generated_tokens - 1 : 0;
  std::fprintf(stderr, "       eval time = %10.2f ms / %5lld runs   (%8.2f ms per token, %8.2f tokens per second)\n",
               t.decode_ms, steps, steps ? t.decode_ms / steps : 0.0, t.decode_tok_s());
  if (spec.method != SpecMethod::kNone) {
    const SpecStats& st = r.spec;
    std::fprintf(stderr,
                 "    speculation = %s: %lld drafted, %lld accepted (%.1f %%), %.2f tokens per verification over "
                 "%lld verifications in %lld forward passes\n",
                 SpecMethodName(spec.method), static_cast<long long>(st.proposed), static_cast<long long>(st.accepted),
                 100.0 * st.acceptance_rate(), st.mean_accepted_len(), static_cast<long long>(st.verify_steps),
                 static_cast<long long>(st.decode_steps));
  }
}

void RunGenerate(const RunArgs& a) {
  Session s = Open(a);
  std::vector<int32_t> prompt;
  SystemContent system;
  system.reasoning_effort = ParseReasoningEffort(a.reasoning);
  if (a.raw) {
    prompt = s.tokenizer.Encode(a.prompt);
  } else if (s.chat_template) {
    prompt = s.chat_template->RenderIds(s.tokenizer, TemplateConversation(a, a.prompt), TemplateOptions(a));
  } else {
    prompt = s.harmony->RenderForCompletion(MakeConversation(a.prompt, system, a.developer));
  }
  Sampler sampler(s.sampling);
  StopCondition stop = MakeStop(s, a.n_predict);
  std::optional<HarmonyParser> parser;
  if (s.harmony) parser.emplace(*s.harmony);
  ThinkSplitter think(s.chat_template ? s.chat_template->Thinking(!a.no_think) : ReplyThinking::kNone);
  IncrementalDecoder raw_decoder(s.tokenizer);
  std::string raw_text, final_text, analysis_text;
  const bool stream = !a.json;
  auto emit = [&](const HarmonyDelta& d) {
    if (d.part == HarmonyPart::kAnalysis) {
      analysis_text += d.text;
      if (stream && a.show_analysis) std::fputs(d.text.c_str(), stderr);
    } else {
      final_text += d.text;
      if (stream) std::fputs(d.text.c_str(), stdout);
    }
  };
  auto emit_split = [&](const std::string& analysis, const std::string& answer) {
    if (!analysis.empty()) emit(Delta(HarmonyPart::kAnalysis, analysis));
    if (!answer.empty()) emit(Delta(HarmonyPart::kFinal, answer));
  };
  const GenerationResult r = s.generator->Generate(prompt, sampler, stop, [&](int32_t token) {
    // Ids the model has but the tokenizer lacks (reserved rows of the 201088-entry vocabulary)
    // decode to nothing, as Hugging Face's decode skips them.
    const std::string piece = s.tokenizer.Contains(token) ? raw_decoder.Add(token) : std::string();
    raw_text += piece;
    if (a.raw) {
      if (stream) std::fputs(piece.c_str(), stdout);
    } else if (parser) {
      for (const HarmonyDelta& d : parser->Process(token)) emit(d);
    } else if (!stop.IsStopToken(token)) {
      const auto [analysis, answer] = think.Add(piece);
      emit_split(analysis, answer);
    }
    if (stream) std::fflush(stdout);
    return true;
  }, s.spec);
  const std::string tail = raw_decoder.Flush();
  raw_text += tail;
  if (a.raw) {
    if (stream) std::fputs(tail.c_str(), stdout);
    final_text = raw_text;
  } else if (parser) {
    for (const HarmonyDelta& d : parser->Finish()) emit(d);
  } else {
    const auto [analysis, answer] = think.Add(tail);
    emit_split(analysis, answer);
    const auto [rest_analysis, rest_answer] = think.Finish();
    emit_split(rest_analysis, rest_answer);
  }
  if (a.json) {
    const GenerationTimings& t = r.timings;
    nlohmann::json out = {
        {"text", final_text},
        {"tokens", r.tokens},
        {"prompt_tokens", t.prompt_tokens},
        {"finish_reason", FinishReason(r)},
        {"seed", s.sampling.seed},
        {"timings",
         {{"prefill_ms", t.prefill_ms}, {"decode_ms", t.decode_ms}, {"prefill_tok_s", t.prefill_tok_s()},
          {"decode_tok_s", t.decode_tok_s()}}},
    };
    if (!a.raw) {
      out["analysis"] = analysis_text;
      out["raw_text"] = raw_text;
    }
    if (s.spec.method != SpecMethod::kNone) {
      const SpecStats& st = r.spec;
      out["spec"] = {{"method", SpecMethodName(s.spec.method)}, {"k", s.spec.k}, {"min_n", s.spec.min_n},
                     {"max_n", s.spec.max_n}, {"proposed", st.proposed}, {"accepted", st.accepted},
                     {"acceptance_rate", st.acceptance_rate()}, {"mean_accepted_len", st.mean_accepted_len()},
                     {"verify_steps", st.verify_steps}, {"decode_steps", st.decode_steps}};
    }
    std::printf("%s\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return;
  }
  std::printf("\n");
  PrintTimings(r, s.spec);
}

// One chat turn through a family chat template: the reply streamed (Qwen3's think block shown
// only with /analysis), the answer returned for the history.
std::string TemplateTurn(Session& s, const RunArgs& a, const std::vector<ChatMessage>& history, Sampler& sampler,
                         bool show_analysis, bool print_timings, bool* fits) {
  const std::vector<int32_t> prompt = s.chat_template->RenderIds(s.tokenizer, history, TemplateOptions(a));
  StopCondition stop = MakeStop(s, a.n_predict);
  try {
    s.generator->RequireFits(static_cast<int64_t>(prompt.size()), stop.max_new_tokens());
  } catch (const Error& e) {
    std::fprintf(stderr, "tessera: error: %s; /reset starts a new conversation\n", e.what());
    *fits = false;
    return "";
  }
  *fits = true;
  ThinkSplitter think(s.chat_template->Thinking(!a.no_think));
  IncrementalDecoder decoder(s.tokenizer);
  std::string answer_text;
  bool in_analysis = false;
  auto show = [&](const std::pair<std::string, std::string>& parts) {
    if (!parts.first.empty() && show_analysis) {
      if (!in_analysis) std::fputs("[analysis] ", stdout);
      in_analysis = true;
      std::fputs(parts.first.c_str(), stdout);
    }
    if (!parts.second.empty()) {
      if (in_analysis) std::fputs("\n[final] ", stdout);
      in_analysis = false;
      answer_text += parts.second;
      std::fputs(parts.second.c_str(), stdout);
    }
    std::fflush(stdout);
  };
  const GenerationResult r = s.generator->Generate(prompt, sampler, stop, [&](int32_t token) {
    if (!stop.IsStopToken(token)) show(think.Add(s.tokenizer.Contains(token) ? decoder.Add(token) : std::string()));
    return true;
  }, s.spec);
  show(think.Add(decoder.Flush()));
  show(think.Finish());
  std::printf("\n");
  std::fflush(stdout);
  if (print_timings) PrintTimings(r, s.spec);
  return answer_text;
}

// The chat input loop shared by both chat formats: reads lines (rank 0 under --tp, handed to
// the others), handles /exit, /quit, /reset and /analysis, and calls turn(line, show_analysis)
// for every other non-empty line.
void ChatLoop(const ModelOptions& options, bool prints, bool show_analysis, const std::function<void()>& reset,
              const std::function<void(const std::string&, bool)>& turn) {
  const bool tty = isatty(STDIN_FILENO);
  std::string line;
  for (;;) {
    if (tty && prints) std::fprintf(stderr, "\n> ");
    if (!ReadLineAcrossRanks(options, std::cin, line)) break;
    if (line == "/exit" || line == "/quit") break;
    if (line == "/reset") {
      reset();
      continue;
    }
    if (line == "/analysis") {
      show_analysis = !show_analysis;
      if (prints) std::fprintf(stderr, "analysis %s\n", show_analysis ? "shown" : "hidden");
      continue;
    }
    if (!line.empty()) turn(line, show_analysis);
  }
}

void RunTemplateChat(Session& s, const RunArgs& a) {
  const ModelOptions& options = s.model->options();
  const bool prints = PrintsForTheJob(options);
  const bool tty = isatty(STDIN_FILENO);
  std::vector<ChatMessage> history;
  auto reset = [&] {
    history.clear();
    if (!a.system.empty()) history.push_back(TextMessage("system", a.system));
  };
  reset();
  Sampler sampler(s.sampling);
  if (prints) {
    std::fprintf(stderr, "tessera chat: %s (%s template, %d threads). /analysis, /reset, /exit.\n",
                 s.model->path().c_str(), std::string(s.chat_template->name()).c_str(), GlobalPool().num_threads());
  }
  ChatLoop(options, prints, a.show_analysis, reset, [&](const std::string& line, bool show_analysis) {
    history.push_back(TextMessage("user", line));
    bool fits = true;
    const std::string answer = TemplateTurn(s, a, history, sampler, show_analysis, tty && prints, &fits);
    if (!fits) {
      history.pop_back();
      return;
    }
    history.push_back(TextMessage("assistant", answer));
  });
}

// --raw: no chat format. The conversation is one text: each line is appended to it (with a
// newline) and the model continues it until a stop token or -n tokens; its reply joins the text.
void RunRawChat(Session& s, const RunArgs& a) {
  const ModelOptions& options = s.model->options();
  const bool prints = PrintsForTheJob(options);
  const bool tty = isatty(STDIN_FILENO);
  std::string transcript;
  Sampler sampler(s.sampling);
  if (prints) {
    std::fprintf(stderr, "tessera chat: %s (raw text, no chat format, %d threads). /reset, /exit.\n",
                 s.model->path().c_str(), GlobalPool().num_threads());
  }
  ChatLoop(options, prints, false, [&] { transcript.clear(); }, [&](const std::string& line, bool) {
    const std::string before = transcript;
    transcript += line + "\n";
    const std::vector<int32_t> prompt = s.tokenizer.Encode(transcript);
    StopCondition stop = MakeStop(s, a.n_predict);
    try {
      s.generator->RequireFits(static_cast<int64_t>(prompt.size()), stop.max_new_tokens());
    } catch (const Error& e) {
      std::fprintf(stderr, "tessera: error: %s; /reset starts a new conversation\n", e.what());
      transcript = before;
      return;
    }
    IncrementalDecoder decoder(s.tokenizer);
    auto emit = [&](const std::string& piece) {
      transcript += piece;
      std::fputs(piece.c_str(), stdout);
      std::fflush(stdout);
    };
    const GenerationResult r = s.generator->Generate(prompt, sampler, stop, [&](int32_t token) {
      if (!stop.IsStopToken(token) && s.tokenizer.Contains(token)) emit(decoder.Add(token));
      return true;
    }, s.spec);
    emit(decoder.Flush());
    std::printf("\n");
    std::fflush(stdout);
    if (tty && prints) PrintTimings(r, s.spec);
  });
}

void RunChat(const RunArgs& a) {
  Session s = Open(a);
  if (s.chat_template) return RunTemplateChat(s, a);
  if (a.raw) return RunRawChat(s, a);
  const ModelOptions& options = s.model->options();
  const bool prints = PrintsForTheJob(options);
  SystemContent system;
  system.reasoning_effort = ParseReasoningEffort(a.reasoning);
  const bool tty = isatty(STDIN_FILENO);
  std::vector<Message> history;
  auto reset = [&] {
    history = {Message::System(system)};
    if (!a.developer.empty()) history.push_back(Message::Developer(a.developer));
  };
  reset();
  Sampler sampler(s.sampling);
  if (prints) {
    std::fprintf(stderr, "tessera chat: %s (%d threads). /analysis toggles the chain of thought, /reset, /exit.\n",
                 s.model->path().c_str(), GlobalPool().num_threads());
  }
  ChatLoop(options, prints, a.show_analysis, reset, [&](const std::string& line, bool show_analysis) {
    history.push_back(Message::User(line));
    const std::vector<int32_t> prompt = s.harmony->RenderForCompletion(history);
    StopCondition stop = MakeStop(s, a.n_predict);
    // A conversation that has outgrown the context ends the turn, not the session (every rank
    // decides the same from the same history).
    try {
      s.generator->RequireFits(static_cast<int64_t>(prompt.size()), stop.max_new_tokens());
    } catch (const Error& e) {
      if (prints) std::fprintf(stderr, "tessera: error: %s; /reset starts a new conversation\n", e.what());
      history.pop_back();
      return;
    }
    HarmonyParser parser(*s.harmony);
    std::string final_text;
    bool in_analysis = false;
    auto emit = [&](const HarmonyDelta& d) {
      if (d.part == HarmonyPart::kAnalysis) {
        if (!show_analysis) return;
        if (!in_analysis) std::fputs("[analysis] ", stdout);
        in_analysis = true;
      } else {
        if (in_analysis) std::fputs("\n[final] ", stdout);
        in_analysis = false;
        final_text += d.text;
      }
      std::fputs(d.text.c_str(), stdout);
      std::fflush(stdout);
    };
    const GenerationResult r = s.generator->Generate(prompt, sampler, stop, [&](int32_t token) {
      for (const HarmonyDelta& d : parser.Process(token)) emit(d);
      return true;
    }, s.spec);
    for (const HarmonyDelta& d : parser.Finish()) emit(d);
    std::printf("\n");
    std::fflush(stdout);
    if (tty && prints) PrintTimings(r, s.spec);
    // History keeps the final answer only; the analysis of a finished turn is dropped
    // (gpt-oss.md §4.2).
    history.push_back(Message::Assistant("final", final_text));
  });
}

}  // namespace

void RegisterGenerate(CLI::App& app) {
  auto args = std::make_shared<RunArgs>();
  auto* cmd = app.add_subcommand("generate", "generate text from a prompt (a user turn in the model's chat format by default)");
  AddRunOptions(cmd, *args);
  cmd->add_option("-p,--prompt", args->prompt, "prompt text")->required();
  cmd->add_flag("--json", args->json, "print one JSON object with text, tokens, prompt_tokens and timings");
  cmd->callback([args] { RunGenerate(*args); });

  auto chat_args = std::make_shared<RunArgs>();
  auto* chat = app.add_subcommand("chat", "interactive chat; keeps the history, shows the final channel");
  AddRunOptions(chat, *chat_args);
  chat->callback([chat_args] { RunChat(*chat_args); });
}

}  // namespace tessera::cli
