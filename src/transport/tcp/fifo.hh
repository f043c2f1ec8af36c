#pragma once
// A FIFO on a power-of-two ring that grows when full and never shrinks, so steady traffic
// allocates nothing (std::deque allocates and frees a block every few dozen elements).
#include <cstdint>
#include <utility>

#include "core/ring_slots.hh"

namespace rb::transport::tcp {

template <class T>
class Fifo {
 public:
  explicit Fifo(size_t capacity = 64) : v_(capacity) {}
  bool empty() const { return head_ == tail_; }
  size_t size() const { return size_t(tail_ - head_); }
  T& front() { return v_[head_]; }
  void pop_front() { ++head_; }
  void push_back(const T& x) {
    if (size() == v_.capacity()) grow();
    v_[tail_++] = x;
  }
  void clear() { head_ = tail_ = 0; }

 private:
  void grow() {
    RingSlots<T> n(v_.capacity() * 2);
    for (uint64_t i = 0; i < size(); ++i) n[i] = v_[head_ + i];
    tail_ = size();
    head_ = 0;
    v_ = std::move(n);
  }
  RingSlots<T> v_;
  uint64_t head_ = 0, tail_ = 0;
};

}  // namespace rb::transport::tcp
