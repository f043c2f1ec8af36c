#pragma once
// Keeps the link's TCP connections within bounds. libfabric accepts them and holds each until its
// peer speaks or goes, so a stranger's silent connections would hold the router's descriptors for
// ever (the link's messages are authenticated, its TCP connections are not). A thread of its own
// looks once a second at this process's TCP connections and shuts down:
//   - those accepted on the port that sent nothing within a deadline, and those past a cap per
//     host (per uid, for peers on this host);
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
#include <string>
#include <thread>

#include "core/status.hh"
#include "core/unique_fd.hh"

namespace rb::vrdma {

struct LinkGuardLimits {
  uint32_t per_host = 32;                   // connections one host (one uid of this host) holds
  int64_t silent_ns = 10'000'000'000;       // a connection that sent nothing this long is shut
  int64_t stuck_ns = 5'000'000'000;         // unread bytes nobody takes for this long: shut
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
  };
  // One look (the thread's; tests call it alone).
  Swept sweep(int64_t now_ns);

 private:
  struct Conn;
  LinkGuard(uint16_t port, LinkGuardLimits limits, Log log) : port_(port), limits_(limits), log_(std::move(log)) {}
  bool look_at(int fd, int64_t now_ns, Conn& out);
  bool shut(int fd, uint64_t ino);
  void report(const Swept& s, int64_t now_ns);

  uint16_t port_;
  LinkGuardLimits limits_;
  Log log_;
  // Held from the start so that a look needs no new descriptor (the router may be out of them):
  // /proc/self/fd, and a slot each connection is looked at through (a dup of it, so what is shut
  // is what was looked at, even if its number is reused meanwhile), and /dev/null to clear it.
  UniqueFd fd_dir_, slot_, null_, stop_;
  struct Seen {
    uint64_t ino = 0;
    int64_t first_ns = 0;
    uint64_t taken = 0;           // bytes the process had read from it at the last look
    int64_t unread_since_ns = 0;  // since when bytes have waited and none were read
  };
  std::map<int, Seen> seen_;  // by descriptor: when the connection was first seen
  Swept unreported_;
  int64_t reported_ns_ = 0;
  std::thread thread_;
};

}  // namespace rb::vrdma
