#pragma once
// Where each op lands in the remote region (the DMA bench's addressing modes):
//   fixed        thread t always targets offset t*gap
//   random-space every thread draws 64 B-aligned offsets anywhere in [0, random_space)
//   thread-gap   thread t draws 64 B-aligned offsets inside its slice [t*gap, (t+1)*gap)
// An op never crosses the end of its range.
#include <cstdint>

#include "engine/pattern.hh"
#include "engine/model.hh"
#include "core/rng.hh"

namespace rb::engine {

// The seed of a run's phase `index` (one op, mode, size, repeat), from the run's --seed: each
// thread's AddressGen and the data patterns draw from it, so one --seed gives one target sequence.
inline uint64_t phase_seed(uint64_t run_seed, uint64_t index) { return mix64(run_seed + index * 0x1000193); }

// Where the server's receive slot `slot` lands, in slots of its thread's receive ring, whose lanes
// (endpoints) own `per_lane` slots each: its own place, or with --recv-mr (`recv_mr` bytes) one of
// the places its lane's first recv_mr bytes hold, in turn, as perftest receives into one page.
inline uint64_t receive_landing(uint64_t slot, uint64_t per_lane, uint64_t recv_mr, uint64_t slot_bytes) {
  if (!recv_mr) return slot;
  uint64_t fit = recv_mr / slot_bytes > 1 ? recv_mr / slot_bytes : 1;
  return slot - slot % per_lane + slot % per_lane % fit;
}

class AddressGen {
 public:
  AddressGen(const RunSpec& s, int thread, uint64_t size, uint64_t seed);
  uint64_t next() {
    if (slots_ <= 1) return base_;
    return base_ + rng_.below(slots_) * kAlign;
  }
  uint64_t lo() const { return base_; }
  uint64_t hi() const { return base_ + span_; }  // exclusive end of the range ops may touch

 private:
  uint64_t base_ = 0, span_ = 0, slots_ = 1;
  Rng rng_;
};

}  // namespace rb::engine
