#pragma once
// vrdma0's GID as both sides of the datagram path see it: the verbs layer lists it at index 0,
// and the router writes it into the routing header (GRH) that a datagram's receive begins with.
#include <array>
#include <cstdint>
#include <cstring>

namespace rb::vrdma::proto {

using Gid = std::array<uint8_t, 16>;

// The router's listening address (IPv6, or IPv4-mapped) names it to other hosts; a router that
// does not listen (port 0, or the wildcard) is this host's alone, and its GID is the IPv4-mapped
// loopback.
inline Gid router_gid(const uint8_t ip[16], uint16_t port) {
  static constexpr Gid kMappedAny = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 0, 0};
  static constexpr Gid kLoopback = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1};
  Gid g;
  std::memcpy(g.data(), ip, 16);
  if (port == 0 || g == Gid{} || g == kMappedAny) return kLoopback;
  return g;
}

constexpr size_t kGrhBytes = 40;

// An InfiniBand global routing header (IPv6's layout): version 6, next header 0x1b (IB), hop
// limit 64, the payload length, then the source and destination GIDs at bytes 8 and 24, where
// programs read them (ibv_init_ah_from_wc reads the source).
inline void write_grh(uint8_t out[kGrhBytes], const Gid& sgid, const Gid& dgid, uint32_t payload) {
  std::memset(out, 0, kGrhBytes);
  out[0] = 0x60;
  out[4] = uint8_t(payload >> 8);
  out[5] = uint8_t(payload);
  out[6] = 0x1b;
  out[7] = 64;
  std::memcpy(out + 8, sgid.data(), 16);
  std::memcpy(out + 24, dgid.data(), 16);
}

}  // namespace rb::vrdma::proto
