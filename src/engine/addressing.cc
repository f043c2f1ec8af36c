#include "engine/addressing.hh"

namespace rb::engine {

AddressGen::AddressGen(const RunSpec& s, int thread, uint64_t size, uint64_t seed)
    : rng_(seed * 0x9e3779b97f4a7c15ull + uint64_t(thread) + 1) {
  if (!s.random()) {
    base_ = uint64_t(thread) * s.gap();
    span_ = size;
    slots_ = 1;
    return;
  }
  if (s.thread_gap) {
    base_ = uint64_t(thread) * s.thread_gap;
    span_ = s.thread_gap;
  } else {
    base_ = 0;
    span_ = s.random_space;
  }
  // Start offsets o = base + k*64 with o + size <= base + span.
  slots_ = (span_ - size) / kAlign + 1;
}

}  // namespace rb::engine
