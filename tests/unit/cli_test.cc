// What the command line decides itself, beyond the spec's checks: flags given where they mean
// nothing, and what an unset warm-up stays.
#include <gtest/gtest.h>

#include "../../apps/rdmabench/cli.hh"

namespace rb::app {
namespace {

Status parse_error(const std::vector<std::string>& args) {
  auto c = parse_command_line(args);
  return c ? Status{} : c.status();
}

TEST(Cli, StreamFlagsGivenToALatencyOnlyRunAreErrors) {
  for (const char* flag : {"--depth", "--batch", "--signal"}) {
    Status st = parse_error({"--mode", "lat", flag, "4"});
    EXPECT_EQ(st.code(), Errc::invalid_argument) << flag;
    EXPECT_NE(st.message().find(std::string(flag) + " 4 with --mode lat"), std::string::npos) << st.message();
  }
}

TEST(Cli, StreamFlagsAreFineWhenARunAlsoStreams) {
  EXPECT_TRUE(parse_error({"--mode", "bw,lat", "--depth", "4", "--batch", "2", "--signal", "2"}).is_ok());
  EXPECT_TRUE(parse_error({"--mode", "lat", "--depth", "1"}).is_ok());  // the value a latency run uses anyway
}

TEST(Cli, WarmupIsACountATimeOrUnset) {
  auto by_count = parse_command_line({"--warmup", "100"});
  ASSERT_TRUE(by_count.is_ok());
  EXPECT_EQ(by_count->spec.warmup_iters, std::optional<uint64_t>(100));
  EXPECT_FALSE(by_count->spec.warmup_s.has_value());
  auto by_time = parse_command_line({"--warmup", "0.5s", "--duration", "2"});
  ASSERT_TRUE(by_time.is_ok());
  EXPECT_EQ(by_time->spec.warmup_s, std::optional<double>(0.5));
  EXPECT_EQ(by_time->spec.warmup_seconds(), 0.5);
  auto unset = parse_command_line(std::vector<std::string>{"--iters", "1000"});
  ASSERT_TRUE(unset.is_ok());
  EXPECT_FALSE(unset->spec.warmup_iters.has_value());
  EXPECT_EQ(unset->spec.warmup_iters_for(bench::Mode::bw), 100u);  // the default rule: a tenth
  auto zero = parse_command_line({"--warmup", "0"});
  ASSERT_TRUE(zero.is_ok());
  EXPECT_EQ(zero->spec.warmup_iters_for(bench::Mode::bw), 0u);  // an explicit none is not the default
}

// The aliases the README lists are the same flags: --life is --duration, --batch-size is --batch.
TEST(Cli, LifeAndBatchSizeAreDurationAndBatch) {
  auto alias = parse_command_line({"--life", "2.5", "--batch-size", "8", "--depth", "16"});
  auto named = parse_command_line({"--duration", "2.5", "--batch", "8", "--depth", "16"});
  ASSERT_TRUE(alias.is_ok()) << alias.status().message();
  ASSERT_TRUE(named.is_ok()) << named.status().message();
  EXPECT_EQ(alias->spec.duration_s, 2.5);
  EXPECT_EQ(alias->spec.batch, 8);
  EXPECT_EQ(alias->spec.duration_s, named->spec.duration_s);
  EXPECT_EQ(alias->spec.batch, named->spec.batch);
}

// --no-inject turns inline sends off (both sides read spec.inject); --fixed wins over
// --random-space, so targets are the slice start (what AddressGen draws when random() is false).
TEST(Cli, NoInjectAndFixedReachTheSpec) {
  auto plain = parse_command_line({"--mode", "lat"});
  auto no_inject = parse_command_line({"--mode", "lat", "--no-inject"});
  ASSERT_TRUE(plain.is_ok() && no_inject.is_ok());
  EXPECT_TRUE(plain->spec.inject);
  EXPECT_FALSE(no_inject->spec.inject);
  auto random = parse_command_line({"--random-space", "1M", "--size", "64"});
  auto fixed = parse_command_line({"--random-space", "1M", "--size", "64", "--fixed"});
  ASSERT_TRUE(random.is_ok() && fixed.is_ok());
  EXPECT_TRUE(random->spec.random());
  EXPECT_FALSE(fixed->spec.random());
}

}  // namespace
}  // namespace rb::app
