#pragma once
// A router's address (proto::RouterAddress: IPv6, IPv4 mapped) and the socket address a kernel
// or libfabric call takes or gives, each way.
#include <sys/socket.h>

#include "vrdma/proto/control.hh"

namespace rb::vrdma {

proto::RouterAddress router_address_of(const sockaddr_storage& a);
// `a` as a sockaddr_in (family AF_INET; `a` must be IPv4 mapped) or a sockaddr_in6.
sockaddr_storage sockaddr_of(const proto::RouterAddress& a, int family);

}  // namespace rb::vrdma
