// Power-of-two rings: rounding, slot mapping across wraparound, and the growable tcp FIFO built
// on them keeping its order when it grows.
#include "core/pow2.hh"

#include <gtest/gtest.h>

#include "core/ring_slots.hh"
#include "transport/tcp/fifo.hh"

namespace rb {
namespace {

TEST(Pow2, NextPow2RoundsUpToAPowerOfTwo) {
  EXPECT_EQ(next_pow2(0), 1u);
  EXPECT_EQ(next_pow2(1), 1u);
  EXPECT_EQ(next_pow2(2), 2u);
  EXPECT_EQ(next_pow2(3), 4u);
  EXPECT_EQ(next_pow2(4096), 4096u);
  EXPECT_EQ(next_pow2(4097), 8192u);
  EXPECT_EQ(next_pow2((uint64_t(1) << 40) + 1), uint64_t(1) << 41);
  EXPECT_TRUE(is_pow2(64));
  EXPECT_FALSE(is_pow2(96));
  EXPECT_FALSE(is_pow2(0));
}

TEST(Pow2, RingMaskWrapsPositionsOntoSlots) {
  RingMask m(5);
  EXPECT_EQ(m.capacity(), 8u);
  EXPECT_EQ(m.slot(3), 3u);
  EXPECT_EQ(m.slot(8), 0u);
  EXPECT_EQ(m.slot(13), 5u);
  EXPECT_EQ(m.slot(~uint64_t(0)), 7u);
}

TEST(Pow2, RingSlotsIndexByPositionModuloCapacity) {
  RingSlots<int> s(3);
  ASSERT_EQ(s.capacity(), 4u);
  for (int pos = 0; pos < 4; ++pos) s[uint64_t(pos)] = pos * 10;
  EXPECT_EQ(s[4], 0);   // position 4 is slot 0 again
  EXPECT_EQ(s[7], 30);
  s[9] = 99;            // slot 1
  EXPECT_EQ(s[1], 99);
  int n = 0;
  for (int v : s) n += v == 99;
  EXPECT_EQ(n, 1);
}

TEST(Pow2, FifoKeepsOrderWhenItGrowsAcrossTheWrap) {
  transport::tcp::Fifo<int> f(4);
  int next_in = 0, next_out = 0;
  // Move head and tail past the end of the ring first, so growing has to unwrap.
  for (int i = 0; i < 3; ++i) f.push_back(next_in++);
  for (int i = 0; i < 2; ++i, f.pop_front()) ASSERT_EQ(f.front(), next_out++);
  for (int i = 0; i < 20; ++i) f.push_back(next_in++);  // grows twice
  EXPECT_EQ(f.size(), size_t(next_in - next_out));
  while (!f.empty()) {
    ASSERT_EQ(f.front(), next_out++);
    f.pop_front();
  }
  EXPECT_EQ(next_out, next_in);
}

}  // namespace
}  // namespace rb
