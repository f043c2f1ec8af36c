// QP numbers: never one issued twice in a router's life, never 0, and all of 24 bits.
#include <gtest/gtest.h>

#include <vector>

#include "vrdma/router/qp_numbers.hh"

namespace rb::vrdma {
namespace {

TEST(VrdmaQpNumbers, EveryNumberOfTheSpaceOnceThenNone) {
  QpNumbers n({1, 2, 3, 4});
  std::vector<bool> seen(size_t(QpNumbers::kMask) + 1);
  uint64_t issued = 0;
  while (auto q = n.next()) {
    ASSERT_NE(*q, 0u);
    ASSERT_LE(*q, QpNumbers::kMask);
    ASSERT_FALSE(seen[*q]) << "issued twice: " << *q;
    seen[*q] = true;
    ++issued;
  }
  EXPECT_EQ(issued, uint64_t(QpNumbers::kMask));  // 2^24 - 1: all but 0
  EXPECT_FALSE(n.next());
}

TEST(VrdmaQpNumbers, NumbersLookRandomAndDifferByKey) {
  QpNumbers a({1, 2, 3, 4}), b({5, 6, 7, 8});
  int same = 0, ascending = 0;
  uint32_t last = 0;
  for (int i = 0; i < 1000; ++i) {
    uint32_t x = *a.next(), y = *b.next();
    same += x == y;
    ascending += x > last;
    last = x;
  }
  EXPECT_LT(same, 5);
  EXPECT_GT(ascending, 350);  // a counter would be 1000
  EXPECT_LT(ascending, 650);
}

// Eight uids, each within its own pace, once spent the whole space in 23 minutes: the router-wide
// pace holds however many tenants churn, so spending it takes over two hours.
TEST(VrdmaQpNumbers, TheRouterWidePaceHoldsForAllTenantsTogether) {
  QpNumbers n({1, 2, 3, 4});
  int64_t t = 1'000'000'000;
  int burst = 0;
  while (n.pace.take(t)) ++burst;
  EXPECT_EQ(burst, int(QpNumbers::kBurst));
  int next_second = 0;
  for (int i = 0; i < 100'000; ++i)
    next_second += n.pace.take(t + 1'000'000'000);
  EXPECT_EQ(next_second, int(QpNumbers::kRate));
  double hours = (double(QpNumbers::kMask) - QpNumbers::kBurst) / QpNumbers::kRate / 3600;
  EXPECT_GT(hours, 2.0);
}

// Three uids churning QPs together (each within its own pace) once took the whole router-wide
// pace, and a fourth tenant's create_qp failed one time in three. Past half the router's burst
// each tenant draws within an equal share, so the fourth keeps its hundred a second, and all of
// them together still stay within the router's pace.
TEST(VrdmaQpNumbers, EachTenantKeepsItsShareOfTheRouterWidePace) {
  QpNumbers n({1, 2, 3, 4});
  Pace greedy[3] = {{0, 0}, {0, 0}, {0, 0}}, modest{0, 0};
  int64_t t0 = 1'000'000'000;
  int refused = 0, issued = 0;
  for (int ms = 0; ms < 20'000; ++ms) {
    int64_t now = t0 + int64_t(ms) * 1'000'000;
    for (Pace& g : greedy)
      for (int k = 0; k < 2; ++k) issued += n.take(g, 4, now);  // 2,000 a second each, asked
    if (ms % 10 == 0) {  // 100 a second
      bool got = n.take(modest, 4, now);
      refused += !got;
      issued += got;
    }
  }
  EXPECT_EQ(refused, 0);
  EXPECT_LE(issued, int(QpNumbers::kBurst + QpNumbers::kRate * 20) + 1);
}

}  // namespace
}  // namespace rb::vrdma
