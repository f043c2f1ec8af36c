// ExitWatchdog: silent when the watched code finishes in time, ends the process when it does not.
#include "core/exit_watchdog.hh"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace rb {
namespace {

TEST(ExitWatchdog, CodeThatFinishesInTimeGoesOn) {
  auto t0 = std::chrono::steady_clock::now();
  { ExitWatchdog w(30, "should not print", 3); }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1));  // disarming does not wait out the limit
}

TEST(ExitWatchdogDeathTest, CodeThatOverrunsEndsTheProcess) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        ExitWatchdog w(0.2, "closing the transport took over 0 s", 7);
        std::this_thread::sleep_for(std::chrono::seconds(20));  // stands for a close that never returns
      },
      ::testing::ExitedWithCode(7), "closing the transport took over 0 s");
}

}  // namespace
}  // namespace rb
