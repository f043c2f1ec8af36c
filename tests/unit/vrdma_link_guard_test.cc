// The link guard's rule for stuck connections: bytes that wait and are never read, not a busy
// link whose queue happens to hold the same count at every look.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <vector>

#include "core/unique_fd.hh"
#include "vrdma/router/link_guard.hh"

namespace rb::vrdma {
namespace {

constexpr int64_t kSecond = 1'000'000'000;
constexpr size_t kMessage = 200;  // a key's question on the link is this long

struct Loopback {
  UniqueFd listener, sender, receiver;
  uint16_t port = 0;
};

// A TCP connection on loopback: `sender` writes, `receiver` (accepted) reads.
Loopback connect_loopback() {
  Loopback l;
  l.listener.reset(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  EXPECT_EQ(bind(l.listener.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  EXPECT_EQ(listen(l.listener.get(), 1), 0);
  EXPECT_EQ(getsockname(l.listener.get(), reinterpret_cast<sockaddr*>(&a), &len), 0);
  l.port = ntohs(a.sin_port);
  l.sender.reset(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  EXPECT_EQ(connect(l.sender.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  l.receiver.reset(accept4(l.listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
  return l;
}

void send_message(int fd) {
  std::vector<char> m(kMessage, 'q');
  ASSERT_EQ(send(fd, m.data(), m.size(), 0), ssize_t(m.size()));
}

void read_message(int fd) {
  std::vector<char> m(kMessage);
  ASSERT_EQ(recv(fd, m.data(), m.size(), MSG_WAITALL), ssize_t(m.size()));
}

// Waits until `fd` has `n` bytes queued (loopback delivers at once, but not within the call).
void wait_unread(int fd, size_t n) {
  for (int i = 0; i < 1000; ++i) {
    std::vector<char> m(n);
    if (recv(fd, m.data(), m.size(), MSG_PEEK | MSG_DONTWAIT) == ssize_t(n)) return;
    usleep(1000);
  }
  FAIL() << "the message did not arrive";
}

std::unique_ptr<LinkGuard> guard(uint16_t port) {
  LinkGuardLimits limits;
  limits.per_host = 1000;
  limits.silent_ns = 1000 * kSecond;
  auto g = LinkGuard::create(port, limits, [](const std::string&) {});
  EXPECT_TRUE(bool(g));
  return g ? std::move(*g) : nullptr;
}

// Each look finds one message waiting, as on a link answering questions at 40,000 a second: the
// guard shut the routers' link after 5 s of it (its count of unread bytes never changed).
TEST(VrdmaLinkGuard, ABusyLinkWithTheSameCountUnreadIsNotStuck) {
  Loopback l = connect_loopback();
  auto g = guard(l.port);
  ASSERT_TRUE(g);
  send_message(l.sender.get());
  for (int look = 0; look < 10; ++look) {
    wait_unread(l.receiver.get(), kMessage);
    EXPECT_EQ(g->sweep(look * kSecond).stuck, 0u) << "look " << look;
    send_message(l.sender.get());  // the next question comes before this one is read
    read_message(l.receiver.get());
  }
}

// Bytes nobody reads are shut at the bound (5 s), not before.
TEST(VrdmaLinkGuard, BytesNeverReadAreShutAtTheBound) {
  Loopback l = connect_loopback();
  auto g = guard(l.port);
  ASSERT_TRUE(g);
  send_message(l.sender.get());
  wait_unread(l.receiver.get(), kMessage);
  for (int look = 0; look < 5; ++look) EXPECT_EQ(g->sweep(look * kSecond).stuck, 0u) << "look " << look;
  EXPECT_EQ(g->sweep(5 * kSecond).stuck, 1u);
  char c;
  EXPECT_EQ(recv(l.sender.get(), &c, 1, 0), 0) << "the sender sees the connection end";
}

}  // namespace
}  // namespace rb::vrdma
