#include "cluster/outcome.hh"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "cluster/host_verdict.hh"
#include "core/bytes.hh"

namespace rb::cluster {
namespace {

// A number with a unit suffix; the suffix must be one of `units` (factor applied), or none.
Result<double> number_with_unit(const std::string& text, const char* flag,
                                const std::vector<std::pair<std::string, double>>& units, const char* example) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  std::string unit = text.substr(used);
  if (used == 0 || !std::isfinite(v) || v <= 0)
    return Status(Errc::invalid_argument, fmt::format("{} '{}': give a positive figure, e.g. {}", flag, text, example));
  for (const auto& [name, factor] : units)
    if (unit == name) return v * factor;
  return Status(Errc::invalid_argument, fmt::format("{} '{}': unknown unit '{}', e.g. {}", flag, text, unit, example));
}

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string bw_miss(const Cell& c, const BwExpect& e) {
  double need = e.value;
  if (e.of_line) {
    if (c.line_gbps <= 0)
      return fmt::format("the provider reports no link speed, so {:g}xline cannot be judged: give --expect-bw in Gb/s", e.value);
    need = e.value * c.line_gbps;
  }
  if (c.value >= need) return "";
  return e.of_line ? fmt::format("{:.2f} Gb/s < {:g} x {:g} Gb/s line", c.value, e.value, c.line_gbps)
                   : fmt::format("{:.2f} Gb/s < {:g} Gb/s", c.value, need);
}

}  // namespace

Result<Record> record_of(const std::string& json_line, double line_gbps) {
  Record r;
  try {
    r.line = nlohmann::json::parse(json_line);
    const auto& res = r.line.at("results");
    r.op = r.line.at("op").get<std::string>();
    r.mode = r.line.at("mode").get<std::string>();
    r.size = r.line.at("size").get<uint64_t>();
    r.gbps = res.at("gbps").get<double>();
    r.mops = res.at("mops").get<double>();
    r.p50_us = res.at("lat_us").at("p50").get<double>();
    r.partial = res.at("partial").get<bool>();
    r.repeat = r.line.value("repeat", 0);
  } catch (const std::exception& e) {
    return Status(Errc::io, fmt::format("control protocol error: a pair's record is not a result line ({})", e.what()));
  }
  r.line_gbps = line_gbps;
  return r;
}

Result<BwExpect> parse_expect_bw(const std::string& text, const char* flag) {
  const std::string line = "xline";
  if (text.size() > line.size() && text.compare(text.size() - line.size(), line.size(), line) == 0) {
    auto share = number_with_unit(text.substr(0, text.size() - line.size()), flag, {{"", 1}}, "0.9xline");
    if (!share) return Status(Errc::invalid_argument, fmt::format("{} '{}': give a share of the link, e.g. 0.9xline", flag, text));
    if (*share > 1) return Status(Errc::invalid_argument, fmt::format("{} '{}': a share of the link is at most 1, e.g. 0.9xline", flag, text));
    return BwExpect{*share, true};
  }
  auto v = number_with_unit(text, flag, {{"", 1}, {"G", 1}, {"Gbps", 1}, {"Gb/s", 1}, {"M", 1e-3}, {"Mbps", 1e-3},
                                         {"Mb/s", 1e-3}, {"GB/s", 8}, {"MB/s", 8e-3}},
                            "0.9xline, 25Gbps or 3GB/s");
  if (!v) return v.status();
  return BwExpect{*v, false};
}

Result<double> parse_expect_lat_us(const std::string& text, const char* flag) {
  return number_with_unit(text, flag, {{"", 1}, {"us", 1}, {"ns", 1e-3}, {"ms", 1e3}, {"s", 1e6}}, "2.5us");
}

std::vector<Group> evaluate(const Outcome& o, const Thresholds& t) {
  using Key = std::tuple<std::string, std::string, uint64_t>;
  std::map<Key, std::map<std::pair<int, int>, std::vector<const Record*>>> by_group;
  std::vector<Key> order;
  for (const auto& r : o.records) {
    Key k{r.op, r.mode, r.size};
    if (!by_group.count(k)) order.push_back(k);
    by_group[k][{r.src, r.dst}].push_back(&r);
  }
  std::vector<Group> groups;
  for (const auto& k : order) {
    Group g{std::get<0>(k), std::get<1>(k), std::get<2>(k), std::get<1>(k) == "bw", 0, {}, {}};
    std::map<int, double> per_round;
    for (const auto& [pair, recs] : by_group[k]) {
      Cell c{pair.first, pair.second, 0, 0, false, ""};
      for (const auto* r : recs) {
        c.value += g.is_bw ? r->gbps : r->p50_us;
        c.line_gbps = std::max(c.line_gbps, r->line_gbps);
        if (g.is_bw) per_round[r->round] += r->gbps / double(recs.size());
      }
      c.value /= double(recs.size());
      g.cells.push_back(c);
    }
    std::vector<double> values;
    for (const auto& c : g.cells) values.push_back(c.value);
    g.median = median_of(values);
    for (auto& c : g.cells) {
      c.outlier = g.is_bw ? c.value < t.outlier_bw * g.median : c.value > t.outlier_lat * g.median;
      if (g.is_bw && t.expect_bw) c.miss = bw_miss(c, *t.expect_bw);
      if (!g.is_bw && t.expect_lat_us && c.value > *t.expect_lat_us)
        c.miss = fmt::format("p50 {:.2f} us > {:g} us", c.value, *t.expect_lat_us);
    }
    for (const auto& [round, sum] : per_round) g.round_gbps.push_back(sum);
    g.hosts = judge_hosts(g, o.records, int(o.names.size()), t);
    groups.push_back(std::move(g));
  }
  return groups;
}

std::vector<std::string> acceptance_failures(const Outcome& o, const std::vector<Group>& groups) {
  std::vector<std::string> lines;
  for (const auto& f : o.failed)
    lines.push_back(fmt::format("{} -> {}: failed: {}", o.names[size_t(f.src)], o.names[size_t(f.dst)], f.error));
  for (const auto& g : groups)
    for (const auto& c : g.cells)
      if (!c.miss.empty())
        lines.push_back(fmt::format("{} -> {}: {} {} {}: {}", o.names[size_t(c.src)], o.names[size_t(c.dst)], g.op, g.mode,
                                    format_bytes(g.size), c.miss));
  return lines;
}

}  // namespace rb::cluster
