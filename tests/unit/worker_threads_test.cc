// WorkerThreads: workers that finish are joined; one that never returns ends the process with a
// clear error instead of hanging it.
#include "engine/worker_threads.hh"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace rb::engine {
namespace {

TEST(WorkerThreads, JoinWaitsForWorkersThatStopWhenReleased) {
  std::atomic<bool> abort{false}, release{false};
  std::atomic<int> finished{0};
  {
    WorkerThreads w(abort, release, 5.0);
    for (int i = 0; i < 3; ++i)
      w.spawn([&] {
        while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        finished.fetch_add(1);
      });
    EXPECT_FALSE(w.all_returned());
    w.join(nullptr);
    EXPECT_TRUE(w.all_returned());
    EXPECT_FALSE(abort.load());  // a plain join lets them finish: it does not abort them
  }
  EXPECT_EQ(finished.load(), 3);
}

TEST(WorkerThreads, DestructionAbortsAndJoins) {
  std::atomic<bool> abort{false}, release{false};
  bool saw_abort = false;
  {
    WorkerThreads w(abort, release, 5.0);
    w.spawn([&] {
      while (!abort.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      saw_abort = true;
    });
  }
  EXPECT_TRUE(saw_abort);
}

TEST(WorkerThreadsDeathTest, AWorkerThatNeverReturnsEndsTheProcessWithTheCause) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto stuck_run = [] {
    std::atomic<bool> abort{false}, release{false};
    WorkerThreads w(abort, release, 0.3);
    w.spawn([] {  // stands for a provider spinning on a dead peer's lock: it ignores every flag
      while (true) std::this_thread::sleep_for(std::chrono::seconds(1));
    });
    w.stop_and_join([] { return Status(Errc::io, "peer 10.0.0.2 closed the control connection"); });
  };
  EXPECT_EXIT(stuck_run(), ::testing::ExitedWithCode(1),
              "peer 10.0.0.2 closed the control connection; 1 worker thread\\(s\\) still inside the transport");
}

TEST(WorkerThreads, ReturnedTellsWhichWorkersAreDone) {
  std::atomic<bool> abort{false}, release{false}, second_may_go{false};
  WorkerThreads w(abort, release, 5.0);
  w.spawn([] {});
  w.spawn([&] {
    while (!second_may_go.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  while (!w.returned(0)) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_FALSE(w.returned(1));
  EXPECT_FALSE(w.all_returned());
  second_may_go.store(true);
  w.join(nullptr);
  EXPECT_TRUE(w.returned(1));
}

TEST(WorkerThreads, GraceCoversEveryEndpointsCleanup) {
  EXPECT_DOUBLE_EQ(worker_grace_s(3, 1), 5.0);
  EXPECT_DOUBLE_EQ(worker_grace_s(10, 4), 42.0);
}

}  // namespace
}  // namespace rb::engine
