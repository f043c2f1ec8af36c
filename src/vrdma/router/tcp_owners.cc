#include "vrdma/router/tcp_owners.hh"

#include <netinet/in.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace rb::vrdma {

std::string proc_net_text(const sockaddr_storage& a) {
  if (a.ss_family == AF_INET) {
    const auto& s = reinterpret_cast<const sockaddr_in&>(a);
    return fmt::format("{:08X}:{:04X}", s.sin_addr.s_addr, ntohs(s.sin_port));
  }
  const auto& s = reinterpret_cast<const sockaddr_in6&>(a);
  uint32_t w[4];
  std::memcpy(w, &s.sin6_addr, sizeof w);
  return fmt::format("{:08X}{:08X}{:08X}{:08X}:{:04X}", w[0], w[1], w[2], w[3], ntohs(s.sin6_port));
}

TcpOwners TcpOwners::read(int family) {
  TcpOwners t;
  std::ifstream f(family == AF_INET ? "/proc/net/tcp" : "/proc/net/tcp6");
  std::string line;
  std::getline(f, line);  // the header
  while (std::getline(f, line)) {
    std::istringstream in(line);
    std::string sl, l, r, st, queues, timer, retransmits;
    uint32_t uid = 0;
    if (in >> sl >> l >> r >> st >> queues >> timer >> retransmits >> uid) t.uid_[{l, r}] = uid;
  }
  return t;
}

std::optional<uint32_t> TcpOwners::uid(const sockaddr_storage& local, const sockaddr_storage& remote) const {
  auto it = uid_.find({proc_net_text(local), proc_net_text(remote)});
  if (it == uid_.end()) return std::nullopt;
  return it->second;
}

namespace {

// `a` as the other family writes it: an IPv4 address as IPv6 writes it (::ffff:a.b.c.d), a
// v4-mapped IPv6 one as IPv4; none for any other IPv6 address.
std::optional<sockaddr_storage> other_family(const sockaddr_storage& a) {
  sockaddr_storage out{};
  if (a.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(a);
    auto& v6 = reinterpret_cast<sockaddr_in6&>(out);
    v6.sin6_family = AF_INET6;
    v6.sin6_port = v4.sin_port;
    v6.sin6_addr.s6_addr[10] = v6.sin6_addr.s6_addr[11] = 0xff;
    std::memcpy(&v6.sin6_addr.s6_addr[12], &v4.sin_addr, 4);
    return out;
  }
  const auto& v6 = reinterpret_cast<const sockaddr_in6&>(a);
  if (!IN6_IS_ADDR_V4MAPPED(&v6.sin6_addr)) return std::nullopt;
  auto& v4 = reinterpret_cast<sockaddr_in&>(out);
  v4.sin_family = AF_INET;
  v4.sin_port = v6.sin6_port;
  std::memcpy(&v4.sin_addr, &v6.sin6_addr.s6_addr[12], 4);
  return out;
}

}  // namespace

std::optional<uint32_t> local_peer_uid(const sockaddr_storage& peer, const sockaddr_storage& self) {
  // The peer's socket has our peer as its local end and us as its remote one. Its family need
  // not be ours: an IPv6 socket connected to ::ffff:127.0.0.1 reaches an IPv4 listener, and is
  // listed in tcp6.
  if (auto uid = TcpOwners::read(peer.ss_family).uid(peer, self)) return uid;
  auto p = other_family(peer), s = other_family(self);
  if (!p || !s) return std::nullopt;
  return TcpOwners::read(p->ss_family).uid(*p, *s);
}

bool from_this_host(const sockaddr_storage& peer, const sockaddr_storage& self) {
  auto unmapped = [](const sockaddr_storage& a) {  // ::ffff:a.b.c.d is a.b.c.d
    auto v4 = a.ss_family == AF_INET6 ? other_family(a) : std::nullopt;
    return v4 ? *v4 : a;
  };
  auto host = [](const sockaddr_storage& a) {
    std::string text = proc_net_text(a);
    return text.substr(0, text.rfind(':'));
  };
  sockaddr_storage p = unmapped(peer);
  if (p.ss_family == AF_INET) {
    if ((ntohl(reinterpret_cast<const sockaddr_in&>(p).sin_addr.s_addr) >> 24) == 127) return true;
  } else if (IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6&>(p).sin6_addr)) {
    return true;
  }
  return host(p) == host(unmapped(self));
}

}  // namespace rb::vrdma
