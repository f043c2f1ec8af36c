#include "core/clock.hh"

#include <cpuid.h>

#include <algorithm>
#include <vector>

namespace rb {
namespace {

bool has_invariant_tsc() {
#if defined(__x86_64__)
  unsigned a, b, c, d;
  if (!__get_cpuid(0x80000000, &a, &b, &c, &d) || a < 0x80000007) return false;
  __get_cpuid(0x80000007, &a, &b, &c, &d);
  return (d >> 8) & 1;
#else
  return false;
#endif
}

uint64_t mono_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

}  // namespace

Clock::Clock(bool force_monotonic) {
#if defined(__x86_64__)
  if (force_monotonic || !has_invariant_tsc()) return;
  // Median of a few 4 ms windows: one preempted window must not skew the rate.
  std::vector<double> rates;
  for (int i = 0; i < 5; ++i) {
    uint64_t n0 = mono_ns(), t0 = __builtin_ia32_rdtsc();
    uint64_t n1;
    do n1 = mono_ns(); while (n1 - n0 < 4000000);
    uint64_t t1 = __builtin_ia32_rdtsc();
    if (t1 > t0) rates.push_back(double(n1 - n0) / double(t1 - t0));
  }
  if (rates.size() < 3) return;
  std::sort(rates.begin(), rates.end());
  ns_per_tick_ = rates[rates.size() / 2];
  tsc_ = true;
#else
  (void)force_monotonic;
#endif
}

}  // namespace rb
