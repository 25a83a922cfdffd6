#include "core/profile.h"

#include <chrono>

#include "core/thread_pool.h"

namespace tessera {
namespace {

using Clock = std::chrono::steady_clock;

// The profiling thread's state. Entries are keyed by (category, detail) views, which point at
// static strings, so a lookup compares views without allocating.
struct ThreadProfile {
  struct Key {
    std::string_view category, detail;
  };
  std::vector<Key> keys;
  std::vector<ProfileEntry> entries;
  int current = -1;             // the entry whose clock runs, -1 outside every scope
  Clock::time_point mark;       // when the current entry's clock last started
};

thread_local bool tls_profiling = false;
thread_local std::string_view tls_linear_category = "linear";
thread_local ThreadProfile tls_profile;

double SecondsBetween(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

int EntryOf(std::string_view category, std::string_view detail) {
  ThreadProfile& p = tls_profile;
  for (size_t i = 0; i < p.keys.size(); ++i) {
    if (p.keys[i].category == category && p.keys[i].detail == detail) return static_cast<int>(i);
  }
  p.keys.push_back({category, detail});
  ProfileEntry entry;
  entry.category = std::string(category);
  entry.detail = std::string(detail);
  p.entries.push_back(std::move(entry));
  return static_cast<int>(p.entries.size()) - 1;
}

}  // namespace

void StartProfiling() {
  tls_profile = ThreadProfile{};
  tls_profiling = true;
  GlobalPool().StartProfile();
}

void StopProfiling() {
  tls_profiling = false;
  GlobalPool().StopProfile();
}

bool ProfilingThisThread() { return tls_profiling; }

ProfileLinearCategory::ProfileLinearCategory(std::string_view category) : saved_(tls_linear_category) {
  tls_linear_category = category;
}
ProfileLinearCategory::~ProfileLinearCategory() { tls_linear_category = saved_; }
std::string_view ProfileLinearCategory::Current() { return tls_linear_category; }

std::vector<ProfileEntry> ProfileEntries() { return tls_profile.entries; }

void ProfileScope::Enter(std::string_view category, std::string_view detail, double bytes, double ops,
                         ProfileArithmetic arithmetic) {
  ThreadProfile& p = tls_profile;
  const Clock::time_point now = Clock::now();
  if (p.current >= 0) p.entries[static_cast<size_t>(p.current)].seconds += SecondsBetween(p.mark, now);
  parent_ = p.current;
  p.current = EntryOf(category, detail);
  ProfileEntry& entry = p.entries[static_cast<size_t>(p.current)];
  ++entry.calls;
  entry.bytes += bytes;
  entry.ops += ops;
  entry.arithmetic = arithmetic;
  p.mark = now;
  active_ = true;
}

void ProfileScope::Leave() {
  ThreadProfile& p = tls_profile;
  const Clock::time_point now = Clock::now();
  if (p.current >= 0) p.entries[static_cast<size_t>(p.current)].seconds += SecondsBetween(p.mark, now);
  p.current = parent_;
  p.mark = now;
}

}  // namespace tessera
