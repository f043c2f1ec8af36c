#include "engine/serve_run.hh"

#include <optional>

#include <fmt/format.h>

#include "engine/drive.hh"
#include "engine/serve_phase.hh"
#include "engine/session.hh"
#include "core/clock.hh"
#include "core/exit_watchdog.hh"
#include "core/netif.hh"
#include "protocol/peer.hh"

namespace rb::engine {
namespace {

class ServeRun {
 public:
  ServeRun(bootstrap::Channel ch, const ServerOptions& o, const std::atomic<bool>& stop)
      : o_(o), stop_(stop), client_(std::move(ch), "client", o.hello_timeout_s) {}

  // Fills `was_run` once the client's hello was accepted.
  Status run(bool& was_run) {
    Status st = receive_hello();
    if (!st || drove_) return was_run = drove_, st;
    was_run = true;
    client_.set_timeout(s_.timeout_s);
    st = open_local_session();
    if (!st) return reject(st);
    st = exchange_endpoints();
    if (!st) return st;
    if (!o_.quiet)
      fmt::print(stderr, "rdmabench server: run from {} over {}:{} ({} threads)\n", client_.address(), s_.transport.name,
                 sess_->domain().info().provider, s_.threads);
    return serve_phases();
  }

 private:
  Status reject(const Status& s) {
    (void)client_.send(protocol::error_of(s));
    return s;
  }

  Status receive_hello() {
    auto first = client_.receive(&stop_);
    if (!first) return reject(first.status());
    if (auto* d = std::get_if<protocol::Drive>(&first.value())) return drive(*d);
    auto* hello = std::get_if<protocol::Hello>(&first.value());
    if (!hello) return reject(client_.unexpected(first.value(), protocol::Hello::kType));
    if (hello->version != protocol::kVersion)
      return reject({Errc::unsupported, fmt::format("the client at {} speaks control protocol {} (rdmabench {}), this "
                                                    "server {} (rdmabench {}): run the same rdmabench version on both hosts",
                                                    client_.address(), hello->version, hello->software,
                                                    protocol::kVersion, RDMABENCH_VERSION)});
    Status st = check(hello->spec);
    if (!st) return reject(st);
    s_ = std::move(hello->spec);
    rail_ips_ = std::move(hello->rail_ips);
    return {};
  }

  // A cluster coordinator's request to run a pair from this host: a client run of our own, to the
  // target's server. Its records and its end go to the coordinator; no session is served here.
  Status drive(const protocol::Drive& d) {
    if (d.version != protocol::kVersion)
      return reject({Errc::unsupported, fmt::format("the coordinator at {} speaks control protocol {} (rdmabench {}), "
                                                    "this server {} (rdmabench {}): run the same rdmabench everywhere",
                                                    client_.address(), d.version, d.software, protocol::kVersion,
                                                    RDMABENCH_VERSION)});
    auto target = bootstrap::parse_host_port(d.target, 0, "drive target");
    if (!target) return reject(target.status());
    if (!o_.quiet) fmt::print(stderr, "rdmabench server: cluster pair from here to {} (coordinator {})\n", d.target,
                              client_.address());
    Status st = drive_pair(client_, d, [t = *target](double timeout_s) { return bootstrap::Channel::connect(t, timeout_s); },
                           stop_);
    drove_ = true;
    return st;
  }

  // The client's rails on separate NICs get one domain each here too: the server's --domains, or
  // for each rail the interface on the same subnet as the client's.
  Status open_local_session() {
    if (!s_.domains.empty() && !o_.domains.empty() && int(o_.domains.size()) != s_.rails)
      return {Errc::invalid_argument,
              fmt::format("the server's --domains lists {} NICs but the client runs {} rails", o_.domains.size(), s_.rails)};
    auto topts = domain_sites(s_, {o_.domain, client_.local_ip()}, [&](int r) -> Result<std::string> {
      if (!o_.domains.empty()) return o_.domains[size_t(r)];
      std::string peer = size_t(r) < rail_ips_.size() ? rail_ips_[size_t(r)] : "";
      std::string nic = interface_on_subnet_of(peer).name;
      if (nic.empty())
        return Status(Errc::invalid_argument, fmt::format("rail {}: no interface of the server shares a subnet with the "
                                                          "client's {}; start the server with --domains",
                                                          r, peer.empty() ? "(unknown address)" : peer));
      return nic;
    });
    if (!topts) return topts.status();
    auto sess = open_session(s_, *topts, s_.region_bytes(), std::max<uint32_t>(2, s_.depth), o_.transports);
    if (!sess) return sess.status();
    sess_ = std::move(sess.value());
    return {};
  }

  Status exchange_endpoints() {
    Status st = client_.send(protocol::Ready{protocol::kVersion, RDMABENCH_VERSION, endpoint_addresses(*sess_),
                                             regions_of(*sess_), sess_->domain().info()});
    if (!st) return st;
    auto conn = client_.expect<protocol::Connect>(&stop_);
    if (!conn) return reject(conn.status());
    st = connect_endpoints(*sess_, conn->endpoints, conn->regions);
    if (!st) return reject(st);
    return client_.send(protocol::Connected{});
  }

  Status serve_phases() {
    while (true) {
      auto m = client_.receive(&stop_);
      if (!m) return reject(m.status());
      if (std::holds_alternative<protocol::Bye>(m.value())) return {};
      auto* start = std::get_if<protocol::PhaseStart>(&m.value());
      if (!start) return reject(client_.unexpected(m.value(), protocol::PhaseStart::kType));
      Status st = serve_phase({s_, *sess_, client_, clock_, o_.cpus, stop_}, *start);
      if (!st) return st;
    }
  }

  const ServerOptions& o_;
  const std::atomic<bool>& stop_;
  protocol::Peer client_;
  RunSpec s_;
  std::vector<std::string> rail_ips_;
  Clock clock_;
  std::unique_ptr<Session> sess_;
  bool drove_ = false;
};

}  // namespace

Status serve_channel(bootstrap::Channel ch, const ServerOptions& opt, const std::atomic<bool>& stop) {
  bool was_run = false;
  ServeRun run(std::move(ch), opt, stop);
  return run.run(was_run);
}

int serve_connection(bootstrap::Channel ch, const ServerOptions& opt, const std::atomic<bool>& stop) {
  // Closing a transport is quick unless a provider blocks on a peer that died holding a lock.
  constexpr double kCloseLimitS = 15;
  std::optional<ExitWatchdog> closing;  // outlives `run`, so it watches its transport close
  const std::string from = ch.peer();
  bool was_run = false;
  Status st;
  {
    ServeRun run(std::move(ch), opt, stop);
    st = run.run(was_run);
    int code = st.is_ok() ? kRunOk : st.code() == Errc::interrupted ? kRunStopped : kRunFailed;
    closing.emplace(kCloseLimitS,
                    fmt::format("rdmabench server: closing the transport after this run took over {:.0f} s; "
                                "ending the run's process", kCloseLimitS),
                    code ? code : kRunFailed);
  }
  if (!st && !opt.quiet)
    fmt::print(stderr, "rdmabench server: {} ended with an error: {}\n", was_run ? "run" : "connection from " + from,
               st.message());
  if (!was_run) return kNoRun;
  return st.is_ok() ? kRunOk : st.code() == Errc::interrupted ? kRunStopped : kRunFailed;
}

}  // namespace rb::engine
