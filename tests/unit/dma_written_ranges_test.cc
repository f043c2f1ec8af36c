// dma:cuda's --validate copies back only the ranges an endpoint wrote: the set must merge what
// overlaps or touches and keep apart what does not, so no byte it did not write is copied back.
#include "transport/dma/written_ranges.hh"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

namespace rb::transport::dma {
namespace {

std::vector<std::pair<uint64_t, uint64_t>> ranges(const WrittenRanges& w) {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  w.for_each([&](uint64_t off, uint64_t len) { out.push_back({off, len}); });
  return out;
}

TEST(DmaWrittenRanges, MergesOverlappingAndTouchingKeepsGaps) {
  WrittenRanges w;
  w.add(100, 10);
  w.add(0, 10);
  w.add(10, 5);   // touches [0,10)
  w.add(200, 0);  // nothing
  w.add(105, 20);  // overlaps [100,110)
  EXPECT_EQ(ranges(w), (std::vector<std::pair<uint64_t, uint64_t>>{{0, 15}, {100, 25}}));
  w.add(14, 90);  // bridges both
  EXPECT_EQ(ranges(w), (std::vector<std::pair<uint64_t, uint64_t>>{{0, 125}}));
  w.clear();
  EXPECT_TRUE(w.empty());
}

TEST(DmaWrittenRanges, InterleavedSlotsOfOneEndpointStayApart) {
  // Two endpoints writing alternate 64-byte slots: each must copy back only its own.
  WrittenRanges mine;
  for (uint64_t k = 0; k < 1000; ++k) mine.add(k * 128, 64);
  for (uint64_t k = 0; k < 1000; ++k) mine.add(k * 128, 64);  // the same slots again: no growth
  auto r = ranges(mine);
  ASSERT_EQ(r.size(), 1000u);
  for (uint64_t k = 0; k < 1000; ++k) EXPECT_EQ(r[k], std::make_pair(k * 128, uint64_t(64)));
}

}  // namespace
}  // namespace rb::transport::dma
