#pragma once
// A pace: `burst` at once, then `per_second` (a token bucket that never goes below empty).
#include <algorithm>
#include <cstdint>

namespace rb::vrdma {

class Pace {
 public:
  Pace(double burst, double per_second) : burst_(burst), rate_(per_second), tokens_(burst) {}
  // Whether one more is allowed at `now_ns`; takes it if so.
  bool take(int64_t now_ns) {
    refill(now_ns);
    if (tokens_ < 1) return false;
    tokens_ -= 1;
    return true;
  }
  // The same under a burst and rate that change (a share of something shared by a changing few).
  bool take(int64_t now_ns, double burst, double per_second) {
    refill(now_ns);
    burst_ = burst;
    rate_ = per_second;
    tokens_ = std::min(tokens_, burst_);
    return take(now_ns);
  }
  double available(int64_t now_ns) {
    refill(now_ns);
    return tokens_;
  }

 private:
  void refill(int64_t now_ns) {
    if (refill_ns_) tokens_ = std::min(burst_, tokens_ + double(now_ns - refill_ns_) * 1e-9 * rate_);
    refill_ns_ = now_ns;
  }
  double burst_, rate_, tokens_;
  int64_t refill_ns_ = 0;
};

}  // namespace rb::vrdma
