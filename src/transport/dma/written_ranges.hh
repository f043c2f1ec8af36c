#pragma once
// The byte ranges an endpoint has written, merged: with --validate, dma:cuda copies back to the
// peer's region only what its own device buffer received, so endpoints writing different parts
// of one region do not overwrite each other's bytes with stale ones.
#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>

namespace rb::transport::dma {

class WrittenRanges {
 public:
  void add(uint64_t off, uint64_t len) {
    if (len == 0) return;
    uint64_t end = off + len;
    auto it = ranges_.upper_bound(off);
    if (it != ranges_.begin() && std::prev(it)->second >= off) --it;  // touches the one before
    while (it != ranges_.end() && it->first <= end) {  // absorb every range it touches
      off = std::min(off, it->first);
      end = std::max(end, it->second);
      it = ranges_.erase(it);
    }
    ranges_.emplace(off, end);
  }
  template <class F>
  void for_each(F&& fn) const {
    for (const auto& [off, end] : ranges_) fn(off, end - off);
  }
  void clear() { ranges_.clear(); }
  bool empty() const { return ranges_.empty(); }

 private:
  std::map<uint64_t, uint64_t> ranges_;  // start -> end, disjoint and not touching
};

}  // namespace rb::transport::dma
