#include "core/buffer.h"

#include <sys/mman.h>

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

}  // namespace tessera
