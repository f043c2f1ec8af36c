#pragma once
// Single-producer single-consumer ring of fixed power-of-two capacity; no locks, no allocation.
#include <atomic>
#include <cstdint>
#include <vector>

namespace rb::transport::dma {

template <class T>
class SpscRing {
 public:
  explicit SpscRing(uint32_t capacity) {
    uint32_t c = 1;
    while (c < capacity) c <<= 1;
    slots_.resize(c);
    mask_ = c - 1;
  }
  bool push(const T& v) {
    uint64_t t = tail_.load(std::memory_order_relaxed);
    if (t - head_.load(std::memory_order_acquire) > mask_) return false;
    slots_[t & mask_] = v;
    tail_.store(t + 1, std::memory_order_release);
    return true;
  }
  bool pop(T& v) {
    uint64_t h = head_.load(std::memory_order_relaxed);
    if (h == tail_.load(std::memory_order_acquire)) return false;
    v = slots_[h & mask_];
    head_.store(h + 1, std::memory_order_release);
    return true;
  }
  bool empty() const { return head_.load(std::memory_order_acquire) == tail_.load(std::memory_order_acquire); }
  uint64_t size() const { return tail_.load(std::memory_order_acquire) - head_.load(std::memory_order_acquire); }

 private:
  std::vector<T> slots_;
  uint64_t mask_ = 0;
  alignas(64) std::atomic<uint64_t> head_{0};
  alignas(64) std::atomic<uint64_t> tail_{0};
};

}  // namespace rb::transport::dma
