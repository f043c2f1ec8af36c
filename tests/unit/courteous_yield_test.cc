// CourteousYield and IdleSpin next to a process that never yields, on the same CPU.
#include "core/courteous_yield.hh"

#include <gtest/gtest.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <ctime>
#include <functional>
#include <optional>
#include <thread>

#include "core/affinity.hh"
#include "forked_child.hh"

namespace rb {
namespace {

int64_t steady_ns() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return int64_t(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}

// Pins this thread and a spinning child to one CPU; undoes the pin at the end.
class SpinnerBeside : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(sched_getaffinity(0, sizeof saved_, &saved_), 0);
    cpu_ = sched_getcpu();
    ASSERT_TRUE(pin_this_thread(cpu_));
    spinner_.emplace([cpu = cpu_] {
      if (!pin_this_thread(cpu)) return 3;
      for (;;) asm volatile("" ::: "memory");  // a spinner the compiler may not remove
      return 0;
    });
    ASSERT_TRUE(spinner_->started());
  }
  void TearDown() override {
    spinner_.reset();
    sched_setaffinity(0, sizeof saved_, &saved_);
  }
  cpu_set_t saved_;
  int cpu_ = 0;
  std::optional<test::ForkedChild> spinner_;
};

TEST_F(SpinnerBeside, YieldsStopOnceTheyComeBackLate) {
  CourteousYield y;
  int yields = 0;
  while (!y.core_hoarded() && yields < 300) {
    ASSERT_TRUE(y.yield());
    ++yields;
  }
  ASSERT_TRUE(y.core_hoarded()) << "300 yields beside a spinner on CPU " << cpu_ << " all came back at once";
  EXPECT_FALSE(y.yield());  // held off: no more yields for a while
}

// A neighbour that now and then runs a millisecond without yielding (an interrupt's work, a
// daemon waking) makes a yield late once in thousands: that is no hoarder, and a yielder that took
// it for one stopped yielding for a second, which made its neighbours' yields late in turn.
TEST(CourteousYield, RareLateYieldsAmongPromptOnesAreNoHoarding) {
  cpu_set_t saved;
  ASSERT_EQ(sched_getaffinity(0, sizeof saved, &saved), 0);
  int cpu = sched_getcpu();
  ASSERT_TRUE(pin_this_thread(cpu));
  test::ForkedChild now_and_then([cpu] {
    if (!pin_this_thread(cpu)) return 3;
    for (;;) {
      timespec nap{0, 100'000'000};
      nanosleep(&nap, nullptr);
      for (int64_t end = steady_ns() + 1'000'000; steady_ns() < end;) {
      }
    }
    return 0;
  });
  ASSERT_TRUE(now_and_then.started());
  CourteousYield y;
  int late = 0;
  int64_t since_late = 1 << 30;  // yields since the last late one
  bool crowded = false;
  for (int64_t end = steady_ns() + 1'200'000'000; steady_ns() < end && !y.core_hoarded();) {
    int64_t t0 = steady_ns();
    y.yield();
    bool was_late = steady_ns() - t0 > 200'000;
    // The neighbour makes one late yield in 100 ms, thousands apart: two within the rule's 8
    // yields of each other mean others on this CPU (ctest -j, a build), which is hoarding.
    crowded = crowded || (was_late && since_late <= 8);
    since_late = was_late ? 0 : since_late + 1;
    late += was_late;
  }
  sched_setaffinity(0, sizeof saved, &saved);
  if (crowded) GTEST_SKIP() << "late yields came close together: something besides the neighbour ran on CPU " << cpu;
  if (late < 3) GTEST_SKIP() << "the neighbour made only " << late << " late yields in 1.2 s";
  EXPECT_FALSE(y.core_hoarded()) << late << " late yields among many prompt ones were taken for hoarding";
}

TEST_F(SpinnerBeside, ARouterNapsThenParks) {
  IdleSpin spin(1'000'000);  // rounds enough that only the hoarding ends the yielding
  IdleSpin::Turn t = IdleSpin::Turn::again;
  for (int i = 0; i < 300 && t == IdleSpin::Turn::again; ++i) t = spin.turn();
  ASSERT_EQ(t, IdleSpin::Turn::nap);
  // Naps go on for a while, then it parks: bounded by the napping time, not by rounds.
  int naps = 0;
  while ((t = spin.turn()) == IdleSpin::Turn::nap) {
    ++naps;
    timespec d{0, 1'000'000};
    nanosleep(&d, nullptr);
    ASSERT_LT(naps, 1000);
  }
  EXPECT_EQ(t, IdleSpin::Turn::park);
  spin.worked();
  EXPECT_EQ(spin.turn(), IdleSpin::Turn::nap);  // still hoarded: the next stretch naps at once
}

TEST(IdleSpin, WithoutHoardingParksAfterItsRounds) {
  IdleSpin spin(5);
  int again = 0;
  IdleSpin::Turn t;
  while ((t = spin.turn()) == IdleSpin::Turn::again) ++again;
  // Three late yields in five would take a busy neighbour; without one it is the rounds.
  if (t == IdleSpin::Turn::park) {
    EXPECT_EQ(again, 4);
  }
}

int my_nice() { return getpriority(PRIO_PROCESS, id_t(gettid())); }

// Runs `body` on a thread of its own at nice -10 (so this process's other threads keep theirs);
// false when this user may not raise a priority.
bool at_nice_minus_10(const std::function<void()>& body) {
  bool allowed = false;
  std::thread([&] {
    if (setpriority(PRIO_PROCESS, id_t(gettid()), -10) != 0) return;
    allowed = true;
    body();
  }).join();
  return allowed;
}

TEST(IdleSpin, AHighPriorityGoesWhileItSpinsIdleAndComesBackForWork) {
  int seen_lowered = 0, after_work = 1, after_park = 1, after_end = 1;
  bool ran = at_nice_minus_10([&] {
    {
      IdleSpin spin(1'000'000);
      // A yield that comes back late (another process wanted this CPU) keeps the priority for a
      // while: on a quiet machine most turns spin at nice 0.
      for (int i = 0; i < 200; ++i)
        if (spin.turn() == IdleSpin::Turn::again && my_nice() == 0) ++seen_lowered;
      spin.worked();
      after_work = my_nice();
    }
    after_end = my_nice();
    IdleSpin parking(2);
    while (parking.turn() == IdleSpin::Turn::again) {
    }
    after_park = my_nice();  // parked (or napping): a wake-up should preempt at its priority
  });
  if (!ran) GTEST_SKIP() << "this user may not run a thread at nice -10";
  EXPECT_GT(seen_lowered, 0);
  EXPECT_EQ(after_work, -10);
  EXPECT_EQ(after_end, -10);
  EXPECT_EQ(after_park, -10);
}

// In a child at nice -10 that then becomes uid nobody (no capabilities) with RLIMIT_NICE
// `nice_limit`: 0 when IdleSpin kept the priority at every turn, 1 when some turn spun at nice 0 and
// work brought -10 back, 2 when it was lost, 77 when this user may not set it up.
int idle_spin_as_nobody(rlim_t nice_limit) {
  rlimit lim{nice_limit, nice_limit};
  if (setpriority(PRIO_PROCESS, 0, -10) != 0 || setrlimit(RLIMIT_NICE, &lim) != 0) return 77;
  if (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0) return 77;
  IdleSpin spin(1'000'000);
  bool lowered = false;
  for (int i = 0; i < 200; ++i) {
    spin.turn();
    lowered = lowered || my_nice() == 0;
    if (my_nice() != 0 && my_nice() != -10) return 2;
  }
  spin.worked();
  if (my_nice() != -10) return 2;
  return lowered ? 1 : 0;
}

TEST(IdleSpin, WithoutTheRightToRaiseItAgainAHighPriorityIsKept) {
  // The unit runs vrdmad as its own user with no capabilities: lowered to 0, it could not come back.
  test::ForkedChild child([] { return idle_spin_as_nobody(0); });
  int code = child.wait(30);
  if (code == 77) GTEST_SKIP() << "this user may not set a thread to nice -10 or become nobody";
  EXPECT_EQ(code, 0);
}

TEST(IdleSpin, RlimitNiceLetsItLowerAndRaise) {
  test::ForkedChild child([] { return idle_spin_as_nobody(30); });  // LimitNICE=-10
  int code = child.wait(30);
  if (code == 77) GTEST_SKIP() << "this user may not set a thread to nice -10 or become nobody";
  EXPECT_EQ(code, 1);
}

TEST(IdleSpin, APriorityOfZeroOrLessUrgentIsLeftAlone) {
  int before = my_nice(), during = before;
  std::thread([&] {
    IdleSpin spin(50);
    for (int i = 0; i < 20; ++i) {
      spin.turn();
      during = std::max(during, my_nice());
    }
  }).join();
  EXPECT_EQ(during, before);
}

}  // namespace
}  // namespace rb
