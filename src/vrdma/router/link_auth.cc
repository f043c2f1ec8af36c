#include "vrdma/router/link_auth.hh"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/stat.h>

#include <chrono>
#include <cstring>
#include <fstream>

#include <fmt/format.h>

namespace rb::vrdma {
namespace {

// The MAC of `covered` for the router at `to`: the recipient's address is covered without being
// sent, so the message verifies only where it was meant to go.
void mac_of(const LinkKey32& key, std::span<const uint8_t> covered, const proto::RouterAddress& to, uint8_t out[32]) {
  std::vector<uint8_t> all(covered.begin(), covered.end());
  const auto* t = reinterpret_cast<const uint8_t*>(&to);
  all.insert(all.end(), t, t + sizeof to);
  unsigned len = 32;
  HMAC(EVP_sha256(), key.data(), int(key.size()), all.data(), all.size(), out, &len);
}

std::optional<LinkKey32> parse_hex_key(const std::string& line) {
  if (line.size() != 64) return std::nullopt;
  LinkKey32 k;
  for (size_t i = 0; i < 32; ++i) {
    unsigned v = 0;
    for (int h = 0; h < 2; ++h) {
      char c = line[2 * i + h];
      int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
      if (d < 0) return std::nullopt;
      v = v * 16 + unsigned(d);
    }
    k[i] = uint8_t(v);
  }
  return k;
}

}  // namespace

LinkKey32 hmac_sha256(std::span<const uint8_t> key, std::span<const uint8_t> data) {
  LinkKey32 out{};
  unsigned len = 32;
  HMAC(EVP_sha256(), key.data(), int(key.size()), data.data(), data.size(), out.data(), &len);
  return out;
}

Result<std::vector<LinkKey32>> load_link_keys(const std::string& path) {
  auto bad = [&](const std::string& what) {
    return Status(Errc::invalid_argument, fmt::format("link_key {}: {}", path, what));
  };
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return bad("cannot be read; make one with `vrdmactl link-key > FILE` (mode 0600)");
  if (st.st_mode & (S_IRWXG | S_IRWXO))
    return bad(fmt::format("mode {:o} lets others read the cluster's key; chmod 600 it", st.st_mode & 0777));
  std::ifstream f(path);
  if (!f) return bad("cannot be read; make one with `vrdmactl link-key > FILE` (mode 0600)");
  std::vector<LinkKey32> keys;
  std::string line;
  for (int n = 1; std::getline(f, line); ++n) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    auto k = parse_hex_key(line);
    if (!k) return bad(fmt::format("line {} is not a key: give 64 hex digits (`vrdmactl link-key` prints one)", n));
    keys.push_back(*k);
  }
  if (keys.empty()) return bad("holds no key; `vrdmactl link-key` prints one");
  return keys;
}

int64_t LinkAuth::wall_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void LinkAuth::seal(std::vector<uint8_t>& message, const proto::RouterAddress& to) { seal(message, to, wall_ns()); }

void LinkAuth::seal(std::vector<uint8_t>& message, const proto::RouterAddress& to, int64_t sent_ns) {
  LinkTrailer t;
  t.seq = next_seq_++;
  t.sent_ns = sent_ns;
  size_t at = message.size();
  message.resize(at + sizeof t);
  std::memcpy(message.data() + at, &t, sizeof t);
  if (keys_.empty()) return;
  uint8_t mac[32];
  mac_of(keys_.front(), {message.data(), message.size() - sizeof t.mac}, to, mac);
  std::memcpy(message.data() + message.size() - sizeof t.mac, mac, sizeof mac);
}

bool LinkAuth::fresh(Window& w, uint64_t seq) {
  if (seq > w.top) {
    uint64_t shift = seq - w.top;
    w.seen = shift >= 64 ? 0 : w.seen << shift;
    w.seen |= 1;
    w.top = seq;
    return true;
  }
  uint64_t back = w.top - seq;
  if (back >= 64 || (w.seen >> back) & 1) return false;
  w.seen |= 1ull << back;
  return true;
}

std::optional<std::span<const uint8_t>> LinkAuth::open(std::span<const uint8_t> packet, uint64_t from_router,
                                                       const proto::RouterAddress& self, std::string* why) {
  LinkTrailer t;
  if (packet.size() < sizeof t) {
    *why = fmt::format("a link message of {} B has no trailer", packet.size());
    return std::nullopt;
  }
  std::memcpy(&t, packet.data() + packet.size() - sizeof t, sizeof t);
  if (!keys_.empty()) {
    bool ok = false;
    uint8_t mac[32];
    for (const LinkKey32& k : keys_) {
      mac_of(k, packet.first(packet.size() - sizeof t.mac), self, mac);
      ok = ok || CRYPTO_memcmp(mac, t.mac, sizeof mac) == 0;
    }
    if (!ok) {
      *why = "its MAC does not verify under the cluster's key for this router (a stranger, another cluster's key, or "
             "a message meant for another router)";
      return std::nullopt;
    }
  }
  int64_t now = wall_ns();  // sent_ns is anything a sender wrote: compared, never subtracted from
  if (t.sent_ns < now - kLinkSkewNs || t.sent_ns > now + kLinkSkewNs) {
    *why = fmt::format("it was sent {:.1f} s from now: a replay, or clocks that disagree",
                       (double(t.sent_ns) - double(now)) * 1e-9);
    return std::nullopt;
  }
  if (t.sent_ns < started_ns_) {
    *why = "it was sent before this router started: a replay of a message to its last run";
    return std::nullopt;
  }
  auto it = windows_.find(from_router);
  if (it == windows_.end()) {
    if (windows_.size() >= kMaxSenders) {  // forget senders not heard for twice the skew
      std::erase_if(windows_, [&](const auto& kv) { return now - kv.second.heard_ns > 2 * kLinkSkewNs; });
      if (windows_.size() >= kMaxSenders) {
        *why = fmt::format("{} routers are linked already", kMaxSenders);
        return std::nullopt;
      }
    }
    it = windows_.emplace(from_router, Window{}).first;
  }
  if (!fresh(it->second, t.seq)) {
    *why = fmt::format("message {} of router {:#x} came before: a replay", t.seq, from_router);
    return std::nullopt;
  }
  it->second.heard_ns = now;
  return packet.first(packet.size() - sizeof t);
}

}  // namespace rb::vrdma
