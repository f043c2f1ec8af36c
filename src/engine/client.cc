#include "engine/client.hh"

#include <optional>

#include <fmt/format.h>

#include "engine/client_phase.hh"
#include "engine/session.hh"
#include "core/exit_watchdog.hh"
#include "protocol/peer.hh"

namespace rb::engine {
namespace {

class ClientRun {
 public:
  ClientRun(const RunSpec& s, const ClientOptions& o, ResultSink& sink, const std::atomic<bool>& interrupt)
      : s_(s), o_(o), sink_(sink), interrupt_(interrupt) {}

  Status run() {
    Status st = check(s_);
    if (!st) return st;
    st = connect();
    if (!st) return st;
    st = open_local_session();
    if (!st) return st;
    st = handshake();
    if (!st) return st;
    sink_.run_started(run_info());
    auto list = phases(s_);
    for (size_t i = 0; i < list.size(); ++i) {
      sink_.phase_started(i, list.size(), list[i]);
      PhaseResult result;
      st = run_client_phase({s_, *sess_, server_, clock_, sink_, interrupt_}, list[i], i, result);
      if (!st.is_ok() || result.partial) {
        Status w = (result.iterations || st.is_ok()) ? sink_.phase_done(result, s_.repeat) : Status{};
        if (!st) return st;
        if (!w) return w;
        return {Errc::interrupted, "interrupted: the results above are partial"};
      }
      st = sink_.phase_done(result, s_.repeat);
      if (!st) return st;
    }
    (void)server_.send(protocol::Bye{});
    return {};
  }

 private:
  Status connect() {
    auto ch = o_.connect ? o_.connect(s_.timeout_s) : bootstrap::Channel::connect(o_.server, s_.timeout_s);
    if (!ch) return ch.status();
    server_ = protocol::Peer(std::move(ch.value()), "server", s_.timeout_s);
    return {};
  }

  // One domain for all rails, or one per rail on the NICs --domains names.
  Status open_local_session() {
    auto topts = domain_sites(s_, {s_.transport.domain, server_.local_ip()},
                              [&](int r) -> Result<std::string> { return s_.domains[size_t(r)]; });
    if (!topts) return topts.status();
    if (!s_.domains.empty())
      for (const auto& site : *topts) rail_ips_.push_back(site.local_ip);
    auto sess = open_session(s_, *topts, uint64_t(s_.threads) * s_.local_bytes_per_thread(), 2, o_.transports);
    if (!sess) return sess.status();
    sess_ = std::move(sess.value());
    return {};
  }

  Status handshake() {
    Status st = server_.send(protocol::Hello{protocol::kVersion, RDMABENCH_VERSION, s_, rail_ips_});
    if (!st) return st;
    auto ready = server_.expect<protocol::Ready>(&interrupt_);
    if (!ready) return ready.status();
    if (ready->version != protocol::kVersion)
      return {Errc::unsupported, fmt::format("the server at {} speaks control protocol {} (rdmabench {}), this client {} "
                                             "(rdmabench {}): run the same rdmabench version on both hosts",
                                             server_.address(), ready->version, ready->software, protocol::kVersion,
                                             RDMABENCH_VERSION)};
    st = connect_endpoints(*sess_, ready->endpoints, ready->regions);
    if (!st) return st;
    st = server_.send(protocol::Connect{endpoint_addresses(*sess_), regions_of(*sess_)});
    if (!st) return st;
    auto ok = server_.expect<protocol::Connected>(&interrupt_);
    return ok ? Status{} : ok.status();
  }

  RunInfo run_info() const {
    RunInfo info{&s_, sess_->domain().info(),
                 o_.server_name.empty() ? bootstrap::host_port_text(o_.server) : o_.server_name,
                 clock_.uses_tsc() ? fmt::format("tsc {:.2f} GHz", clock_.ghz()) : "clock_gettime", {}, 0};
    for (auto& d : sess_->domains) info.domains.push_back(d->info().domain);
    // The line rate a bw row is a share of: every rail's link, when the provider reports them all.
    double line = 0;
    for (auto& d : sess_->domains) line = (line >= 0 && d->caps().link_gbps > 0) ? line + d->caps().link_gbps : -1;
    if (sess_->domains.size() == 1 && line > 0) line *= s_.rails;  // rails sharing one NIC share its link
    info.line_gbps = line > 0 ? line : 0;
    return info;
  }

  const RunSpec& s_;
  const ClientOptions& o_;
  ResultSink& sink_;
  const std::atomic<bool>& interrupt_;
  Clock clock_;
  protocol::Peer server_;
  std::vector<std::string> rail_ips_;
  std::unique_ptr<Session> sess_;
};

}  // namespace

Status run_client(const RunSpec& spec, const ClientOptions& opt, ResultSink& sink, const std::atomic<bool>& interrupt) {
  // Closing a transport is quick unless a provider blocks on a peer that died holding a lock.
  constexpr double kCloseLimitS = 15;
  std::optional<ExitWatchdog> closing;  // outlives `run`, so it watches its transport close
  ClientRun run(spec, opt, sink, interrupt);
  Status st = run.run();
  sink.run_ended();
  closing.emplace(kCloseLimitS,
                  fmt::format("rdmabench: error: {}closing the transport took over {:.0f} s; exiting",
                              st.is_ok() ? "" : st.message() + "; ", kCloseLimitS),
                  st.code() == Errc::interrupted ? 130 : 1);
  return st;
}

}  // namespace rb::engine
