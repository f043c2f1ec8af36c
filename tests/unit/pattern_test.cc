#include "engine/pattern.hh"

#include <gtest/gtest.h>

#include <vector>

namespace rb::engine {
namespace {

TEST(Pattern, PositionalPatternCatchesMisplacement) {
  std::vector<uint8_t> a(4096), b(4096);
  fill_pattern(a.data(), a.size(), 42, 0);
  EXPECT_EQ(check_pattern(a.data(), a.size(), 42, 0), a.size());
  // The same bytes written 64 B further along do not match there.
  EXPECT_LT(check_pattern(a.data(), a.size(), 42, 64), 64u);
  // A different seed (another phase) does not match either.
  EXPECT_LT(check_pattern(a.data(), a.size(), 43, 0), 64u);
  fill_pattern(b.data(), b.size(), 42, 0);
  b[1000] ^= 1;
  EXPECT_EQ(check_pattern(b.data(), b.size(), 42, 0), 1000u);
}

TEST(Pattern, MessageSeedsDifferBySequenceAndThread) {
  EXPECT_NE(message_seed(1, 0, 0), message_seed(1, 0, 1));
  EXPECT_NE(message_seed(1, 0, 0), message_seed(1, 1, 0));
}

}  // namespace
}  // namespace rb::engine
