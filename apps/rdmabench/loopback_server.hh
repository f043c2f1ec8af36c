#pragma once
// --loopback: the server as a real child process on 127.0.0.1 with a free port. The child is
// killed if we die (PDEATHSIG), sits in its own process group so Ctrl-C reaches only us, and is
// always reaped, also when a second Ctrl-C quick_exits (an at_quick_exit hook stops and reaps it).
#include <sys/types.h>

#include <vector>

#include "core/status.hh"

namespace rb::app {

class LoopbackServer {
 public:
  // once = false: the child serves runs until finish() stops it (a job's runs share one child).
  static Result<LoopbackServer> start(const std::vector<int>& cpus, bool once = true);
  LoopbackServer(LoopbackServer&& o) noexcept : pid_(o.pid_), port_(o.port_) { o.pid_ = -1; }
  ~LoopbackServer();
  uint16_t port() const { return port_; }
  // False once the child has exited (it is then reaped).
  bool alive();
  // Waits up to timeout_s for the child to exit by itself, then kills it; returns its exit code.
  int finish(double timeout_s);

 private:
  LoopbackServer() = default;
  int wait_or_kill(double timeout_s);  // finish() before the child is forgotten
  pid_t pid_ = -1;
  uint16_t port_ = 0;
};

}  // namespace rb::app
