#include "cluster/launched_ranks.hh"

#include <arpa/inet.h>
#include <netdb.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <list>
#include <thread>

#include <fmt/format.h>

#include "engine/drive.hh"
#include "engine/serve_run.hh"
#include "bootstrap/hub.hh"
#include "core/exit_watchdog.hh"
#include "core/netif.hh"

namespace rb::cluster {
namespace {

// Message tags. Commands travel on two fixed tags; pair `session` owns the eight from 8*(session+1).
constexpr int kToAgent = 1, kToCoordinator = 2;
constexpr double kLeaveSlackS = 10;  // beyond --timeout, for the last rank to finish its report
enum SessionTag { coord_to_driver, driver_to_coord, client_to_server, server_to_client, coord_to_server, server_to_coord };
int tag(uint64_t session, SessionTag t) { return int(8 * (session + 1) + uint64_t(t)); }

// Every rank's side of the run: it takes rank 0's commands (Drive, Serve, Bye) and runs each in
// a thread of its own, since a rank may drive one pair and serve another at once (ring, alltoall).
class Agent {
 public:
  Agent(bootstrap::Hub& hub, const ClusterJob& job, const std::atomic<bool>& stop)
      : hub_(hub), job_(job), stop_(stop),
        coordinator_(hub.link(0, kToCoordinator, kToAgent), "the coordinator (rank 0)", job.spec.timeout_s) {}
  ~Agent() {
    halt_.store(true);
    for (auto& t : threads_) t.join();
  }

  // Rank 0's commands until its Bye; an error when rank 0 went silent or away.
  bool told_ranks_lost() const { return ranks_lost_; }

  Status run() {
    while (true) {
      auto m = coordinator_.receive(&stop_);
      if (!m) return halt_.store(true), m.status();
      if (auto* bye = std::get_if<protocol::Bye>(&*m)) return ranks_lost_ = bye->ranks_lost, Status{};
      if (auto* d = std::get_if<protocol::Drive>(&*m)) threads_.emplace_back([this, d = *d] { drive(d); });
      else if (auto* s = std::get_if<protocol::Serve>(&*m)) threads_.emplace_back([this, s = *s] { serve(s); });
      else if (std::holds_alternative<protocol::Ping>(*m)) (void)coordinator_.send(protocol::Pong{});
      else return halt_.store(true), coordinator_.unexpected(*m, protocol::Drive::kType);
    }
  }

 private:
  void drive(const protocol::Drive& d) {
    protocol::Peer coord(hub_.link(0, tag(d.session, driver_to_coord), tag(d.session, coord_to_driver)), "the coordinator (rank 0)",
                         d.spec.timeout_s);
    if (d.version != protocol::kVersion || d.target_rank < 0 || d.target_rank >= hub_.size()) {
      (void)coord.send(protocol::Error{Errc::io, fmt::format("rank {}: a drive command it cannot run", hub_.rank())});
      return;
    }
    auto connect = [this, &d](double) {
      return Result<bootstrap::Channel>(hub_.link(d.target_rank, tag(d.session, client_to_server), tag(d.session, server_to_client)));
    };
    protocol::Drive named = d;
    named.target = fmt::format("rank {} ({})", d.target_rank, hub_.host_of(d.target_rank));
    (void)engine::drive_pair(coord, named, connect, halt_);
  }

  void serve(const protocol::Serve& s) {
    protocol::Peer coord(hub_.link(0, tag(s.session, server_to_coord), tag(s.session, coord_to_server)), "the coordinator (rank 0)",
                         job_.spec.timeout_s);
    Status st = s.from_rank < 0 || s.from_rank >= hub_.size()
                    ? Status(Errc::io, "a serve command from a rank outside the job")
                    : engine::serve_channel(hub_.link(s.from_rank, tag(s.session, server_to_client), tag(s.session, client_to_server)),
                                           job_.server, halt_);
    (void)coord.send(st.is_ok() ? protocol::Message(protocol::Bye{}) : protocol::error_of(st));
  }

  bootstrap::Hub& hub_;
  const ClusterJob& job_;
  const std::atomic<bool>& stop_;
  bool ranks_lost_ = false;  // rank 0's Bye said a rank is gone
  std::atomic<bool> halt_{false};  // stops this rank's pairs: the agent ended
  protocol::Peer coordinator_;
  std::list<std::thread> threads_;
};

// Rank 0's view of the ranks: commands go on each rank's command link.
class LaunchedHosts final : public Hosts {
 public:
  LaunchedHosts(bootstrap::Hub& hub, double timeout_s) : hub_(hub) {
    for (int r = 0; r < hub.size(); ++r)
      agents_.emplace_back(hub.link(r, kToAgent, kToCoordinator), fmt::format("rank {}", r), timeout_s);
  }

  std::string reached_by() const override { return hub_.kind() == std::string("PMIx") ? "pmix" : "mpi"; }
  std::vector<std::string> names() const override {
    std::vector<std::string> n;
    for (int r = 0; r < hub_.size(); ++r) n.push_back(fmt::format("rank {} ({})", r, hub_.host_of(r)));
    return n;
  }

  Result<PairControl> start(const Pair& pair, uint64_t session, const model::RunSpec& spec) override {
    Status st = agents_[size_t(pair.dst)].send(protocol::Serve{pair.src, session});
    if (st) st = agents_[size_t(pair.src)].send(protocol::Drive{protocol::kVersion, RDMABENCH_VERSION, spec, "", pair.dst, session});
    if (!st) return st;
    PairControl ctl{protocol::Peer(hub_.link(pair.src, tag(session, coord_to_driver), tag(session, driver_to_coord)),
                                   fmt::format("rank {}", pair.src), spec.timeout_s),
                    protocol::Peer(hub_.link(pair.dst, tag(session, coord_to_server), tag(session, server_to_coord)),
                                   fmt::format("rank {}", pair.dst), spec.timeout_s)};
    return ctl;
  }

  void keep_alive() override {
    for (auto& a : agents_) (void)a.send(protocol::Alive{});
  }

  // Every rank involved is pinged at once; those with no Pong within a few seconds are named.
  std::string unreachable(const std::vector<int>& which, const std::atomic<bool>& stop) override {
    constexpr double kWaitS = 2;
    std::vector<int> asked;
    std::string text;
    for (int r : which) {
      if (std::find(asked.begin(), asked.end(), r) != asked.end() || text.find(fmt::format("rank {} (", r)) != std::string::npos)
        continue;
      // The hub may know already (under PMIx: the TCP link to it broke).
      if (Status st = agents_[size_t(r)].send(protocol::Ping{}); !st)
        text += fmt::format("{}rank {} ({}) does not answer: {}", text.empty() ? "" : "; ", r, hub_.host_of(r), st.message());
      else
        asked.push_back(r);
    }
    std::vector<bool> answered(asked.size());
    auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(kWaitS);
    while (std::chrono::steady_clock::now() < deadline && !stop.load() &&
           std::find(answered.begin(), answered.end(), false) != answered.end()) {
      for (size_t i = 0; i < asked.size(); ++i) {
        if (answered[i]) continue;
        auto m = agents_[size_t(asked[i])].poll();  // a pair's late Bye or Error may come first: skipped
        if (m && m->has_value() && std::holds_alternative<protocol::Pong>(**m)) answered[i] = true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    for (size_t i = 0; i < asked.size(); ++i)
      if (!answered[i])
        text += fmt::format("{}rank {} ({}) does not answer", text.empty() ? "" : "; ", asked[i], hub_.host_of(asked[i]));
    ranks_lost_ |= !text.empty();
    return text;
  }

  bool ranks_lost() const { return ranks_lost_; }
  void finish() {
    for (auto& a : agents_) (void)a.send(protocol::Bye{ranks_lost_});
  }

 private:
  bootstrap::Hub& hub_;
  std::vector<protocol::Peer> agents_;
  bool ranks_lost_ = false;  // unreachable() named a rank
};

// The address this rank's data path uses: --data-net's, else the one the host name resolves to
// (what a cluster's hosts file usually maps it to), else none (the transport's own default).
Result<std::string> data_ip(const std::string& net) {
  if (net.empty()) {
    char name[256] = {};
    gethostname(name, sizeof name - 1);
    addrinfo hints{}, *res = nullptr;
    hints.ai_family = AF_INET;
    if (getaddrinfo(name, nullptr, &hints, &res) != 0) return std::string();
    char ip[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr, ip, sizeof ip);
    freeaddrinfo(res);
    return std::string(ip);
  }
  Interface i = interface_named(net);
  if (i.ip.empty())
    return Status(Errc::invalid_argument, fmt::format("--data-net {}: no interface of that name with an address on this "
                                                      "host; give the data network's interface, e.g. ib0 or eth1", net));
  return i.ip;
}

struct RankEnd {
  int code;
  bool ranks_lost;  // a rank of the job is gone, or rank 0 is: nobody to wait for at the exit
};

// This rank's part once the hub is up: rank 0 coordinates (and serves as an agent), the others
// serve as agents.
RankEnd run_rank(bootstrap::Hub& h, const ClusterJob& job, const Coordinate& coordinate, const std::atomic<bool>& stop) {
  if (h.size() < 2) {
    if (h.rank() == 0) fmt::print(stderr, "rdmabench: error: --cluster: the launcher started 1 rank; start 2 or more (mpirun -np 4)\n");
    return {2, false};
  }
  Agent agent(h, job, stop);
  if (h.rank() != 0) {
    Status st = agent.run();
    if (!st) fmt::print(stderr, "rdmabench: rank {} ({}): error: {}\n", h.rank(), h.host_of(h.rank()), st.message());
    return {st.is_ok() ? 0 : st.code() == Errc::interrupted ? 130 : 1, !st || agent.told_ranks_lost()};
  }
  Status agent_status;
  std::thread own([&] { agent_status = agent.run(); });
  LaunchedHosts hosts(h, job.spec.timeout_s);
  int code = coordinate(hosts);
  hosts.finish();
  own.join();
  return {code, hosts.ranks_lost()};
}

}  // namespace

int run_launched_ranks(int* argc, char*** argv, const ClusterJob& job, const Coordinate& coordinate,
                       const std::atomic<bool>& stop) {
  auto ip = data_ip(job.cluster.data_net);
  if (!ip) return fmt::print(stderr, "rdmabench: error: {}\n", ip.status().message()), 2;
  auto hub = bootstrap::start_hub(job.cluster.bootstrap, argc, argv, *ip, job.spec.timeout_s);
  if (!hub) {
    fmt::print(stderr, "rdmabench: error: --cluster: {}\n", hub.status().message());
    return hub.status().code() == Errc::invalid_argument || hub.status().code() == Errc::unsupported ? 2 : 1;
  }
  auto [code, ranks_lost] = run_rank(**hub, job, coordinate, stop);
  // Leaving an MPI job is collective (MPI_Finalize waits for every rank), so with a rank dead it
  // can wait for good: once in six runs with a rank killed, every rank left hung in it. Where a
  // rank is known lost, leave alone; where one died unseen, the watchdog ends the wait.
  if (ranks_lost) (*hub)->leave_alone();
  double limit = job.spec.timeout_s + kLeaveSlackS;
  ExitWatchdog leaving(limit, fmt::format("rdmabench: rank {}: leaving the {} job took over {:g} s (a rank gone?); exiting without it",
                                          (*hub)->rank(), (*hub)->kind(), limit), code);
  hub->reset();
  return code;
}

}  // namespace rb::cluster
