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

std::optional<uint32_t> local_peer_uid(const sockaddr_storage& peer, const sockaddr_storage& self) {
  // The peer's socket has our peer as its local end and us as its remote one.
  return TcpOwners::read(peer.ss_family).uid(peer, self);
}

}  // namespace rb::vrdma
