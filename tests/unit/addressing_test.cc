#include "bench/addressing.hh"

#include <gtest/gtest.h>

#include <set>

namespace rb::bench {
namespace {

TEST(Addressing, FixedIsOneSlotPerThread) {
  RunSpec s;
  s.sizes = {1000};
  s.threads = 3;
  for (int t = 0; t < 3; ++t) {
    AddressGen g(s, t, 1000, 7);
    for (int i = 0; i < 100; ++i) EXPECT_EQ(g.next(), uint64_t(t) * 1024);
  }
}

TEST(Addressing, RandomSpaceStaysInsideAndAligned) {
  RunSpec s;
  s.sizes = {4096};
  s.threads = 2;
  s.random_space = 1 << 20;
  std::set<uint64_t> seen;
  for (int t = 0; t < 2; ++t) {
    AddressGen g(s, t, 4096, 9);
    for (int i = 0; i < 200000; ++i) {
      uint64_t o = g.next();
      ASSERT_EQ(o % 64, 0u);
      ASSERT_LE(o + 4096, s.random_space);
      seen.insert(o);
    }
  }
  // Draws spread over the whole space: both ends are reached.
  EXPECT_EQ(*seen.begin(), 0u);
  EXPECT_EQ(*seen.rbegin(), (1u << 20) - 4096);
}

TEST(Addressing, ThreadGapConfinesEachThread) {
  RunSpec s;
  s.sizes = {512};
  s.threads = 4;
  s.random_space = 1 << 20;
  s.thread_gap = 64 << 10;
  for (int t = 0; t < 4; ++t) {
    AddressGen g(s, t, 512, 3);
    uint64_t lo = UINT64_MAX, hi = 0;
    for (int i = 0; i < 100000; ++i) {
      uint64_t o = g.next();
      ASSERT_EQ(o % 64, 0u);
      ASSERT_GE(o, uint64_t(t) * s.thread_gap);
      ASSERT_LE(o + 512, uint64_t(t + 1) * s.thread_gap);
      lo = std::min(lo, o);
      hi = std::max(hi, o);
    }
    EXPECT_EQ(lo, uint64_t(t) * s.thread_gap);
    EXPECT_EQ(hi + 512, uint64_t(t + 1) * s.thread_gap);
  }
}

TEST(Addressing, FixedWithRandomSpaceUsesSliceStart) {
  RunSpec s;
  s.sizes = {256};
  s.threads = 2;
  s.random_space = 1 << 16;
  s.thread_gap = 4096;
  s.fixed = true;
  AddressGen g(s, 1, 256, 1);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(g.next(), 4096u);
}

TEST(Addressing, SeedsDifferPerThread) {
  RunSpec s;
  s.sizes = {64};
  s.threads = 2;
  s.random_space = 1 << 20;
  AddressGen a(s, 0, 64, 5), b(s, 1, 64, 5);
  int same = 0;
  for (int i = 0; i < 1000; ++i) same += a.next() == b.next();
  EXPECT_LT(same, 10);
}

}  // namespace
}  // namespace rb::bench
