#include "engine/serve_phase.hh"

#include <poll.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "engine/pattern.hh"
#include "engine/phase_threads.hh"
#include "engine/model.hh"
#include "engine/collect.hh"
#include "engine/worker.hh"
#include "engine/worker_threads.hh"
#include "core/cpu_usage.hh"

namespace rb::engine {
namespace {

using SteadyClock = std::chrono::steady_clock;

// Granules [from, to) of the region, as check_region describes.
Status check_granules(const uint8_t* region, uint64_t from, uint64_t to, const std::vector<uint8_t>& cover, uint64_t seed,
                      uint64_t size) {
  for (uint64_t off = from; off < to; off += kAlign) {
    uint64_t n = std::min<uint64_t>(kAlign, to - off);
    uint8_t c = off / kAlign < cover.size() ? cover[off / kAlign] : kCoverNone;
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

class ServePhase {
 public:
  ServePhase(const ServePhaseEnv& env, const protocol::PhaseStart& start)
      : e_(env), s_(env.spec), ph_(start.phase), seed_(start.seed), caps_(env.session.domain().caps()),
        bidir_(s_.bidir && ph_.mode == Mode::bw && (ph_.op == Op::write || ph_.op == Op::read)), start_(s_.threads, &pc_.measure_tick, &env.clock),
        workers_(abort_, release_, worker_grace_s(s_.timeout_s, s_.eps_per_thread())) {}

  Status run() {
    Status st = prepare();
    if (!st) return reject(st);
    spawn_workers();
    st = e_.client.send(protocol::Go{});
    if (!st) return stop_workers(st), st;
    cpu0_ = CpuTimes::now();
    tick0_ = SteadyClock::now();
    auto end = wait_for_end();
    if (!end) return end.status();
    st = receive_coverage(end.value());
    if (!st) return stop_workers(st), st;
    Status lost = wait_for_sends(end->sent);
    if (lost.is_ok() && s_.validate && is_atomic(ph_.op)) lost = check_counters(end->sent);
    std::optional<protocol::StreamFigures> reverse;
    if (bidir_) reverse = finish_reverse_stream(lost);
    CpuTimes cpu1 = CpuTimes::now();
    double window = std::chrono::duration<double>(SteadyClock::now() - tick0_).count();
    stop_workers();
    for (auto& t : ts_)  // a worker's own error explains a shortfall better than the count does
      if (!t->status) {
        lost = t->status;
        break;
      }
    if (lost.is_ok() && !coverage_.empty()) lost = check_region(region(), s_.region_bytes(), coverage_, seed_, ph_.size, alive());
    if (!lost.is_ok()) return reject(lost);
    return e_.client.send(outcome(cpu1 - cpu0_, window, reverse));
  }

 private:
  uint8_t* region() const { return e_.session.memory->data(); }
  // For long steps: the client waits on us meanwhile.
  std::function<void()> alive() {
    return [this] { (void)e_.client.keep_alive(); };
  }

  Status reject(const Status& s) {
    stop_workers(s);
    (void)e_.client.send(protocol::error_of(s));
    return s;
  }
  void stop_workers(const Status& why = Status(Errc::io, "the phase ended early")) {
    workers_.stop_and_join([&] { return why; });
  }

  Status prepare() {
    pc_.spec = &s_;
    pc_.phase = ph_;
    pc_.clock = &e_.clock;
    pc_.seed = seed_;
    pc_.abort = &abort_;
    pc_.inject_max = s_.inject ? caps_.inject : 0;
    pc_.target_progress = caps_.target_progress;
    pc_.yield_to_engine = caps_.engine_thread;
    const uint64_t rlen = s_.region_bytes();
    uint8_t* r = region();
    if (ph_.op == Op::read && s_.validate)
      in_pieces(rlen, [&](uint64_t off, uint64_t n) { fill_pattern(r + off, n, seed_, off); }, alive());
    // Validation, echo detection and the atomics' counters start from zero.
    if (ph_.op == Op::write || ph_.op == Op::write_imm || is_atomic(ph_.op))
      in_pieces(rlen, [&](uint64_t off, uint64_t n) { std::memset(r + off, 0, n); }, alive());
    slots_ = ph_.mode == Mode::lat ? 2 : rx_slots_for(s_, ph_.size, caps_);  // per endpoint
    if (is_message(ph_.op)) return prepare_receive_ring();
    ts_ = thread_states(e_.session, s_.threads, session_mrs(e_.session), [](int) { return uint64_t(0); });
    if (bidir_) return prepare_reverse_stream();
    return {};
  }

  // Send phases get a receive ring of their own, registered in every domain for this phase only.
  Status prepare_receive_ring() {
    const uint64_t per_thread = uint64_t(s_.eps_per_thread()) * slots_ * align_up(ph_.size);
    Status st = allocate_ring(uint64_t(s_.threads) * per_thread);
    if (!st) return st;
    ts_ = thread_states(e_.session, s_.threads, ring_in_domain_, [&](int t) { return uint64_t(t) * per_thread; });
    return {};
  }

  // Memory for this phase only (a receive ring, or a validated reverse stream's buffers).
  Status allocate_ring(uint64_t bytes) {
    auto mem = e_.session.domain().allocate(bytes);
    if (!mem) return mem.status();
    ring_ = std::move(mem.value());
    for (auto& d : e_.session.domains) {
      auto r = d->register_memory(ring_->data(), ring_->size());
      if (!r) return r.status();
      ring_mrs_.push_back(std::move(r.value()));
      ring_in_domain_.push_back(ring_mrs_.back().get());
    }
    return {};
  }

  // --bidir: instead of waiting passively, each thread streams the same op back at the client,
  // into its client thread's landing slot (RunSpec::reverse_landing). Unvalidated, it streams
  // from its slice of our region; validated, from memory of its own, so that neither stream
  // touches the other's bytes and each direction is checked on its own region.
  Status prepare_reverse_stream() {
    const uint64_t slice = s_.region_bytes() / uint64_t(s_.threads) / kAlign * kAlign;
    reverse_ = s_;
    reverse_.random_space = 0;
    reverse_.fixed = true;
    reverse_.thread_gap = s_.local_bytes_per_thread();  // the client's per-thread buffers
    reverse_.local_mr = s_.validate ? 0 : slice;
    reverse_.cpus = e_.cpus;
    pc_.spec = &reverse_;
    pc_.release = &release_;
    pc_.remote_base = align_up(s_.local_area());
    if (!s_.validate) {
      for (auto& t : ts_) t->area_off = uint64_t(t->index) * slice;
      return {};
    }
    const uint64_t per_thread = reverse_.local_bytes_per_thread();
    Status st = allocate_ring(uint64_t(s_.threads) * per_thread);
    if (!st) return st;
    ts_ = thread_states(e_.session, s_.threads, ring_in_domain_, [&](int t) { return uint64_t(t) * per_thread; });
    for (auto& t : ts_) {
      uint8_t* area = t->area();
      // As a validating client does: a write's source mirrors the target's pattern; reads are checked as they land.
      if (ph_.op == Op::write) {
        in_pieces(reverse_.region_bytes(), [&](uint64_t off, uint64_t n) { fill_pattern(area + off, n, seed_, off); }, alive());
        t->coverage.assign(reverse_.region_bytes() / kAlign + 1, kCoverNone);
      }
    }
    return {};
  }

  void spawn_workers() {
    const uint64_t per_thread = s_.local_bytes_per_thread(), gap = s_.gap();
    for (auto& t : ts_) {
      if (bidir_) {
        workers_.spawn(run_client_thread, std::ref(*t), std::ref(pc_), std::ref(start_));
        continue;
      }
      int cpu = e_.cpus.empty() ? -1 : e_.cpus[size_t(t->index) % e_.cpus.size()];
      uint64_t echo = uint64_t(t->index) * per_thread + align_up(s_.local_area());
      workers_.spawn(run_server_thread, std::ref(*t), std::ref(pc_), uint64_t(t->index) * gap, echo, slots_, cpu);
    }
  }

  // Until the client's End: watches our workers, the stop flag, and the client's liveness.
  Result<protocol::End> wait_for_end() {
    while (true) {
      Status failure = worker_failure();
      if (!failure.is_ok()) return reject(failure);
      if (e_.stop.load()) return reject({Errc::interrupted, "server stopped"});
      auto m = e_.client.poll();
      if (!m) return stop_workers(m.status()), m.status();
      if (!m.value()) {
        Status quiet = e_.client.check_silence();
        if (!quiet) return reject(quiet);
        pollfd_wait();
        continue;
      }
      if (std::holds_alternative<protocol::Mark>(*m.value())) {
        cpu0_ = CpuTimes::now();
        tick0_ = SteadyClock::now();
        continue;
      }
      if (auto* end = std::get_if<protocol::End>(&m.value().value())) return std::move(*end);
      Status st = e_.client.unexpected(*m.value(), protocol::End::kType);
      return stop_workers(st), st;
    }
  }

  void pollfd_wait() {
    pollfd pf{e_.client.fd(), POLLIN, 0};
    ::poll(&pf, 1, 50);
  }

  Status worker_failure() {
    if (!bidir_) {
      for (auto& t : ts_)
        if (t->exited.load() && !t->status) return t->status;
      return {};
    }
    if (!abort_.load()) return {};
    stop_workers();  // joined, so their statuses can be read
    Status w = first_failure(ts_, [](size_t) { return true; });
    return w.is_ok() ? Status(Errc::io, "the server's reverse stream stopped") : w;
  }

  Status receive_coverage(const protocol::End& end) {
    if (!end.coverage) return {};
    auto b = e_.client.receive_bytes(s_.region_bytes() / kAlign + 1, &e_.stop);
    if (!b) return b.status();
    coverage_ = std::move(b.value());
    return {};
  }

  // Every message (and every write with immediate) the client sent must arrive before the phase
  // ends: none may be lost.
  Status wait_for_sends(const std::vector<uint64_t>& sent) {
    if (!is_message(ph_.op) && ph_.op != Op::write_imm) return {};
    const size_t ept = size_t(s_.eps_per_thread());
    auto deadline = SteadyClock::now() + std::chrono::duration<double>(s_.timeout_s);
    for (size_t t = 0; t < ts_.size(); ++t) {
      uint64_t want = 0;
      for (size_t e = t * ept; e < (t + 1) * ept && e < sent.size(); ++e) want += sent[e];
      while (ts_[t]->ops.load() < want && SteadyClock::now() < deadline && !ts_[t]->exited.load()) {
        (void)e_.client.keep_alive();
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      if (ts_[t]->ops.load() < want)
        return {Errc::validation, fmt::format("thread {}: {} messages sent, {} received within {:g} s", t, want,
                                              ts_[t]->ops.load(), s_.timeout_s)};
    }
    return {};
  }

  // Each endpoint's counter holds exactly its atomics: every fadd added one, and every cswap found
  // the value the one before it left and moved it one on.
  Status check_counters(const std::vector<uint64_t>& sent) {
    const int ept = s_.eps_per_thread();
    for (int t = 0; t < s_.threads; ++t)
      for (int e = 0; e < ept; ++e) {
        size_t global = size_t(t * ept + e);
        uint64_t want = global < sent.size() ? sent[global] : 0, have;
        std::memcpy(&have, region() + counter_offset(s_, t, e), sizeof have);
        if (have != want)
          return {Errc::validation, fmt::format("endpoint {}: the counter holds {} after {} {} ops", global, have, want,
                                                transport::op_name(ph_.op))};
      }
    return {};
  }

  // Our stream runs the same budget as the client's: let it finish, then report it.
  std::optional<protocol::StreamFigures> finish_reverse_stream(Status& lost) {
    auto deadline = SteadyClock::now() + std::chrono::duration<double>(s_.timeout_s + s_.duration_s);
    auto all_done = [&] { return std::all_of(ts_.begin(), ts_.end(), [](auto& t) { return t->done.load(); }); };
    while (!all_done() && !abort_.load() && SteadyClock::now() < deadline) {
      (void)e_.client.keep_alive();
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (!all_done() && lost.is_ok()) lost = Status(Errc::timeout, "the server's reverse stream did not finish in time");
    stop_workers();  // joined before their figures are read
    PhaseResult rr = collect(ph_, ts_, e_.clock);
    return protocol::StreamFigures{rr.iterations, rr.duration_s, rr.gbps, rr.mops};
  }

  protocol::PhaseOutcome outcome(const CpuTimes& used, double window, const std::optional<protocol::StreamFigures>& reverse) {
    protocol::PhaseOutcome o;
    for (auto& t : ts_) o.received.push_back(t->ops.load());
    o.cpu = {used.user_s, used.sys_s, used.total_s, window > 0 ? used.total_s / window : 0.0};
    o.reverse = reverse;
    return o;
  }

  const ServePhaseEnv& e_;
  const RunSpec& s_;
  const Phase ph_;
  const uint64_t seed_;
  const transport::Caps caps_;
  const bool bidir_;
  RunSpec reverse_;
  uint32_t slots_ = 2;
  std::unique_ptr<transport::HostMemory> ring_;
  std::vector<std::unique_ptr<transport::MemoryRegion>> ring_mrs_;
  std::vector<const transport::MemoryRegion*> ring_in_domain_;
  std::vector<uint8_t> coverage_;
  std::atomic<bool> abort_{false}, release_{false};
  PhaseContext pc_;
  std::vector<std::unique_ptr<ThreadState>> ts_;
  CpuTimes cpu0_;
  SteadyClock::time_point tick0_{};
  StartBarrier start_;
  WorkerThreads workers_;  // last: destroyed (and joined) before everything the workers use
};

}  // namespace

Status serve_phase(const ServePhaseEnv& env, const protocol::PhaseStart& start) {
  ServePhase p(env, start);
  return p.run();
}

Status check_region(const uint8_t* region, uint64_t len, const std::vector<uint8_t>& cover, uint64_t seed, uint64_t size,
                    const std::function<void()>& between) {
  Status found;
  in_pieces(len, [&](uint64_t from, uint64_t n) {
    if (found.is_ok()) found = check_granules(region, from, from + n, cover, seed, size);
  }, between);
  return found;
}

}  // namespace rb::engine
