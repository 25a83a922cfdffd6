// `tessera tokenize` and `tessera detokenize`: text <-> token ids through a tokenizer.json
// (or the built-in o200k_harmony tokenizer), exactly as Hugging Face `tokenizers` would.
//
//   tokenize:             all of stdin (UTF-8 text)      -> one JSON array of ids
//   tokenize --jsonl:     each line a JSON string         -> each line a JSON array of ids
//   detokenize:           stdin: one JSON array of ids    -> the decoded text, as is
//   detokenize --jsonl:   each line a JSON array of ids   -> each line a JSON string
// In --jsonl mode each output line is written (and flushed) as soon as its input line is read,
// so the commands can sit in a pipeline.
#include <malloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/error.h"
#include "io/json_util.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace tessera::cli {
namespace {

struct Options {
  std::string model;
  bool jsonl = false;
};

constexpr char kModelHelp[] =
    "model directory containing tokenizer.json, or a tokenizer.json file "
    "(default: the built-in o200k_harmony tokenizer of gpt-oss)";

// Keeps a loaded tokenizer alive; the built-in one is a process-wide singleton.
class TokenizerHandle {
 public:
  explicit TokenizerHandle(const std::string& model) {
    if (!model.empty()) loaded_.emplace(Tokenizer::FromPath(model));
  }
  const Tokenizer& get() const { return loaded_ ? *loaded_ : Tokenizer::BuiltIn(); }

 private:
  std::optional<Tokenizer> loaded_;
};

std::string ReadAllStdin() {
  std::string data;
  // A file's size is known: reserved, so the text is not copied by growth on the way (issue 44:
  // memory a small constant per input byte). A pipe grows by doubling.
  struct stat st;
  if (::fstat(STDIN_FILENO, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
    data.reserve(static_cast<size_t>(st.st_size));
  }
  char buffer[1 << 16];
  size_t got;
  while ((got = std::fread(buffer, 1, sizeof(buffer), stdin)) > 0) data.append(buffer, got);
  if (std::ferror(stdin)) Fail("stdin: read error");
  return data;
}

// Calls fn(line, line_number) for each '\n'-terminated line of stdin (the last one may lack
// the '\n'); a trailing '\r' is left in place (JSON treats it as whitespace).
template <typename Fn>
void ForEachStdinLine(Fn&& fn) {
  char* buffer = nullptr;  // grown by getline; freed on every exit, including a throw from fn
  struct FreeBuffer {
    char** p;
    ~FreeBuffer() { std::free(*p); }
  } free_buffer{&buffer};
  size_t capacity = 0;
  ssize_t length;
  size_t number = 0;
  while ((length = getline(&buffer, &capacity, stdin)) >= 0) {
    std::string_view line(buffer, static_cast<size_t>(length));
    if (!line.empty() && line.back() == '\n') line.remove_suffix(1);
    fn(line, ++number);
  }
  if (std::ferror(stdin)) Fail("stdin: read error");
}

nlohmann::json ParseJson(std::string_view text, const std::string& where) {
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) Fail(where, ": empty input (expected JSON)");
  return ParseJsonText(text, where);
}

void Write(const std::string& s) {
  if (std::fwrite(s.data(), 1, s.size(), stdout) != s.size()) Fail("stdout: write error");
}

// Writes `ids` as one JSON array line in 64 KB pieces (not as one string of up to 8 bytes per id).
void WriteIds(const std::vector<int32_t>& ids) {
  std::string out = "[";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(ids[i]);
    if (out.size() >= (1u << 16)) {
      Write(out);
      out.clear();
    }
  }
  out += "]\n";
  Write(out);
}

// Encodes `text` into `ids` (cleared). One id per byte at most, but for what a normalizer adds
// (a "▁" prefix): reserved once, so the ids are not copied by growth (the pages become resident
// only as ids are written).
void EncodeInto(const Tokenizer& tokenizer, std::string_view text, std::vector<int32_t>& ids) {
  ids.clear();
  ids.reserve(text.size() + 1);
  tokenizer.Encode(text, ids);
}

std::vector<int32_t> IdsFromJson(const nlohmann::json& value, const std::string& where) {
  if (!value.is_array()) Fail(where, ": expected a JSON array of token ids");
  std::vector<int32_t> ids;
  ids.reserve(value.size());
  for (size_t i = 0; i < value.size(); ++i) {
    const nlohmann::json& v = value[i];
    if (!v.is_number_integer()) Fail(where, ": element ", i, " is not an integer token id");
    const bool fits = v.is_number_unsigned() ? v.get<uint64_t>() <= INT32_MAX
                                             : v.get<int64_t>() >= 0 && v.get<int64_t>() <= INT32_MAX;
    if (!fits) Fail(where, ": element ", i, " (", v.dump(), ") is not a valid token id");
    ids.push_back(static_cast<int32_t>(v.get<int64_t>()));
  }
  return ids;
}

void RunTokenize(const Options& opts) {
  const TokenizerHandle handle(opts.model);
  const Tokenizer& tokenizer = handle.get();
  // Loading a tokenizer.json frees its parse buffers (~50 MB for o200k), which main's malloc
  // settings would keep in the heap: given back, so that they do not add to what a long text
  // takes.
  ::malloc_trim(0);
  std::vector<int32_t> ids;
  if (!opts.jsonl) {
    const std::string text = ReadAllStdin();
    const size_t bad = utf8::FindInvalid(text);
    if (bad != text.size()) Fail("stdin: input is not valid UTF-8 (byte offset ", bad, ")");
    EncodeInto(tokenizer, text, ids);
    WriteIds(ids);
    return;
  }
  ForEachStdinLine([&](std::string_view line, size_t number) {
    const std::string where = StrCat("stdin line ", number);
    const nlohmann::json value = ParseJson(line, where);
    if (!value.is_string()) Fail(where, ": expected a JSON string");
    EncodeInto(tokenizer, value.get_ref<const std::string&>(), ids);
    WriteIds(ids);
    std::fflush(stdout);
  });
}

void RunDetokenize(const Options& opts) {
  const TokenizerHandle handle(opts.model);
  const Tokenizer& tokenizer = handle.get();
  if (!opts.jsonl) {
    const std::string input = ReadAllStdin();
    Write(tokenizer.Decode(IdsFromJson(ParseJson(input, "stdin"), "stdin")));
    return;
  }
  ForEachStdinLine([&](std::string_view line, size_t number) {
    const std::string where = StrCat("stdin line ", number);
    const std::vector<int32_t> ids = IdsFromJson(ParseJson(line, where), where);
    // Decode replaced ill-formed UTF-8, so dump() cannot meet invalid bytes.
    Write(nlohmann::json(tokenizer.Decode(ids)).dump() + "\n");
    std::fflush(stdout);
  });
}

}  // namespace

void RegisterTokenize(CLI::App& app) {
  {
    auto opts = std::make_shared<Options>();
    auto* cmd = app.add_subcommand(
        "tokenize",
        "encode UTF-8 text from stdin into token ids (a JSON array on stdout), exactly as Hugging Face "
        "tokenizers does; special tokens such as <|start|> in the text are recognised");
    cmd->add_option("-m,--model", opts->model, kModelHelp);
    cmd->add_flag("--jsonl", opts->jsonl,
                  "read one JSON string per line and write one JSON array of ids per line");
    cmd->callback([opts] { RunTokenize(*opts); });
  }
  {
    auto opts = std::make_shared<Options>();
    auto* cmd = app.add_subcommand(
        "detokenize",
        "decode a JSON array of token ids from stdin into text on stdout (ill-formed UTF-8 becomes U+FFFD, "
        "as in Hugging Face tokenizers)");
    cmd->add_option("-m,--model", opts->model, kModelHelp);
    cmd->add_flag("--jsonl", opts->jsonl,
                  "read one JSON array of ids per line and write one JSON string per line");
    cmd->callback([opts] { RunDetokenize(*opts); });
  }
}

}  // namespace tessera::cli
