#include "model/spec_json.hh"

#include <gtest/gtest.h>

namespace rb::model {
namespace {

TEST(SpecJson, RoundTrip) {
  RunSpec s;
  s.transport = {"ofi", "tcp", "eth1", {{"key", "value"}, {"other", "1"}}};
  s.ops = {Op::write, Op::send};
  s.modes = {Mode::bw, Mode::lat};
  s.sizes = {64, 4096};
  s.threads = 2;
  s.cpus = {0, 1};
  s.random_space = 1 << 20;
  s.thread_gap = 4096;
  s.validate = true;
  s.warmup_s = 0.5;
  auto back = spec_from_json(spec_to_json(s));
  ASSERT_TRUE(back.is_ok());
  EXPECT_EQ(spec_to_json(*back), spec_to_json(s));
  EXPECT_EQ(back->transport.label(), "ofi:tcp");
  EXPECT_EQ(back->transport.domain, "eth1");
  EXPECT_EQ(back->transport.options, s.transport.options);
  EXPECT_EQ(back->warmup_s, std::optional<double>(0.5));
  EXPECT_FALSE(back->warmup_iters.has_value());  // unset stays unset: the default rule applies
}

TEST(SpecJson, MissingFieldIsAnError) {
  auto j = spec_to_json(RunSpec{});
  j["workload"].erase("sizes");
  EXPECT_FALSE(spec_from_json(j).is_ok());
  j = spec_to_json(RunSpec{});
  j["workload"]["ops"] = {"teleport"};
  EXPECT_FALSE(spec_from_json(j).is_ok());
}

}  // namespace
}  // namespace rb::model
