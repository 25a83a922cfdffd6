#include "core/buffer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <utility>

#include "core/error.h"

namespace tessera {
namespace {
constexpr size_t kHugePage = size_t{2} << 20;
}

ByteBuffer::ByteBuffer(size_t size) : size_(size) {
  if (size == 0) return;
  const size_t align = size >= kHugePage ? kHugePage : 64;
  const size_t rounded = (size + align - 1) / align * align;
  data_ = static_cast<uint8_t*>(std::aligned_alloc(align, rounded));
  if (data_ == nullptr) Fail("out of memory allocating ", size, " bytes for model weights");
  if (align == kHugePage) madvise(data_, rounded, MADV_HUGEPAGE);  // advisory
}

ByteBuffer::~ByteBuffer() { std::free(data_); }

ByteBuffer::ByteBuffer(ByteBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

ByteBuffer& ByteBuffer::operator=(ByteBuffer&& other) noexcept {
  if (this != &other) {
    std::free(data_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

uint64_t AvailableMemoryBytes() {
  if (std::FILE* f = std::fopen("/proc/meminfo", "re")) {
    char line[256];
    unsigned long long kib = 0;
    bool found = false;
    while (!found && std::fgets(line, sizeof(line), f)) found = std::sscanf(line, "MemAvailable: %llu kB", &kib) == 1;
    std::fclose(f);
    if (found) return static_cast<uint64_t>(kib) * 1024;
  }
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : UINT64_MAX;
}

std::string FormatMemorySize(uint64_t bytes) {
  char buf[32];
  if (bytes >= (uint64_t{1} << 30)) {
    std::snprintf(buf, sizeof(buf), "%.2f GiB", static_cast<double>(bytes) / (uint64_t{1} << 30));
  } else if (bytes >= (uint64_t{1} << 20)) {
    std::snprintf(buf, sizeof(buf), "%.1f MiB", static_cast<double>(bytes) / (uint64_t{1} << 20));
  } else if (bytes >= 1024) {
    std::snprintf(buf, sizeof(buf), "%.1f KiB", static_cast<double>(bytes) / 1024);
  } else {
    std::snprintf(buf, sizeof(buf), "%llu B", static_cast<unsigned long long>(bytes));
  }
  return buf;
}

}  // namespace tessera
