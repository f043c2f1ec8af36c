#include "cluster_flags.hh"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace rb::app {
namespace {

Status bad(std::string msg) { return {Errc::invalid_argument, std::move(msg)}; }

Result<double> real(const FlagValue& v, const char* flag, const char* example) {
  try {
    size_t used = 0;
    double d = std::stod(v.text(), &used);
    if (used == v.text().size() && std::isfinite(d)) return d;
  } catch (const std::exception&) {
  }
  return bad(fmt::format("{} '{}': give a number, e.g. {}", flag, v.text(), example));
}

bool has_mode(const model::RunSpec& s, model::Mode m) { return std::find(s.modes.begin(), s.modes.end(), m) != s.modes.end(); }

}  // namespace

const char* const kClusterOnlyFlags[8] = {"hosts", "pattern", "expect-bw", "expect-lat", "outlier-bw", "outlier-lat", "data-net",
                                          "bootstrap"};

Status apply_pattern(const FlagInfo&, const FlagValue& v, Command& c) {
  auto p = cluster::parse_pattern(v.text(), "--pattern");
  if (!p) return p.status();
  c.cluster.pattern = *p;
  return {};
}

Status apply_expect_bw(const FlagInfo&, const FlagValue& v, Command& c) {
  auto e = cluster::parse_expect_bw(v.text(), "--expect-bw");
  if (!e) return e.status();
  c.cluster.thresholds.expect_bw = *e;
  return {};
}

Status apply_expect_lat(const FlagInfo&, const FlagValue& v, Command& c) {
  auto e = cluster::parse_expect_lat_us(v.text(), "--expect-lat");
  if (!e) return e.status();
  c.cluster.thresholds.expect_lat_us = *e;
  return {};
}

Status apply_outlier_bw(const FlagInfo&, const FlagValue& v, Command& c) {
  auto d = real(v, "--outlier-bw", "0.8");
  if (!d) return d.status();
  if (*d <= 0 || *d >= 1)
    return bad(fmt::format("--outlier-bw {}: a share of the median between 0 and 1, e.g. 0.8", v.text()));
  c.cluster.thresholds.outlier_bw = *d;
  return {};
}

Status apply_outlier_lat(const FlagInfo&, const FlagValue& v, Command& c) {
  auto d = real(v, "--outlier-lat", "2");
  if (!d) return d.status();
  if (*d <= 1) return bad(fmt::format("--outlier-lat {}: a multiple of the median above 1, e.g. 2", v.text()));
  c.cluster.thresholds.outlier_lat = *d;
  return {};
}

Status apply_bootstrap(const FlagInfo&, const FlagValue& v, Command& c) {
  const std::string& t = v.text();
  if (t == "auto") c.cluster.bootstrap = bootstrap::HubKind::automatic;
  else if (t == "pmix") c.cluster.bootstrap = bootstrap::HubKind::pmix;
  else if (t == "mpi") c.cluster.bootstrap = bootstrap::HubKind::mpi;
  else return bad(fmt::format("--bootstrap '{}': give auto, pmix or mpi", t));
  return {};
}

FlagError cluster_flag_without_cluster(const FlagValues& values) {
  for (const char* f : kClusterOnlyFlags)
    if (values.given(f)) return {f, bad(fmt::format("--{} applies to --cluster only; add --cluster or drop it", f))};
  return {};
}

FlagResult<Command> cluster_command(const FlagValues& values, Command cmd) {
  for (const char* f : {"server", "addr", "loopback", "once", "ready-fd", "csv", "server-cpus"})
    if (values.given(f))
      return FlagError{f, bad(fmt::format("--{} with --cluster: hosts come from the launcher or --hosts, and records go "
                                          "to --json; drop --{}", f, f))};
  if (values.given("hosts") && values.given("data-net"))
    return FlagError{"data-net", bad("--data-net with --hosts: each host's data path uses the address its server is "
                                     "reached at; --data-net is for launches under mpirun or srun")};
  if (values.given("hosts") && values.given("bootstrap"))
    return FlagError{"bootstrap", bad("--bootstrap with --hosts: a hosts file needs no launcher; --bootstrap is for "
                                      "launches under mpirun or srun")};
  const auto& t = cmd.cluster.thresholds;
  if (t.expect_bw && !has_mode(cmd.spec, model::Mode::bw))
    return FlagError{"expect-bw", bad("--expect-bw judges bandwidth, and this run has no --mode bw; add it or drop --expect-bw")};
  if (t.expect_lat_us && !has_mode(cmd.spec, model::Mode::lat))
    return FlagError{"expect-lat", bad("--expect-lat judges latency, and this run has no --mode lat; add it or drop --expect-lat")};
  cmd.cluster.enabled = true;
  cmd.kind = Command::Kind::cluster;
  return cmd;
}

}  // namespace rb::app
