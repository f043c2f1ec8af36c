#include "vrdma/router/sock_address.hh"

#include <netinet/in.h>

#include <cstring>

namespace rb::vrdma {

proto::RouterAddress router_address_of(const sockaddr_storage& a) {
  proto::RouterAddress r;
  if (a.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(a);
    r.ip[10] = r.ip[11] = 0xff;
    std::memcpy(r.ip + 12, &v4.sin_addr, 4);
    r.port = ntohs(v4.sin_port);
  } else {
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(a);
    std::memcpy(r.ip, &v6.sin6_addr, 16);
    r.port = ntohs(v6.sin6_port);
  }
  return r;
}

sockaddr_storage sockaddr_of(const proto::RouterAddress& a, int family) {
  sockaddr_storage out{};
  if (family == AF_INET) {
    auto& v4 = reinterpret_cast<sockaddr_in&>(out);
    v4.sin_family = AF_INET;
    v4.sin_port = htons(a.port);
    std::memcpy(&v4.sin_addr, a.ip + 12, 4);
  } else {
    auto& v6 = reinterpret_cast<sockaddr_in6&>(out);
    v6.sin6_family = AF_INET6;
    v6.sin6_port = htons(a.port);
    std::memcpy(&v6.sin6_addr, a.ip, 16);
  }
  return out;
}

}  // namespace rb::vrdma
