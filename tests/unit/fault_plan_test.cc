// RDMABENCH_FAULT is parsed strictly: a value that does not parse is a one-line error naming the
// variable, the value and the fix, from the environment reader, from open_selected and from the
// command line alike; never ignored.
#include <gtest/gtest.h>

#include <cstdlib>

#include "../../apps/rdmabench/cli.hh"
#include "fault/fault_plan.hh"
#include "registry/registry.hh"

namespace rb::transport::fault {
namespace {

// Sets the variable for one test and removes it after.
struct FaultEnv {
  explicit FaultEnv(const char* v) { setenv(kFaultEnv, v, 1); }
  ~FaultEnv() { unsetenv(kFaultEnv); }
};

TEST(FaultPlan, GoodValuesParse) {
  struct Case {
    const char* text;
    Kind kind;
    Op op;
    uint64_t nth;
  };
  for (const Case& c : {Case{"corrupt:write:5", Kind::corrupt, Op::write, 5}, Case{"corrupt:read:1", Kind::corrupt, Op::read, 1},
                        Case{"corrupt:send:2", Kind::corrupt, Op::send, 2}, Case{"misplace:read:3", Kind::misplace, Op::read, 3},
                        Case{"misplace:write:1", Kind::misplace, Op::write, 1}, Case{"drop:send:300", Kind::drop, Op::send, 300},
                        Case{"duplicate:write:7", Kind::duplicate, Op::write, 7},
                        Case{"truncate:send:4", Kind::truncate, Op::send, 4}}) {
    auto p = parse_fault_plan(c.text);
    ASSERT_TRUE(p.is_ok()) << c.text << ": " << p.status().message();
    EXPECT_EQ(p->kind, c.kind) << c.text;
    EXPECT_EQ(p->op, c.op) << c.text;
    EXPECT_EQ(p->nth, c.nth) << c.text;
  }
}

TEST(FaultPlan, BadValuesAreOneLineErrorsNamingTheVariableTheValueAndTheFix) {
  for (const char* text : {"corrupt", "corrupt:write", "corrupt:write:5:1", "smash:write:1", "corrupt:wrte:5", "corrupt:recv:1",
                           "corrupt:write:0", "corrupt:write:x", "corrupt:write:5x", "corrupt:write:-1", "corrupt:write:",
                           " corrupt:write:5", "CORRUPT:write:5", "misplace:send:1", "drop:read:1", "duplicate:read:1",
                           "truncate:read:1", "corrupt:write:99999999999999999999999"}) {
    auto p = parse_fault_plan(text);
    ASSERT_FALSE(p.is_ok()) << text;
    const std::string& m = p.status().message();
    EXPECT_EQ(p.status().code(), Errc::invalid_argument) << text;
    EXPECT_NE(m.find(std::string("RDMABENCH_FAULT='") + text + "'"), std::string::npos) << m;
    EXPECT_NE(m.find("give KIND:OP:NTH"), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
  EXPECT_NE(parse_fault_plan("misplace:send:1").status().message().find("misplace does not apply to send"), std::string::npos);
}

TEST(FaultPlan, TheEnvironmentIsReadWhenSetAndNotEmpty) {
  unsetenv(kFaultEnv);
  auto none = fault_plan_from_env();
  ASSERT_TRUE(none.is_ok());
  EXPECT_FALSE(none->has_value());
  {
    FaultEnv env("");
    EXPECT_FALSE(fault_plan_from_env()->has_value());
  }
  {
    FaultEnv env("drop:send:3");
    auto p = fault_plan_from_env();
    ASSERT_TRUE(p.is_ok() && p->has_value());
    EXPECT_EQ((*p)->kind, Kind::drop);
    EXPECT_EQ((*p)->nth, 3u);
  }
  FaultEnv env("drop:sned:3");
  EXPECT_FALSE(fault_plan_from_env().is_ok());
}

TEST(FaultPlan, AMalformedValueStopsARunsOpenAndItsCommandLine) {
  FaultEnv env("drop:sned:3");
  auto d = open_selected({"tcp", "", "", {}}, {"", "127.0.0.1"});
  ASSERT_FALSE(d.is_ok());
  EXPECT_NE(d.status().message().find("RDMABENCH_FAULT='drop:sned:3'"), std::string::npos) << d.status().message();
  for (auto args : {std::vector<std::string>{"--server"}, std::vector<std::string>{"--addr", "127.0.0.1", "--validate"},
                    std::vector<std::string>{"--loopback"}}) {
    auto cmd = app::parse_command_line(args);
    ASSERT_FALSE(cmd.is_ok()) << args[0];
    EXPECT_EQ(cmd.status().code(), Errc::invalid_argument);
    EXPECT_NE(cmd.status().message().find("'sned' is not an op"), std::string::npos) << cmd.status().message();
  }
}

}  // namespace
}  // namespace rb::transport::fault
