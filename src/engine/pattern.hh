#pragma once
// Data patterns for --validate. A byte's value is a hash of (seed, position): for write and
// read bw the position is the absolute remote offset, so overlapping ops in any order leave the
// same bytes and a misplaced op is caught; for messages and ping-pong the seed also carries the
// sequence number, so a stale or reordered message is caught.
#include <cstddef>
#include <cstdint>

namespace rb::engine {

inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
inline uint8_t pattern_byte(uint64_t seed, uint64_t pos) {
  return uint8_t(mix64(seed ^ ((pos >> 3) * 0x9e3779b97f4a7c15ull)) >> ((pos & 7) * 8));
}
inline uint64_t message_seed(uint64_t seed, int thread, uint64_t seq) {
  return mix64(seed + uint64_t(thread) * 0x100000001b3ull) ^ (seq * 0xd6e8feb86659fd93ull);
}

void fill_pattern(uint8_t* buf, size_t len, uint64_t seed, uint64_t pos0);
// Index of the first byte that differs, or len when all match.
size_t check_pattern(const uint8_t* buf, size_t len, uint64_t seed, uint64_t pos0);

}  // namespace rb::engine
