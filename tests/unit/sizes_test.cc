#include "model/sizes.hh"

#include <gtest/gtest.h>

namespace rb::model {
namespace {

TEST(Sizes, Suffixes) {
  EXPECT_EQ(*parse_bytes("64", "--size"), 64u);
  EXPECT_EQ(*parse_bytes("4K", "--size"), 4096u);
  EXPECT_EQ(*parse_bytes("1M", "--size"), 1u << 20);
  EXPECT_EQ(*parse_bytes("2G", "--size"), 2ull << 30);
  EXPECT_EQ(*parse_bytes("8KiB", "--size"), 8192u);
}

TEST(Sizes, BadValuesNameTheFlag) {
  for (const char* bad : {"", "K", "12Q", "-4", "99999999999999999999", "18446744073709551615G"}) {
    auto r = parse_bytes(bad, "--payload");
    ASSERT_FALSE(r.is_ok()) << bad;
    EXPECT_EQ(r.status().code(), Errc::invalid_argument);
    EXPECT_NE(r.status().message().find("--payload"), std::string::npos);
  }
}

TEST(Sizes, ListsRangesAndAll) {
  auto l = parse_size_list("64,4K,1M", "--size");
  ASSERT_TRUE(l.is_ok());
  EXPECT_EQ(*l, (std::vector<uint64_t>{64, 4096, 1 << 20}));
  auto r = parse_size_list("2:16", "--size");
  EXPECT_EQ(*r, (std::vector<uint64_t>{2, 4, 8, 16}));
  auto all = parse_size_list("all", "--size");
  EXPECT_EQ(all->front(), 2u);
  EXPECT_EQ(all->back(), 8u << 20);
  EXPECT_EQ(all->size(), 23u);
  EXPECT_FALSE(parse_size_list("16:2", "--size").is_ok());
  EXPECT_FALSE(parse_size_list("0", "--size").is_ok());
  EXPECT_FALSE(parse_size_list("64,,4K", "--size").is_ok());
}

// A range doubles from LOW: one whose HIGH is never reached would run fewer sizes than asked.
TEST(Sizes, ARangeMustReachItsHigh) {
  auto r = parse_size_list("3:8", "--size");
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().message(), "--size '3:8': a range doubles from LOW, and 3 B never reaches 8 B; end it at 6 B, e.g. 3:6");
  EXPECT_TRUE(parse_size_list("3:6", "--size").is_ok());
  EXPECT_TRUE(parse_size_list("4K:4K", "--size").is_ok());
}

TEST(Sizes, MessagesGiveSizesWithTheirUnit) {
  EXPECT_EQ(bytes_with_unit(3), "3 B");
  EXPECT_EQ(bytes_with_unit(1536), "1536 B");
  EXPECT_EQ(bytes_with_unit(4096), "4 KiB");
  EXPECT_EQ(bytes_with_unit(2ull << 30), "2 GiB");
}

TEST(Sizes, Format) {
  EXPECT_EQ(format_bytes(4096), "4K");
  EXPECT_EQ(format_bytes(1 << 20), "1M");
  EXPECT_EQ(format_bytes(1536), "1536");
}

}  // namespace
}  // namespace rb::model
