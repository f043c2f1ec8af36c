#pragma once
// Timestamps for the hot path: the invariant TSC when the CPU has one, calibrated against
// CLOCK_MONOTONIC once at start-up; CLOCK_MONOTONIC otherwise.
#include <cstdint>
#include <ctime>

namespace rb {

class Clock {
 public:
  // Calibrates (about 20 ms) unless the TSC is unusable or force_monotonic is set.
  explicit Clock(bool force_monotonic = false);

  uint64_t now() const {
#if defined(__x86_64__)
    if (tsc_) return __builtin_ia32_rdtsc();
#endif
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
  }
  double to_ns(uint64_t ticks) const { return double(ticks) * ns_per_tick_; }
  double to_s(uint64_t ticks) const { return to_ns(ticks) * 1e-9; }
  uint64_t from_ns(double ns) const { return uint64_t(ns / ns_per_tick_); }
  bool uses_tsc() const { return tsc_; }
  double ghz() const { return 1.0 / ns_per_tick_; }
  const char* name() const { return tsc_ ? "tsc" : "clock_gettime"; }

 private:
  bool tsc_ = false;
  double ns_per_tick_ = 1.0;
};

}  // namespace rb
