#include "cluster/coordinator.hh"

#include <poll.h>

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "core/bytes.hh"

namespace rb::cluster {
namespace {

using Clock = std::chrono::steady_clock;

struct LivePair {
  Pair pair;
  PairControl ctl;
  bool driver_done = false, server_done = false;
  std::string error;
  bool done() const { return !error.empty() || (driver_done && server_done); }
};

class RoundRunner {
 public:
  // `spec` asks each pair for one measurement; the runner is told which of `passes` it is in.
  RoundRunner(Hosts& hosts, const model::RunSpec& spec, int passes, Outcome& out, const RecordWriter& write,
              const std::atomic<bool>& stop)
      : hosts_(hosts), spec_(spec), passes_(passes), out_(out), write_(write), stop_(stop) {}

  // Runs one round of pass `pass` to its end; false when a pair failed or the run was stopped.
  bool run(int pass, int round, const Round& pairs, uint64_t& session, Status& ended) {
    pass_ = pass;
    std::vector<LivePair> live;
    for (const auto& p : pairs) {
      auto ctl = hosts_.start(p, session++, spec_);
      LivePair lp{p, {}, false, true, ""};
      if (!ctl) lp.error = ctl.status().message();
      else {
        lp.ctl = std::move(ctl.value());
        lp.server_done = !lp.ctl.server.has_value();
      }
      live.push_back(std::move(lp));
    }
    auto last_alive = Clock::now();
    while (!all_done(live)) {
      if (stop_.load()) {
        ended = {Errc::interrupted, fmt::format("interrupted in {}: the records above are what was gathered", where(round))};
        return false;
      }
      for (auto& lp : live) step(round, lp, ended);
      if (!ended) return false;
      if (Clock::now() - last_alive > std::chrono::duration<double>(protocol::alive_interval_s(spec_.timeout_s))) {
        hosts_.keep_alive();
        last_alive = Clock::now();
      }
      wait(live);
    }
    bool ok = true;
    for (auto& lp : live)
      if (!lp.error.empty()) {
        out_.failed.push_back({round, lp.pair.src, lp.pair.dst, lp.error});
        ok = false;
      }
    if (!ok) name_the_failed(round, live, ended);
    return ok;
  }

 private:
  std::string where(int round) const {
    return passes_ > 1 ? fmt::format("pass {}, round {}", pass_ + 1, round + 1) : fmt::format("round {}", round + 1);
  }

  static bool all_done(const std::vector<LivePair>& live) {
    for (const auto& lp : live)
      if (!lp.done()) return false;
    return true;
  }

  void step(int round, LivePair& lp, Status& ended) {
    if (lp.done()) return;
    const std::string& src = out_.names[size_t(lp.pair.src)];
    const std::string& dst = out_.names[size_t(lp.pair.dst)];
    if (!lp.driver_done) {
      auto m = lp.ctl.driver.poll();
      if (!m) return void(lp.error = fmt::format("{} (source): {}", src, m.status().message()));
      if (m->has_value()) {
        if (auto* rec = std::get_if<protocol::PairRecord>(&**m)) {
          Status st = take_record(round, lp.pair, *rec);
          if (!st) ended = st;
        } else if (std::holds_alternative<protocol::Bye>(**m)) {
          lp.driver_done = true;
        } else if (auto* e = std::get_if<protocol::Error>(&**m)) {
          lp.error = fmt::format("measured from {}: {}", src, e->message);
        } else {
          lp.error = lp.ctl.driver.unexpected(**m, protocol::PairRecord::kType).message();
        }
      } else if (Status s = lp.ctl.driver.check_silence(); !s) {
        lp.error = fmt::format("{} (source) went silent: {}", src, s.message());
      }
    }
    if (lp.ctl.server && !lp.server_done && lp.error.empty()) {
      auto m = lp.ctl.server->poll();
      if (!m) return void(lp.error = fmt::format("{} (destination): {}", dst, m.status().message()));
      if (m->has_value()) {
        if (std::holds_alternative<protocol::Bye>(**m)) lp.server_done = true;
        else if (auto* e = std::get_if<protocol::Error>(&**m)) lp.error = fmt::format("served at {}: {}", dst, e->message);
      } else if (Status s = lp.ctl.server->check_silence(); !s) {
        lp.error = fmt::format("{} (destination) went silent: {}", dst, s.message());
      }
    }
  }

  Status take_record(int round, const Pair& p, const protocol::PairRecord& m) {
    auto r = record_of(m.line, m.line_gbps);
    if (!r) return r.status();
    r->round = round;
    r->src = p.src;
    r->dst = p.dst;
    r->repeat = pass_;
    r->line["repeat"] = pass_;
    r->line["repeats"] = passes_;
    r->line["cluster"] = {{"pattern", pattern_text(out_.pattern)}, {"round", round},
                          {"src_rank", p.src}, {"dst_rank", p.dst},
                          {"src_host", out_.names[size_t(p.src)]}, {"dst_host", out_.names[size_t(p.dst)]},
                          {"hosts", out_.names.size()}, {"line_gbps", m.line_gbps},
                          {"bootstrap", out_.reached_by}};
    std::string pass = passes_ > 1 ? fmt::format("pass {} ", pass_ + 1) : "";
    fmt::print("{}round {:>3}  {} -> {}  {} {} {:>6}  {:>9.3f} Gb/s  {:>9.4f} Mop/s  p50 {:>9.2f} us{}\n", pass, round + 1,
               out_.names[size_t(p.src)], out_.names[size_t(p.dst)], r->op, r->mode, format_bytes(r->size), r->gbps,
               r->mops, r->p50_us, r->partial ? "  (partial)" : "");
    std::fflush(stdout);
    Status st = write_(*r);
    out_.records.push_back(std::move(r.value()));
    return st;
  }

  void wait(const std::vector<LivePair>& live) {
    std::vector<pollfd> fds;
    for (const auto& lp : live) {
      if (lp.done()) continue;
      if (lp.ctl.driver.fd() >= 0) fds.push_back({lp.ctl.driver.fd(), POLLIN, 0});
      if (lp.ctl.server && lp.ctl.server->fd() >= 0) fds.push_back({lp.ctl.server->fd(), POLLIN, 0});
    }
    ::poll(fds.data(), fds.size(), 50);
  }

  void name_the_failed(int round, const std::vector<LivePair>& live, Status& ended) {
    std::vector<int> involved;
    std::string first;
    for (const auto& lp : live)
      if (!lp.error.empty()) {
        involved.push_back(lp.pair.src);
        involved.push_back(lp.pair.dst);
        if (first.empty())
          first = fmt::format("{} -> {}: {}", out_.names[size_t(lp.pair.src)], out_.names[size_t(lp.pair.dst)], lp.error);
      }
    std::string gone = hosts_.unreachable(involved, stop_);
    ended = {Errc::peer_gone, fmt::format("{}: {}{}{}", where(round), gone, gone.empty() ? "" : "; ", first)};
  }

  Hosts& hosts_;
  const model::RunSpec& spec_;
  int passes_ = 1, pass_ = 0;
  Outcome& out_;
  const RecordWriter& write_;
  const std::atomic<bool>& stop_;
};

}  // namespace

Outcome coordinate(Hosts& hosts, const model::RunSpec& spec, const Pattern& pattern, const RecordWriter& write,
                   const std::atomic<bool>& stop, Status& ended) {
  Outcome out;
  out.pattern = pattern;
  out.names = hosts.names();
  out.reached_by = hosts.reached_by();
  ended = {};
  auto rounds = schedule(pattern, int(out.names.size()));
  if (!rounds) return ended = rounds.status(), out;
  // --repeat N runs the whole pattern N times, each pair measuring once a pass: a burst of noise
  // then lands on different pairs in each repeat. Run back to back, one host's rounds shared a
  // burst in every repeat and a healthy host was named slow (a CI run: 0.67 x in both repeats).
  int passes = std::max(1, spec.repeat);
  model::RunSpec once = spec;
  once.repeat = 1;
  out.rounds_planned = rounds->size() * size_t(passes);
  RoundRunner runner(hosts, once, passes, out, write, stop);
  uint64_t session = 1;
  for (int pass = 0; pass < passes; ++pass)
    for (size_t r = 0; r < rounds->size(); ++r) {
      bool ok = runner.run(pass, int(r), (*rounds)[r], session, ended);
      ++out.rounds_run;
      if (!ok || !ended) return out;
    }
  return out;
}

}  // namespace rb::cluster
