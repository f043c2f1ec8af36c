#pragma once
// How two routers make a link connection, so that only routers holding the cluster's key make
// one. A fabric that takes any connection request and knows a peer by its address (rxm did)
// let a local user of a linked host, connecting from that host's address, take the host's link:
// the router sent what it had for that host down the stranger's connection. The connector's
// request (fi_connect's data) names both routers, a nonce and when it was sent, under an HMAC;
// the listener takes it only for its own address, within kLinkSkewNs, after it started, and once
// (a replay is refused), and answers (fi_accept's data) with a nonce of its own and an HMAC over
// both nonces, which the connector checks before it sends anything down the connection.
#include <array>
#include <cstdint>
#include <deque>
#include <optional>
#include <set>
#include <span>
#include <string>

#include "vrdma/proto/control.hh"
#include "vrdma/router/link_auth.hh"

namespace rb::vrdma {

constexpr uint32_t kConnectMagic = 0x4c445256;  // "VRDL"
constexpr uint32_t kConnectVersion = 1;

using LinkNonce = std::array<uint8_t, 16>;

struct ConnectRequest {
  uint32_t magic = kConnectMagic;
  uint32_t version = kConnectVersion;
  proto::RouterAddress from, to;  // where each router listens
  LinkNonce nonce{};
  int64_t sent_ns = 0;  // CLOCK_REALTIME at the connector
  uint8_t mac[32] = {};
};
static_assert(sizeof(ConnectRequest) == 104);

struct ConnectAnswer {
  uint32_t magic = kConnectMagic;
  uint32_t version = kConnectVersion;
  LinkNonce nonce{};  // the listener's
  uint8_t mac[32] = {};
};
static_assert(sizeof(ConnectAnswer) == 56);

class LinkHandshake {
 public:
  // `auth` holds the keys (reloaded on SIGHUP); without keys every request is taken (--insecure-link).
  explicit LinkHandshake(LinkAuth& auth) : auth_(auth) {}

  // A request from the router at `self` to the one at `to`, stamped now (or at `sent_ns`,
  // CLOCK_REALTIME).
  ConnectRequest request(const proto::RouterAddress& self, const proto::RouterAddress& to);
  ConnectRequest request(const proto::RouterAddress& self, const proto::RouterAddress& to, int64_t sent_ns);
  // The answer to `data` when it is a request this router (at `self`) takes; nullopt and why not.
  std::optional<ConnectAnswer> take(std::span<const uint8_t> data, const proto::RouterAddress& self,
                                    proto::RouterAddress* from, std::string* why);
  // Whether `data` answers `sent` under the key.
  bool answers(std::span<const uint8_t> data, const ConnectRequest& sent, std::string* why);

  static constexpr size_t kMaxTaken = 4096;  // nonces remembered (only key holders add any)

 private:
  bool fresh_nonce(const LinkNonce& n, int64_t now_ns);
  LinkAuth& auth_;
  std::set<LinkNonce> taken_;
  std::deque<std::pair<int64_t, LinkNonce>> taken_order_;  // oldest first, to forget after 2 skews
};

}  // namespace rb::vrdma
