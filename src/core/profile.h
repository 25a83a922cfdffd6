// The decode profile behind `tessera bench --profile`: where a forward pass spends its time, by
// kind of operation, with the bytes each kind reads.
//
// A ProfileScope marks one operation (a linear of some weight format, attention, a norm, ...)
// on the thread that drives the forward pass. Time is exclusive: while a nested scope runs,
// its parent's clock stops, so the kinds' times add up to the time spent inside the outermost
// scopes, and nothing is counted twice (a q8 quantization inside a linear is "quantize", not
// the linear). Bytes are what the operation must read from memory (weights, KV rows), given
// by the caller; kinds that only touch activations give none. Ops are the arithmetic operations
// (a multiply-add counts 2) of the kinds whose work is counted (linears, attention), for the
// prefill profile's rate against the compute peak.
//
// Profiling is per thread: StartProfiling() on the calling thread turns scopes on for that
// thread only, so a server's engine thread or a test running beside it records nothing, and
// a disabled scope costs one thread-local load. The thread pool's counters (hand-offs, busy
// and idle time per thread) are on while any thread profiles (core/thread_pool.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tessera {

// What a scope's ops are, so that the prefill profile can set them against the matching peak.
enum class ProfileArithmetic { kF32, kInt8 };

struct ProfileEntry {
  std::string category;  // "linear", "moe experts", "attention", "norm", ...
  std::string detail;    // the weight format, the KV type, or empty
  int64_t calls = 0;
  double seconds = 0.0;  // exclusive
  double bytes = 0.0;
  double ops = 0.0;
  ProfileArithmetic arithmetic = ProfileArithmetic::kF32;  // of the ops (the entry's last scope)
};

// Per thread of the pool, over the Run() calls while profiling was on.
struct PoolThreadProfile {
  double busy_seconds = 0.0;  // running tasks
  double wake_seconds = 0.0;  // from a Run() being posted to this thread starting on it (workers)
  int64_t tasks = 0;
};

struct PoolProfile {
  int64_t runs = 0;           // parallel Run() calls (serial ones are not counted)
  double run_seconds = 0.0;   // their wall time on the calling thread
  std::vector<PoolThreadProfile> threads;
};

// Turns scopes on for the calling thread and clears what was recorded (its entries and the
// pool's counters). Not nested: one profiling thread at a time.
void StartProfiling();
// Turns them off; the entries stay readable.
void StopProfiling();
bool ProfilingThisThread();
// What was recorded on the profiling thread, in order of first appearance.
std::vector<ProfileEntry> ProfileEntries();

// The category the linear scopes of the calling thread report under while one of these lives
// ("lm_head" for the output projection, so it is not lumped with the layers' linears of its
// format). Default: "linear".
class ProfileLinearCategory {
 public:
  explicit ProfileLinearCategory(std::string_view category);
  ~ProfileLinearCategory();
  ProfileLinearCategory(const ProfileLinearCategory&) = delete;
  ProfileLinearCategory& operator=(const ProfileLinearCategory&) = delete;
  static std::string_view Current();

 private:
  std::string_view saved_;
};

class ProfileScope {
 public:
  // `category` and `detail` must outlive the profile (string literals, format names).
  explicit ProfileScope(std::string_view category, std::string_view detail = {}, double bytes = 0.0,
                        double ops = 0.0, ProfileArithmetic arithmetic = ProfileArithmetic::kF32) {
    if (ProfilingThisThread()) Enter(category, detail, bytes, ops, arithmetic);
  }
  ~ProfileScope() {
    if (active_) Leave();
  }
  ProfileScope(const ProfileScope&) = delete;
  ProfileScope& operator=(const ProfileScope&) = delete;

 private:
  void Enter(std::string_view category, std::string_view detail, double bytes, double ops,
             ProfileArithmetic arithmetic);
  void Leave();
  bool active_ = false;
  int parent_ = -1;  // the enclosing scope's entry, -1 at the top
};

}  // namespace tessera
