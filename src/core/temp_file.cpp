#include "core/temp_file.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "core/error.h"

namespace tessera {
namespace {

// Live temporary files, readable from a signal handler: fixed storage (nothing is freed while
// a handler may read it) and a lock-free flag per slot, set only once the path is in place.
constexpr int kSlots = 64;
constexpr size_t kMaxPath = 4096;
char g_paths[kSlots][kMaxPath];
std::atomic<bool> g_live[kSlots];
std::mutex g_slots_mutex;  // claiming and releasing slots (never taken in the handler)
bool g_slot_taken[kSlots];

constexpr int kCleanupSignals[] = {SIGINT, SIGTERM, SIGHUP};

extern "C" void RemoveTempFilesAndReraise(int signal_number) {
  for (int i = 0; i < kSlots; ++i) {
    if (g_live[i].load(std::memory_order_acquire)) ::unlink(g_paths[i]);  // async-signal-safe
  }
  ::signal(signal_number, SIG_DFL);
  ::raise(signal_number);
}

void InstallHandlersOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (const int sig : kCleanupSignals) {
      struct sigaction old;
      if (::sigaction(sig, nullptr, &old) != 0 || old.sa_handler == SIG_IGN) continue;  // keep nohup's choice
      struct sigaction action {};
      action.sa_handler = RemoveTempFilesAndReraise;
      sigemptyset(&action.sa_mask);
      ::sigaction(sig, &action, nullptr);
    }
  });
}

int ClaimSlot(const std::string& path) {
  if (path.size() >= kMaxPath) return -1;  // too long to register: removed on errors only
  std::lock_guard<std::mutex> lock(g_slots_mutex);
  for (int i = 0; i < kSlots; ++i) {
    if (g_slot_taken[i]) continue;
    g_slot_taken[i] = true;
    std::memcpy(g_paths[i], path.c_str(), path.size() + 1);
    g_live[i].store(true, std::memory_order_release);
    return i;
  }
  return -1;
}

void ReleaseSlot(int slot) {
  if (slot < 0) return;
  g_live[slot].store(false, std::memory_order_release);
  std::lock_guard<std::mutex> lock(g_slots_mutex);
  g_slot_taken[slot] = false;
}

}  // namespace

TempFile::TempFile(const std::string& path) : path_(path), tmp_(path + kTempSuffix) {
  InstallHandlersOnce();
  // Registered before it exists, so that no moment has the file on disk and unregistered.
  slot_ = ClaimSlot(tmp_);
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    const int err = errno;
    ReleaseSlot(slot_);
    Fail(tmp_, ": cannot create: ", std::strerror(err));
  }
}

TempFile::~TempFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(tmp_.c_str());
  ReleaseSlot(slot_);
}

void TempFile::Write(const void* data, size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd_, p, std::min<size_t>(size, size_t{1} << 30));
    if (n < 0) {
      if (errno == EINTR) continue;
      Fail(tmp_, ": write error: ", std::strerror(errno));
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
}

void TempFile::Commit() {
  if (::fsync(fd_) != 0) Fail(tmp_, ": fsync failed: ", std::strerror(errno));
  const int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) Fail(tmp_, ": close failed: ", std::strerror(errno));
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0) {
    Fail(path_, ": cannot rename from ", tmp_, ": ", std::strerror(errno));
  }
  committed_ = true;
}

}  // namespace tessera
