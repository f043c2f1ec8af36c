#include "core/netif.hh"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

namespace rb {
namespace {

template <class F>
Interface find(F match) {
  ifaddrs* ifs = nullptr;
  if (getifaddrs(&ifs) != 0) return {};
  Interface found, v6;
  for (ifaddrs* i = ifs; i; i = i->ifa_next) {
    if (!i->ifa_addr || (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6)) continue;
    char buf[INET6_ADDRSTRLEN] = {};
    if (i->ifa_addr->sa_family == AF_INET)
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, buf, sizeof buf);
    else
      inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(i->ifa_addr)->sin6_addr, buf, sizeof buf);
    if (!match(i, buf)) continue;
    if (i->ifa_addr->sa_family == AF_INET) {
      found = {i->ifa_name, buf};
      break;
    }
    if (v6.name.empty()) v6 = {i->ifa_name, buf};
  }
  freeifaddrs(ifs);
  return found.name.empty() ? v6 : found;
}

}  // namespace

Interface interface_with_ip(const std::string& ip) {
  return find([&](ifaddrs*, const char* a) { return ip == a; });
}

Interface interface_named(const std::string& name) {
  return find([&](ifaddrs* i, const char*) { return name == i->ifa_name; });
}

Interface interface_on_subnet_of(const std::string& peer_ip) {
  in_addr peer{};
  if (inet_pton(AF_INET, peer_ip.c_str(), &peer) != 1) return {};
  return find([&](ifaddrs* i, const char*) {
    if (i->ifa_addr->sa_family != AF_INET || !i->ifa_netmask) return false;
    uint32_t a = reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr;
    uint32_t m = reinterpret_cast<sockaddr_in*>(i->ifa_netmask)->sin_addr.s_addr;
    return m != 0 && (a & m) == (peer.s_addr & m);
  });
}

std::string interface_name_of(const std::string& ip) {
  std::string name = interface_with_ip(ip).name;
  // Any 127/8 address lives on lo even when only 127.0.0.1 is listed.
  if (name.empty() && ip.rfind("127.", 0) == 0) name = "lo";
  return name;
}

bool interface_exists(const std::string& name) { return if_nametoindex(name.c_str()) != 0; }

}  // namespace rb
