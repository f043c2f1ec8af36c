#pragma once
// Power-of-two rings: positions count up forever and a slot is the position masked by the
// capacity minus one, so wrapping costs an AND and "full" is tail - head == capacity.
#include <bit>
#include <cstdint>

namespace rb {

// The smallest power of two that is at least n (1 for 0).
constexpr uint64_t next_pow2(uint64_t n) { return n <= 1 ? 1 : std::bit_ceil(n); }

constexpr bool is_pow2(uint64_t n) { return std::has_single_bit(n); }

// Maps a position that counts up forever onto a slot of a ring of at least the asked capacity.
class RingMask {
 public:
  constexpr RingMask() = default;
  constexpr explicit RingMask(uint64_t at_least) : mask_(next_pow2(at_least) - 1) {}
  constexpr uint64_t capacity() const { return mask_ + 1; }
  constexpr uint64_t slot(uint64_t position) const { return position & mask_; }

 private:
  uint64_t mask_ = 0;
};

}  // namespace rb
