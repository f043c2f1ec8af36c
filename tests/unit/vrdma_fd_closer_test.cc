// The router's closer thread: a close that never returns (a client's file on a FUSE mount whose
// server does not answer FLUSH) once stopped every later close and unmapping for good. Here the
// stuck item is a mapping whose release waits on the test; what comes after it must still go.
#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <memory>

#include <gtest/gtest.h>

#include "forked_child.hh"
#include "vrdma/ipc/seqpacket.hh"
#include "vrdma/router/client_fds.hh"

namespace rb::vrdma {
namespace {

// True once the pipe's write end is closed everywhere (its reader sees end of file).
bool writer_gone(int read_end, int within_ms) {
  pollfd p{read_end, POLLIN, 0};
  if (poll(&p, 1, within_ms) != 1) return false;
  char c;
  return read(read_end, &c, 1) == 0;
}

TEST(FdCloser, AStuckCloseIsLeftToItsThreadAndTheRestGoesOn) {
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  int fds[2];
  ASSERT_EQ(pipe2(fds, O_CLOEXEC), 0);
  {
    FdCloser closer;
    closer.drop_later(std::shared_ptr<void>(new int(0), [released](int* p) {
      released.wait();  // as a close waits for a server that does not answer
      delete p;
    }));
    closer.close_later(UniqueFd(fds[1]));
    auto t0 = std::chrono::steady_clock::now();
    EXPECT_TRUE(writer_gone(fds[0], int(3 * FdCloser::kStuckNs / 1'000'000))) << "the close queued behind a stuck one never came";
    EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::nanoseconds(FdCloser::kStuckNs / 2));
    EXPECT_EQ(closer.stuck(), 1);
    release.set_value();
    for (int i = 0; i < 100 && closer.stuck(); ++i) usleep(10'000);
    EXPECT_EQ(closer.stuck(), 0) << "the thread left to it ends once its close returns";
  }
  close(fds[0]);
}

// What a client passed counts against its uid until its close returns: the router serves a uid
// no further while too many of its descriptors wait (a close of its that never returns included).
TEST(FdCloser, DescriptorsCountAgainstTheirOwnerUntilClosed) {
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  int fds[2];
  ASSERT_EQ(pipe2(fds, O_CLOEXEC), 0);
  {
    FdCloser closer;
    closer.drop_later(std::shared_ptr<void>(new int(0), [released](int* p) {
      released.wait();
      delete p;
    }));
    closer.close_later(UniqueFd(fds[1]), 4242);
    closer.close_later(UniqueFd(dup(fds[0])));  // the router's own: counted against nobody
    EXPECT_EQ(closer.waiting_from(4242), 1u);
    EXPECT_EQ(closer.waiting_from(FdCloser::kNoOwner), 0u);
    EXPECT_TRUE(writer_gone(fds[0], int(3 * FdCloser::kStuckNs / 1'000'000)));
    for (int i = 0; i < 100 && closer.waiting_from(4242); ++i) usleep(10'000);
    EXPECT_EQ(closer.waiting_from(4242), 0u);
    release.set_value();
  }
  close(fds[0]);
}

TEST(FdCloser, WhatIsQueuedIsLetGoOfBeforeItEnds) {
  int fds[2];
  ASSERT_EQ(pipe2(fds, O_CLOEXEC), 0);
  {
    FdCloser closer;
    closer.close_later(UniqueFd(fds[1]));
  }
  EXPECT_TRUE(writer_gone(fds[0], 0));
  close(fds[0]);
}

// A router out of descriptors cannot take those a well-formed request brings: the kernel cuts the
// packet's control part. That once read as a hostile packet, and the tenant's session was dropped.
TEST(RecvPacket, OutOfDescriptorsTheRequestStillComesAndSaysSo) {
  test::ForkedChild child([] {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) != 0) return 10;
    const uint8_t bytes[] = {1, 2, 3};
    if (!ipc::send_packet(sv[0], bytes, sv[0])) return 11;
    rlimit few{64, 64};
    if (setrlimit(RLIMIT_NOFILE, &few) != 0) return 12;
    while (dup(0) >= 0) {
    }
    auto p = ipc::recv_packet(sv[1], 16, 1000, nullptr);
    if (!p) return 13;  // refused: what the old code did
    return p->bytes.size() == 3 && p->fds_lost && !p->fd ? 0 : 14;
  });
  ASSERT_TRUE(child.started());
  EXPECT_EQ(child.wait(10), 0);
}

}  // namespace
}  // namespace rb::vrdma
