// One phase's record as docs/output-format.md documents it: what --json writes and what a
// cluster rank sends its coordinator.
#include "model/record_json.hh"

#include <unistd.h>

#include <ctime>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace rb::model {

using nlohmann::json;

namespace {
std::string utc_now() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}
// The field of schema 1 that predates other libraries: libfabric's version, empty for any other.
std::string libfabric_version(const std::string& library) {
  constexpr std::string_view kPrefix = "libfabric ";
  return library.starts_with(kPrefix) ? library.substr(kPrefix.size()) : std::string();
}

std::string hostname() {
  char buf[256] = {};
  gethostname(buf, sizeof buf - 1);
  return buf;
}
json lat_json(const LatencySummary& l) {
  return {{"min", l.min}, {"p50", l.p50}, {"avg", l.avg}, {"p99", l.p99}, {"p999", l.p999},
          {"p9999", l.p9999}, {"max", l.max}, {"stdev", l.stdev}};
}
json cpu_json(const CpuFigures& c) {
  return {{"user_s", c.times.user_s}, {"sys_s", c.times.sys_s}, {"total_s", c.times.total_s}, {"util", c.util}};
}
}  // namespace

std::string run_label(const RunInfo& h, const Phase& p) {
  std::string t = h.info.transport;
  if (!h.info.provider.empty() && h.info.provider != h.info.transport) t += ":" + h.info.provider;
  return fmt::format("{} {} {} t{}", t, transport::op_name(p.op), mode_name(p.mode), h.spec->threads);
}

std::string json_line(const RunInfo& h, const PhaseResult& r, int repeats) {
  const auto& s = *h.spec;
  const auto& p = r.phase;
  json params = {{"op", transport::op_name(p.op)}, {"mode", mode_name(p.mode)}, {"size", p.size},
                 {"threads", s.threads}, {"batch", s.batch}, {"depth", p.mode == Mode::bw ? s.depth : 1},
                 {"signal", s.signal}, {"rails", s.rails}, {"qps", s.qps}, {"lazy", s.lazy}, {"bidir", s.bidir}, {"iters", s.iters_for(p.mode)}, {"duration_s", s.duration_s},
                 {"warmup_iters", s.duration_s > 0 ? 0 : s.warmup_iters_for(p.mode)},
                 {"warmup_s", s.duration_s > 0 ? s.warmup_seconds() : 0.0}, {"random_space", s.random_space},
                 {"thread_gap", s.gap()}, {"fixed", !s.random()}, {"addressing", s.addressing()},
                 {"local_mr", s.local_area()}, {"recv_mr", s.recv_mr}, {"validate", s.validate}, {"event", s.event}, {"inject", s.inject}, {"cpus", s.cpus}, {"seed", s.seed},
                 {"domain", s.transport.domain}};
  json per_thread = json::array();
  for (auto& t : r.per_thread)
    per_thread.push_back({{"thread", t.thread}, {"iterations", t.iterations}, {"seconds", t.seconds}, {"gbps", t.gbps},
                          {"mops", t.mops}});
  json per_rail = json::array();
  for (auto& f : r.per_rail)
    per_rail.push_back({{"rail", f.thread}, {"iterations", f.iterations}, {"gbps", f.gbps}, {"mops", f.mops}});
  json results = {{"iterations", r.iterations}, {"bytes", r.bytes}, {"duration_s", r.duration_s},
                  {"gbps", r.gbps}, {"gbytes_per_s", r.gbytes_per_s}, {"mops", r.mops},
                  {"lat_kind", r.lat_kind}, {"lat_us", lat_json(r.lat)}, {"per_thread", per_thread}, {"per_rail", per_rail},
                  {"partial", r.partial}};
  if (r.has_reverse) {
    results["reverse"] = {{"iterations", r.reverse.iterations}, {"duration_s", r.reverse.seconds},
                          {"gbps", r.reverse.gbps}, {"mops", r.reverse.mops}};
    results["sum"] = {{"gbps", r.gbps + r.reverse.gbps}, {"mops", r.mops + r.reverse.mops}};
  }
  if (h.line_gbps > 0) {
    results["line_rate_gbps"] = h.line_gbps;
    results["pct_of_line_rate"] = 100 * r.gbps / h.line_gbps;
  }
  if (r.has_cpu) results["cpu"] = {{"client", cpu_json(r.client_cpu)}, {"server", cpu_json(r.server_cpu)}};
  json bins = json::array();
  for (auto& b : r.hist.nonempty_bins()) bins.push_back({b.low, b.high, b.count});
  json j = {{"schema", 1}, {"tool", "rdmabench"}, {"version", RDMABENCH_VERSION}, {"timestamp", utc_now()},
            {"host", hostname()}, {"server", h.server}, {"label", run_label(h, p)},
            {"transport", h.info.transport}, {"provider", h.info.provider}, {"fabric", h.info.fabric},
            {"domain", h.info.domain}, {"domains", h.domains}, {"library_version", h.info.library_version},
            {"libfabric_version", libfabric_version(h.info.library_version)},
            {"op", transport::op_name(p.op)}, {"mode", mode_name(p.mode)}, {"size", p.size},
            {"repeat", p.repeat}, {"repeats", repeats}, {"params", params}, {"results", results},
            {"histogram", {{"unit", "ns"}, {"bins", bins}}}};
  return j.dump();
}

}  // namespace rb::model
