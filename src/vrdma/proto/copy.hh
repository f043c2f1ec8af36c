#pragma once
// Moving a request's bytes between scatter-gather lists, for both the library (direct path) and
// the router (router path).
#include <atomic>
#include <cstdint>
#include <cstring>

namespace rb::vrdma {

struct Piece {
  uint8_t* p;
  uint64_t len;
};

// Copies the bytes of `from` into `to` as far as both reach. The last byte goes last, with
// release: a target polling it (write latency) finds the rest there.
void copy_pieces(const Piece* from, int nfrom, const Piece* to, int nto);

// `m` bytes from one buffer into another that does not overlap it. From 16 to 64 bytes in
// 16-byte moves that overlap where m is not a multiple of 16: inline, they cost a 64 B request a
// third of what the call into memcpy and its size dispatch did.
inline void copy_bytes(uint8_t* to, const uint8_t* from, uint64_t m) {
  if (m < 16 || m > 64) {
    std::memcpy(to, from, m);
    return;
  }
  auto move16 = [&](uint64_t at) { std::memcpy(to + at, from + at, 16); };
  move16(0);
  move16(m - 16);
  if (m > 32) {
    move16(16);
    move16(m - 32);
  }
}

// The same for one buffer into another, `n` bytes (n > 0): nearly every request, inline.
inline void copy_one(uint8_t* to, const uint8_t* from, uint64_t n) {
  copy_bytes(to, from, n - 1);
  std::atomic_ref<uint8_t>(to[n - 1]).store(from[n - 1], std::memory_order_release);
}

// A fetch-add (`fetch_add` true) or compare-swap on the 8 aligned bytes at `target`, as the
// library, the router and another host's router all apply it; the value found there.
uint64_t apply_atomic(uint8_t* target, bool fetch_add, uint64_t compare_add, uint64_t swap);

}  // namespace rb::vrdma
