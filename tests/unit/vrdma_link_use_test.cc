#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "vrdma/router/link_use.hh"

namespace rb::vrdma {
namespace {

constexpr uint64_t kPiece = 1 << 20;

struct Links {
  std::shared_ptr<LinkUse> all = std::make_shared<LinkUse>();
  std::vector<std::shared_ptr<LinkUse>> tenant;
  std::vector<LinkCharge> held;

  explicit Links(size_t tenants) {
    for (size_t i = 0; i < tenants; ++i) tenant.push_back(std::make_shared<LinkUse>());
  }
  // Tenant i's requests of `bytes` each while the rules let them go; how many went.
  int fill(size_t i, uint64_t bytes, int most = 100000) {
    int n = 0;
    while (n < most && room_for_request(*tenant[i], *all, kPiece)) {
      held.emplace_back(tenant[i], all);
      held.back().grow(bytes);
      ++n;
    }
    return n;
  }
};

TEST(VrdmaLinkUse, ChargesCountTenantsBytesAndThePeakAndGiveAllBack) {
  Links l(2);
  {
    LinkCharge a(l.tenant[0], l.all), b(l.tenant[0], l.all), c(l.tenant[1], l.all);
    a.grow(3 * kPiece);
    c.grow(kPiece);
    EXPECT_EQ(l.all->tenants, 2u);
    EXPECT_EQ(l.all->ops, 3u);
    EXPECT_EQ(l.tenant[0]->bytes, 3 * kPiece);
    a.shrink(2 * kPiece);
    LinkCharge moved = std::move(c);
    EXPECT_EQ(l.all->bytes, 2 * kPiece);
    EXPECT_EQ(l.all->peak_bytes, 4 * kPiece);
  }
  EXPECT_EQ(l.all->tenants, 0u);
  EXPECT_EQ(l.all->ops, 0u);
  EXPECT_EQ(l.all->bytes, 0u);
  EXPECT_EQ(l.tenant[0]->ops, 0u);
  EXPECT_EQ(l.all->peak_bytes, 4 * kPiece);
}

TEST(VrdmaLinkUse, ALoneTenantHasItsOwnShareAndNoMore) {
  Links l(1);
  EXPECT_EQ(l.fill(0, kPiece), int(kTenantLinkBytes / kPiece));
  Links small(1);
  EXPECT_EQ(small.fill(0, 8), int(kTenantLinkOps));
}

TEST(VrdmaLinkUse, ManyTenantsTogetherStayNearTheRoutersBound) {
  Links l(40);
  for (int round = 0; round < 3; ++round)
    for (size_t i = 0; i < l.tenant.size(); ++i) l.fill(i, kPiece);
  // Each may always send one request; past the bound no one with something there sends more.
  EXPECT_LE(l.all->bytes, kLinkBytes + 40 * kPiece);
  for (size_t i = 0; i < l.tenant.size(); ++i) EXPECT_GE(l.tenant[i]->ops, 1u) << i;
  Links ops(40);
  for (size_t i = 0; i < ops.tenant.size(); ++i) ops.fill(i, 8);
  EXPECT_LE(ops.all->ops, kLinkOps + 40);
}

TEST(VrdmaLinkUse, ATenantWithNothingThereGoesEvenWhenTheBoundIsReached) {
  Links l(3);
  l.fill(0, kPiece);
  l.fill(1, kPiece);
  EXPECT_GE(l.all->bytes, kLinkBytes);
  EXPECT_EQ(l.fill(2, 64), 1);  // one, then it waits its turn with the others
  EXPECT_TRUE(room_for_piece(LinkUse{}, *l.all, kPiece));
  EXPECT_FALSE(room_for_piece(*l.tenant[0], *l.all, kPiece));
}

TEST(VrdmaLinkUse, TheBoundIsSharedEvenly) {
  Links l(4);
  for (size_t i = 0; i < 4; ++i) l.fill(i, kPiece);
  // The first could take its whole 8 MiB; once four are there, each has about a quarter.
  l.held.clear();
  for (size_t i = 0; i < 4; ++i) l.fill(i, kPiece, 1);
  for (int round = 0; round < 4; ++round)
    for (size_t i = 0; i < 4; ++i) l.fill(i, kPiece, 1);
  for (size_t i = 0; i < 4; ++i) EXPECT_LE(l.tenant[i]->bytes, kLinkBytes / 4 + kPiece) << i;
}

}  // namespace
}  // namespace rb::vrdma
