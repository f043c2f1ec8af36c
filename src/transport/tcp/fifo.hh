#pragma once
// A FIFO on a power-of-two ring that grows when full and never shrinks, so steady traffic
// allocates nothing (std::deque allocates and frees a block every few dozen elements).
#include <cstdint>
#include <vector>

namespace rb::transport::tcp {

template <class T>
class Fifo {
 public:
  explicit Fifo(size_t capacity = 64) {
    size_t c = 1;
    while (c < capacity) c <<= 1;
    v_.resize(c);
  }
  bool empty() const { return head_ == tail_; }
  size_t size() const { return size_t(tail_ - head_); }
  T& front() { return v_[head_ & (v_.size() - 1)]; }
  void pop_front() { ++head_; }
  void push_back(const T& x) {
    if (size() == v_.size()) grow();
    v_[tail_++ & (v_.size() - 1)] = x;
  }
  void clear() { head_ = tail_ = 0; }

 private:
  void grow() {
    std::vector<T> n(v_.size() * 2);
    for (size_t i = 0; i < size(); ++i) n[i] = v_[(head_ + i) & (v_.size() - 1)];
    tail_ = size();
    head_ = 0;
    v_.swap(n);
  }
  std::vector<T> v_;
  uint64_t head_ = 0, tail_ = 0;
};

}  // namespace rb::transport::tcp
