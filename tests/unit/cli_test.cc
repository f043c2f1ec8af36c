// What the command line decides itself, beyond the spec's checks: values that do not convert,
// flags given where they mean nothing, which flag an error is about, and what an unset warm-up stays.
#include <fmt/format.h>
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

TEST(Cli, LazyPostingInALatencyOnlyRunIsAnError) {
  EXPECT_NE(parse_error({"--mode", "lat", "--lazy"}).message().find("--lazy with --mode lat"), std::string::npos);
  EXPECT_TRUE(parse_error({"--mode", "bw,lat", "--lazy"}).is_ok());
}

// A flag the chosen role ignores would be silently dropped: the server takes its run from the client.
TEST(Cli, FlagsOfTheOtherRoleAreErrors) {
  for (const char* flag : {"--iters", "--size", "--json", "--threads"}) {
    Status st = parse_error({"--server", flag, "4"});
    EXPECT_EQ(st.code(), Errc::invalid_argument) << flag;
    EXPECT_EQ(st.message().rfind(std::string(flag) + " with --server", 0), 0u) << st.message();
  }
  EXPECT_TRUE(parse_error({"--server", "--once", "--quiet", "--timeout", "2", "--cpus", "0", "--addr", "127.0.0.1:1"}).is_ok());
  EXPECT_EQ(parse_error({"--quiet"}).message(), "--quiet applies to --server only; drop it");
}

TEST(Cli, EmptyValuesAndRepeatedListItemsAreErrors) {
  for (const char* flag : {"--op", "--mode", "--addr", "--json", "--csv", "--domain", "--cpus", "--warmup", "--random-space"})
    EXPECT_EQ(parse_error({flag, ""}).message(),
              fmt::format("{} '': an empty value; give one, or leave {} out for its default", flag, flag));
  EXPECT_EQ(parse_error({"--op", "read,write,read"}).message(),
            "--op 'read,write,read': read is listed twice; give each once");
  EXPECT_EQ(parse_error({"--mode", "lat,lat"}).message(), "--mode 'lat,lat': lat is listed twice; give each once");
}

TEST(Cli, StreamFlagsAreFineWhenARunAlsoStreams) {
  EXPECT_TRUE(parse_error({"--mode", "bw,lat", "--depth", "4", "--batch", "2", "--signal", "2"}).is_ok());
  EXPECT_TRUE(parse_error({"--mode", "lat", "--depth", "1"}).is_ok());  // the value a latency run uses anyway
}

// Every value flag converts its text itself and says what it wants: the flag, the value, the
// rule and an example.
TEST(Cli, ValuesThatDoNotConvertNameTheFlagTheValueAndAFix) {
  auto message = [](const std::vector<std::string>& args) { return parse_error(args).message(); };
  EXPECT_EQ(message({"--threads", "x"}), "--threads 'x': must be a whole number from 1 to 256, e.g. --threads 4");
  EXPECT_EQ(message({"-d", "4.5"}), "--depth '4.5': must be a whole number from 1 to 4294967295, e.g. --depth 64");
  EXPECT_EQ(message({"--depth=-5"}), "--depth '-5': must be a whole number from 1 to 4294967295, e.g. --depth 64");
  EXPECT_EQ(message({"--iters", "-5"}), "--iters '-5': must be a whole number from 1 to 9223372036854775807, e.g. --iters 2000");
  EXPECT_EQ(message({"--batch", "99999999999"}),
            "--batch '99999999999': must be a whole number from 1 to 4294967295, e.g. --batch 8");
  EXPECT_EQ(message({"--duration", "soon"}), "--duration 'soon': must be a number of seconds, e.g. --duration 2.5");
  EXPECT_EQ(message({"--timeout", "inf"}), "--timeout 'inf': must be a number of seconds, e.g. --timeout 30");
  EXPECT_EQ(message({"--threads", "1", "--threads", "2"}), "--threads given 2 times ('1', '2'): give it once");
  // Numbers a run cannot mean: past 2^63, below what a clock measures, or longer than a day.
  EXPECT_EQ(message({"--iters", "9223372036854775808"}),
            "--iters '9223372036854775808': must be a whole number from 1 to 9223372036854775807, e.g. --iters 2000");
  EXPECT_EQ(message({"--warmup", "99999999999999999999"}),
            "--warmup '99999999999999999999': must be a whole number from 0 to 9223372036854775807, e.g. --warmup 1000");
  EXPECT_EQ(message({"-D", "1e-9"}), "--duration '1e-9': must be from 0.001 s (1 ms) to 86400 s (1 day), e.g. --duration 2.5");
  EXPECT_EQ(message({"-D", "1e10"}), "--duration '1e10': must be from 0.001 s (1 ms) to 86400 s (1 day), e.g. --duration 2.5");
  EXPECT_EQ(message({"--warmup", "1e308s"}),
            "--warmup '1e308s': seconds must be 0 or from 0.001s (1 ms) to 86400s (1 day), e.g. --warmup 2s");
  EXPECT_EQ(message({"--timeout", "1e-9"}), "--timeout '1e-9': must be from 0.001 s (1 ms) to 86400 s (1 day), e.g. --timeout 30");
  EXPECT_EQ(message({"--repeat", "1000000000"}),
            "--repeat '1000000000': must be a whole number from 1 to 1000, e.g. --repeat 3");
  // Each count's own range, also past its type's (2^32 + 1 once read as "-2147483648 to 2147483647").
  EXPECT_EQ(message({"--threads", "4294967297"}), "--threads '4294967297': must be a whole number from 1 to 256, e.g. --threads 4");
  EXPECT_EQ(message({"--threads", "0"}), "--threads '0': must be a whole number from 1 to 256, e.g. --threads 4");
  EXPECT_EQ(message({"--qps", "99999999999999999999"}), "--qps '99999999999999999999': must be a whole number from 1 to 64, e.g. --qps 2");
  EXPECT_EQ(message({"--rails", "-1"}), "--rails '-1': must be a whole number from 1 to 16, e.g. --rails 2");
  EXPECT_EQ(message({"--signal", "0"}), "--signal '0': must be a whole number from 1 to 4294967295, e.g. --signal 16");
  EXPECT_TRUE(parse_error({"--report-interval", "0"}).is_ok());  // 0 is "off"
  // The argument parser's own texts are replaced by ours.
  EXPECT_EQ(message({"--bogus"}), "--bogus: not an rdmabench flag; rdmabench --help lists them");
  EXPECT_EQ(message({"-n"}), "--iters: no value; give --iters UINT");
  // Sizes in a rule carry their unit.
  EXPECT_EQ(message({"--thread-gap", "1000"}),
            "--thread-gap 1000 B: must be a multiple of 64 B so targets stay 64 B aligned; try 1K");
  EXPECT_EQ(message({"--validate=maybe"}), "--validate=maybe: a switch is on or off; give --validate, or --validate=false to leave it off");
  auto hex = parse_command_line({"--seed", "0x10", "--threads", "2"});  // what the flags took before
  ASSERT_TRUE(hex.is_ok()) << hex.status().message();
  EXPECT_EQ(hex->spec.seed, 16u);
  auto off = parse_command_line({"--validate=false"});
  ASSERT_TRUE(off.is_ok());
  EXPECT_FALSE(off->spec.validate);
}

// build_command's errors name their flag: the one whose value is wrong, or for a rule between
// flags the first of them (in the rule's message order) that was given.
TEST(Cli, ErrorsNameTheirFlag) {
  auto flag_of = [](std::vector<std::pair<std::string, std::string>> given) {
    FlagValues values;
    for (auto& [name, text] : given) values.set(name, {text.empty() ? std::vector<std::string>{} : std::vector{text}, {}});
    auto c = build_command(values);
    EXPECT_FALSE(c.is_ok());
    return c ? std::string("(built)") : c.error().flag;
  };
  EXPECT_EQ(flag_of({{"threads", "x"}}), "threads");
  EXPECT_EQ(flag_of({{"mode", "lat"}, {"depth", "8"}}), "depth");
  EXPECT_EQ(flag_of({{"batch", "8"}, {"depth", "4"}}), "depth");             // --depth 4 < --batch 8
  EXPECT_EQ(flag_of({{"batch", "8"}, {"local-mr", "1K"}, {"size", "512"}}), "batch");
  EXPECT_EQ(flag_of({{"size", "8K"}, {"random-space", "4K"}}), "size");
  EXPECT_EQ(flag_of({{"random-space", "4K"}, {"size", "8K"}}), "size");     // the rule's order, not the user's
  EXPECT_EQ(flag_of({{"read", ""}, {"op", "write"}}), "read");
  EXPECT_EQ(flag_of({{"transport", "tcp"}, {"transport-opt", "nodelay=maybe"}}), "transport-opt");
  EXPECT_EQ(flag_of({{"transport", "carrier-pigeon"}}), "transport");
  EXPECT_EQ(flag_of({{"thread-gap", "1000"}}), "thread-gap");
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
  EXPECT_EQ(unset->spec.warmup_iters_for(model::Mode::bw), 100u);  // the default rule: a tenth
  auto zero = parse_command_line({"--warmup", "0"});
  ASSERT_TRUE(zero.is_ok());
  EXPECT_EQ(zero->spec.warmup_iters_for(model::Mode::bw), 0u);  // an explicit none is not the default
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
