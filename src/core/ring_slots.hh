#pragma once
// The slots of a power-of-two ring in one allocation made up front, indexed by a position that
// counts up forever. The owner keeps its own head and tail; indexing allocates nothing.
#include <cstdint>
#include <vector>

#include "core/pow2.hh"

namespace rb {

template <class T>
class RingSlots {
 public:
  explicit RingSlots(uint64_t at_least = 1) : mask_(at_least), v_(mask_.capacity()) {}
  uint64_t capacity() const { return mask_.capacity(); }
  T& operator[](uint64_t position) { return v_[mask_.slot(position)]; }
  const T& operator[](uint64_t position) const { return v_[mask_.slot(position)]; }
  // Every slot, in storage order (not queue order).
  auto begin() { return v_.begin(); }
  auto end() { return v_.end(); }

 private:
  RingMask mask_;
  std::vector<T> v_;
};

}  // namespace rb
