#include "vrdma/proto/copy.hh"

#include <algorithm>
#include <atomic>
#include <cstring>

namespace rb::vrdma {

void copy_pieces(const Piece* from, int nfrom, const Piece* to, int nto) {
  if (nfrom == 1 && nto == 1) {  // nearly every op: the general walk below costs 80 instructions
    if (uint64_t n = std::min(from->len, to->len)) copy_one(to->p, from->p, n);
    return;
  }
  uint64_t total = 0, room = 0;
  for (int i = 0; i < nfrom; ++i) total += from[i].len;
  for (int i = 0; i < nto; ++i) room += to[i].len;
  total = std::min(total, room);
  if (total == 0) return;
  uint8_t* last_dst = nullptr;
  uint8_t last_byte = 0;
  int fi = 0, ti = 0;
  uint64_t fo = 0, to_off = 0, left = total;
  while (left) {
    while (fo == from[fi].len) ++fi, fo = 0;
    while (to_off == to[ti].len) ++ti, to_off = 0;
    uint64_t n = std::min({from[fi].len - fo, to[ti].len - to_off, left});
    if (n == left) {  // the final run: hold its last byte back
      if (n > 1) std::memcpy(to[ti].p + to_off, from[fi].p + fo, n - 1);
      last_dst = to[ti].p + to_off + n - 1;
      last_byte = from[fi].p[fo + n - 1];
    } else {
      std::memcpy(to[ti].p + to_off, from[fi].p + fo, n);
    }
    fo += n;
    to_off += n;
    left -= n;
  }
  std::atomic_ref<uint8_t>(*last_dst).store(last_byte, std::memory_order_release);
}

uint64_t apply_atomic(uint8_t* target, bool fetch_add, uint64_t compare_add, uint64_t swap) {
  std::atomic_ref<uint64_t> t(*reinterpret_cast<uint64_t*>(target));
  if (fetch_add) return t.fetch_add(compare_add, std::memory_order_acq_rel);
  uint64_t old = compare_add;
  t.compare_exchange_strong(old, swap, std::memory_order_acq_rel);
  return old;
}

}  // namespace rb::vrdma
