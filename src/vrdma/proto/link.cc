#include "vrdma/proto/link.hh"

#include <arpa/inet.h>

#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

namespace rb::vrdma::proto {

std::string to_string(const RouterAddress& a) {
  static constexpr uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  char buf[INET6_ADDRSTRLEN] = {};
  if (std::memcmp(a.ip, kMapped, 12) == 0) {
    inet_ntop(AF_INET, a.ip + 12, buf, sizeof buf);
    return fmt::format("{}:{}", buf, a.port);
  }
  inet_ntop(AF_INET6, a.ip, buf, sizeof buf);
  return fmt::format("[{}]:{}", buf, a.port);
}

std::optional<RouterAddress> parse_router_address(const std::string& s, std::string* why) {
  auto colon = s.rfind(':');
  if (colon == std::string::npos || colon + 1 == s.size()) {
    *why = fmt::format("{}: give HOST:PORT with a numeric host, e.g. 127.0.0.1:7480", s);
    return std::nullopt;
  }
  std::string host = s.substr(0, colon), port = s.substr(colon + 1);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  RouterAddress a;
  char* end = nullptr;
  unsigned long p = std::strtoul(port.c_str(), &end, 10);
  if (*end || p == 0 || p > 65535) {
    *why = fmt::format("{}: port {} is not 1 to 65535", s, port);
    return std::nullopt;
  }
  a.port = uint16_t(p);
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) {
    a.ip[10] = a.ip[11] = 0xff;
    std::memcpy(a.ip + 12, &v4, 4);
    return a;
  }
  if (inet_pton(AF_INET6, host.c_str(), a.ip) == 1) return a;
  *why = fmt::format("{}: host {} is not a numeric IPv4 or IPv6 address", s, host);
  return std::nullopt;
}

bool RouterNetwork::contains(const RouterAddress& a) const {
  int whole = prefix / 8, bits = prefix % 8;
  if (std::memcmp(ip, a.ip, size_t(whole)) != 0) return false;
  if (!bits) return true;
  uint8_t mask = uint8_t(0xff << (8 - bits));
  return (ip[whole] & mask) == (a.ip[whole] & mask);
}

std::string to_string(const RouterNetwork& n) {
  RouterAddress a;
  std::memcpy(a.ip, n.ip, sizeof a.ip);
  std::string host = to_string(a);
  host = host.substr(0, host.rfind(':'));
  bool v4 = host.front() != '[';
  if (!v4) host = host.substr(1, host.size() - 2);
  return fmt::format("{}/{}", host, v4 ? n.prefix - 96 : n.prefix);
}

std::optional<RouterNetwork> parse_router_network(const std::string& s, std::string* why) {
  if (s.find('\0') != std::string::npos) {
    *why = "a network holds a NUL byte: give a numeric network, e.g. 10.1.0.0/16 or fd00::/8";
    return std::nullopt;
  }
  auto slash = s.find('/');
  std::string host = s.substr(0, slash);
  RouterNetwork n;
  in_addr v4{};
  int most = 128;
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) {
    n.ip[10] = n.ip[11] = 0xff;
    std::memcpy(n.ip + 12, &v4, 4);
    most = 32;
  } else if (inet_pton(AF_INET6, host.c_str(), n.ip) != 1) {
    *why = fmt::format("{}: give a numeric network, e.g. 10.1.0.0/16 or fd00::/8", s);
    return std::nullopt;
  }
  int prefix = most;
  if (slash != std::string::npos) {
    char* end = nullptr;
    std::string bits = s.substr(slash + 1);
    long p = std::strtol(bits.c_str(), &end, 10);
    bool digits = !bits.empty() && bits.size() <= 3 && bits.find_first_not_of("0123456789") == std::string::npos;
    if (!digits || *end || p < 0 || p > most) {
      *why = fmt::format("{}: the prefix length {} is not 0 to {}", s, bits, most);
      return std::nullopt;
    }
    prefix = int(p);
  }
  n.prefix = prefix + (128 - most);
  RouterNetwork whole = n;
  for (int b = n.prefix; b < 128; ++b) whole.ip[b / 8] &= uint8_t(~(0x80 >> (b % 8)));
  if (std::memcmp(whole.ip, n.ip, sizeof n.ip) != 0) {
    *why = fmt::format("{}: host bits are set past /{} (did you mean {}?)", s, prefix, to_string(whole));
    return std::nullopt;
  }
  return n;
}

std::optional<size_t> link_body_size(LinkType t) {
  switch (t) {
    case LinkType::connect: return sizeof(LinkConnect);
    case LinkType::connect_reply: return sizeof(LinkStatus);
    case LinkType::key_ask: return sizeof(LinkKeyAsk);
    case LinkType::key_reply: return sizeof(LinkKey);
    case LinkType::op: return sizeof(LinkOp);
    case LinkType::op_reply: return sizeof(LinkOpReply);
    case LinkType::revoke: return sizeof(LinkRevoke);
    case LinkType::qp_gone: return sizeof(LinkQpGone);
    case LinkType::hello:
    case LinkType::hello_reply: return sizeof(LinkHello);
    case LinkType::datagram: return sizeof(LinkDatagram);
    case LinkType::conn_proof: return sizeof(LinkConnProof);
  }
  return std::nullopt;
}

std::optional<LinkMessage> parse_link(std::span<const uint8_t> packet, std::string* why) {
  LinkMessage m;
  if (packet.size() < sizeof m.h) {
    *why = fmt::format("a link message of {} B is shorter than its header", packet.size());
    return std::nullopt;
  }
  std::memcpy(&m.h, packet.data(), sizeof m.h);
  if (m.h.magic != kLinkMagic || m.h.version != kLinkVersion) {
    *why = fmt::format("not a vrdma link message of version {}", kLinkVersion);
    return std::nullopt;
  }
  auto want = link_body_size(m.type());
  if (!want) {
    *why = fmt::format("unknown link message type {}", m.h.type);
    return std::nullopt;
  }
  size_t rest = packet.size() - sizeof m.h;
  if (m.h.body != rest || rest < *want) {
    *why = fmt::format("link message type {}: body of {} B in a packet of {} B", m.h.type, m.h.body, packet.size());
    return std::nullopt;
  }
  m.body = packet.subspan(sizeof m.h, *want);
  m.tail = packet.subspan(sizeof m.h + *want);
  if (m.type() == LinkType::op) {  // only an op has a tail: its inline payload
    auto op = m.as<LinkOp>();
    size_t inline_len = op.npieces ? 0 : op.len;
    if (op.npieces > kMaxSge || inline_len > kLinkInline || m.tail.size() != inline_len) {
      *why = fmt::format("link op: {} pieces, {} B inline in a tail of {} B", op.npieces, inline_len, m.tail.size());
      return std::nullopt;
    }
  } else if (m.type() == LinkType::datagram) {  // a datagram's tail: its message
    auto d = m.as<LinkDatagram>();
    if (d.len > kLinkInline || m.tail.size() != d.len) {
      *why = fmt::format("link datagram: {} B in a tail of {} B", d.len, m.tail.size());
      return std::nullopt;
    }
  } else if (!m.tail.empty()) {
    *why = fmt::format("link message type {} carries {} B too many", m.h.type, m.tail.size());
    return std::nullopt;
  }
  return m;
}

void encode_link(std::vector<uint8_t>& out, const LinkHeader& h, LinkType t, std::span<const uint8_t> body,
                 std::span<const uint8_t> tail) {
  LinkHeader hh = h;
  hh.type = uint16_t(t);
  hh.body = uint32_t(body.size() + tail.size());
  out.resize(sizeof hh + hh.body);
  std::memcpy(out.data(), &hh, sizeof hh);
  std::memcpy(out.data() + sizeof hh, body.data(), body.size());
  if (!tail.empty()) std::memcpy(out.data() + sizeof hh + body.size(), tail.data(), tail.size());
}

}  // namespace rb::vrdma::proto
