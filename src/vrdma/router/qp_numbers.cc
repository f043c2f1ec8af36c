#include "vrdma/router/qp_numbers.hh"

#include <algorithm>

#include <sys/random.h>

namespace rb::vrdma {
namespace {

// A round of the Feistel network on 12-bit halves: any function works (the structure makes the
// whole a bijection); this one mixes the half with the round's key.
uint32_t round_fn(uint32_t half, uint16_t key) {
  uint32_t x = (half ^ key) * 0x9e3779b1u;
  x ^= x >> 15;
  x *= 0x85ebca77u;
  x ^= x >> 13;
  return x & 0xfff;
}

}  // namespace

QpNumbers::QpNumbers() {
  while (getrandom(key_.data(), sizeof key_, 0) != ssize_t(sizeof key_)) {
  }
}

uint32_t QpNumbers::permute(uint32_t n) const {
  uint32_t l = (n >> 12) & 0xfff, r = n & 0xfff;
  for (uint16_t k : key_) {
    uint32_t t = l ^ round_fn(r, k);
    l = r;
    r = t;
  }
  return (l << 12) | r;
}

bool QpNumbers::take(Pace& share, int tenants, int64_t now_ns) {
  double n = std::max(tenants, 2);
  bool within_share = share.take(now_ns, kBurst / (2 * n), kRate / n);
  if (!within_share && pace.available(now_ns) < kBurst / 2 + 1) return false;
  return pace.take(now_ns);
}

std::optional<uint32_t> QpNumbers::next() {
  while (counter_ <= kMask) {
    uint32_t n = permute(counter_++);
    if (n != 0) return n;  // 0 means "no QP" on the wire: the one counter that maps there is skipped
  }
  return std::nullopt;
}

}  // namespace rb::vrdma
