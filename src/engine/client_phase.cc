#include "engine/client_phase.hh"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "engine/addressing.hh"
#include "engine/pattern.hh"
#include "engine/phase_threads.hh"
#include "engine/collect.hh"
#include "engine/worker.hh"
#include "engine/worker_threads.hh"

namespace rb::engine {
namespace {

class ClientPhase {
 public:
  ClientPhase(const ClientPhaseEnv& env, const Phase& ph, size_t index)
      : e_(env), s_(env.spec), ph_(ph), index_(index), bidir_(s_.bidir && ph.mode == Mode::bw),
        cover_(s_.validate && (ph.op == Op::write || ph.op == Op::write_imm) && ph.mode == Mode::bw),
        start_(s_.threads, &pc_.measure_tick, &env.clock, &cpu_at_start_),
        workers_(abort_, release_, worker_grace_s(s_.timeout_s, s_.eps_per_thread())) {}

  Status run(PhaseResult& result) {
    prepare_threads();
    Status st = start_on_server();
    if (!st) return st;
    for (auto& t : ts_) workers_.spawn(run_client_thread, std::ref(*t), std::ref(pc_), std::ref(start_));
    watch_workers();
    st = end_workers();
    if (!st) return st;
    st = send_end();
    if (!st) return st;
    auto outcome = e_.server.expect<protocol::PhaseOutcome>(nullptr);  // bounded by --timeout, even after Ctrl-C
    if (!outcome) return outcome.status();
    if (bidir_) {  // our threads kept the endpoints progressing for the server's stream until now
      workers_.join([&] { return why_stopped(); });
      st = first_failure(ts_, [](size_t) { return true; });
      if (!st) return st;
      if (s_.validate && ph_.op == Op::write && !interrupted_) st = check_reverse_writes();
      if (!st) return st;
    }
    result = figures(outcome.value());
    return {};
  }

 private:
  void prepare_threads() {
    pc_.spec = &s_;
    pc_.phase = ph_;
    pc_.clock = &e_.clock;
    pc_.seed = phase_seed(s_.seed, index_);
    pc_.abort = &abort_;
    pc_.inject_max = s_.inject ? e_.session.domain().caps().inject : 0;
    pc_.yield_to_engine = e_.session.domain().caps().engine_thread;
    pc_.target_progress = e_.session.domain().caps().target_progress;
    if (bidir_) pc_.release = &release_;
    const uint64_t per_thread = s_.local_bytes_per_thread();
    ts_ = thread_states(e_.session, s_.threads, session_mrs(e_.session), [&](int t) { return uint64_t(t) * per_thread; });
    auto alive = [&] { (void)e_.server.keep_alive(); };  // the server waits for our PhaseStart meanwhile
    for (auto& t : ts_) {
      uint8_t* area = t->area();
      if (cover_) t->coverage.assign(s_.region_bytes() / kAlign + 1, kCoverNone);
      if (s_.wants_mirror() && (ph_.op == Op::write || ph_.op == Op::write_imm))
        in_pieces(s_.region_bytes(), [&](uint64_t off, uint64_t n) { fill_pattern(area + off, n, pc_.seed, off); }, alive);
      else
        in_pieces(per_thread, [&](uint64_t off, uint64_t n) { std::memset(area + off, 0, n); }, alive);
    }
    if (bidir_ && s_.validate) prepare_landing();
  }

  uint8_t* landing(int t) const { return static_cast<uint8_t*>(e_.session.memory->data()) + s_.reverse_landing(t); }

  // --bidir --validate: the server's reads find the pattern in our landing slots; its writes
  // start from zero there.
  void prepare_landing() {
    for (int t = 0; t < s_.threads; ++t) {
      if (ph_.op == Op::read) fill_pattern(landing(t), ph_.size, pc_.seed, s_.reverse_pattern_offset(t));
      else std::memset(landing(t), 0, ph_.size);
    }
  }

  // Every write of the server's stream carried the same bytes to the same slot: they must be there.
  Status check_reverse_writes() {
    for (int t = 0; t < s_.threads; ++t) {
      const uint8_t* p = landing(t);
      uint64_t base = s_.reverse_pattern_offset(t);
      size_t bad = check_pattern(p, ph_.size, pc_.seed, base);
      if (bad != ph_.size)
        return {Errc::validation, fmt::format("the server's reverse write of {} B into thread {}'s buffer: byte {} is "
                                              "{:#04x}, expected {:#04x}", ph_.size, t, bad, p[bad],
                                              pattern_byte(pc_.seed, base + bad))};
    }
    return {};
  }

  Status start_on_server() {
    Status st = e_.server.send(protocol::PhaseStart{index_, ph_, pc_.seed});
    if (!st) return st;
    auto go = e_.server.expect<protocol::Go>(&e_.interrupt);
    return go ? Status{} : go.status();
  }

  // Until every worker is done, or the run stops: marks the measured window for the server, keeps
  // it told we are alive, watches for its errors and Ctrl-C, and prints live lines.
  void watch_workers() {
    double next_report = s_.report_interval;
    while (true) {
      bool all_done = std::all_of(ts_.begin(), ts_.end(), [](auto& t) { return t->done.load(); });
      mark_window_if_open();  // before leaving too: a short phase may end within one sleep
      // Once told to stop, workers that do not finish are stuck in the transport: stop waiting for
      // `done` and let the bounded join deal with them.
      if (all_done || abort_.load()) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      if (e_.interrupt.load() && !interrupted_) {
        interrupted_ = true;
        abort_.store(true);
      }
      watch_server();
      if (marked_ && s_.report_interval > 0) {
        double at = e_.clock.to_s(e_.clock.now() - pc_.measure_tick.load());
        if (at >= next_report) {
          print_interval(at);
          next_report += s_.report_interval;
        }
      }
    }
  }

  void mark_window_if_open() {
    uint64_t started = pc_.measure_tick.load();
    if (!started || marked_) return;
    marked_ = true;
    cpu0_ = cpu_at_start_;  // taken by the thread that opened the measured window
    cpu0_tick_ = started;
    if (peer_.is_ok()) peer_ = e_.server.send(protocol::Mark{});
  }

  // The server speaks during a phase only to say it failed; silence past --timeout is a failure too.
  void watch_server() {
    if (!peer_.is_ok()) return;
    Status st = e_.server.keep_alive();
    if (st) {
      auto m = e_.server.poll();
      if (!m) st = m.status();
      else if (m.value()) st = e_.server.unexpected(*m.value(), protocol::PhaseOutcome::kType);
    }
    if (!st) {
      peer_ = st;
      abort_.store(true);
    }
  }

  // Asked only when a worker is stuck: reads the status of workers that returned, nothing else.
  Status why_stopped() {
    if (!peer_.is_ok()) return peer_;
    Status w = first_failure(ts_, [&](size_t i) { return workers_.returned(i); });
    if (!w.is_ok()) return w;
    return interrupted_ ? Status(Errc::interrupted, "interrupted") : Status{};
  }

  Status end_workers() {
    const bool join_now = !bidir_ || abort_.load();  // a failed or interrupted --bidir phase stops here too
    if (join_now) workers_.join([&] { return why_stopped(); });
    cpu1_ = CpuTimes::now();
    end_tick_ = e_.clock.now();
    if (!peer_.is_ok()) return peer_;
    if (!join_now) return {};
    Status failure = first_failure(ts_, [](size_t) { return true; });
    if (failure.is_ok()) return {};
    // A server that failed says why before it closes: its reason beats our view of the symptom
    // (say, the connection closing under a worker).
    for (auto wait_until = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
         std::chrono::steady_clock::now() < wait_until;) {
      auto m = e_.server.poll();
      if (!m) break;
      if (m.value() && std::holds_alternative<protocol::Error>(*m.value()))
        return e_.server.unexpected(*m.value(), protocol::PhaseOutcome::kType);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return failure;
  }

  Status send_end() {
    protocol::End end;
    for (auto& t : ts_) {  // per endpoint, warm-up included: what the server must have seen
      if (t->lane_total.size() != t->eps.size()) t->lane_total.assign(t->eps.size(), 0);
      end.sent.insert(end.sent.end(), t->lane_total.begin(), t->lane_total.end());
    }
    end.coverage = cover_ && !interrupted_;
    Status st = e_.server.send(end);
    if (!st || !end.coverage) return st;
    std::vector<uint8_t> merged(ts_[0]->coverage.size(), kCoverNone);
    for (auto& t : ts_)
      for (size_t g = 0; g < merged.size(); ++g) merged[g] = std::max(merged[g], t->coverage[g]);
    return e_.server.send_bytes(merged);
  }

  PhaseResult figures(const protocol::PhaseOutcome& outcome) {
    PhaseResult result = collect(ph_, ts_, e_.clock);
    if (outcome.reverse) {
      result.has_reverse = true;
      result.reverse = {0, outcome.reverse->iterations, outcome.reverse->duration_s, outcome.reverse->gbps,
                        outcome.reverse->mops};
    }
    result.partial = interrupted_;
    if (s_.cpu_util && cpu0_tick_) {
      // The window ends when the last thread finished, not when this thread noticed it.
      uint64_t last = 0;
      for (auto& t : ts_) last = std::max(last, t->t_end);
      double window = e_.clock.to_s((last ? last : end_tick_) - cpu0_tick_);
      result.has_cpu = true;
      result.client_cpu.times = cpu1_ - cpu0_;
      result.client_cpu.util = window > 0 ? result.client_cpu.times.total_s / window : 0;
      result.server_cpu.times = {outcome.cpu.user_s, outcome.cpu.sys_s, outcome.cpu.total_s};
      result.server_cpu.util = outcome.cpu.util;
    }
    return result;
  }

  void print_interval(double at) {
    const double dt = s_.report_interval;
    if (last_snap_.empty()) {
      last_snap_.resize(ts_.size());
      last_ops_.assign(ts_.size(), 0);
      last_bytes_.assign(ts_.size(), 0);
    }
    std::vector<IntervalSample> samples;
    HistogramSnapshot total_h;
    double total_ops = 0, total_bytes = 0;
    for (size_t i = 0; i < ts_.size(); ++i) {
      auto snap = ts_[i]->hist.snapshot();
      auto d = snap.since(last_snap_[i]);
      uint64_t ops = ts_[i]->ops.load(), bytes = ts_[i]->bytes.load();
      double dops = double(ops - std::min(ops, last_ops_[i])), dbytes = double(bytes - std::min(bytes, last_bytes_[i]));
      if (ts_.size() > 1) samples.push_back({int(i), dops / dt, dbytes * 8 / dt / 1e9, d.percentile(0.5) / 1e3});
      total_h.merge(d);
      total_ops += dops;
      total_bytes += dbytes;
      last_snap_[i] = std::move(snap);
      last_ops_[i] = ops;
      last_bytes_[i] = bytes;
    }
    samples.push_back({-1, total_ops / dt, total_bytes * 8 / dt / 1e9, total_h.percentile(0.5) / 1e3});
    e_.sink.interval(at, samples);
  }

  const ClientPhaseEnv& e_;
  const RunSpec& s_;
  const Phase ph_;
  const size_t index_;
  const bool bidir_, cover_;
  std::atomic<bool> abort_{false}, release_{false};
  PhaseContext pc_;
  std::vector<std::unique_ptr<ThreadState>> ts_;
  Status peer_;  // the server's failure, or the connection's
  bool interrupted_ = false, marked_ = false;
  CpuTimes cpu_at_start_, cpu0_, cpu1_;
  uint64_t cpu0_tick_ = 0, end_tick_ = 0;
  std::vector<HistogramSnapshot> last_snap_;
  std::vector<uint64_t> last_ops_, last_bytes_;
  StartBarrier start_;
  WorkerThreads workers_;  // last: destroyed (and joined) before everything the workers use
};

}  // namespace

Status run_client_phase(const ClientPhaseEnv& env, const Phase& phase, size_t index, PhaseResult& result) {
  ClientPhase p(env, phase, index);
  return p.run(result);
}

}  // namespace rb::engine
