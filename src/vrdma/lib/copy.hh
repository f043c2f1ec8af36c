#pragma once
// Moving a request's bytes between scatter-gather lists, for both the library (direct path) and
// the router (router path).
#include <cstdint>

namespace rb::vrdma {

struct Piece {
  uint8_t* p;
  uint64_t len;
};

// Copies the bytes of `from` into `to` as far as both reach. The last byte goes last, with
// release: a target polling it (write latency) finds the rest there.
void copy_pieces(const Piece* from, int nfrom, const Piece* to, int nto);

}  // namespace rb::vrdma
