#include "vrdma/router/link_handshake.hh"

#include <sys/random.h>

#include <cstddef>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

namespace rb::vrdma {
namespace {

template <class T>
std::span<const uint8_t> bytes_of(const T& v) {
  return {reinterpret_cast<const uint8_t*>(&v), sizeof v};
}

// Each MAC covers a label first, so that nothing else signed under the key (a link message, the
// other kind of handshake message) passes for it. A request's covers all of it but the MAC.
std::span<const uint8_t> request_label() {
  static constexpr uint8_t kLabel[] = "vrdma link connect request";
  return {kLabel, sizeof kLabel};
}

std::span<const uint8_t> signed_part(const ConnectRequest& r) { return bytes_of(r).first(offsetof(ConnectRequest, mac)); }

std::span<const uint8_t> answer_label() {
  static constexpr uint8_t kLabel[] = "vrdma link connect answer";
  return {kLabel, sizeof kLabel};
}

void draw(LinkNonce& n) {
  if (getrandom(n.data(), n.size(), 0) != ssize_t(n.size())) throw std::runtime_error("getrandom failed");
}

}  // namespace

ConnectRequest LinkHandshake::request(const proto::RouterAddress& self, const proto::RouterAddress& to) {
  return request(self, to, LinkAuth::wall_ns());
}

ConnectRequest LinkHandshake::request(const proto::RouterAddress& self, const proto::RouterAddress& to,
                                      int64_t sent_ns) {
  ConnectRequest r;
  r.from = self;
  r.to = to;
  draw(r.nonce);
  r.sent_ns = sent_ns;
  LinkKey32 mac = auth_.sign({request_label(), signed_part(r)});
  std::memcpy(r.mac, mac.data(), sizeof r.mac);
  return r;
}

std::optional<ConnectAnswer> LinkHandshake::take(std::span<const uint8_t> data, const proto::RouterAddress& self,
                                                 proto::RouterAddress* from, std::string* why) {
  ConnectRequest r;
  if (data.size() != sizeof r) {
    *why = fmt::format("its request has {} B, not a router's {}", data.size(), sizeof r);
    return std::nullopt;
  }
  std::memcpy(&r, data.data(), sizeof r);
  if (r.magic != kConnectMagic || r.version != kConnectVersion) {
    *why = fmt::format("its request is not a router's of this version ({:#x} v{})", r.magic, r.version);
    return std::nullopt;
  }
  if (!auth_.verifies({request_label(), signed_part(r)}, r.mac)) {
    *why = "its MAC does not verify under the cluster's key (a stranger, or another cluster's key)";
    return std::nullopt;
  }
  if (!(r.to == self)) {
    *why = fmt::format("it was made for the router at {}", proto::to_string(r.to));
    return std::nullopt;
  }
  int64_t now = LinkAuth::wall_ns();
  if (r.sent_ns < now - kLinkSkewNs || r.sent_ns > now + kLinkSkewNs || r.sent_ns < auth_.started_ns()) {
    *why = fmt::format("it was sent {:.1f} s from now, or before this router started: a replay, or clocks that disagree",
                       (double(r.sent_ns) - double(now)) * 1e-9);
    return std::nullopt;
  }
  if (auth_.authenticated() && !fresh_nonce(r.nonce, now)) {
    *why = "its nonce came before: a replay";
    return std::nullopt;
  }
  *from = r.from;
  ConnectAnswer a;
  draw(a.nonce);
  LinkKey32 mac = auth_.sign({answer_label(), bytes_of(r.nonce), bytes_of(a.nonce), bytes_of(r.from), bytes_of(r.to)});
  std::memcpy(a.mac, mac.data(), sizeof a.mac);
  return a;
}

bool LinkHandshake::answers(std::span<const uint8_t> data, const ConnectRequest& sent, std::string* why) {
  ConnectAnswer a;
  if (data.size() != sizeof a) {
    *why = fmt::format("its answer has {} B, not a router's {}", data.size(), sizeof a);
    return false;
  }
  std::memcpy(&a, data.data(), sizeof a);
  if (a.magic != kConnectMagic || a.version != kConnectVersion ||
      !auth_.verifies({answer_label(), bytes_of(sent.nonce), bytes_of(a.nonce), bytes_of(sent.from), bytes_of(sent.to)},
                      a.mac)) {
    *why = "its answer does not verify under the cluster's key: not the router we asked for";
    return false;
  }
  return true;
}

bool LinkHandshake::fresh_nonce(const LinkNonce& n, int64_t now_ns) {
  while (!taken_order_.empty() &&
         (taken_order_.front().first < now_ns - 2 * kLinkSkewNs || taken_order_.size() >= kMaxTaken)) {
    taken_.erase(taken_order_.front().second);
    taken_order_.pop_front();
  }
  if (!taken_.insert(n).second) return false;
  taken_order_.emplace_back(now_ns, n);
  return true;
}

}  // namespace rb::vrdma
