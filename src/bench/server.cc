#include "bench/server.hh"

#include "core/netif.hh"

#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "bench/pattern.hh"
#include "bench/result.hh"
#include "bench/session.hh"
#include "bench/spec_json.hh"
#include "bench/worker.hh"
#include "bench/worker_threads.hh"
#include "core/child_process.hh"
#include "core/exit_watchdog.hh"
#include "core/cpu_usage.hh"

namespace rb::bench {
namespace {

using nlohmann::json;

json error_msg(const Status& s) { return {{"type", "error"}, {"code", int(s.code())}, {"message", s.message()}}; }

// Checks the region after a validated write stream: fully covered granules hold the pattern,
// partly covered ones hold pattern or zero, untouched ones are still zero.
Status check_region(const uint8_t* region, uint64_t len, const std::vector<uint8_t>& cover, uint64_t seed, uint64_t size) {
  for (uint64_t g = 0; g * kAlign < len; ++g) {
    uint64_t off = g * kAlign, n = std::min<uint64_t>(kAlign, len - off);
    uint8_t c = g < cover.size() ? cover[g] : kCoverNone;
    for (uint64_t i = 0; i < n; ++i) {
      uint8_t v = region[off + i], want = pattern_byte(seed, off + i);
      bool ok = c == kCoverFull ? v == want : c == kCoverPartial ? (v == want || v == 0) : v == 0;
      if (!ok)
        return {Errc::validation,
                fmt::format("write of {} B: byte at remote offset {:#x} is {:#04x}, expected {} ({})", size, off + i, v,
                            c == kCoverNone ? "0x00" : fmt::format("{:#04x}", want),
                            c == kCoverNone ? "no write targeted it: a write landed out of place"
                                            : "a write to this granule was lost or corrupted")};
    }
  }
  return {};
}

class ServeOne {
 public:
  ServeOne(bootstrap::Channel& ch, const ServerOptions& o, const std::atomic<bool>& stop) : ch_(ch), o_(o), stop_(stop) {}

  Status run() {
    auto hello = ch_.recv_json(30, &stop_);
    if (!hello) return hello.status();
    if (hello->value("type", "") != "hello") return {Errc::io, "control protocol error: expected hello"};
    auto spec = spec_from_json(hello->value("spec", json::object()));
    if (!spec) return reject(spec.status());
    s_ = spec.value();
    Status st = check(s_);
    if (!st) return reject(st);
    // The client's rails on separate NICs get one domain each here too: the server's --domains,
    // or for each rail the interface on the same subnet as the client's.
    std::vector<transport::DomainSite> topts;
    if (s_.domains.empty()) {
      topts.push_back({o_.domain, ch_.local_ip()});
    } else {
      auto ips = hello->value("rail_ips", json::array());
      if (!o_.domains.empty() && int(o_.domains.size()) != s_.rails)
        return reject({Errc::invalid_argument, fmt::format("the server's --domains lists {} NICs but the client runs {} rails",
                                                           o_.domains.size(), s_.rails)});
      for (int r = 0; r < s_.rails; ++r) {
        std::string dom = o_.domains.empty() ? "" : o_.domains[size_t(r)];
        std::string peer = size_t(r) < ips.size() ? ips[size_t(r)].get<std::string>() : "";
        if (dom.empty()) {
          dom = interface_on_subnet_of(peer).name;
          if (dom.empty())
            return reject({Errc::invalid_argument,
                           fmt::format("rail {}: no interface of the server shares a subnet with the client's {}; "
                                       "start the server with --domains", r, peer.empty() ? "(unknown address)" : peer)});
        }
        topts.push_back({dom, interface_named(dom).ip});
      }
    }
    auto sess = open_session(s_, topts, s_.region_bytes(), rx_max());
    if (!sess) return reject(sess.status());
    sess_ = std::move(sess.value());
    caps_ = sess_->domain().caps();
    st = ch_.send_json({{"type", "ready"}, {"eps", endpoint_addresses(*sess_)}, {"regions", regions_json(*sess_)},
                        {"info", info_json(sess_->domain().info())}});
    if (!st) return st;
    auto conn = ch_.recv_json(30, &stop_);
    if (!conn) return conn.status();
    try {
      st = connect_endpoints(*sess_, conn->at("eps"), conn->at("regions"));
    } catch (const json::exception& e) {
      st = Status(Errc::io, fmt::format("control protocol error: {}", e.what()));
    }
    if (!st) return reject(st);
    st = ch_.send_json({{"type", "ok"}});
    if (!st) return st;
    if (!o_.quiet)
      fmt::print(stderr, "rdmabench server: run from {} over {}:{} ({} threads)\n", ch_.peer(), s_.transport.name,
                 sess_->domain().info().provider, s_.threads);
    while (true) {
      auto m = ch_.recv_json(0, &stop_);
      if (!m) return m.status();
      std::string type = m->value("type", "");
      if (type == "bye") return {};
      if (type != "phase") return {Errc::io, "control protocol error: expected phase or bye, got " + type};
      st = phase(*m);
      if (!st) return st;
    }
  }

 private:
  uint32_t rx_max() const { return std::max<uint32_t>(2, s_.depth); }

  Status reject(const Status& s) {
    (void)ch_.send_json(error_msg(s));
    return s;
  }

  Status phase(const json& m) {
    Phase ph;
    auto op = parse_op(m.value("op", ""));
    auto mode = parse_mode(m.value("mode", ""));
    if (!op || !mode) return reject({Errc::io, "control protocol error: bad phase"});
    ph.op = *op;
    ph.mode = *mode;
    ph.size = m.value("size", uint64_t(0));
    ph.repeat = m.value("repeat", 0);
    std::atomic<bool> abort{false};
    PhaseContext pc;
    pc.spec = &s_;
    pc.phase = ph;
    pc.clock = &clock_;
    pc.seed = m.value("seed", uint64_t(0));
    pc.abort = &abort;
    pc.inject_max = s_.inject ? caps_.inject : 0;
    pc.target_progress = caps_.target_progress;
    pc.yield_to_engine = caps_.engine_thread;

    uint8_t* region = sess_->memory->data();
    const uint64_t gap = s_.gap(), rlen = s_.region_bytes();
    if (ph.op == Op::read && s_.validate) fill_pattern(region, rlen, pc.seed, 0);
    if (ph.op == Op::write) std::memset(region, 0, rlen);  // validation and echo detection start from zero

    // Send phases get a receive ring of their own, registered for this phase only.
    uint32_t slots = ph.mode == Mode::lat ? 2 : rx_slots_for(s_, ph.size, caps_);  // per endpoint
    const uint64_t ept = uint64_t(s_.eps_per_thread());
    std::unique_ptr<transport::HostMemory> ring;
    std::vector<std::unique_ptr<transport::MemoryRegion>> ring_mrs;  // the ring in every domain
    if (ph.op == Op::send) {
      auto mem = sess_->domain().allocate(uint64_t(s_.threads) * ept * slots * align_up(ph.size));
      if (!mem) return reject(mem.status());
      ring = std::move(mem.value());
      for (auto& d : sess_->domains) {
        auto r = d->register_memory(ring->data(), ring->size());
        if (!r) return reject(r.status());
        ring_mrs.push_back(std::move(r.value()));
      }
    }
    std::vector<std::unique_ptr<ThreadState>> ts;
    for (int t = 0; t < s_.threads; ++t) {
      auto st = std::make_unique<ThreadState>();
      st->index = t;
      for (uint64_t e = 0; e < ept; ++e) st->eps.push_back(sess_->eps[size_t(t * ept + e)].get());
      st->first_ep = int(t * ept);
      st->qps = s_.qps;
      bool ring_phase = !ring_mrs.empty();
      st->mr = ring_phase ? ring_mrs[0].get() : sess_->mr();
      for (uint64_t e = 0; e < ept; ++e) {
        size_t d = sess_->domain_of_endpoint(size_t(t * ept + e));
        st->lane_mrs.push_back(ring_phase ? ring_mrs[d].get() : sess_->mrs[d].get());
      }
      st->area_off = ring_phase ? uint64_t(t) * ept * slots * align_up(ph.size) : 0;
      ts.push_back(std::move(st));
    }
    const uint64_t per_thread = s_.local_bytes_per_thread();
    // --bidir: instead of waiting passively, each thread streams the same op back at the client:
    // from its slice of our region to the start of its client thread's buffers.
    const bool bidir = s_.bidir && ph.mode == Mode::bw && ph.op != Op::send;
    RunSpec reverse = s_;
    std::atomic<bool> release{false};
    StartBarrier start(s_.threads, &pc.measure_tick, &clock_);
    if (bidir) {
      uint64_t slice = rlen / uint64_t(s_.threads) / kAlign * kAlign;
      reverse.random_space = 0;
      reverse.fixed = true;
      reverse.thread_gap = per_thread;  // the client's per-thread buffers
      reverse.local_mr = slice;
      reverse.validate = false;
      reverse.cpus = o_.cpus;
      pc.spec = &reverse;
      pc.release = &release;
      for (auto& t : ts) t->area_off = uint64_t(t->index) * slice;
    }
    WorkerThreads workers(abort, release, worker_grace_s(s_.timeout_s, s_.eps_per_thread()));
    for (auto& t : ts) {
      if (bidir) {
        workers.spawn(run_client_thread, std::ref(*t), std::ref(pc), std::ref(start));
        continue;
      }
      int cpu = o_.cpus.empty() ? -1 : o_.cpus[size_t(t->index) % o_.cpus.size()];
      uint64_t echo = uint64_t(t->index) * per_thread + align_up(s_.local_area());
      workers.spawn(run_server_thread, std::ref(*t), std::ref(pc), uint64_t(t->index) * gap, echo, slots, cpu);
    }
    auto stop_all = [&](const Status& why = Status(Errc::io, "the phase ended early")) {
      workers.stop_and_join([&] { return why; });
    };
    Status st = ch_.send_json({{"type", "go"}});
    if (!st) {
      stop_all();
      return st;
    }
    CpuTimes cpu0 = CpuTimes::now();
    auto tick0 = std::chrono::steady_clock::now();
    json end;
    Status worker_failure;
    while (true) {
      for (auto& t : ts)
        if (!bidir && t->exited.load() && !t->status && worker_failure.is_ok()) worker_failure = t->status;
      if (bidir && abort.load() && worker_failure.is_ok()) {
        stop_all();  // joined, so their statuses can be read
        for (auto& t : ts)
          if (!t->status && t->status.code() != Errc::interrupted && worker_failure.is_ok()) worker_failure = t->status;
        if (worker_failure.is_ok()) worker_failure = Status(Errc::io, "the server's reverse stream stopped");
      }
      if (!worker_failure.is_ok()) {
        stop_all(worker_failure);
        return reject(worker_failure);
      }
      if (stop_.load()) {
        stop_all({Errc::interrupted, "server stopped"});
        return reject({Errc::interrupted, "server stopped"});
      }
      pollfd pf{ch_.fd(), POLLIN, 0};
      if (::poll(&pf, 1, 50) <= 0) continue;
      auto msg = ch_.recv_json(10, &stop_);
      if (!msg) {
        stop_all(msg.status());
        return msg.status();
      }
      std::string type = msg->value("type", "");
      if (type == "mark") {
        cpu0 = CpuTimes::now();
        tick0 = std::chrono::steady_clock::now();
        continue;
      }
      if (type != "end") {
        stop_all();
        return {Errc::io, "control protocol error: expected end, got " + type};
      }
      end = *msg;
      if (!end.contains("sent") || !end["sent"].is_array()) {
        stop_all();
        return reject({Errc::io, "control protocol error: malformed end message"});
      }
      break;
    }
    std::vector<uint8_t> cover;
    if (end.contains("coverage") && end["coverage"].is_boolean() && end["coverage"].get<bool>()) {
      auto b = ch_.recv_bytes(30, &stop_);
      if (!b) {
        stop_all(b.status());
        return b.status();
      }
      cover = std::move(b.value());
    }
    // Every message the client sent must arrive before the phase ends: none may be lost.
    Status lost;
    if (ph.op == Op::send) {
      auto sent = end.value("sent", json::array());  // per endpoint
      auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(s_.timeout_s);
      for (size_t t = 0; t < ts.size(); ++t) {
        uint64_t want = 0;
        for (size_t e = t * ept; e < (t + 1) * ept && e < sent.size(); ++e)
          want += sent[e].is_number_unsigned() ? sent[e].get<uint64_t>() : 0;
        while (ts[t]->ops.load() < want && std::chrono::steady_clock::now() < deadline && !ts[t]->exited.load())
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        if (ts[t]->ops.load() < want && lost.is_ok())
          lost = Status(Errc::validation, fmt::format("thread {}: {} messages sent, {} received within {:.0f} s", t, want,
                                                      ts[t]->ops.load(), s_.timeout_s));
      }
    }
    json reverse_figures;
    if (bidir) {  // our stream runs the same budget as the client's: let it finish, then report it
      auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(s_.timeout_s + s_.duration_s);
      auto all_done = [&] {
        for (auto& t : ts)
          if (!t->done.load()) return false;
        return true;
      };
      while (!all_done() && !abort.load() && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      if (!all_done() && lost.is_ok()) lost = Status(Errc::timeout, "the server's reverse stream did not finish in time");
      stop_all();  // joined before their figures are read
      PhaseResult rr = collect(ph, ts, clock_);
      reverse_figures = {{"iterations", rr.iterations}, {"duration_s", rr.duration_s}, {"gbps", rr.gbps}, {"mops", rr.mops}};
    }
    CpuTimes cpu1 = CpuTimes::now();
    double window = std::chrono::duration<double>(std::chrono::steady_clock::now() - tick0).count();
    stop_all();
    for (auto& t : ts)  // a worker's own error explains a shortfall better than the count does
      if (!t->status) {
        lost = t->status;
        break;
      }
    if (lost.is_ok() && !cover.empty()) lost = check_region(region, rlen, cover, pc.seed, ph.size);
    if (!lost.is_ok()) return reject(lost);
    CpuTimes used = cpu1 - cpu0;
    json received = json::array();
    for (auto& t : ts) received.push_back(t->ops.load());
    json result = {{"type", "result"}, {"received", received},
                   {"cpu", {{"user_s", used.user_s}, {"sys_s", used.sys_s},
                            {"total_s", used.total_s}, {"util", window > 0 ? used.total_s / window : 0.0}}}};
    if (bidir) result["reverse"] = reverse_figures;
    return ch_.send_json(result);
  }

  bootstrap::Channel& ch_;
  const ServerOptions& o_;
  const std::atomic<bool>& stop_;
  RunSpec s_;
  Clock clock_;
  std::unique_ptr<Session> sess_;
  transport::Caps caps_;
};

}  // namespace

// Closing a transport is quick unless a provider blocks on a peer that died holding a lock.
constexpr double kCloseLimitS = 15;

Status run_server(const ServerOptions& opt, const std::atomic<bool>& stop) {
  auto l = bootstrap::Listener::listen(opt.listen);
  if (!l) {
    fmt::print(stderr, "rdmabench: error: {}\n", l.status().message());
    return l.status();
  }
  if (!opt.quiet) fmt::print(stderr, "rdmabench server: listening on {}:{}\n", opt.listen.host, l->port());
  if (opt.ready_fd >= 0) {
    std::string port = fmt::format("{}\n", l->port());
    (void)!write(opt.ready_fd, port.data(), port.size());
    close(opt.ready_fd);
  }
  // Each run is served by a child process: a run that ends badly (a worker stuck in a provider on
  // a killed client's lock, a provider crash) takes the child with it, and this process goes on
  // listening for the next client.
  ChildOptions child;
  child.in_child_first = [&] { close(l->fd()); };
  while (true) {
    auto ch = l->accept(&stop);
    if (!ch) return stop.load() ? Status{} : ch.status();
    auto code = run_in_child(
        [&](const std::atomic<bool>& child_stop) {
          std::optional<ExitWatchdog> closing;  // outlives `one`, so it watches its transport close
          ServeOne one(*ch, opt, child_stop);
          Status st = one.run();
          if (!st && !opt.quiet) fmt::print(stderr, "rdmabench server: run ended with an error: {}\n", st.message());
          int code = st.is_ok() ? 0 : st.code() == Errc::interrupted ? 130 : 1;
          closing.emplace(kCloseLimitS,
                          fmt::format("rdmabench server: closing the transport after this run took over {:.0f} s; "
                                      "ending the run's process",
                                      kCloseLimitS),
                          code ? code : 1);
          return code;
        },
        stop, child);
    *ch = bootstrap::Channel();  // our copy of the client's connection: the child had it
    if (!code) {
      fmt::print(stderr, "rdmabench: error: {}\n", code.status().message());
      return code.status();
    }
    if (*code > 128 && *code != 130)
      fmt::print(stderr, "rdmabench server: the run's process died of signal {}\n", *code - 128);
    if (opt.once || stop.load()) {
      if (*code == 0) return {};
      return *code == 130 ? Status(Errc::interrupted, "server stopped") : Status(Errc::io, "the run ended with an error");
    }
  }
}

}  // namespace rb::bench
