#include "bench/client.hh"

#include "core/netif.hh"

#include <chrono>
#include <cstring>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "bench/pattern.hh"
#include "bench/result.hh"
#include "bench/session.hh"
#include "bench/sizes.hh"
#include "bench/spec_json.hh"
#include "bench/worker.hh"
#include "bench/worker_threads.hh"
#include "core/exit_watchdog.hh"
#include "report/progress.hh"
#include "report/reporter.hh"

namespace rb::bench {
namespace {

using nlohmann::json;

Status from_peer(const json& msg, const char* expected) {
  if (msg.value("type", "") == "error") {
    // A server that was stopped is a failed run here, not an interrupt of this process.
    Errc code = Errc(msg.value("code", int(Errc::internal)));
    return {code == Errc::interrupted ? Errc::io : code, "server: " + msg.value("message", std::string("(no message)"))};
  }
  return {Errc::io, fmt::format("control protocol error: expected '{}', got '{}'", expected, msg.value("type", "?"))};
}

// `stop` may be null: the wait is then bounded by the timeout alone (used after an interrupt,
// to collect the partial phase's result).
Result<json> expect(bootstrap::Channel& ch, const char* type, double timeout_s, const std::atomic<bool>* stop) {
  auto m = ch.recv_json(timeout_s, stop);
  if (!m) return m.status();
  if (m->value("type", "") != type) return from_peer(*m, type);
  return m;
}

struct Reporters {
  report::RunHeader header;
  report::TableReporter table{stdout};
  std::unique_ptr<report::JsonlReporter> jsonl;
  std::unique_ptr<report::CsvReporter> csv;
};

class ClientRun {
 public:
  ClientRun(const RunSpec& s, const ClientOptions& o, const std::atomic<bool>& interrupt)
      : s_(s), o_(o), interrupt_(interrupt) {}

  Status run() {
    Status st = check(s_);
    if (!st) return st;
    Reporters rep;
    if (!o_.json_path.empty()) {
      auto j = report::JsonlReporter::open(o_.json_path);
      if (!j) return j.status();
      rep.jsonl = std::move(j.value());
    }
    if (!o_.csv_path.empty()) {
      auto c = report::CsvReporter::open(o_.csv_path);
      if (!c) return c.status();
      rep.csv = std::move(c.value());
    }
    auto ch = bootstrap::Channel::connect(o_.server, o_.connect_timeout_s);
    if (!ch) return ch.status();
    ch_ = std::move(ch.value());
    // One domain for all rails, or one per rail on the NICs --domains names.
    std::vector<transport::DomainSite> topts;
    nlohmann::json rail_ips = nlohmann::json::array();
    if (s_.domains.empty()) {
      topts.push_back({s_.transport.domain, ch_.local_ip()});
    } else {
      for (const auto& d : s_.domains) {
        Interface ifc = interface_named(d);
        topts.push_back({d, ifc.ip});
        rail_ips.push_back(ifc.ip);
      }
    }
    auto sess = open_session(s_, topts, uint64_t(s_.threads) * s_.local_bytes_per_thread(), 2);
    if (!sess) return sess.status();
    sess_ = std::move(sess.value());

    st = ch_.send_json({{"type", "hello"}, {"version", RDMABENCH_VERSION}, {"spec", spec_to_json(s_)}, {"rail_ips", rail_ips}});
    if (!st) return st;
    auto ready = expect(ch_, "ready", 60, &interrupt_);
    if (!ready) return ready.status();
    try {
      st = connect_endpoints(*sess_, ready->at("eps"), ready->at("regions"));
      if (!st) return st;
      server_info_ = ready->at("info");
    } catch (const json::exception& e) {
      return {Errc::io, fmt::format("control protocol error: {}", e.what())};
    }
    st = ch_.send_json({{"type", "connect"}, {"eps", endpoint_addresses(*sess_)}, {"regions", regions_json(*sess_)}});
    if (!st) return st;
    auto ok = expect(ch_, "ok", 60, &interrupt_);
    if (!ok) return ok.status();

    rep.header = {&s_, sess_->domain().info(), fmt::format("{}:{}", o_.server.host, o_.server.port),
                  clock_.uses_tsc() ? fmt::format("tsc {:.2f} GHz", clock_.ghz()) : "clock_gettime"};
    for (auto& d : sess_->domains) rep.header.domains.push_back(d->info().domain);
    // The line rate a bw row is a share of: every rail's link, when the provider reports them all.
    double line = 0;
    for (auto& d : sess_->domains) line = (line >= 0 && d->caps().link_gbps > 0) ? line + d->caps().link_gbps : -1;
    if (sess_->domains.size() == 1 && line > 0) line *= s_.rails;  // rails sharing one NIC share its link
    rep.header.line_gbps = line > 0 ? line : 0;
    rep.table.header(rep.header);
    auto list = phases(s_);
    report::ProgressLine progress(stderr);
    auto t0 = std::chrono::steady_clock::now();
    for (size_t i = 0; i < list.size(); ++i) {
      const Phase& ph = list[i];
      double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      double eta = i ? elapsed / double(i) * double(list.size() - i) : -1;
      progress.update(fmt::format("[{}/{}] {} {} {}", i + 1, list.size(), transport::op_name(ph.op), mode_name(ph.mode),
                                  format_bytes(ph.size)),
                      elapsed, eta);
      PhaseResult result;
      st = run_phase(ph, i, result, progress);
      progress.clear();
      if (st || result.partial) {
        if (result.iterations || st) {
          rep.table.phase(result, result.partial ? 1 : s_.repeat);
          if (rep.jsonl) {
            Status w = rep.jsonl->write(rep.header, result, s_.repeat);
            if (!w) return w;
          }
          if (rep.csv) {
            Status w = rep.csv->write(rep.header, result);
            if (!w) return w;
          }
        }
      }
      if (!st) return st;
      if (result.partial) return {Errc::interrupted, "interrupted: the results above are partial"};
    }
    (void)ch_.send_json({{"type", "bye"}});
    return {};
  }

 private:
  Status run_phase(const Phase& ph, size_t index, PhaseResult& result, report::ProgressLine& progress) {
    std::atomic<bool> abort{false};
    PhaseContext pc;
    pc.spec = &s_;
    pc.phase = ph;
    pc.clock = &clock_;
    pc.seed = mix64(s_.seed + index * 0x1000193);
    pc.abort = &abort;
    pc.inject_max = s_.inject ? sess_->domain().caps().inject : 0;
    pc.yield_to_engine = sess_->domain().caps().engine_thread;
    const uint64_t per_thread = s_.local_bytes_per_thread();
    bool cover = s_.validate && ph.op == Op::write && ph.mode == Mode::bw;
    std::vector<std::unique_ptr<ThreadState>> ts;
    for (int t = 0; t < s_.threads; ++t) {
      auto st = std::make_unique<ThreadState>();
      st->index = t;
      const int ept = s_.eps_per_thread();
      for (int e = 0; e < ept; ++e) st->eps.push_back(sess_->eps[size_t(t * ept + e)].get());
      st->first_ep = t * ept;
      st->qps = s_.qps;
      st->mr = sess_->mr();
      for (int e = 0; e < ept; ++e)
        st->lane_mrs.push_back(sess_->mrs[sess_->domain_of_endpoint(size_t(t * ept + e))].get());
      st->area_off = uint64_t(t) * per_thread;
      if (cover) st->coverage.assign(s_.region_bytes() / kAlign + 1, kCoverNone);
      uint8_t* area = st->area();
      if (s_.wants_mirror() && ph.op == Op::write) fill_pattern(area, s_.region_bytes(), pc.seed, 0);
      else std::memset(area, 0, per_thread);
      ts.push_back(std::move(st));
    }
    Status st = ch_.send_json({{"type", "phase"}, {"index", index}, {"op", transport::op_name(ph.op)},
                               {"mode", mode_name(ph.mode)}, {"size", ph.size}, {"repeat", ph.repeat}, {"seed", pc.seed}});
    if (!st) return st;
    auto go = expect(ch_, "go", 60, &interrupt_);
    if (!go) return go.status();

    // --bidir: our threads keep the endpoints progressing after their stream until the server's
    // reverse stream has finished (its result is in hand).
    std::atomic<bool> release{false};
    const bool bidir = s_.bidir && ph.mode == Mode::bw;
    if (bidir) pc.release = &release;
    CpuTimes cpu_at_start;
    StartBarrier start(s_.threads, &pc.measure_tick, &clock_, &cpu_at_start);
    // Declared after everything the workers use, so it is destroyed (and joins them) first.
    WorkerThreads workers(abort, release, worker_grace_s(s_.timeout_s, s_.eps_per_thread()));
    for (auto& t : ts) workers.spawn(run_client_thread, std::ref(*t), std::ref(pc), std::ref(start));
    auto first_failure = [&] {
      Status failure;
      for (auto& t : ts)
        if (!t->status && t->status.code() != Errc::interrupted && failure.is_ok()) failure = t->status;
      return failure;
    };

    Status peer;
    bool interrupted = false, marked = false;
    CpuTimes cpu0;
    uint64_t cpu0_tick = 0;
    double next_report = s_.report_interval;
    std::vector<HistogramSnapshot> last_snap(ts.size());
    std::vector<uint64_t> last_ops(ts.size(), 0), last_bytes(ts.size(), 0);
    // Asked only when a worker is stuck: reads the status of workers that returned, nothing else.
    auto why_stopped = [&] {
      if (!peer.is_ok()) return peer;
      for (size_t i = 0; i < ts.size(); ++i)
        if (workers.returned(i) && !ts[i]->status && ts[i]->status.code() != Errc::interrupted) return ts[i]->status;
      return interrupted ? Status(Errc::interrupted, "interrupted") : Status{};
    };
    while (true) {
      bool all_done = true;
      for (auto& t : ts) all_done = all_done && t->done.load();
      uint64_t started = pc.measure_tick.load();
      if (started && !marked) {  // before leaving too: a short phase may end within one sleep
        marked = true;
        cpu0 = cpu_at_start;  // taken by the thread that opened the measured window
        cpu0_tick = started;
        if (peer.is_ok()) (void)ch_.send_json({{"type", "mark"}});
      }
      // Once told to stop, workers that do not finish are stuck in the transport: stop waiting for
      // `done` and let the bounded join below deal with them.
      if (all_done || abort.load()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      if (interrupt_.load() && !interrupted) {
        interrupted = true;
        abort.store(true);
      }
      if (peer.is_ok() && ch_.readable()) {
        auto m = ch_.recv_json(5, nullptr);
        peer = m ? from_peer(*m, "result") : m.status();
        abort.store(true);
      }
      uint64_t mt = pc.measure_tick.load();
      if (marked && s_.report_interval > 0) {
        double at = clock_.to_s(clock_.now() - mt);
        if (at >= next_report) {
          progress.clear();
          print_interval(ts, at, s_.report_interval, last_snap, last_ops, last_bytes);
          next_report += s_.report_interval;
        }
      }
    }
    const bool joined = !bidir || abort.load();  // a failed or interrupted --bidir phase stops here too
    if (joined) workers.join(why_stopped);
    CpuTimes cpu1 = CpuTimes::now();
    uint64_t end_tick = clock_.now();
    if (!peer.is_ok()) return peer;
    if (joined) {
      Status failure = first_failure();
      if (!failure.is_ok()) {
        // A server that failed says why before it closes: its reason beats our view of the symptom
        // (say, the connection closing under a worker).
        auto m = ch_.recv_json(0.5, nullptr);
        if (m && m->value("type", "") == "error") return from_peer(*m, "result");
        return failure;
      }
    }

    json sent = json::array();  // per endpoint, warm-up included: what the server must have seen
    for (auto& t : ts) {
      if (t->lane_total.size() != t->eps.size()) t->lane_total.assign(t->eps.size(), 0);
      for (uint64_t n : t->lane_total) sent.push_back(n);
    }
    st = ch_.send_json({{"type", "end"}, {"sent", sent}, {"coverage", cover && !interrupted}});
    if (!st) return st;
    if (cover && !interrupted) {
      std::vector<uint8_t> merged(ts[0]->coverage.size(), kCoverNone);
      for (auto& t : ts)
        for (size_t g = 0; g < merged.size(); ++g) merged[g] = std::max(merged[g], t->coverage[g]);
      st = ch_.send_bytes(merged);
      if (!st) return st;
    }
    auto res = expect(ch_, "result", s_.timeout_s + 30, nullptr);
    if (!res) return res.status();
    if (bidir) {
      workers.join(why_stopped);
      Status failure = first_failure();
      if (!failure.is_ok()) return failure;
    }

    result = collect(ph, ts, clock_);
    if (res->contains("reverse")) {
      const auto& r = res->at("reverse");
      result.has_reverse = true;
      result.reverse.iterations = r.value("iterations", uint64_t(0));
      result.reverse.gbps = r.value("gbps", 0.0);
      result.reverse.mops = r.value("mops", 0.0);
      result.reverse.seconds = r.value("duration_s", 0.0);
    }
    result.partial = interrupted;
    if (s_.cpu_util && cpu0_tick) {
      // The window ends when the last thread finished, not when this thread noticed it.
      uint64_t last = 0;
      for (auto& t : ts) last = std::max(last, t->t_end);
      double window = clock_.to_s((last ? last : end_tick) - cpu0_tick);
      result.has_cpu = true;
      result.client_cpu.times = cpu1 - cpu0;
      result.client_cpu.util = window > 0 ? result.client_cpu.times.total_s / window : 0;
      auto c = res->value("cpu", json::object());
      result.server_cpu.times = {c.value("user_s", 0.0), c.value("sys_s", 0.0), c.value("total_s", 0.0)};
      result.server_cpu.util = c.value("util", 0.0);
    }
    return {};
  }

  void print_interval(const std::vector<std::unique_ptr<ThreadState>>& ts, double at, double dt,
                      std::vector<HistogramSnapshot>& last, std::vector<uint64_t>& lops, std::vector<uint64_t>& lbytes) {
    HistogramSnapshot total_h;
    double total_ops = 0, total_bytes = 0;
    for (size_t i = 0; i < ts.size(); ++i) {
      auto snap = ts[i]->hist.snapshot();
      auto d = snap.since(last[i]);
      uint64_t ops = ts[i]->ops.load(), bytes = ts[i]->bytes.load();
      double dops = double(ops - std::min(ops, lops[i])), dbytes = double(bytes - std::min(bytes, lbytes[i]));
      if (ts.size() > 1)
        fmt::print("{}\n", report::interval_line(at, {int(i), dops / dt, dbytes * 8 / dt / 1e9, d.percentile(0.5) / 1e3}));
      total_h.merge(d);
      total_ops += dops;
      total_bytes += dbytes;
      last[i] = std::move(snap);
      lops[i] = ops;
      lbytes[i] = bytes;
    }
    fmt::print("{}\n", report::interval_line(at, {-1, total_ops / dt, total_bytes * 8 / dt / 1e9, total_h.percentile(0.5) / 1e3}));
    std::fflush(stdout);
  }

  const RunSpec& s_;
  const ClientOptions& o_;
  const std::atomic<bool>& interrupt_;
  Clock clock_;
  bootstrap::Channel ch_;
  std::unique_ptr<Session> sess_;
  json server_info_;
};

}  // namespace

Status run_client(const RunSpec& spec, const ClientOptions& opt, const std::atomic<bool>& interrupt) {
  // Closing a transport is quick unless a provider blocks on a peer that died holding a lock.
  constexpr double kCloseLimitS = 15;
  std::optional<ExitWatchdog> closing;  // outlives `run`, so it watches its transport close
  ClientRun run(spec, opt, interrupt);
  Status st = run.run();
  closing.emplace(kCloseLimitS,
                  fmt::format("rdmabench: error: {}closing the transport took over {:.0f} s; exiting",
                              st.is_ok() ? "" : st.message() + "; ", kCloseLimitS),
                  st.code() == Errc::interrupted ? 130 : 1);
  return st;
}

}  // namespace rb::bench
