// Which closes the router gives a thread of their own, and what it counts while they run.
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "vrdma/router/client_fds.hh"
#include "vrdma/router/slow_closes.hh"

namespace rb::vrdma {
namespace {

// Only shared memory (a memfd) closes at once, on the closer, told without asking the file's
// filesystem. What an epoll set can watch (an eventfd, a pipe, a socket: its last close takes the
// set's lock, which the client holds as long as it likes; probe 25), or any file with a path but
// shared memory (a disk or FUSE file, /dev/null, a device), goes to a thread.
TEST(SlowCloses, OnlyWhatClosesAtOnceStaysOnTheCloser) {
  int mem = memfd_create("t", MFD_CLOEXEC);
  int ev = eventfd(0, EFD_CLOEXEC);
  int sv[2], pv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
  ASSERT_EQ(pipe2(pv, O_CLOEXEC), 0);
  int tcp = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
  int self = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(null, 0);
  EXPECT_EQ(close_kind(mem), CloseKind::at_once);
  EXPECT_EQ(close_kind(ev), CloseKind::may_wait);
  EXPECT_EQ(close_kind(pv[0]), CloseKind::may_wait);
  EXPECT_EQ(close_kind(sv[0]), CloseKind::unix_socket);
  EXPECT_EQ(close_kind(tcp), CloseKind::socket);
  EXPECT_EQ(close_kind(null), CloseKind::may_wait);
  EXPECT_EQ(close_kind(self), CloseKind::may_wait);
  EXPECT_EQ(close_kind(-1), CloseKind::may_wait);
  for (int fd : {mem, ev, sv[0], sv[1], pv[0], pv[1], tcp, null, self}) close(fd);
}

// A memfd is told by what the kernel answers for shared memory alone, not by its name: any
// filesystem can have a path that starts "/memfd:" (a FUSE mount there, whose pages the router
// would fault on). Making one at the root needs root; elsewhere the test skips.
TEST(FdKind, AFileNamedLikeAMemfdIsNone) {
  int mem = memfd_create("t", MFD_CLOEXEC);
  EXPECT_EQ(fd_kind(mem), FdKind::memfd);
  close(mem);
  std::string dir = "/memfd:rb-unit-" + std::to_string(getpid());
  if (mkdir(dir.c_str(), 0700) != 0) GTEST_SKIP() << "cannot make " << dir << " (not root)";
  std::string path = dir + "/f";
  int f = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  ASSERT_GE(f, 0);
  EXPECT_EQ(fd_kind(f), FdKind::other);
  close(f);
  unlink(path.c_str());
  rmdir(dir.c_str());
}

// A descriptor given is counted against its owner until its close returns, and its thread ends.
TEST(SlowCloses, CountsAnOwnersDescriptorsUntilTheirClosesReturn) {
  SlowCloses slow;
  for (int k = 0; k < 40; ++k) slow.close(open("/dev/null", O_RDONLY | O_CLOEXEC), 7, false);  // past one owner's threads
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while ((slow.open_from(7) || slow.threads()) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(slow.open_from(7), 0u);
  EXPECT_EQ(slow.threads(), 0u);
  EXPECT_EQ(slow.open_from(8), 0u);
}

// A TCP socket whose close waits `linger_s`: connected to a peer that reads nothing, its send
// queue full, SO_LINGER set. The peer and listener are returned to be closed by the caller.
int lingering_socket(int linger_s, int& peer, int& listener) {
  listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int small = 4096;
  setsockopt(listener, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  if (bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(listener, 1) != 0 ||
      getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    return -1;
  int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  setsockopt(s, SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
  if (connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return -1;
  peer = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  char junk[4096] = {};
  while (send(s, junk, sizeof junk, MSG_DONTWAIT) > 0) {
  }
  linger l{1, linger_s};
  setsockopt(s, SOL_SOCKET, SO_LINGER, &l, sizeof l);
  return s;
}

// A close counts toward its owner's stuck ones only once it has waited the age asked about on a
// thread: a tenant's many programs ending at once close many sockets, each in microseconds.
TEST(SlowCloses, CountsACloseAsStuckOnlyOnceItHasWaited) {
  int peer = -1, listener = -1;
  int s = lingering_socket(1, peer, listener);
  ASSERT_GE(s, 0);
  SlowCloses slow;
  slow.close(s, 7, true);
  constexpr int64_t kAge = 100'000'000;
  EXPECT_EQ(slow.open_from(7), 1u);
  EXPECT_EQ(slow.stuck_from(7, kAge), 0u);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(slow.stuck_from(7, kAge), 1u);  // still in its linger
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (slow.open_from(7) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(slow.open_from(7), 0u);
  EXPECT_EQ(slow.stuck_from(7, 0), 0u);
  close(peer);
  close(listener);
}

}  // namespace
}  // namespace rb::vrdma
