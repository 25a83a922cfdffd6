#include "kernels/scratch.h"

#include <cstdlib>

#include "core/error.h"

namespace tessera {
namespace {

class Scratch {
 public:
  Scratch() = default;
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() { std::free(data_); }
  uint8_t* Get(size_t bytes) {
    if (bytes > capacity_) {
      std::free(data_);
      capacity_ = (bytes + 63) / 64 * 64;
      data_ = static_cast<uint8_t*>(std::aligned_alloc(64, capacity_));
      if (data_ == nullptr) {
        capacity_ = 0;
        Fail("out of memory allocating ", bytes, " bytes of kernel scratch");
      }
    }
    return data_;
  }

 private:
  uint8_t* data_ = nullptr;
  size_t capacity_ = 0;
};

}  // namespace

uint8_t* ThreadScratchBytes(size_t bytes) {
  thread_local Scratch scratch;
  return scratch.Get(bytes);
}

}  // namespace tessera
