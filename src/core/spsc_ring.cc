#include "core/spsc_ring.hh"

#include <new>

#include <fmt/format.h>

namespace rb {
namespace {

bool aligned(const void* p, size_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; }

Status bad_ring(const std::string& why) { return {Errc::validation, "shared ring: " + why}; }

}  // namespace

size_t spsc_ring_bytes(uint64_t capacity, size_t slot_size) {
  return sizeof(SpscRingHeader) + next_pow2(capacity) * slot_size;
}

Result<SpscRingHeader*> lay_out_spsc_ring(std::span<uint8_t> mem, uint64_t capacity, size_t slot_size,
                                          size_t slot_align) {
  if (capacity == 0 || capacity > SpscRingHeader::kMaxCapacity)
    return Status(Errc::invalid_argument,
                  fmt::format("shared ring: capacity {} is not in 1..{}", capacity, SpscRingHeader::kMaxCapacity));
  if (!aligned(mem.data(), kCacheLine))
    return Status(Errc::invalid_argument, "shared ring: memory must start on a cache line");
  size_t need = spsc_ring_bytes(capacity, slot_size);
  if (mem.size() < need)
    return Status(Errc::invalid_argument,
                  fmt::format("shared ring: {} slots of {} B need {} B, memory has {} B", next_pow2(capacity),
                              slot_size, need, mem.size()));
  auto* h = new (mem.data()) SpscRingHeader{};
  h->version = SpscRingHeader::kVersion;
  h->slot_size = uint32_t(slot_size);
  h->slot_align = uint32_t(slot_align);
  h->capacity = next_pow2(capacity);
  h->head.store(0, std::memory_order_relaxed);
  h->tail.store(0, std::memory_order_relaxed);
  std::atomic_ref<uint32_t>(h->magic).store(SpscRingHeader::kMagic, std::memory_order_release);
  return h;
}

Result<SpscRingHeader*> check_spsc_ring(std::span<uint8_t> mem, size_t slot_size, size_t slot_align) {
  if (!aligned(mem.data(), kCacheLine)) return bad_ring("memory does not start on a cache line");
  if (mem.size() < sizeof(SpscRingHeader))
    return bad_ring(fmt::format("{} B cannot hold the {} B header", mem.size(), sizeof(SpscRingHeader)));
  auto* h = reinterpret_cast<SpscRingHeader*>(mem.data());
  uint32_t magic = std::atomic_ref<uint32_t>(h->magic).load(std::memory_order_acquire);
  if (magic != SpscRingHeader::kMagic) return bad_ring(fmt::format("no ring here (magic {:#x})", magic));
  if (h->version != SpscRingHeader::kVersion)
    return bad_ring(fmt::format("layout version {}, this build reads {}", h->version, SpscRingHeader::kVersion));
  if (h->slot_size != slot_size || h->slot_align != slot_align)
    return bad_ring(fmt::format("slots of {} B aligned to {}, expected {} B aligned to {}", h->slot_size,
                                h->slot_align, slot_size, slot_align));
  uint64_t cap = h->capacity;
  if (!is_pow2(cap) || cap > SpscRingHeader::kMaxCapacity)
    return bad_ring(fmt::format("capacity {} is not a power of two up to {}", cap, SpscRingHeader::kMaxCapacity));
  if (spsc_ring_bytes(cap, slot_size) > mem.size())
    return bad_ring(fmt::format("{} slots of {} B do not fit in {} B", cap, slot_size, mem.size()));
  uint64_t used = h->tail.load(std::memory_order_acquire) - h->head.load(std::memory_order_acquire);
  if (used > cap) return bad_ring(fmt::format("indices say {} slots are full of {}", used, cap));
  return h;
}

}  // namespace rb
