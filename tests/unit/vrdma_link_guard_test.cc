// The link guard's rules: stuck connections are those whose bytes wait and are never read, not a
// busy link whose queue happens to hold the same count at every look; with a key, what no router
// vouched for goes after a bound, and past the cap the oldest unvouched go, never a vouched one.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <poll.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
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


// A listener with any number of connections to it: `senders[i]` made, `receivers[i]` accepted.
struct Port {
  UniqueFd listener;
  uint16_t port = 0;
  std::vector<UniqueFd> senders, receivers;
  Port() {
    listener.reset(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in a = address(0);
    socklen_t len = sizeof a;
    EXPECT_EQ(bind(listener.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(listen(listener.get(), 64), 0);
    EXPECT_EQ(getsockname(listener.get(), reinterpret_cast<sockaddr*>(&a), &len), 0);
    port = ntohs(a.sin_port);
  }
  static sockaddr_in address(uint16_t port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    return a;
  }
  // A connection that said something (a fabric's connection request): not silent.
  size_t connect_one() {
    UniqueFd s(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in a = address(port);
    EXPECT_EQ(connect(s.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    UniqueFd r(accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    send_message(s.get());
    read_message(r.get());
    senders.push_back(std::move(s));
    receivers.push_back(std::move(r));
    return senders.size() - 1;
  }
  // The far end of connection i as the link names it (IPv4-mapped).
  proto::RouterAddress far_end(size_t i) const {
    sockaddr_in a{};
    socklen_t len = sizeof a;
    EXPECT_EQ(getsockname(senders[i].get(), reinterpret_cast<sockaddr*>(&a), &len), 0);
    proto::RouterAddress r;
    r.ip[10] = r.ip[11] = 0xff;
    std::memcpy(r.ip + 12, &a.sin_addr, 4);
    r.port = ntohs(a.sin_port);
    return r;
  }
  // Whether connection i was shut; one that was is then closed, as libfabric closes it.
  bool shut(size_t i) {
    pollfd p{senders[i].get(), POLLIN, 0};
    char c;
    bool was = poll(&p, 1, 200) == 1 && recv(senders[i].get(), &c, 1, MSG_DONTWAIT) == 0;
    if (was) receivers[i].reset();
    return was;
  }
};

std::unique_ptr<LinkGuard> keyed_guard(uint16_t port, uint32_t per_host) {
  LinkGuardLimits limits;
  limits.per_host = per_host;
  limits.silent_ns = 1000 * kSecond;
  limits.prove_ns = 10 * kSecond;
  auto g = LinkGuard::create(port, limits, [](const std::string&) {});
  EXPECT_TRUE(bool(g));
  return g ? std::move(*g) : nullptr;
}

// A stranger that replayed a fabric's connection request spoke once and then held its
// connection for ever; with a key, what no router vouched for is shut at the bound.
TEST(VrdmaLinkGuard, WhatNoRouterVouchedForIsShutAtTheBound) {
  Port p;
  auto g = keyed_guard(p.port, 1000);
  ASSERT_TRUE(g);
  size_t stranger = p.connect_one(), router = p.connect_one();
  g->vouch(p.far_end(router), 0);
  EXPECT_EQ(g->sweep(0).unproven, 0u);
  EXPECT_EQ(g->sweep(9 * kSecond).unproven, 0u);
  EXPECT_EQ(g->sweep(10 * kSecond).unproven, 1u);
  EXPECT_TRUE(p.shut(stranger));
  EXPECT_EQ(g->sweep(60 * kSecond).unproven, 0u) << "a vouched connection stays";
  EXPECT_FALSE(p.shut(router));
}

// A stranger that held the cap's worth of connections first pushed out a router's new one
// (the newest past the cap went); now the oldest unvouched go, and vouched ones do not count.
TEST(VrdmaLinkGuard, PastTheCapTheOldestUnvouchedGoNeverAVouchedOne) {
  Port p;
  auto g = keyed_guard(p.port, 2);
  ASSERT_TRUE(g);
  size_t old1 = p.connect_one(), old2 = p.connect_one();
  EXPECT_EQ(g->sweep(0).over_cap, 0u);
  size_t router = p.connect_one();
  EXPECT_EQ(g->sweep(1 * kSecond).over_cap, 1u);
  EXPECT_TRUE(p.shut(old1));
  EXPECT_FALSE(p.shut(router)) << "the router's new connection was pushed out";
  g->vouch(p.far_end(router), 1 * kSecond);
  size_t newer = p.connect_one();
  EXPECT_EQ(g->sweep(2 * kSecond).over_cap, 0u) << "a vouched connection counted against the cap";
  EXPECT_FALSE(p.shut(old2));
  EXPECT_FALSE(p.shut(newer));
}

// Without a key nobody can vouch: nothing is shut for want of it, and what holds a place keeps it.
TEST(VrdmaLinkGuard, WithoutAKeyNothingIsShutForWantOfAVouch) {
  Port p;
  auto g = guard(p.port);
  ASSERT_TRUE(g);
  size_t c = p.connect_one();
  EXPECT_EQ(g->sweep(0).unproven, 0u);
  EXPECT_EQ(g->sweep(100 * kSecond).unproven, 0u);
  EXPECT_FALSE(p.shut(c));
}

// The connections this process made are what the router vouches for; a change is signalled.
TEST(VrdmaLinkGuard, MadeConnectionsAreListedAndTheirChangeSignalled) {
  Port p;
  Port other;  // the guard's own port: connections to p's are made ones
  auto g = keyed_guard(other.port, 1000);
  ASSERT_TRUE(g);
  size_t c = p.connect_one();
  g->sweep(0);
  pollfd pf{g->changed_fd(), POLLIN, 0};
  EXPECT_EQ(poll(&pf, 1, 0), 1);
  bool listed = false;
  for (const MadeConn& m : g->made()) listed = listed || (m.self == p.far_end(c) && m.peer.port == p.port);
  EXPECT_TRUE(listed);
}

}  // namespace
}  // namespace rb::vrdma
