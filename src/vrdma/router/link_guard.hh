#pragma once
// Keeps the connections accepted on the --listen port within bounds. libfabric accepts them and
// holds each until its peer speaks or goes, so a stranger's silent connections would hold the
// router's descriptors for ever (the link's messages are authenticated, its TCP connections are
// not). A thread of its own looks once a second at this process's sockets connected to the port
// and shuts down those that sent nothing within a deadline, and those past a cap per host (per
// uid, for peers on this host). It shuts them down and never closes them: libfabric owns the
// descriptor, sees the connection end, and closes it itself.
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
  };
  std::map<int, Seen> seen_;  // by descriptor: when the connection was first seen
  Swept unreported_;
  int64_t reported_ns_ = 0;
  std::thread thread_;
};

}  // namespace rb::vrdma
