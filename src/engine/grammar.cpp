#include "engine/grammar.h"

#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <fcntl.h>
#include <malloc.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <list>
#include <mutex>
#include <unordered_map>

#include "core/error.h"
#include "io/json_util.h"
#include "tokenizer/tokenizer.h"

#ifdef TESSERA_HAVE_XGRAMMAR
#include <xgrammar/xgrammar.h>
#endif

namespace tessera {
namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif
#else
constexpr bool kAddressSanitizer = false;
#endif

// The child's heap may grow by `bytes` beyond what it inherited: RLIMIT_DATA (private writable
// mappings and brk, Linux >= 4.7) set to VmData + bytes. Not under AddressSanitizer, whose
// allocator reserves far more than it uses.
void LimitChildHeap(size_t bytes) {
  if (kAddressSanitizer) return;
  FILE* status = std::fopen("/proc/self/status", "r");
  if (!status) return;
  char line[256];
  unsigned long long data_kb = 0;
  while (std::fgets(line, sizeof(line), status)) {
    if (std::sscanf(line, "VmData: %llu kB", &data_kb) == 1) break;
  }
  std::fclose(status);
  if (data_kb == 0) return;
  const rlim_t limit = static_cast<rlim_t>(data_kb) * 1024 + bytes;
  const rlimit r{limit, limit};
  ::setrlimit(RLIMIT_DATA, &r);
}

bool WriteAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

void KillChild(pid_t pid) {
  ::kill(pid, SIGKILL);
  while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
  }
}

// Runs `job` in a forked child and returns what it returned; a tessera::Error (or other
// exception) it throws comes back as a tessera::Error with its message. The child writes one
// tag byte ('K' result, 'E' error, 'M' out of memory) and the payload to a pipe; the parent
// polls the pipe every 20 ms and kills the child at the deadline, on `cancelled`, or when the
// payload would pass the memory cap.
std::string RunIsolated(const std::function<std::string()>& job, const CompileLimits& limits) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) Fail("grammar: cannot open a pipe to the compile process: ", std::strerror(errno));
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    Fail("grammar: cannot start the compile process: ", std::strerror(err));
  }
  if (pid == 0) {
    // The child: one thread (the caller's), a copy of the parent's memory. It never returns
    // into the parent's code, and leaves with _exit (no atexit handlers, no destructors of the
    // parent's objects).
    ::close(fds[0]);
    LimitChildHeap(limits.memory_bytes);
    char tag = 'K';
    std::string out;
    try {
      out = job();
    } catch (const std::bad_alloc&) {
      tag = 'M';
      out.clear();
    } catch (const std::exception& e) {
      tag = 'E';
      out = e.what();
    } catch (...) {
      tag = 'E';
      out = "grammar: the compile failed";
    }
    const bool ok = WriteAll(fds[1], &tag, 1) && WriteAll(fds[1], out.data(), out.size());
    ::_exit(ok ? 0 : 1);
  }
  ::close(fds[1]);
  const int fd = fds[0];
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::duration<double>(limits.seconds);
  std::string got;
  char buffer[1 << 16];
  auto stop = [&](GrammarCompileStopped::Reason reason, const std::string& why) {
    KillChild(pid);
    ::close(fd);
    throw GrammarCompileStopped(reason, why);
  };
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, 20);
    if (ready > 0) {
      const ssize_t n = ::read(fd, buffer, sizeof(buffer));
      if (n == 0) break;
      if (n < 0 && errno != EINTR && errno != EAGAIN) stop(GrammarCompileStopped::kCancelled, "grammar: lost the compile process");
      if (n > 0) got.append(buffer, static_cast<size_t>(n));
      if (got.size() > limits.memory_bytes) {
        stop(GrammarCompileStopped::kMemory,
             StrCat("the grammar needs more than ", limits.memory_bytes >> 20, " MiB (--grammar-memory)"));
      }
    }
    if (limits.cancelled && limits.cancelled()) stop(GrammarCompileStopped::kCancelled, "the grammar compile was cancelled");
    if (std::chrono::steady_clock::now() >= deadline) {
      stop(GrammarCompileStopped::kDeadline,
           StrCat("the grammar did not compile within ", limits.seconds, " s (--grammar-timeout): the schema is too complex"));
    }
  }
  ::close(fd);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (got.empty() || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    if (WIFSIGNALED(status)) Fail("grammar: the compile process ended by signal ", WTERMSIG(status));
    Fail("grammar: the compile process failed");
  }
  if (got[0] == 'M') {
    throw GrammarCompileStopped(GrammarCompileStopped::kMemory,
                                StrCat("the grammar needs more than ", limits.memory_bytes >> 20, " MiB (--grammar-memory)"));
  }
  if (got[0] == 'E') throw Error(got.substr(1));
  return got.substr(1);
}

}  // namespace

#ifdef TESSERA_HAVE_XGRAMMAR

namespace {

// The engine's messages start "[HH:MM:SS] xgrammar-0.2.9/cpp/file.cc:123: "; the reason follows.
std::string EngineReason(const std::exception& e) {
  std::string_view text = e.what();
  const size_t source = text.find("xgrammar-");
  if (source != std::string_view::npos) {
    const size_t colon = text.find(": ", source);
    if (colon != std::string_view::npos) text.remove_prefix(colon + 2);
  }
  return OneLine(text, 300);
}

// The tokens as the grammar sees them: their bytes; special tokens behind a 0xFF byte, which no
// UTF-8 text holds, so no string, literal or free-text region of a grammar can produce one
// (only a structural tag's {"type": "token"} can, by id); ids without a token are empty
// (always masked).
// Ids at or past `model_vocab` have no logit and are left out.
std::vector<std::string> GrammarTokens(const Tokenizer& tokenizer, int64_t model_vocab) {
  const int32_t count = static_cast<int32_t>(std::min<int64_t>(tokenizer.vocab_size(), model_vocab));
  std::vector<std::string> tokens(static_cast<size_t>(count));
  for (int32_t id = 0; id < count; ++id) {
    if (!tokenizer.Contains(id)) continue;
    tokens[static_cast<size_t>(id)] =
        tokenizer.IsSpecial(id) ? std::string("\xff").append(tokenizer.TokenBytes(id)) : std::string(tokenizer.TokenBytes(id));
  }
  return tokens;
}

}  // namespace

class CompiledConstraint {
 public:
  CompiledConstraint(xgrammar::CompiledGrammar grammar, std::vector<int32_t> end_tokens)
      : grammar(std::move(grammar)), end_tokens(std::move(end_tokens)) {}
  xgrammar::CompiledGrammar grammar;
  std::vector<int32_t> end_tokens;
};

// Compiled constraints by key, least recently used first out, at most `capacity` bytes.
class ConstraintCache {
 public:
  std::shared_ptr<const CompiledConstraint> Find(const std::string& key) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = index_.find(key);
    if (it == index_.end()) return nullptr;
    order_.splice(order_.begin(), order_, it->second);
    return it->second->value;
  }
  void Insert(const std::string& key, std::shared_ptr<const CompiledConstraint> value, size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (index_.count(key) || bytes > capacity_) return;
    order_.push_front({key, std::move(value), bytes});
    index_[key] = order_.begin();
    held_ += bytes;
    Evict();
  }
  void SetCapacity(size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    capacity_ = bytes;
    Evict();
  }
  size_t held() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return held_;
  }
  size_t entries() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return order_.size();
  }

 private:
  struct Entry {
    std::string key;
    std::shared_ptr<const CompiledConstraint> value;
    size_t bytes;
  };
  void Evict() {
    while (held_ > capacity_ && !order_.empty()) {
      held_ -= order_.back().bytes;
      index_.erase(order_.back().key);
      order_.pop_back();
    }
  }
  mutable std::mutex mutex_;
  std::list<Entry> order_;
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
  size_t held_ = 0, capacity_ = size_t{256} << 20;
};

struct GrammarVocabulary::Impl {
  Impl(const Tokenizer& tokenizer, int64_t model_vocab)
      : info(GrammarTokens(tokenizer, model_vocab), xgrammar::VocabType::RAW, static_cast<int>(model_vocab), std::vector<int32_t>{},
             false),
        compiler(info, /*max_threads=*/1, /*cache_enabled=*/false, /*max_memory_bytes=*/-1) {}
  xgrammar::TokenizerInfo info;
  // The engine's own cache is off: with it on, memory grew by about 4 MB with every distinct
  // 1,000-property schema whatever its max_memory_bytes (xgrammar 0.2.9), and compiles were no
  // faster. ConstraintCache keeps the compiled grammars, within its bytes.
  mutable xgrammar::GrammarCompiler compiler;
  mutable ConstraintCache cache;
};

namespace {

xgrammar::CompiledGrammar CompileRecipe(xgrammar::GrammarCompiler& compiler, const GrammarRecipe& recipe) {
  if (recipe.structural_tag) {
    return compiler.CompileStructuralTag(R"({"type": "structural_tag", "format": )" + recipe.text + "}");
  }
  return compiler.CompileJSONSchema(recipe.text, /*any_whitespace=*/false, std::nullopt, std::nullopt,
                                    /*strict_mode=*/true);
}

}  // namespace

GrammarVocabulary::GrammarVocabulary(const Tokenizer& tokenizer, int64_t model_vocab) : model_vocab_(model_vocab) {
  if (model_vocab <= 0 || model_vocab > INT32_MAX) Fail("grammar: vocabulary size ", model_vocab, " is out of range");
  try {
    impl_ = std::make_unique<Impl>(tokenizer, model_vocab);
  } catch (const std::exception& e) {
    Fail("grammar: cannot index the vocabulary: ", EngineReason(e));
  }
}
GrammarVocabulary::~GrammarVocabulary() = default;
bool GrammarVocabulary::Available() { return true; }

std::shared_ptr<const CompiledConstraint> GrammarVocabulary::Compile(const std::string& key,
                                                                     const std::function<GrammarRecipe()>& recipe,
                                                                     const CompileLimits& limits) const {
  if (auto hit = impl_->cache.Find(key)) return hit;
  // A recipe's own errors keep their message; the engine's get "cannot be used" and its reason.
  auto compile = [&](const GrammarRecipe& r, xgrammar::GrammarCompiler& compiler) {
    try {
      return CompileRecipe(compiler, r);
    } catch (const std::bad_alloc&) {
      throw;
    } catch (const std::exception& e) {
      Fail(r.structural_tag ? "the constraint cannot be used: " : "the JSON schema cannot be used: ", EngineReason(e));
    }
  };
  GrammarRecipe r;
  if (!limits.isolate) {
    r = recipe();
  } else {
    // The child makes the recipe and compiles it within the limits; it sends back the recipe
    // (the structural flag, the end tokens, the text), and the grammar is compiled again here.
    // The engine's own serialization of a compiled grammar would be far dearer than that second
    // compile (35 MB of JSON and 2.4 s for a 400-property schema that compiles in 0.03 s), and
    // the second compile is known to end: it repeats, deterministically, one that ended within
    // the deadline and the heap cap.
    const std::string payload = RunIsolated(
        [&] {
          const GrammarRecipe made = recipe();
          // A compiler of its own: another thread of the parent may have held the shared one's
          // lock when this process was forked.
          xgrammar::GrammarCompiler own(impl_->info, /*max_threads=*/1, /*cache_enabled=*/false, -1);
          compile(made, own);
          const uint32_t count = static_cast<uint32_t>(made.end_tokens.size());
          std::string out(1, made.structural_tag ? 'T' : 'S');
          out.append(reinterpret_cast<const char*>(&count), sizeof(count));
          out.append(reinterpret_cast<const char*>(made.end_tokens.data()), made.end_tokens.size() * sizeof(int32_t));
          return out + made.text;
        },
        limits);
    uint32_t count = 0;
    if (payload.size() >= 1 + sizeof(count)) std::memcpy(&count, payload.data() + 1, sizeof(count));
    const size_t head = 1 + sizeof(count) + size_t{count} * sizeof(int32_t);
    if (payload.size() < head) Fail("grammar: a truncated reply from the compile process");
    r.structural_tag = payload[0] == 'T';
    r.end_tokens.resize(count);
    std::memcpy(r.end_tokens.data(), payload.data() + 1 + sizeof(count), r.end_tokens.size() * sizeof(int32_t));
    r.text = payload.substr(head);
  }
  auto made = std::make_shared<const CompiledConstraint>(compile(r, impl_->compiler), r.end_tokens);
  // The compile's temporaries (several times the grammar) go back to the kernel: the CLI keeps
  // up to 1 GiB of freed heap for the forward pass's buffers (cli/main.cpp), and a server that
  // compiles many distinct schemas would otherwise hold that much beyond its grammar cache. A
  // cache miss is rare next to forward steps; the trim takes milliseconds.
  if (limits.isolate) ::malloc_trim(0);
  impl_->cache.Insert(key, made, made->grammar.MemorySizeBytes() + key.size());
  return made;
}

void GrammarVocabulary::SetCacheBytes(size_t bytes) const { impl_->cache.SetCapacity(bytes); }
size_t GrammarVocabulary::cache_bytes() const { return impl_->cache.held(); }
size_t GrammarVocabulary::cache_entries() const { return impl_->cache.entries(); }

namespace {
std::string EndsKey(std::span<const int32_t> end_tokens) {
  std::string key;
  for (const int32_t t : end_tokens) key += StrCat(t, ",");
  return key;
}
}  // namespace

std::shared_ptr<const CompiledConstraint> GrammarVocabulary::JsonSchema(const std::string& schema_json,
                                                                        std::span<const int32_t> end_tokens) const {
  GrammarRecipe recipe{false, schema_json, {end_tokens.begin(), end_tokens.end()}};
  return Compile(StrCat("schema\n", EndsKey(end_tokens), "\n", schema_json), [&] { return recipe; }, CompileLimits{});
}

std::string GrammarVocabulary::JsonSchemaEbnf(const std::string& schema_json) {
  try {
    return xgrammar::Grammar::FromJSONSchema(schema_json, /*any_whitespace=*/false, std::nullopt, std::nullopt,
                                             /*strict_mode=*/true)
        .ToString();
  } catch (const std::exception& e) {
    Fail("the JSON schema cannot be used: ", EngineReason(e));
  }
}

std::shared_ptr<const CompiledConstraint> GrammarVocabulary::StructuralTag(const std::string& format_json,
                                                                           std::span<const int32_t> end_tokens) const {
  GrammarRecipe recipe{true, format_json, {end_tokens.begin(), end_tokens.end()}};
  return Compile(StrCat("tag\n", EndsKey(end_tokens), "\n", format_json), [&] { return recipe; }, CompileLimits{});
}

struct GrammarState::Impl {
  explicit Impl(std::shared_ptr<const CompiledConstraint> c)
      : constraint(std::move(c)),
        matcher(constraint->grammar, std::vector<int>(constraint->end_tokens.begin(), constraint->end_tokens.end())),
        words(static_cast<size_t>(xgrammar::GetBitmaskSize(constraint->grammar.GetTokenizerInfo().GetVocabSize()))) {
    shape[0] = static_cast<int64_t>(words.size());
    tensor.data = words.data();
    tensor.device = DLDevice{kDLCPU, 0};
    tensor.ndim = 1;
    tensor.dtype = xgrammar::GetBitmaskDLType();
    tensor.shape = shape;
    tensor.strides = nullptr;
    tensor.byte_offset = 0;
  }
  std::shared_ptr<const CompiledConstraint> constraint;
  xgrammar::GrammarMatcher matcher;
  std::vector<int32_t> words;  // bit t of word t / 32: token t is allowed
  int64_t shape[1];
  DLTensor tensor{};
};

GrammarState::GrammarState(std::shared_ptr<const CompiledConstraint> constraint)
    : impl_(std::make_unique<Impl>(std::move(constraint))) {}
GrammarState::~GrammarState() = default;

void GrammarState::Mask(std::span<float> logits) {
  if (!impl_->matcher.FillNextTokenBitmask(&impl_->tensor)) return;  // everything allowed
  constexpr float kMasked = -std::numeric_limits<float>::infinity();
  const size_t n = logits.size();
  for (size_t w = 0; w < impl_->words.size() && w * 32 < n; ++w) {
    const auto bits = static_cast<uint32_t>(impl_->words[w]);
    if (bits == 0xFFFFFFFFu) continue;
    const size_t end = std::min(n, w * 32 + 32);
    for (size_t t = w * 32; t < end; ++t) {
      if (!((bits >> (t - w * 32)) & 1u)) logits[t] = kMasked;
    }
  }
}

bool GrammarState::Accept(int32_t token) { return impl_->matcher.AcceptToken(token); }
bool GrammarState::Finished() const {
  return impl_->matcher.IsTerminated() || (impl_->constraint->end_tokens.empty() && impl_->matcher.IsCompleted());
}

#else  // !TESSERA_HAVE_XGRAMMAR

class CompiledConstraint {};
struct GrammarVocabulary::Impl {};
struct GrammarState::Impl {};

namespace {
[[noreturn]] void NoEngine() {
  Fail("this build of tessera has no grammar engine for structured outputs (scripts/setup_xgrammar.sh builds it; "
       "then rebuild)");
}
}  // namespace

GrammarVocabulary::GrammarVocabulary(const Tokenizer&, int64_t model_vocab) : model_vocab_(model_vocab) {}
GrammarVocabulary::~GrammarVocabulary() = default;
bool GrammarVocabulary::Available() { return false; }
std::shared_ptr<const CompiledConstraint> GrammarVocabulary::JsonSchema(const std::string&, std::span<const int32_t>) const {
  NoEngine();
}
std::shared_ptr<const CompiledConstraint> GrammarVocabulary::StructuralTag(const std::string&,
                                                                           std::span<const int32_t>) const {
  NoEngine();
}
std::string GrammarVocabulary::JsonSchemaEbnf(const std::string&) { NoEngine(); }
std::shared_ptr<const CompiledConstraint> GrammarVocabulary::Compile(const std::string&, const std::function<GrammarRecipe()>&,
                                                                     const CompileLimits&) const {
  NoEngine();
}
void GrammarVocabulary::SetCacheBytes(size_t) const {}
size_t GrammarVocabulary::cache_bytes() const { return 0; }
size_t GrammarVocabulary::cache_entries() const { return 0; }
GrammarState::GrammarState(std::shared_ptr<const CompiledConstraint>) { NoEngine(); }
GrammarState::~GrammarState() = default;
void GrammarState::Mask(std::span<float>) {}
bool GrammarState::Accept(int32_t) { return false; }
bool GrammarState::Finished() const { return false; }

#endif

}  // namespace tessera
