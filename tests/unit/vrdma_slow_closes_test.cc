// Which closes the router gives a thread of their own, and what it counts while they run.
#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "vrdma/router/slow_closes.hh"

namespace rb::vrdma {
namespace {

// What clients pass in earnest (memfds, eventfds, sockets, pipes) closes at once, on the closer,
// as do /dev/null and its kind; another driver's character device, not a tty, goes to a thread
// (its flush may wait).
TEST(SlowCloses, OnlyWhatCanWaitOnAnotherPartyGetsAThread) {
  int mem = memfd_create("t", MFD_CLOEXEC);
  int ev = eventfd(0, EFD_CLOEXEC);
  int sv[2], pv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
  ASSERT_EQ(pipe2(pv, O_CLOEXEC), 0);
  int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
  int fuse = open("/dev/fuse", O_RDWR | O_CLOEXEC);  // a driver's (here, FUSE's own device)
  ASSERT_GE(null, 0);
  EXPECT_FALSE(close_may_wait(mem));
  EXPECT_FALSE(close_may_wait(ev));
  EXPECT_FALSE(close_may_wait(sv[0]));
  EXPECT_FALSE(close_may_wait(pv[0]));
  EXPECT_FALSE(close_may_wait(null));
  if (fuse >= 0) {
    EXPECT_TRUE(close_may_wait(fuse));
  }
  EXPECT_FALSE(close_may_wait(-1));
  for (int fd : {mem, ev, sv[0], sv[1], pv[0], pv[1], null, fuse}) close(fd);
}

// A descriptor given is counted against its owner until its close returns, and its thread ends.
TEST(SlowCloses, CountsAnOwnersDescriptorsUntilTheirClosesReturn) {
  SlowCloses slow;
  for (int k = 0; k < 40; ++k) slow.close(open("/dev/null", O_RDONLY | O_CLOEXEC), 7);  // past one owner's threads
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while ((slow.open_from(7) || slow.threads()) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(slow.open_from(7), 0u);
  EXPECT_EQ(slow.threads(), 0u);
  EXPECT_EQ(slow.open_from(8), 0u);
}

}  // namespace
}  // namespace rb::vrdma
