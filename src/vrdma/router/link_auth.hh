#pragma once
// Who may speak on the link between routers. With --listen a router is reachable by any host
// that reaches its port, so every link message carries a trailer: the sender's message number,
// the time it was sent, and an HMAC-SHA256 over the message, both, and the address of the router
// it is for, under the cluster's key.
// A router takes a message only when the MAC verifies under one of its keys, the time is within
// kLinkSkewNs of its own clock, and the number is new for that sender (a window of 64 behind the
// highest seen) and the router is the one it was for: a stranger can neither join, nor speak for
// another router (the sender's id and address are inside what the MAC covers), nor replay what it
// overheard, to its router or to another (a message from A to B, replayed to C, was once new to
// C's window for A).
//
// The key file holds one key a line, 64 hex digits (32 bytes), as `vrdmactl link-key` prints
// one; the first line signs, every line verifies, so a key is rotated without a flag day: add
// the new key as a second line everywhere (SIGHUP reloads), then make it the first everywhere,
// then drop the old one. The file must be readable by its owner alone.
#include <openssl/types.h>

#include <array>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/status.hh"
#include "vrdma/proto/link.hh"

namespace rb::vrdma {

using LinkKey32 = std::array<uint8_t, 32>;

struct LinkTrailer {
  uint64_t seq = 0;      // the sender's message number, from 1, never repeated in its run
  int64_t sent_ns = 0;   // CLOCK_REALTIME at the sender
  uint8_t mac[32] = {};  // HMAC-SHA256(key, message || seq || sent_ns || the recipient's address)
};
static_assert(sizeof(LinkTrailer) == 48);

// The largest packet on the link: the largest message and its trailer.
constexpr size_t kLinkPacket = proto::kLinkMessage + sizeof(LinkTrailer);

constexpr int64_t kLinkSkewNs = 30'000'000'000;  // clocks of linked hosts agree within this (NTP)

// HMAC-SHA256 of `data` under `key`.
LinkKey32 hmac_sha256(std::span<const uint8_t> key, std::span<const uint8_t> data);

// HMAC-SHA256 under one key, the padded key hashed once: a MAC then costs two hash continuations
// (0.24 us here), where the one-shot HMAC() looked the algorithm up and set its contexts up each
// time (1.2 us), and every link message is sealed once and opened once on its way.
class KeyedMac {
 public:
  explicit KeyedMac(const LinkKey32& key);
  // The MAC of `parts` one after another.
  LinkKey32 of(std::initializer_list<std::span<const uint8_t>> parts);

 private:
  struct Free {
    void operator()(EVP_MD_CTX* c) const;
  };
  std::unique_ptr<EVP_MD_CTX, Free> inner_, outer_, work_;
};

// The keys of a key file; an error names the file, the line and the fix.
Result<std::vector<LinkKey32>> load_link_keys(const std::string& path);

class LinkAuth {
 public:
  // No keys: messages carry the trailer unsigned, and any MAC is taken (--insecure-link).
  // `started_ns`: when this router started (CLOCK_REALTIME; tests give it).
  explicit LinkAuth(std::vector<LinkKey32> keys = {}, int64_t started_ns = wall_ns()) : started_ns_(started_ns) {
    set_keys(std::move(keys));
  }
  bool authenticated() const { return !keys_.empty(); }
  const std::vector<LinkKey32>& keys() const { return keys_; }
  void set_keys(std::vector<LinkKey32> keys);

  // Appends the trailer to `message` for the router at `to`, stamped now (or at `sent_ns`,
  // CLOCK_REALTIME).
  void seal(std::vector<uint8_t>& message, const proto::RouterAddress& to);
  void seal(std::vector<uint8_t>& message, const proto::RouterAddress& to, int64_t sent_ns);
  static int64_t wall_ns();
  int64_t started_ns() const { return started_ns_; }
  // The MAC of `parts` under the signing key (zeros without a key), and whether `mac` is theirs
  // under any key (true without a key).
  LinkKey32 sign(std::initializer_list<std::span<const uint8_t>> parts);
  bool verifies(std::initializer_list<std::span<const uint8_t>> parts, const uint8_t* mac);
  // The message without its trailer when the router at `self` may take it from router
  // `from_router` (its id, as the header says: covered by the MAC); nullopt and the reason
  // otherwise.
  std::optional<std::span<const uint8_t>> open(std::span<const uint8_t> packet, uint64_t from_router,
                                               const proto::RouterAddress& self, std::string* why);
  static constexpr size_t kMaxSenders = 4096;

 private:
  struct Window {
    uint64_t top = 0, seen = 0;  // bit i of seen: top - i has been taken
    int64_t heard_ns = 0;
  };
  bool fresh(Window& w, uint64_t seq);
  std::vector<LinkKey32> keys_;
  std::vector<KeyedMac> macs_;  // one for each key, in order
  uint64_t next_seq_ = 1;
  // A message stamped before this router started was for its last life: a replay (a restarted
  // router's windows start empty). No slack: what is left open is the clocks' disagreement (a
  // sender's clock ahead of ours by d lets what it sent in our last run's final d be replayed
  // once; NTP keeps d to milliseconds), and a sender behind by d is refused for d after a start.
  int64_t started_ns_ = 0;
  std::map<uint64_t, Window> windows_;  // by sender router id
};

}  // namespace rb::vrdma
