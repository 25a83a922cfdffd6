// Owned, 64-byte aligned, uninitialized byte storage for weights made at load time (repacked or
// quantized copies of checkpoint tensors). Large buffers ask for transparent huge pages, since
// the kernels stream them and TLB misses would otherwise show in the memory-bound paths.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tessera {

class ByteBuffer {
 public:
  ByteBuffer() = default;
  // Throws tessera::Error (one line, with the size) when the memory cannot be allocated.
  explicit ByteBuffer(size_t size);
  ~ByteBuffer();
  ByteBuffer(ByteBuffer&& other) noexcept;
  ByteBuffer& operator=(ByteBuffer&& other) noexcept;
  ByteBuffer(const ByteBuffer&) = delete;
  ByteBuffer& operator=(const ByteBuffer&) = delete;

  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  template <typename T>
  T* as() { return reinterpret_cast<T*>(data_); }
  template <typename T>
  const T* as() const { return reinterpret_cast<const T*>(data_); }

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// Memory the kernel says a new allocation can use without swapping (MemAvailable of
// /proc/meminfo), or physical memory when that is unreadable.
uint64_t AvailableMemoryBytes();

// "1.50 GiB", "12.0 MiB", "512 B": memory sizes in messages (binary units).
std::string FormatMemorySize(uint64_t bytes);

}  // namespace tessera
