// run_in_child: exit codes come back, signals are reported, and the parent's stop reaches the child.
#include "core/child_process.hh"

#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <thread>

namespace rb {
namespace {

// The contract: SIGINT and SIGTERM are blocked in every thread (rdmabench takes them with sigwait).
struct BlockStopSignals {
  sigset_t old;
  BlockStopSignals() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, &old);
  }
  ~BlockStopSignals() { pthread_sigmask(SIG_SETMASK, &old, nullptr); }
};

TEST(ChildProcess, ReturnsTheChildsExitCode) {
  BlockStopSignals blocked;
  std::atomic<bool> stop{false};
  auto r = run_in_child([](const std::atomic<bool>&) { return 7; }, stop);
  ASSERT_TRUE(bool(r));
  EXPECT_EQ(*r, 7);
}

TEST(ChildProcess, AChildKilledBySignalReportsIt) {
  BlockStopSignals blocked;
  std::atomic<bool> stop{false};
  auto r = run_in_child([](const std::atomic<bool>&) { raise(SIGKILL); return 0; }, stop);
  ASSERT_TRUE(bool(r));
  EXPECT_EQ(*r, 128 + SIGKILL);
}

TEST(ChildProcess, TheParentsStopReachesTheChild) {
  BlockStopSignals blocked;
  std::atomic<bool> stop{false};
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    stop.store(true);
  });
  auto r = run_in_child(
      [](const std::atomic<bool>& child_stop) {
        auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (!child_stop.load() && std::chrono::steady_clock::now() < give_up)
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
        return child_stop.load() ? 42 : 1;
      },
      stop);
  stopper.join();
  ASSERT_TRUE(bool(r));
  EXPECT_EQ(*r, 42);
}

TEST(ChildProcess, AChildThatIgnoresStopIsKilledAfterTheGrace) {
  BlockStopSignals blocked;
  std::atomic<bool> stop{true};
  ChildOptions opt;
  opt.grace_s = 0.2;
  opt.child_grace_s = 30;  // the parent's SIGKILL comes first
  auto t0 = std::chrono::steady_clock::now();
  auto r = run_in_child(
      [](const std::atomic<bool>&) {
        while (true) pause();
        return 0;
      },
      stop, opt);
  ASSERT_TRUE(bool(r));
  EXPECT_EQ(*r, 128 + SIGKILL);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
}

TEST(ChildProcess, AStoppedChildThatIsStuckEndsItself) {
  BlockStopSignals blocked;
  std::atomic<bool> stop{true};
  ChildOptions opt;
  opt.child_grace_s = 0.2;
  auto r = run_in_child(
      [](const std::atomic<bool>&) {
        while (true) pause();  // stuck: never looks at its stop flag
        return 0;
      },
      stop, opt);
  ASSERT_TRUE(bool(r));
  EXPECT_EQ(*r, 130);
}

TEST(ChildProcess, AnExceptionEndsTheChildNotTheCaller) {
  BlockStopSignals blocked;
  std::atomic<bool> stop{false};
  auto r = run_in_child([](const std::atomic<bool>&) -> int { throw std::runtime_error("boom"); }, stop);
  ASSERT_TRUE(bool(r));
  EXPECT_EQ(*r, 1);
}

TEST(ChildProcess, InChildFirstRunsOnlyInTheChild) {
  BlockStopSignals blocked;
  std::atomic<bool> stop{false};
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  ChildOptions opt;
  opt.in_child_first = [&] { close(fds[1]); };
  auto r = run_in_child([&](const std::atomic<bool>&) { return write(fds[1], "x", 1) < 0 ? 3 : 4; }, stop, opt);
  ASSERT_TRUE(bool(r));
  EXPECT_EQ(*r, 3);                    // the child's copy was closed first
  EXPECT_EQ(write(fds[1], "x", 1), 1);  // the parent's was not
  close(fds[0]);
  close(fds[1]);
}

}  // namespace
}  // namespace rb
