#pragma once
// Who owns a TCP socket of this host: the kernel (sock_diag) gives a socket's uid by its two
// ends. The router asks it of a connection that reached it over loopback or a local address,
// where the peer's address says nothing about who the peer is.
#include <sys/socket.h>

#include <cstdint>
#include <optional>
#include <string>

namespace rb::vrdma {

// An address as /proc/net/tcp{,6} writes it: the 32-bit words in host order, in hex, then the port.
std::string proc_net_text(const sockaddr_storage& a);

// The uid owning the TCP socket of this host that is connected from `peer` to `self` (both as
// accept and getsockname give them), asked of the kernel for that socket alone (sock_diag);
// none when no local socket is.
std::optional<uint32_t> local_peer_uid(const sockaddr_storage& peer, const sockaddr_storage& self);

// Whether `peer` is of this host: a loopback address, or the address it reached us at. Such a
// peer whose socket local_peer_uid cannot find is no stranger to trust with everything.
bool from_this_host(const sockaddr_storage& peer, const sockaddr_storage& self);

}  // namespace rb::vrdma
