#include "vrdma/router/tcp_owners.hh"

#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

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

namespace {

// The uid owning the TCP socket whose ends are `local` and `remote` (one family), asked of the
// kernel for that one socket (sock_diag): reading the whole of /proc/net/tcp for it took a time
// that grew with every connection on the host, so a uid holding 60,000 made each scrape of the
// metrics wait a quarter of a second, and each look of the link guard cost as much (probe 18).
std::optional<uint32_t> socket_uid(const sockaddr_storage& local, const sockaddr_storage& remote) {
  struct {
    nlmsghdr h;
    inet_diag_req_v2 r;
  } ask{};
  ask.h.nlmsg_len = sizeof ask;
  ask.h.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  ask.h.nlmsg_flags = NLM_F_REQUEST;
  ask.r.sdiag_family = uint8_t(local.ss_family);
  ask.r.sdiag_protocol = IPPROTO_TCP;
  ask.r.idiag_states = ~0u;
  inet_diag_sockid& id = ask.r.id;
  id.idiag_cookie[0] = id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
  if (local.ss_family == AF_INET) {
    const auto &l = reinterpret_cast<const sockaddr_in&>(local), &r = reinterpret_cast<const sockaddr_in&>(remote);
    id.idiag_sport = l.sin_port, id.idiag_dport = r.sin_port;
    std::memcpy(id.idiag_src, &l.sin_addr, 4);
    std::memcpy(id.idiag_dst, &r.sin_addr, 4);
  } else {
    const auto &l = reinterpret_cast<const sockaddr_in6&>(local), &r = reinterpret_cast<const sockaddr_in6&>(remote);
    id.idiag_sport = l.sin6_port, id.idiag_dport = r.sin6_port;
    std::memcpy(id.idiag_src, &l.sin6_addr, 16);
    std::memcpy(id.idiag_dst, &r.sin6_addr, 16);
  }
  int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (fd < 0) return std::nullopt;
  alignas(nlmsghdr) char buf[8192];
  ssize_t n = send(fd, &ask, sizeof ask, 0) == ssize_t(sizeof ask) ? recv(fd, buf, sizeof buf, 0) : -1;
  close(fd);
  const auto* h = reinterpret_cast<const nlmsghdr*>(buf);
  if (n < ssize_t(sizeof *h) || !NLMSG_OK(h, size_t(n)) || h->nlmsg_type != SOCK_DIAG_BY_FAMILY ||
      h->nlmsg_len < NLMSG_LENGTH(sizeof(inet_diag_msg)))
    return std::nullopt;  // no such socket (NLMSG_ERROR), or an answer we do not read
  return reinterpret_cast<const inet_diag_msg*>(NLMSG_DATA(h))->idiag_uid;
}

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
  if (auto uid = socket_uid(peer, self)) return uid;
  auto p = other_family(peer), s = other_family(self);
  if (!p || !s) return std::nullopt;
  return socket_uid(*p, *s);
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
