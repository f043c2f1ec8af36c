#include "engine/pattern.hh"

namespace rb::engine {

void fill_pattern(uint8_t* buf, size_t len, uint64_t seed, uint64_t pos0) {
  for (size_t i = 0; i < len; ++i) buf[i] = pattern_byte(seed, pos0 + i);
}

size_t check_pattern(const uint8_t* buf, size_t len, uint64_t seed, uint64_t pos0) {
  for (size_t i = 0; i < len; ++i)
    if (buf[i] != pattern_byte(seed, pos0 + i)) return i;
  return len;
}

}  // namespace rb::engine
