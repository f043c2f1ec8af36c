#include "vrdma/router/stats.hh"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace rb::vrdma {
namespace {

constexpr const char* kRowFormat = "{:<16} {:>7} {:>5} {:>5} {:>5} {:>12} {:>9} {:>7} {:>7} {:>12} {:>14} {:>12} {:>7}\n";

std::string link_line(const LinkFigures& l) {
  std::string heard = l.heard_s_ago ? fmt::format("heard {:.1f} s ago", *l.heard_s_ago) : "not heard from";
  return fmt::format("link: router {} ({}) {}{}, {} QPs\n", l.router, l.configured ? "--peer" : "learned", heard,
                     l.unreachable ? ", unreachable" : "", l.qps);
}

std::string router_line(const RouterFigures& r) {
  std::string turns;
  for (uint64_t t : r.data_thread_turns) turns += fmt::format("{}{}", turns.empty() ? "" : ",", t);
  return fmt::format("router: cpu {:.2f} s over {:.1f} s up ({:.2f}% of a core), {} router-path QPs, {}\n", r.cpu_s,
                     r.up_s, r.up_s > 0 ? 100.0 * r.cpu_s / r.up_s : 0.0, r.routed_qps,
                     r.data_thread_turns.empty()
                         ? std::string("moved by the control thread")
                         : fmt::format("{} data threads (busy turns {})", r.data_thread_turns.size(), turns));
}

nlohmann::json tenant_json(const TenantFigures& t) {
  return {{"tenant", t.name},         {"clients", t.clients},       {"pds", t.pds},
          {"mrs", t.mrs},             {"qps", t.qps},               {"reg_bytes", t.reg_bytes},
          {"ring_bytes", t.ring_bytes}, {"requests", t.requests},   {"errors", t.errors},
          {"refused", t.refused},     {"routed_ops", t.routed_ops}, {"routed_bytes", t.routed_bytes},
          {"throttled_ms", t.throttled_ms}, {"queued", t.queued}};
}

nlohmann::json link_json(const LinkFigures& l) {
  nlohmann::json heard = l.heard_s_ago ? nlohmann::json(*l.heard_s_ago) : nlohmann::json(nullptr);
  return {{"router", l.router}, {"configured", l.configured}, {"heard_s_ago", heard},
          {"unreachable", l.unreachable}, {"qps", l.qps}};
}

}  // namespace

std::string stats_table(const StatsSnapshot& s, size_t room) {
  std::string out = fmt::format(fmt::runtime(kRowFormat), "tenant", "clients", "pds", "mrs", "qps", "reg_bytes", "requests",
                                "errors", "refused", "routed_ops", "routed_bytes", "throttled_ms", "queued");
  size_t left_out = 0;
  for (const auto& t : s.tenants) {
    std::string row = fmt::format(fmt::runtime(kRowFormat), t.name, t.clients, t.pds, t.mrs, t.qps, t.reg_bytes, t.requests,
                                  t.errors, t.refused, t.routed_ops, t.routed_bytes, t.throttled_ms, t.queued);
    if (out.size() + row.size() > room) ++left_out;
    else out += row;
  }
  if (left_out) out += fmt::format("({} more tenants)\n", left_out);
  if (!s.admin) return out;  // the links and the router's own figures are the operator's
  std::string links;
  for (const auto& l : s.links) links += link_line(l);
  out += out.size() + links.size() + 160 <= room ? links : fmt::format("({} links: too many to show)\n", s.links.size());
  return out + router_line(s.router);
}

std::string stats_json(const StatsSnapshot& s, size_t room) {
  nlohmann::json out = {{"tenants", nlohmann::json::array()}};
  size_t used = 160, left_out = 0;  // room kept for the rest of the object
  for (const auto& t : s.tenants) {
    nlohmann::json row = tenant_json(t);
    size_t n = row.dump().size() + 1;
    if (used + n > room) ++left_out;
    else out["tenants"].push_back(std::move(row)), used += n;
  }
  out["more_tenants"] = left_out;
  if (s.admin) {
    nlohmann::json links = nlohmann::json::array();
    for (const auto& l : s.links) links.push_back(link_json(l));
    if (used + links.dump().size() + 200 <= room) out["links"] = std::move(links);
    else out["more_links"] = s.links.size();
    out["router"] = {{"cpu_s", s.router.cpu_s}, {"up_s", s.router.up_s}, {"routed_qps", s.router.routed_qps},
                     {"data_thread_turns", s.router.data_thread_turns}};
  }
  return out.dump();
}

}  // namespace rb::vrdma
