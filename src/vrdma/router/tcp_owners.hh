#pragma once
// Who owns a TCP socket of this host: the kernel's tables (/proc/net/tcp and tcp6) give each
// socket's two ends and its uid. The router asks them of a connection that reached it over
// loopback or a local address, where the peer's address says nothing about who the peer is.
#include <sys/socket.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>

namespace rb::vrdma {

// An address as /proc/net/tcp{,6} writes it: the 32-bit words in host order, in hex, then the port.
std::string proc_net_text(const sockaddr_storage& a);

// A snapshot of one family's table: the uid of each socket, by its local and remote ends.
class TcpOwners {
 public:
  static TcpOwners read(int family);  // AF_INET or AF_INET6
  // The uid owning the socket whose ends are `local` and `remote` (as getsockname, getpeername give them).
  std::optional<uint32_t> uid(const sockaddr_storage& local, const sockaddr_storage& remote) const;

 private:
  std::map<std::pair<std::string, std::string>, uint32_t> uid_;
};

// The uid owning the TCP socket of this host that is connected from `peer` to `self` (both as
// accept and getsockname give them), asked of the kernel for that socket alone (sock_diag);
// none when no local socket is.
std::optional<uint32_t> local_peer_uid(const sockaddr_storage& peer, const sockaddr_storage& self);

// Whether `peer` is of this host: a loopback address, or the address it reached us at. Such a
// peer whose socket local_peer_uid cannot find is no stranger to trust with everything.
bool from_this_host(const sockaddr_storage& peer, const sockaddr_storage& self);

}  // namespace rb::vrdma
