#include <gtest/gtest.h>

#include "vrdma/router/host_share.hh"

namespace rb::vrdma {
namespace {

// Budgets of 1,000 mappings and 1,000 descriptors.
const HostShare kShare(1000, 1000);

bool allows(uint64_t mine, uint64_t all, size_t tenants, uint64_t more = 1) {
  std::string why;
  return kShare.allows({mine, mine}, {all, all}, tenants, {more, more}, &why);
}

TEST(VrdmaHostShare, ALoneTenantTakesHalfAndLeavesHalfForTheNext) {
  EXPECT_TRUE(allows(499, 499, 1));
  EXPECT_FALSE(allows(500, 500, 1));
  EXPECT_TRUE(allows(0, 500, 2));
}

TEST(VrdmaHostShare, PastHalfATenantOverItsShareWaitsAndOthersGetRoom) {
  EXPECT_TRUE(allows(499, 499, 2));   // under half: anyone
  EXPECT_FALSE(allows(500, 500, 2));  // the early one, past half, over 1000 / (2 x 2)
  EXPECT_TRUE(allows(0, 500, 2));     // the other one still gets its share
  EXPECT_TRUE(allows(249, 749, 2));
  EXPECT_FALSE(allows(250, 750, 2));
}

TEST(VrdmaHostShare, ManyTenantsTogetherLeaveRoomForOneMore) {
  // 66 tenants that each took half an even share of 67 leave the 67th its share, and more.
  uint64_t each = 1000 / (2 * 67), all = 500;  // one took half before the rest came
  for (int t = 0; t < 65; ++t) all += each;
  EXPECT_FALSE(allows(each, all, 67));
  EXPECT_TRUE(allows(0, all, 67));
  EXPECT_GE(1000 - all, each);
}

TEST(VrdmaHostShare, TheReasonNamesTheBudget) {
  std::string why;
  EXPECT_FALSE(kShare.allows({0, 600}, {0, 1000}, 2, {0, 1}, &why));
  EXPECT_NE(why.find("descriptors"), std::string::npos) << why;
}

// A refusal tells the tenant what it holds, never what the others hold together (probe 7).
TEST(VrdmaHostShare, ARefusalTellsNothingOfOtherTenants) {
  std::string why;
  ASSERT_FALSE(kShare.allows({0, 312}, {0, 987}, 2, {0, 1}, &why));
  EXPECT_NE(why.find("holds 312"), std::string::npos) << why;
  EXPECT_EQ(why.find("987"), std::string::npos) << why;
  EXPECT_EQ(why.find("675"), std::string::npos) << why;
}

}  // namespace
}  // namespace rb::vrdma
