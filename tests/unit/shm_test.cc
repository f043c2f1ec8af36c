// Shared memory: a sealed memfd mapped more than once, handed to another process over a Unix
// socket or named through /proc, and refused when it is not what a mapper can trust.
#include "core/shm.hh"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "forked_child.hh"

namespace rb {
namespace {

size_t open_fds() {
  return size_t(std::distance(std::filesystem::directory_iterator("/proc/self/fd"),
                              std::filesystem::directory_iterator()));
}

struct SocketPair {
  UniqueFd a, b;
  SocketPair() {
    int fds[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0) {
      a.reset(fds[0]);
      b.reset(fds[1]);
    }
  }
};

TEST(Shm, CreateGivesZeroedMemoryOfTheAskedSize) {
  auto m = SharedMemory::create("rdmabench-test", 10000);
  ASSERT_TRUE(bool(m)) << m.status().message();
  EXPECT_EQ(m->size(), 10000u);
  EXPECT_GE(m->mapped_size(), 10000u);
  EXPECT_EQ(m->mapped_size() % size_t(sysconf(_SC_PAGESIZE)), 0u);
  EXPECT_TRUE(std::all_of(m->data(), m->data() + m->mapped_size(), [](uint8_t b) { return b == 0; }));
}

TEST(Shm, TheMemfdIsSealedAtItsSizeAndClosedOnExec) {
  auto m = SharedMemory::create("rdmabench-test", 4096);
  ASSERT_TRUE(bool(m));
  int seals = fcntl(m->fd(), F_GET_SEALS);
  EXPECT_TRUE(seals & F_SEAL_SHRINK);
  EXPECT_TRUE(seals & F_SEAL_GROW);
  EXPECT_TRUE(seals & F_SEAL_SEAL);
  EXPECT_NE(ftruncate(m->fd(), 0), 0) << "a holder could shrink it under a peer's mapping";
  EXPECT_TRUE(fcntl(m->fd(), F_GETFD) & FD_CLOEXEC);
}

TEST(Shm, TwoMappingsOfOneMemfdSeeTheSameBytes) {
  auto m = SharedMemory::create("rdmabench-test", 8192);
  ASSERT_TRUE(bool(m));
  auto second = Mapping::map(m->fd(), m->mapped_size());
  ASSERT_TRUE(bool(second)) << second.status().message();
  ASSERT_NE(second->data(), m->data());
  std::memcpy(m->data() + 5000, "hello", 5);
  EXPECT_EQ(std::memcmp(second->data() + 5000, "hello", 5), 0);
  second->data()[7] = 0x5a;
  EXPECT_EQ(m->data()[7], 0x5a);
}

TEST(Shm, MapRefusesAMemfdThatCanShrink) {
  UniqueFd fd(memfd_create("rdmabench-unsealed", MFD_CLOEXEC));
  ASSERT_TRUE(bool(fd));
  ASSERT_EQ(ftruncate(fd.get(), 4096), 0);
  auto m = Mapping::map(fd.get(), 4096);
  ASSERT_FALSE(bool(m));
  EXPECT_EQ(m.status().code(), Errc::invalid_argument);
}

TEST(Shm, MapRefusesMoreThanTheFileHolds) {
  auto m = SharedMemory::create("rdmabench-test", 4096);
  ASSERT_TRUE(bool(m));
  auto big = Mapping::map(m->fd(), m->mapped_size() + 1);
  ASSERT_FALSE(bool(big));
  EXPECT_EQ(big.status().code(), Errc::invalid_argument);
}

TEST(Shm, MapRefusesWhatIsNotAMemfd) {
  UniqueFd fd(open("/dev/zero", O_RDWR | O_CLOEXEC));
  ASSERT_TRUE(bool(fd));
  EXPECT_FALSE(bool(Mapping::map(fd.get(), 4096)));
}

TEST(Shm, AMemfdPassesOverAUnixSocketToAnotherProcess) {
  SocketPair sp;
  ASSERT_TRUE(sp.a && sp.b);
  // Forked before the memory exists: the child can reach it only through the descriptor it receives.
  test::ForkedChild child([&] {
    auto fd = recv_fd(sp.b.get());
    if (!fd) return 10;
    auto map = Mapping::map(fd->get(), 4096);
    if (!map) return 11;
    if (std::memcmp(map->data(), "from parent", 11) != 0) return 12;
    std::memcpy(map->data() + 100, "from child", 10);
    return 0;
  });
  ASSERT_TRUE(child.started());
  auto m = SharedMemory::create("rdmabench-test", 4096);
  ASSERT_TRUE(bool(m));
  std::memcpy(m->data(), "from parent", 11);
  Status s = send_fd(sp.a.get(), m->fd());
  ASSERT_TRUE(bool(s)) << s.message();
  ASSERT_EQ(child.wait(10), 0);
  EXPECT_EQ(std::memcmp(m->data() + 100, "from child", 10), 0);
}

TEST(Shm, RecvFdRefusesAMessageWithoutADescriptor) {
  SocketPair sp;
  ASSERT_EQ(write(sp.a.get(), "x", 1), 1);
  auto fd = recv_fd(sp.b.get());
  ASSERT_FALSE(bool(fd));
  EXPECT_EQ(fd.status().code(), Errc::io);
}

TEST(Shm, RecvFdReportsAClosedPeer) {
  SocketPair sp;
  sp.a.reset();
  auto fd = recv_fd(sp.b.get());
  ASSERT_FALSE(bool(fd));
  EXPECT_EQ(fd.status().code(), Errc::peer_gone);
}

TEST(Shm, RecvFdRefusesTwoDescriptorsAndLeaksNeither) {
  SocketPair sp;
  char byte = 0;
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(2 * sizeof(int))] = {};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = control;
  m.msg_controllen = sizeof control;
  cmsghdr* c = CMSG_FIRSTHDR(&m);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(2 * sizeof(int));
  int two[2] = {sp.a.get(), sp.a.get()};
  std::memcpy(CMSG_DATA(c), two, sizeof two);
  ASSERT_EQ(sendmsg(sp.a.get(), &m, 0), 1);
  size_t before = open_fds();
  auto fd = recv_fd(sp.b.get());
  EXPECT_FALSE(bool(fd));
  EXPECT_EQ(open_fds(), before);
}

TEST(Shm, AProcHandleMapsTheOwnersRangeAtItsOffset) {
  auto m = SharedMemory::create("rdmabench-test", 3 * 4096);
  ASSERT_TRUE(bool(m));
  auto decoded = ProcFdHandle::decode(m->handle(4096 + 16).encode());
  ASSERT_TRUE(bool(decoded));
  EXPECT_EQ(decoded->pid, uint32_t(getpid()));
  EXPECT_EQ(decoded->offset, 4096u + 16);
  auto peer = PeerMapping::map(*decoded);
  ASSERT_TRUE(bool(peer)) << peer.status().message();
  ASSERT_NE(peer->base(), m->data() + 4096 + 16);  // a mapping of its own
  std::memcpy(peer->base(), "via proc", 8);
  EXPECT_EQ(std::memcmp(m->data() + 4096 + 16, "via proc", 8), 0);
}

TEST(Shm, BadHandlesAreErrorsNotCrashes) {
  auto m = SharedMemory::create("rdmabench-test", 4096);
  ASSERT_TRUE(bool(m));
  std::vector<uint8_t> short_blob(23);
  EXPECT_FALSE(bool(ProcFdHandle::decode(short_blob)));

  ProcFdHandle closed = m->handle(0);
  closed.fd = 100000;  // not open
  EXPECT_EQ(PeerMapping::map(closed).status().code(), Errc::unavailable);

  ProcFdHandle beyond = m->handle(0);
  beyond.offset = beyond.map_len + 1;
  EXPECT_EQ(PeerMapping::map(beyond).status().code(), Errc::invalid_argument);

  ProcFdHandle too_long = m->handle(0);
  too_long.map_len *= 2;
  EXPECT_FALSE(bool(PeerMapping::map(too_long)));
}

TEST(Shm, ZeroPagesInPlaceKeepTheAddressAndNoLongerReachTheFile) {
  auto mem = SharedMemory::create("zero-test", 3 * 4096);
  ASSERT_TRUE(bool(mem)) << mem.status().message();
  auto other = Mapping::map(mem->fd(), 3 * 4096);
  ASSERT_TRUE(bool(other));
  uint8_t* at = mem->data();
  std::memset(at, 'x', 3 * 4096);
  ASSERT_TRUE(bool(mem->zero_in_place()));
  EXPECT_EQ(mem->data(), at);
  EXPECT_EQ(at[4096], 0);           // zero pages now
  std::memset(at, 'y', 3 * 4096);   // lands nowhere the file has
  EXPECT_EQ(other->data()[4096], 'x');
}

}  // namespace
}  // namespace rb
