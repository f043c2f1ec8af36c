#pragma once
// Page-aligned, zeroed memory that frees itself.
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace rb {
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t len) : len_(len) {
    size_t rounded = (len + 4095) / 4096 * 4096;
    if (rounded == 0) rounded = 4096;
    p_ = static_cast<uint8_t*>(std::aligned_alloc(4096, rounded));
    if (p_) std::memset(p_, 0, rounded);
  }
  AlignedBuffer(AlignedBuffer&& o) noexcept : p_(o.p_), len_(o.len_) { o.p_ = nullptr; o.len_ = 0; }
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(len_, o.len_);
    return *this;
  }
  ~AlignedBuffer() { std::free(p_); }
  uint8_t* data() const { return p_; }
  size_t size() const { return len_; }
  explicit operator bool() const { return p_ != nullptr; }

 private:
  uint8_t* p_ = nullptr;
  size_t len_ = 0;
};
}  // namespace rb
