#pragma once
// Keeps the link's TCP connections within bounds. libfabric accepts them and holds each until its
// peer speaks or goes, so a stranger's silent connections would hold the router's descriptors for
// ever (the link's messages are authenticated, its TCP connections are not). A thread of its own
// looks once a second at this process's TCP connections and shuts down:
//   - those accepted on the port that sent nothing within a deadline;
//   - with a cluster key, those accepted that no router vouched for within prove_ns: a router
//     that proved the key names the ends of the connections it made to us (a conn_proof link
//     message), so a stranger that replays a fabric's connection request holds nothing for long;
//   - unvouched ones past a cap per host (per uid, for peers on this host), the oldest first
//     (a router's own new connection is not pushed out by a stranger's older ones; vouched ones
//     are never counted);
//   - those it made (a greeting to an address a tenant named) that got nothing back within the
//     same deadline: a listener that accepts and stays silent holds no descriptor of ours;
//   - any with bytes waiting of which none were read for stuck_ns: libfabric 1.17 never consumes some frames
//     (a 16-byte one with a zero header size), and its wait then never arms: the router spun on it.
// It shuts them down and never closes them: libfabric owns the descriptor, sees the connection
// end, and closes it itself.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/status.hh"
#include "core/unique_fd.hh"
#include "vrdma/proto/control.hh"

namespace rb::vrdma {

struct LinkGuardLimits {
  uint32_t per_host = 32;                   // connections one host (one uid of this host) holds
  int64_t silent_ns = 10'000'000'000;       // a connection that sent nothing this long is shut
  int64_t stuck_ns = 5'000'000'000;         // unread bytes nobody takes for this long: shut
  int64_t prove_ns = 0;                     // 0: no proof asked (no key); else unvouched this long: shut
};

// One connection this router made: its own end and the peer's (a router's --listen address).
struct MadeConn {
  proto::RouterAddress self, peer;
  bool operator==(const MadeConn&) const = default;
};

class LinkGuard {
 public:
  using Log = std::function<void(const std::string&)>;
  // Guards `port` (the --listen port) of this process; `log` takes a line at most every 10 s.
  static Result<std::unique_ptr<LinkGuard>> create(uint16_t port, LinkGuardLimits limits, Log log);
  ~LinkGuard();
  LinkGuard(const LinkGuard&) = delete;
  LinkGuard& operator=(const LinkGuard&) = delete;

  // Looks once a second from a thread of its own, until destroyed.
  Status start();
  struct Swept {
    size_t connections = 0;  // accepted on the port, before this look
    size_t silent = 0;       // shut: nothing received within the deadline
    size_t over_cap = 0;     // shut: past the cap of their host
    size_t made_silent = 0;  // shut: made by this router, nothing received within the deadline
    size_t stuck = 0;        // shut: bytes left unread past the bound
    size_t unproven = 0;     // shut: accepted, and no router vouched for it within prove_ns
  };
  // One look (the thread's; tests call it alone).
  Swept sweep(int64_t now_ns);

  // The connections this router made, as the last look found them; changed_fd() (an eventfd)
  // becomes readable when they change, for the router to vouch for them to their peers.
  std::vector<MadeConn> made() const;
  int changed_fd() const { return changed_.get(); }
  // A router that proved the key says the connection whose far end is `end` is its own (taken
  // at the next look; forgotten after a minute if no such connection comes).
  void vouch(const proto::RouterAddress& end, int64_t now_ns);

 private:
  struct Conn;
  LinkGuard(uint16_t port, LinkGuardLimits limits, Log log) : port_(port), limits_(limits), log_(std::move(log)) {}
  bool look_at(int fd, int64_t now_ns, Conn& out);
  bool shut(int fd, uint64_t ino);
  void report(const Swept& s, int64_t now_ns);
  bool take_vouch(const proto::RouterAddress& end, int64_t now_ns);
  void note_made(std::vector<MadeConn> made);
  void shut_over_cap(std::vector<Conn>& conns, Swept& s);

  uint16_t port_;
  LinkGuardLimits limits_;
  Log log_;
  // Held from the start so that a look needs no new descriptor (the router may be out of them):
  // /proc/self/fd, and a slot each connection is looked at through (a dup of it, so what is shut
  // is what was looked at, even if its number is reused meanwhile), and /dev/null to clear it.
  UniqueFd fd_dir_, slot_, null_, stop_, changed_;
  struct Seen {
    uint64_t ino = 0;
    int64_t first_ns = 0;
    uint64_t taken = 0;           // bytes the process had read from it at the last look
    int64_t unread_since_ns = 0;  // since when bytes have waited and none were read
    bool vouched = false;         // a router that proved the key said it is its own
  };
  std::map<int, Seen> seen_;  // by descriptor: when the connection was first seen
  Swept unreported_;
  int64_t reported_ns_ = 0;
  mutable std::mutex mu_;  // the router's thread vouches and reads made(); the guard's looks
  std::map<std::pair<std::string, uint16_t>, int64_t> vouches_;  // far end -> when; at most kMaxVouches
  std::vector<MadeConn> made_;
  static constexpr size_t kMaxVouches = 4096;
  std::thread thread_;
};

}  // namespace rb::vrdma
