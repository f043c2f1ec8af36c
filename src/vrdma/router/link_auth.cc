#include "vrdma/router/link_auth.hh"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/stat.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <new>
#include <utility>

#include <fmt/format.h>

namespace rb::vrdma {
namespace {

// The MAC of `covered` for the router at `to`: the recipient's address is covered without being
// sent, so the message verifies only where it was meant to go.
LinkKey32 mac_of(KeyedMac& key, std::span<const uint8_t> covered, const proto::RouterAddress& to) {
  return key.of({covered, {reinterpret_cast<const uint8_t*>(&to), sizeof to}});
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

void KeyedMac::Free::operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }

KeyedMac::KeyedMac(const LinkKey32& key)
    : inner_(EVP_MD_CTX_new()), outer_(EVP_MD_CTX_new()), work_(EVP_MD_CTX_new()) {
  constexpr size_t kBlock = 64;  // SHA-256's; the key (32 B) is padded to it with zeros
  uint8_t pad[kBlock];
  for (auto [ctx, fill] : {std::pair{inner_.get(), uint8_t(0x36)}, std::pair{outer_.get(), uint8_t(0x5c)}}) {
    std::memset(pad, fill, sizeof pad);
    for (size_t i = 0; i < key.size(); ++i) pad[i] ^= key[i];
    if (!ctx || !EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) || !EVP_DigestUpdate(ctx, pad, sizeof pad)) throw std::bad_alloc();
  }
  OPENSSL_cleanse(pad, sizeof pad);
  if (!work_) throw std::bad_alloc();
}

LinkKey32 KeyedMac::of(std::initializer_list<std::span<const uint8_t>> parts) {
  LinkKey32 inner{}, out{};
  EVP_MD_CTX_copy_ex(work_.get(), inner_.get());
  for (auto p : parts) EVP_DigestUpdate(work_.get(), p.data(), p.size());
  EVP_DigestFinal_ex(work_.get(), inner.data(), nullptr);
  EVP_MD_CTX_copy_ex(work_.get(), outer_.get());
  EVP_DigestUpdate(work_.get(), inner.data(), inner.size());
  EVP_DigestFinal_ex(work_.get(), out.data(), nullptr);
  return out;
}

void LinkAuth::set_keys(std::vector<LinkKey32> keys) {
  keys_ = std::move(keys);
  macs_.clear();
  for (const LinkKey32& k : keys_) macs_.emplace_back(k);
}

Result<std::vector<LinkKey32>> load_link_keys(const std::string& path) {
  auto bad = [&](const std::string& what) {
    return Status(Errc::invalid_argument, fmt::format("link_key {}: {}", path, what));
  };
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return bad("cannot be read; make one with `vrdmactl link-key > FILE` (mode 0600)");
  // Not a FIFO or a device: opening one could block the router's thread (SIGHUP reloads there).
  if (!S_ISREG(st.st_mode)) return bad("is not a regular file; write the key into one (mode 0600)");
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
  if (macs_.empty()) return;
  LinkKey32 mac = mac_of(macs_.front(), {message.data(), message.size() - sizeof t.mac}, to);
  std::memcpy(message.data() + message.size() - sizeof t.mac, mac.data(), mac.size());
}

LinkKey32 LinkAuth::sign(std::initializer_list<std::span<const uint8_t>> parts) {
  return macs_.empty() ? LinkKey32{} : macs_.front().of(parts);
}

bool LinkAuth::verifies(std::initializer_list<std::span<const uint8_t>> parts, const uint8_t* mac) {
  if (macs_.empty()) return true;
  bool ok = false;
  for (KeyedMac& k : macs_) ok = CRYPTO_memcmp(k.of(parts).data(), mac, sizeof(LinkKey32)) == 0 || ok;
  return ok;
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
    for (KeyedMac& k : macs_) {
      LinkKey32 mac = mac_of(k, packet.first(packet.size() - sizeof t.mac), self);
      ok = ok || CRYPTO_memcmp(mac.data(), t.mac, mac.size()) == 0;
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
