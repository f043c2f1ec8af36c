#include "cluster/host_verdict.hh"

#include <algorithm>
#include <map>
#include <optional>

namespace rb::cluster {
namespace {

using Cells = std::map<std::pair<int, int>, double>;  // (src, dst) -> value

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// The mean value of each pair over `records` (of one group), bw in Gb/s, lat in p50 us.
Cells cells_of(const std::vector<const Record*>& records, bool is_bw) {
  std::map<std::pair<int, int>, std::pair<double, int>> sum;
  for (const Record* r : records) {
    auto& s = sum[{r->src, r->dst}];
    s.first += is_bw ? r->gbps : r->p50_us;
    ++s.second;
  }
  Cells out;
  for (const auto& [pair, s] : sum) out[pair] = s.first / s.second;
  return out;
}

struct Score {
  double ratio, median, others;
  bool apart;  // every pair of the host is worse than every pair without it
};

// Host h's pairs on one side against the pairs without h; nothing when either is empty.
std::optional<Score> score(const Cells& cells, int h, bool as_sender, bool is_bw) {
  std::vector<double> in, others;
  for (const auto& [pair, value] : cells) {
    if ((as_sender ? pair.first : pair.second) == h) in.push_back(value);
    else if (pair.first != h && pair.second != h) others.push_back(value);
  }
  if (in.empty() || others.empty()) return std::nullopt;
  double m = median_of(in), o = median_of(others);
  if (o <= 0) return std::nullopt;
  auto [in_lo, in_hi] = std::minmax_element(in.begin(), in.end());
  auto [o_lo, o_hi] = std::minmax_element(others.begin(), others.end());
  return Score{m / o, m, o, is_bw ? *in_hi < *o_lo : *in_lo > *o_hi};
}

// Slow: past the threshold, and apart from the pairs without it. A busy machine scatters the
// pairs (4 ranks on 2 cores: 9-21 Gb/s), so a healthy host's median can fall to 0.73 x by chance
// while its pairs mingle with the others; a slow link or NIC puts all of its pairs below all of
// them. Apart in every repeat is unlikely by chance: with 3 of its pairs among 9, 1 in 84 a repeat.
bool slow_score(const Score& s, bool is_bw, const Thresholds& t) {
  return (is_bw ? s.ratio < t.outlier_bw : s.ratio > t.outlier_lat) && s.apart;
}

HostSide judge_side(const Cells& all, const std::map<int, Cells>& by_repeat, int h, bool as_sender, bool is_bw,
                    const Thresholds& t) {
  HostSide side;
  auto overall = score(all, h, as_sender, is_bw);
  if (!overall) return side;
  side.judged = true;
  side.ratio = overall->ratio;
  side.median = overall->median;
  side.others_median = overall->others;
  for (const auto& [repeat, cells] : by_repeat) {
    auto s = score(cells, h, as_sender, is_bw);
    if (!s) continue;
    bool first = side.repeats_judged++ == 0;
    side.repeat_ratio_min = first ? s->ratio : std::min(side.repeat_ratio_min, s->ratio);
    side.repeat_ratio_max = first ? s->ratio : std::max(side.repeat_ratio_max, s->ratio);
    side.repeats_slow += slow_score(*s, is_bw, t);
  }
  side.slow = slow_score(*overall, is_bw, t) && side.repeats_judged > 0 && side.repeats_slow == side.repeats_judged;
  return side;
}

nlohmann::json side_json(const HostSide& s) {
  if (!s.judged) return nullptr;
  return {{"ratio", s.ratio}, {"median", s.median}, {"others_median", s.others_median},
          {"repeats_judged", s.repeats_judged}, {"repeats_slow", s.repeats_slow},
          {"repeat_ratio_min", s.repeat_ratio_min}, {"repeat_ratio_max", s.repeat_ratio_max}, {"slow", s.slow}};
}

}  // namespace

std::vector<HostVerdict> judge_hosts(const Group& g, const std::vector<Record>& records, int hosts, const Thresholds& t) {
  std::vector<const Record*> mine;
  std::map<int, std::vector<const Record*>> repeats;
  for (const Record& r : records) {
    if (r.op != g.op || r.mode != g.mode || r.size != g.size) continue;
    mine.push_back(&r);
    repeats[r.repeat].push_back(&r);
  }
  Cells all = cells_of(mine, g.is_bw);
  std::map<int, Cells> by_repeat;
  for (const auto& [repeat, recs] : repeats) by_repeat[repeat] = cells_of(recs, g.is_bw);
  std::vector<HostVerdict> out;
  for (int h = 0; h < hosts; ++h)
    out.push_back({h, judge_side(all, by_repeat, h, true, g.is_bw, t), judge_side(all, by_repeat, h, false, g.is_bw, t)});
  return out;
}

nlohmann::json host_record(const Group& g, const HostVerdict& v, const std::string& name, const Thresholds& t) {
  return {{"schema", 1},
          {"kind", "cluster_host"},
          {"op", g.op},
          {"mode", g.mode},
          {"size", g.size},
          {"host", v.host},
          {"name", name},
          {"threshold", g.is_bw ? t.outlier_bw : t.outlier_lat},
          {"sends", side_json(v.sends)},
          {"receives", side_json(v.receives)},
          {"slow", v.named()}};
}

}  // namespace rb::cluster
