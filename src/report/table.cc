#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "model/sizes.hh"
#include "report/reporter.hh"

namespace rb::report {
namespace {

struct MeanSd {
  double mean = 0, sd = 0;
};
template <class F>
MeanSd stat(const std::vector<model::PhaseResult>& rs, F f) {
  MeanSd m;
  for (auto& r : rs) m.mean += f(r);
  m.mean /= double(rs.size());
  if (rs.size() > 1) {
    double ss = 0;
    for (auto& r : rs) ss += (f(r) - m.mean) * (f(r) - m.mean);
    m.sd = std::sqrt(ss / double(rs.size() - 1));
  }
  return m;
}

// With --repeat the extremes stay extremes: the max column is the largest of every repeat, not a
// mean of maxima (which would hide the one spike the column is there to show).
template <class F>
double largest(const std::vector<model::PhaseResult>& rs, F f) {
  double m = f(rs.front());
  for (auto& r : rs) m = std::max(m, f(r));
  return m;
}
template <class F>
double smallest(const std::vector<model::PhaseResult>& rs, F f) {
  double m = f(rs.front());
  for (auto& r : rs) m = std::min(m, f(r));
  return m;
}

std::string cell(const MeanSd& m, int n, const char* fmt_spec) {
  std::string v = fmt::format(fmt::runtime(fmt_spec), m.mean);
  if (n > 1) v += fmt::format("±{}", fmt::format(fmt::runtime(fmt_spec), m.sd));
  return v;
}

}  // namespace

void TableReporter::header(const RunHeader& h) {
  const auto& s = *h.spec;
  line_gbps_ = h.line_gbps;
  fmt::print(out_, "rdmabench {} | transport {} provider {} fabric {} domain {} | library {}\n", RDMABENCH_VERSION,
             h.info.transport, h.info.provider, h.info.fabric, h.info.domain,
             h.info.library_version.empty() ? "-" : h.info.library_version);
  std::string amount = s.duration_s > 0 ? fmt::format("duration {} s (warm-up {} s)", s.duration_s, s.warmup_seconds())
                                        : fmt::format("iters bw {} lat {} per thread (warm-up bw {} lat {})",
                                                      s.iters_for(model::Mode::bw), s.iters_for(model::Mode::lat),
                                                      s.warmup_iters_for(model::Mode::bw), s.warmup_iters_for(model::Mode::lat));
  std::string receives = s.recv_mr ? fmt::format(" receives in {}", model::format_bytes(s.recv_mr)) : std::string();
  fmt::print(out_, "server {} | threads {}{} batch {} depth {} signal {}{} | addressing {} region {}{} | {}{}{} | clock {}\n",
             h.server, s.threads,
             s.eps_per_thread() > 1 ? fmt::format(" rails {} qps {}", s.rails, s.qps) : std::string(), s.batch, s.depth,
             s.signal, s.lazy ? " lazy" : "", s.addressing(), model::format_bytes(s.region_bytes()), receives, amount,
             s.repeat > 1 ? fmt::format(" | repeat {} (mean±stdev; min and max over all repeats)", s.repeat) : "", s.validate ? " | validate on" : "",
             h.clock);
  std::fflush(out_);
}

void TableReporter::note(const std::string& line) {
  fmt::print(out_, "{}\n", line);
  std::fflush(out_);
}

void TableReporter::print_group_header(const model::Phase& p) {
  if (group_op_ == int(p.op) && group_mode_ == int(p.mode)) return;
  group_op_ = int(p.op);
  group_mode_ = int(p.mode);
  const char* kind = model::lat_kind_of(p);
  if (p.mode == model::Mode::bw) {
    fmt::print(out_, "\n{} bw (latency: post to completion)\n", transport::op_name(p.op));
    fmt::print(out_, "{:>8} {:>10} {:>14} {:>12} {:>12} {:>10} {:>10} {:>10}\n", "bytes", "iters", "Gbps", "GB/s", "Mops/s",
               "p50[us]", "p99[us]", "max[us]");
  } else {
    fmt::print(out_, "\n{} lat ({})\n", transport::op_name(p.op),
               std::string(kind) == "round_trip" ? "round trip" : "one way = half the ping-pong round trip");
    fmt::print(out_, "{:>8} {:>10} {:>10} {:>12} {:>10} {:>10} {:>10} {:>11} {:>10} {:>10}\n", "bytes", "iters", "min[us]",
               "p50[us]", "avg[us]", "p99[us]", "p99.9[us]", "p99.99[us]", "max[us]", "stdev[us]");
  }
}

void TableReporter::phase(const model::PhaseResult& r, int repeats) {
  pending_.push_back(r);
  if (int(pending_.size()) < repeats) return;
  print_group_header(r.phase);
  int n = int(pending_.size());
  auto& rs = pending_;
  std::string size = model::format_bytes(r.phase.size);
  uint64_t iters = r.iterations;
  std::string flag = r.partial ? "  (partial: interrupted)" : "";
  if (r.phase.mode == model::Mode::bw && line_gbps_ > 0)
    flag = fmt::format("  {:.1f}% of {:.0f} Gbps", 100 * r.gbps / line_gbps_, line_gbps_) + flag;
  if (r.phase.mode == model::Mode::bw) {
    fmt::print(out_, "{:>8} {:>10} {:>14} {:>12} {:>12} {:>10.2f} {:>10.2f} {:>10.2f}{}\n", size, iters,
               cell(stat(rs, [](auto& x) { return x.gbps; }), n, "{:.2f}"),
               cell(stat(rs, [](auto& x) { return x.gbytes_per_s; }), n, "{:.3f}"),
               cell(stat(rs, [](auto& x) { return x.mops; }), n, "{:.3f}"), stat(rs, [](auto& x) { return x.lat.p50; }).mean,
               stat(rs, [](auto& x) { return x.lat.p99; }).mean, largest(rs, [](auto& x) { return x.lat.max; }), flag);
  } else {
    auto m = [&](auto f) { return stat(rs, f).mean; };
    fmt::print(out_, "{:>8} {:>10} {:>10.2f} {:>12} {:>10.2f} {:>10.2f} {:>10.2f} {:>11.2f} {:>10.2f} {:>10.2f}{}\n", size, iters,
               smallest(rs, [](auto& x) { return x.lat.min; }), cell(stat(rs, [](auto& x) { return x.lat.p50; }), n, "{:.2f}"),
               m([](auto& x) { return x.lat.avg; }), m([](auto& x) { return x.lat.p99; }),
               m([](auto& x) { return x.lat.p999; }), m([](auto& x) { return x.lat.p9999; }),
               largest(rs, [](auto& x) { return x.lat.max; }), m([](auto& x) { return x.lat.stdev; }), flag);
  }
  if (r.has_cpu)
    fmt::print(out_, "{:>8} cpu: client {:.2f} cores (user {:.2f}s sys {:.2f}s), server {:.2f} cores (user {:.2f}s sys {:.2f}s)\n",
               "", r.client_cpu.util, r.client_cpu.times.user_s, r.client_cpu.times.sys_s, r.server_cpu.util,
               r.server_cpu.times.user_s, r.server_cpu.times.sys_s);
  if (r.has_reverse)
    fmt::print(out_, "{:>8}   reverse (server to client): {} iters {:.2f} Gbps {:.3f} Mops/s | both ways {:.2f} Gbps {:.3f} Mops/s\n",
               "", r.reverse.iterations, r.reverse.gbps, r.reverse.mops, r.gbps + r.reverse.gbps, r.mops + r.reverse.mops);
  if (r.per_rail.size() > 1)
    for (auto& f : r.per_rail)
      fmt::print(out_, "{:>8}   rail {}: {} iters {:.2f} Gbps {:.3f} Mops/s\n", "", f.thread, f.iterations, f.gbps, f.mops);
  if (r.per_thread.size() > 1)
    for (auto& t : r.per_thread)
      fmt::print(out_, "{:>8}   thread {}: {} iters {:.2f} Gbps {:.3f} Mops/s\n", "", t.thread, t.iterations, t.gbps, t.mops);
  std::fflush(out_);
  pending_.clear();
}

}  // namespace rb::report
