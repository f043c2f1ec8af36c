#include "engine/server.hh"

#include <unistd.h>

#include <fmt/format.h>

#include "engine/serve_run.hh"
#include "core/child_process.hh"
#include "protocol/peer.hh"
#include "registry/registry.hh"

namespace rb::engine {
namespace {

// How long stopped runs get to wind down before they are killed.
constexpr double kStopGraceS = 30;

class AcceptLoop {
 public:
  AcceptLoop(bootstrap::Listener& l, const ServerOptions& o, const std::atomic<bool>& stop)
      : l_(l), o_(o), stop_(stop) {
    child_opt_.in_child_first = [this] { close(l_.fd()); };
  }

  // Accepts and hands off until stopped, or (--once) until the first run has ended.
  Status run() {
    while (!stop_.load()) {
      auto ch = l_.accept(0.05);
      if (!ch) return stop_children(), ch.status();
      if (ch->fd() >= 0) hand_off(std::move(ch.value()));
      for (auto& e : children_.reap()) ended(e);
      if (o_.once && once_code_ >= 0) return stop_children(), once_status();
    }
    // Stopping is how a server ends: the runs it stops say so in the log, and in their clients.
    stop_children();
    return o_.once ? Status(Errc::interrupted, "server stopped") : Status{};
  }

 private:
  void hand_off(bootstrap::Channel ch) {
    if (children_.running() >= o_.max_runs) {
      // Told at once rather than left waiting: the client's error says what happened.
      protocol::Peer busy(std::move(ch), "client", 1);
      (void)busy.send(protocol::Error{Errc::unavailable, fmt::format("the server is busy with {} runs (its limit); "
                                                                     "try again later", o_.max_runs)});
      return;
    }
    auto pid = children_.spawn([&](const std::atomic<bool>& child_stop) { return serve_connection(std::move(ch), o_, child_stop); },
                               child_opt_);
    if (!pid) fmt::print(stderr, "rdmabench server: cannot serve {}: {}\n", ch.peer(), pid.status().message());
    // Our copy of the connection closes here: the child has its own.
  }

  void ended(const ChildGroup::Ended& e) {
    if (e.code > 128 && e.code != kRunStopped) {
      fmt::print(stderr, "rdmabench server: the run's process {} died of signal {}\n", e.pid, e.code - 128);
      // A killed process cannot clean up after itself: what its transports left is ours to remove.
      transport::remove_leftovers_of(e.pid);
    }
    if (e.code != kNoRun && once_code_ < 0) once_code_ = e.code;
  }

  void stop_children() {
    for (auto& e : children_.stop_all(kStopGraceS)) ended(e);
  }

  Status once_status() const {
    if (once_code_ == kRunOk) return {};
    return once_code_ == kRunStopped ? Status(Errc::interrupted, "server stopped") : Status(Errc::io, "the run ended with an error");
  }

  bootstrap::Listener& l_;
  const ServerOptions& o_;
  const std::atomic<bool>& stop_;
  ChildOptions child_opt_;
  ChildGroup children_;
  int once_code_ = -1;  // the exit code of the first run that ended
};

}  // namespace

Status run_server(const ServerOptions& opt, const std::atomic<bool>& stop) {
  auto l = bootstrap::Listener::listen(opt.listen);
  if (!l) {
    fmt::print(stderr, "rdmabench: error: {}\n", l.status().message());
    return l.status();
  }
  if (!opt.quiet) fmt::print(stderr, "rdmabench server: listening on {}\n", bootstrap::host_port_text({opt.listen.host, l->port()}));
  if (opt.ready_fd >= 0) {
    std::string port = fmt::format("{}\n", l->port());
    (void)!write(opt.ready_fd, port.data(), port.size());
    close(opt.ready_fd);
  }
  // Each run is served by a child process: a run that ends badly (a worker stuck in a provider on
  // a killed client's lock, a provider crash) takes the child with it, and this process goes on
  // listening. No run waits on another, and the loop waits on no client.
  AcceptLoop loop(l.value(), opt, stop);
  Status st = loop.run();
  if (!st && st.code() != Errc::interrupted) fmt::print(stderr, "rdmabench: error: {}\n", st.message());
  return st;
}

}  // namespace rb::engine
