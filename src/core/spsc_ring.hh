#pragma once
// A single-producer single-consumer ring laid out entirely inside memory the caller provides: a
// header (magic, version, slot size, capacity, and the two indices on cache lines of their own)
// followed by the slots. Nothing in it is a pointer, so two processes that map the same memory at
// different addresses use it as one ring. Push and pop take no lock, allocate nothing and throw
// nothing.
//
// A peer that shares the memory can write anything into it. Every slot access is masked with the
// capacity this process read once when it created or attached, so no index a peer writes reaches
// outside the slots; a peer that scribbles on the indices can only lose or repeat its own data.
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>

#include "core/buffer.hh"
#include "core/pow2.hh"
#include "core/status.hh"

namespace rb {

inline constexpr size_t kCacheLine = 64;

struct SpscRingHeader {
  static constexpr uint32_t kMagic = 0x52535052;  // "RPSR" in memory: rdmabench spsc ring
  static constexpr uint32_t kVersion = 1;
  static constexpr uint64_t kMaxCapacity = uint64_t(1) << 31;

  uint32_t magic;  // stored last, with release: a ring half laid out does not attach
  uint32_t version;
  uint32_t slot_size;
  uint32_t slot_align;
  uint64_t capacity;                                 // a power of two
  alignas(kCacheLine) std::atomic<uint64_t> head;  // next position to pop: the consumer's
  alignas(kCacheLine) std::atomic<uint64_t> tail;  // next position to push: the producer's
};
// Indices shared between processes must not hide behind a lock in one process's memory.
static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(sizeof(SpscRingHeader) % kCacheLine == 0, "slots start on a cache line of their own");

// The layout, independent of the slot type (spsc_ring.cc).
size_t spsc_ring_bytes(uint64_t capacity, size_t slot_size);
Result<SpscRingHeader*> lay_out_spsc_ring(std::span<uint8_t> mem, uint64_t capacity, size_t slot_size,
                                          size_t slot_align);
Result<SpscRingHeader*> check_spsc_ring(std::span<uint8_t> mem, size_t slot_size, size_t slot_align);

template <class T>
class SpscRing {
  static_assert(std::is_trivially_copyable_v<T>, "slots are shared memory: only plain bytes can live there");
  static_assert(alignof(T) <= kCacheLine);

 public:
  // Bytes a ring of at least `capacity` slots needs (capacity is rounded up to a power of two).
  static size_t bytes_for(uint64_t capacity) { return spsc_ring_bytes(capacity, sizeof(T)); }

  // Lays out a new, empty ring at the start of `mem` (cache-line aligned, at least bytes_for).
  static Result<SpscRing> create(std::span<uint8_t> mem, uint64_t capacity) {
    auto h = lay_out_spsc_ring(mem, capacity, sizeof(T), alignof(T));
    if (!h) return h.status();
    return SpscRing(*h);
  }
  // Uses a ring another process (or another part of this one) laid out in `mem`, after checking
  // that its header describes a ring of T that fits.
  static Result<SpscRing> attach(std::span<uint8_t> mem) {
    auto h = check_spsc_ring(mem, sizeof(T), alignof(T));
    if (!h) return h.status();
    return SpscRing(*h);
  }

  // Producer side. False when full.
  bool push(const T& v) {
    uint64_t t = h_->tail.load(std::memory_order_relaxed);
    if (t - h_->head.load(std::memory_order_acquire) >= mask_.capacity()) return false;
    slots_[mask_.slot(t)] = v;
    h_->tail.store(t + 1, std::memory_order_release);
    return true;
  }
  // Consumer side. False when empty.
  bool pop(T& v) {
    uint64_t hd = h_->head.load(std::memory_order_relaxed);
    if (!takeable(hd)) return false;
    v = slots_[mask_.slot(hd)];
    h_->head.store(hd + 1, std::memory_order_release);
    return true;
  }
  // Consumer side: drops up to n slots unread in one step; how many it dropped.
  // For a ring with several consumers (an SRQ's: its QPs' peers, on the direct path, and the
  // router): takes the next slot with a compare-and-swap of the head, so each slot goes to one
  // consumer. Every consumer of such a ring claims; none pops. The slot is read before the swap:
  // the producer rewrites it only after the head has passed it, and then the swap fails.
  bool claim(T& v) {
    uint64_t hd = h_->head.load(std::memory_order_acquire);
    while (takeable(hd)) {
      v = slots_[mask_.slot(hd)];
      if (h_->head.compare_exchange_weak(hd, hd + 1, std::memory_order_acq_rel, std::memory_order_acquire)) return true;
    }
    return false;
  }
  uint64_t skip(uint64_t n) {
    uint64_t hd = h_->head.load(std::memory_order_relaxed);
    uint64_t k = std::min(n, takeable(hd));
    if (k) h_->head.store(hd + k, std::memory_order_release);
    return k;
  }
  // Consumer side: a copy of the next slot, left in place (false when empty); pop takes it.
  bool peek(T& v) const {
    uint64_t hd = h_->head.load(std::memory_order_relaxed);
    if (!takeable(hd)) return false;
    v = slots_[mask_.slot(hd)];
    return true;
  }
  // For the consumer: how many it may take, and whether none (a ring that claims more than it
  // holds has none).
  uint64_t waiting() const { return takeable(h_->head.load(std::memory_order_acquire)); }
  bool empty() const { return waiting() == 0; }
  // For the producer: how full it is (a head the consumer moved past the tail reads as full).
  uint64_t size() const {
    return h_->tail.load(std::memory_order_acquire) - h_->head.load(std::memory_order_acquire);
  }
  uint64_t capacity() const { return mask_.capacity(); }

 private:
  // How many slots the consumer may take from `hd` on: what the producer has pushed, or none
  // when it claims more than the ring holds. The producer may be another process that writes
  // the tail as it likes (a tenant set it 2^63 ahead once, and a router carried out zero-filled
  // requests that were never posted for as long as the QP lived).
  uint64_t takeable(uint64_t hd) const {
    uint64_t n = h_->tail.load(std::memory_order_acquire) - hd;
    return n <= mask_.capacity() ? n : 0;
  }

  explicit SpscRing(SpscRingHeader* h)
      : h_(h), slots_(reinterpret_cast<T*>(reinterpret_cast<uint8_t*>(h) + sizeof(SpscRingHeader))),
        mask_(h->capacity) {}

  SpscRingHeader* h_;
  T* slots_;
  RingMask mask_;  // this process's copy: a peer rewriting the header cannot widen it
};

// The same ring for threads of one process, on memory of its own. Aligned to a cache line so the
// ring's own fields never share one with a neighbour that a thread writes.
template <class T>
class alignas(kCacheLine) LocalSpscRing {
 public:
  explicit LocalSpscRing(uint64_t capacity)
      : mem_(SpscRing<T>::bytes_for(capacity)), ring_(*SpscRing<T>::create({mem_.data(), mem_.size()}, capacity)) {}
  bool push(const T& v) { return ring_.push(v); }
  bool pop(T& v) { return ring_.pop(v); }
  bool empty() const { return ring_.empty(); }
  uint64_t size() const { return ring_.size(); }
  uint64_t capacity() const { return ring_.capacity(); }

 private:
  AlignedBuffer mem_;
  SpscRing<T> ring_;
};

}  // namespace rb
