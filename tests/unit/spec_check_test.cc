#include <gtest/gtest.h>

#include "model/spec.hh"

namespace rb::model {
namespace {

// A rejected spec fails with invalid_argument and a message naming every flag in `flags`.
void expect_rejected(const RunSpec& s, std::initializer_list<const char*> flags) {
  Status st = check(s);
  ASSERT_FALSE(st.is_ok());
  EXPECT_EQ(st.code(), Errc::invalid_argument);
  for (const char* f : flags) EXPECT_NE(st.message().find(f), std::string::npos) << st.message();
  EXPECT_EQ(st.message().find('\n'), std::string::npos) << "one line: " << st.message();
}

RunSpec base() {
  RunSpec s;
  s.sizes = {4096};
  return s;
}

TEST(SpecCheck, DefaultsAreValid) { EXPECT_TRUE(check(base()).is_ok()); }

TEST(SpecCheck, ThreadsTimesGapMustFitRandomSpace) {
  auto s = base();
  s.threads = 4;
  s.thread_gap = 64 << 10;
  s.random_space = 128 << 10;
  expect_rejected(s, {"--threads", "--thread-gap", "--random-space"});
  s.random_space = 256 << 10;
  EXPECT_TRUE(check(s).is_ok());
}

TEST(SpecCheck, PayloadMustFitRandomSpace) {
  auto s = base();
  s.random_space = 1024;
  expect_rejected(s, {"--size", "--random-space"});
}

TEST(SpecCheck, PayloadMustFitThreadGap) {
  auto s = base();
  s.thread_gap = 1024;
  expect_rejected(s, {"--size", "--thread-gap"});
}

TEST(SpecCheck, BatchTimesPayloadMustFitLocalMr) {
  auto s = base();
  s.batch = 8;
  s.local_mr = 16 << 10;
  expect_rejected(s, {"--batch", "--size", "--local-mr"});
  s.local_mr = 32 << 10;
  EXPECT_TRUE(check(s).is_ok());
}

TEST(SpecCheck, DepthAtLeastBatch) {
  auto s = base();
  s.batch = 16;
  s.depth = 8;
  expect_rejected(s, {"--depth", "--batch"});
}

TEST(SpecCheck, SignalWithinDepth) {
  auto s = base();
  s.signal = 128;
  expect_rejected(s, {"--signal"});
}

TEST(SpecCheck, ThreadGapAligned) {
  auto s = base();
  s.thread_gap = 5000;
  expect_rejected(s, {"--thread-gap", "5056"});
}

TEST(SpecCheck, IterationsOrDuration) {
  auto s = base();
  s.iters = 10;
  s.duration_s = 1;
  expect_rejected(s, {"--iters", "--duration"});
}

TEST(SpecCheck, RandomSpaceMeaninglessForSend) {
  auto s = base();
  s.ops = {Op::send};
  s.random_space = 1 << 20;
  expect_rejected(s, {"--random-space", "send"});
}

TEST(SpecCheck, RandomWriteLatencyNeedsFixed) {
  auto s = base();
  s.modes = {Mode::lat};
  s.random_space = 1 << 20;
  expect_rejected(s, {"--random-space", "write latency"});
}

TEST(SpecCheck, ValidateNeedsMirrorRoom) {
  auto s = base();
  s.validate = true;
  s.random_space = 1 << 20;
  s.local_mr = 64 << 10;
  expect_rejected(s, {"--local-mr", "--validate"});
}

TEST(SpecCheck, RecvMrIsForSendsThatFitItUnvalidated) {
  auto s = base();
  s.recv_mr = 64 << 10;
  expect_rejected(s, {"--recv-mr", "--op send"});  // --op write has no receives
  s.ops = {Op::write, Op::send};
  EXPECT_TRUE(check(s).is_ok()) << check(s).message();
  s.sizes = {4096, 128 << 10};
  expect_rejected(s, {"--recv-mr", "--size", "128K"});
  s.sizes = {64 << 10};
  EXPECT_TRUE(check(s).is_ok()) << check(s).message();
  s.validate = true;
  expect_rejected(s, {"--recv-mr", "--validate"});
}

TEST(SpecCheck, BadCountsRejected) {
  auto s = base();
  s.threads = 0;
  expect_rejected(s, {"--threads"});
  s = base();
  s.repeat = 0;
  expect_rejected(s, {"--repeat"});
  s = base();
  s.report_interval = 0.001;
  expect_rejected(s, {"--report-interval"});
}

TEST(SpecCheck, CapsLimitSizeAndDepth) {
  auto s = base();
  transport::Caps c;
  c.write = c.read = c.send = true;
  c.max_msg = 1024;
  c.tx_depth = 32;
  Status st = check_caps(s, c, "ofi:test");
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("--size"), std::string::npos);
  c.max_msg = 1 << 20;
  st = check_caps(s, c, "ofi:test");
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("--depth"), std::string::npos);
  c.tx_depth = 1024;
  EXPECT_TRUE(check_caps(s, c, "ofi:test").is_ok());
}

// Caps default to "no": a transport that does not claim the mechanics a run needs is refused
// with a message naming the flag.
TEST(SpecCheck, CapsThatDefaultToNoRefuseWhatNeedsThem) {
  auto s = base();
  transport::Caps c;
  c.write = c.read = true;
  s.validate = true;
  Status st = check_caps(s, c, "demo");
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("--validate"), std::string::npos) << st.message();
  c.peer_memory_readable = true;
  EXPECT_TRUE(check_caps(s, c, "demo").is_ok());
  s.validate = false;
  s.modes = {Mode::lat};
  st = check_caps(s, c, "demo");
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("--mode lat"), std::string::npos) << st.message();
  c.peer_sees_writes = true;
  EXPECT_TRUE(check_caps(s, c, "demo").is_ok());
}

// dma:cuda's far side is a device buffer the server cannot read, but endpoints opened for
// --validate copy it back at quiesce: that is enough for --validate, and for nothing else.
TEST(SpecCheck, RegionReadableAtQuiesceIsEnoughForValidateOnly) {
  auto s = base();
  transport::Caps c;
  c.write = c.read = true;
  c.peer_memory_at_quiesce = true;
  s.validate = true;
  s.modes = {Mode::bw};
  EXPECT_TRUE(check_caps(s, c, "dma:cuda").is_ok());
  s.modes = {Mode::lat};
  Status st = check_caps(s, c, "dma:cuda");
  ASSERT_FALSE(st.is_ok()) << "write latency still needs a peer that sees writes land";
  EXPECT_NE(st.message().find("--mode lat"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace rb::model
