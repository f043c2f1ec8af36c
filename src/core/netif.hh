#pragma once
// Network interfaces of this host: which one carries an address, what address an interface
// has, and which one shares a subnet with a peer (how a server picks its side of a rail).
#include <string>

namespace rb {
struct Interface {
  std::string name, ip;  // empty when none matched
};
Interface interface_with_ip(const std::string& ip);
Interface interface_named(const std::string& name);   // its first IPv4 address (else IPv6)
Interface interface_on_subnet_of(const std::string& peer_ip);
// Name of the interface that carries `ip` (lo for any 127/8 address), or "" when none does.
std::string interface_name_of(const std::string& ip);
bool interface_exists(const std::string& name);
}  // namespace rb
