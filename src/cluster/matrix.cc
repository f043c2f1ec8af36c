#include "cluster/matrix.hh"

#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/bytes.hh"

namespace rb::cluster {
namespace {

constexpr int kWidth = 10;

std::string figure(double v) { return v >= 100 ? fmt::format("{:.0f}", v) : v >= 10 ? fmt::format("{:.1f}", v) : fmt::format("{:.2f}", v); }

void print_matrix(std::FILE* out, const Outcome& o, const Group& g, bool color) {
  std::map<std::pair<int, int>, const Cell*> at;
  for (const auto& c : g.cells) at[{c.src, c.dst}] = &c;
  int n = int(o.names.size());
  fmt::print(out, "{:>6}", "src\\dst");
  for (int j = 0; j < n; ++j) fmt::print(out, "{:>{}}", j, kWidth);
  fmt::print(out, "\n");
  for (int i = 0; i < n; ++i) {
    fmt::print(out, "{:>6} ", i);
    for (int j = 0; j < n; ++j) {
      auto it = at.find({i, j});
      if (it == at.end()) {
        fmt::print(out, "{:>{}}", i == j ? "-" : ".", kWidth);
        continue;
      }
      const Cell& c = *it->second;
      std::string mark = std::string(c.outlier ? "*" : "") + (c.miss.empty() ? "" : "!");
      std::string text = mark + figure(c.value);
      bool bad = c.outlier || !c.miss.empty();
      if (color && bad) fmt::print(out, "\x1b[31m{:>{}}\x1b[0m", text, kWidth);
      else fmt::print(out, "{:>{}}", text, kWidth);
    }
    fmt::print(out, "\n");
  }
}

void print_aggregate(std::FILE* out, const Group& g) {
  if (g.round_gbps.empty()) return;
  auto [lo, hi] = std::minmax_element(g.round_gbps.begin(), g.round_gbps.end());
  double sum = 0;
  for (double v : g.round_gbps) sum += v;
  if (g.round_gbps.size() == 1) fmt::print(out, "aggregate: {:.2f} Gb/s (every pair at once)\n", sum);
  else
    fmt::print(out, "aggregate: {:.2f} Gb/s per round, mean over {} rounds (min {:.2f}, max {:.2f})\n",
               sum / double(g.round_gbps.size()), g.round_gbps.size(), *lo, *hi);
}

void print_outliers(std::FILE* out, const Outcome& o, const Group& g, const Thresholds& t) {
  std::vector<const Cell*> list;
  for (const auto& c : g.cells)
    if (c.outlier) list.push_back(&c);
  if (list.empty()) {
    fmt::print(out, "outliers: none\n");
    return;
  }
  fmt::print(out, "outliers ({} {} x the median):\n", g.is_bw ? "below" : "above", g.is_bw ? t.outlier_bw : t.outlier_lat);
  for (const auto* c : list)
    fmt::print(out, "  {} -> {}: {} {}, {:.2f} x median\n", o.names[size_t(c->src)], o.names[size_t(c->dst)],
               figure(c->value), g.is_bw ? "Gb/s" : "us", g.median > 0 ? c->value / g.median : 0.0);
}

std::string side_text(const HostSide& s, const char* what) {
  if (!s.judged) return fmt::format("{} -", what);
  std::string text = fmt::format("{} {:.2f} x", what, s.ratio);
  if (s.repeats_judged > 1)
    text += fmt::format(" ({:.2f}-{:.2f} over {} repeats)", s.repeat_ratio_min, s.repeat_ratio_max, s.repeats_judged);
  return s.slow ? text + " SLOW" : text;
}

// Each host's pairs against the pairs without it, and the verdict: the hosts named slow.
void print_hosts(std::FILE* out, const Outcome& o, const Group& g, const Thresholds& t) {
  if (o.names.size() < 3) {
    fmt::print(out, "hosts: judged from 3 hosts up (a host's pairs against the pairs without it)\n");
    return;
  }
  fmt::print(out, "hosts (each one's pairs against the pairs without it; slow {} {} x in every repeat):\n",
             g.is_bw ? "below" : "above", g.is_bw ? t.outlier_bw : t.outlier_lat);
  std::vector<std::string> named;
  for (const auto& v : g.hosts) {
    fmt::print(out, "  host {} {}: {}, {}\n", v.host, o.names[size_t(v.host)], side_text(v.sends, "sends"),
               side_text(v.receives, "receives"));
    if (!v.named()) continue;
    std::vector<std::string> how;
    if (v.sends.slow) how.push_back(fmt::format("sends at {:.2f} x", v.sends.ratio));
    if (v.receives.slow) how.push_back(fmt::format("receives at {:.2f} x", v.receives.ratio));
    named.push_back(fmt::format("host {} ({}) {} the pairs without it", v.host, o.names[size_t(v.host)],
                                fmt::join(how, " and ")));
  }
  if (named.empty()) fmt::print(out, "slow hosts: none\n");
  for (const auto& n : named) fmt::print(out, "slow host: {}\n", n);
}

}  // namespace

void print_report(std::FILE* out, const Outcome& o, const std::vector<Group>& groups, const Thresholds& t, bool color) {
  const char* met = o.reached_by == "pmix" ? " (ranks met through PMIx)" : o.reached_by == "mpi" ? " (ranks met through MPI)" : "";
  fmt::print(out, "\ncluster: {} over {} hosts{}, {} of {} rounds run\n", pattern_text(o.pattern), o.names.size(), met,
             o.rounds_run, o.rounds_planned);
  for (size_t i = 0; i < o.names.size(); ++i) fmt::print(out, "  host {}: {}\n", i, o.names[i]);
  for (const auto& g : groups) {
    fmt::print(out, "\n{} {} {}: {} (row: source, column: destination); median {} {}\n", g.op, g.mode,
               bytes_with_unit(g.size), g.is_bw ? "Gb/s" : "p50 latency in us", figure(g.median), g.is_bw ? "Gb/s" : "us");
    print_matrix(out, o, g, color);
    fmt::print(out, "* outlier ({} {} x the median){}\n", g.is_bw ? "below" : "above", g.is_bw ? t.outlier_bw : t.outlier_lat,
               (g.is_bw ? t.expect_bw.has_value() : t.expect_lat_us.has_value())
                   ? (g.is_bw ? "; ! misses --expect-bw" : "; ! misses --expect-lat") : "");
    if (g.is_bw) print_aggregate(out, g);
    print_outliers(out, o, g, t);
    print_hosts(out, o, g, t);
  }
}

}  // namespace rb::cluster
