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
  return fmt::format("router: cpu {:.2f} s over {:.1f} s up ({:.2f}% of a core), {} router-path QPs, {}\n"
                     "router: in flight to other hosts {} requests, {} bytes (at most {} at once); {} link "
                     "connections refused\n",
                     r.cpu_s, r.up_s, r.up_s > 0 ? 100.0 * r.cpu_s / r.up_s : 0.0, r.routed_qps,
                     r.data_thread_turns.empty()
                         ? std::string("moved by the control thread")
                         : fmt::format("{} data threads (busy turns {})", r.data_thread_turns.size(), turns),
                     r.link_ops, r.link_bytes, r.link_bytes_peak, r.link_refused);
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

// A label value as Prometheus' text format writes it: backslash, quote and newline escaped.
std::string label(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

// One metric family: its HELP and TYPE lines, then a sample per labelled value.
template <typename Rows, typename Labels, typename Value>
void family(std::string& out, const char* name, const char* type, const char* help, const Rows& rows, Labels labels,
            Value value) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  for (const auto& r : rows) {
    std::string l = labels(r);
    out += l.empty() ? fmt::format("{} {}\n", name, value(r)) : fmt::format("{}{{{}}} {}\n", name, l, value(r));
  }
}

void tenant_families(std::string& out, const std::vector<TenantFigures>& t) {
  auto by = [](const TenantFigures& r) { return fmt::format("tenant=\"{}\"", label(r.name)); };
  using F = const TenantFigures&;
  family(out, "vrdma_tenant_clients", "gauge", "Connections of the tenant's processes.", t, by, [](F r) { return r.clients; });
  family(out, "vrdma_tenant_pds", "gauge", "Protection domains held.", t, by, [](F r) { return r.pds; });
  family(out, "vrdma_tenant_mrs", "gauge", "Memory regions held.", t, by, [](F r) { return r.mrs; });
  family(out, "vrdma_tenant_qps", "gauge", "Queue pairs held.", t, by, [](F r) { return r.qps; });
  family(out, "vrdma_tenant_registered_bytes", "gauge", "Bytes of memory regions held.", t, by, [](F r) { return r.reg_bytes; });
  family(out, "vrdma_tenant_ring_bytes", "gauge", "Bytes of QP and SRQ memory held.", t, by, [](F r) { return r.ring_bytes; });
  family(out, "vrdma_tenant_requests_total", "counter", "Control requests made.", t, by, [](F r) { return r.requests; });
  family(out, "vrdma_tenant_errors_total", "counter", "Control requests refused or failed.", t, by, [](F r) { return r.errors; });
  family(out, "vrdma_tenant_refused_clients_total", "counter", "Connections refused (a cap).", t, by, [](F r) { return r.refused; });
  family(out, "vrdma_tenant_routed_ops_total", "counter", "Work requests the router moved.", t, by, [](F r) { return r.routed_ops; });
  family(out, "vrdma_tenant_routed_bytes_total", "counter", "Bytes the router moved.", t, by, [](F r) { return r.routed_bytes; });
  family(out, "vrdma_tenant_throttled_seconds_total", "counter", "Time its requests waited for its rate limits.", t, by,
         [](F r) { return fmt::format("{:.3f}", double(r.throttled_ms) / 1000); });
  family(out, "vrdma_tenant_queued_requests", "gauge", "Requests waiting in its router-path send rings.", t, by,
         [](F r) { return r.queued; });
}

void router_families(std::string& out, const StatsSnapshot& s) {
  auto by = [](const LinkFigures& l) { return fmt::format("router=\"{}\",configured=\"{}\"", label(l.router), l.configured); };
  using L = const LinkFigures&;
  family(out, "vrdma_link_up", "gauge", "1 while the router of another host is reachable.", s.links, by,
         [](L l) { return l.unreachable || !l.heard_s_ago ? 0 : 1; });
  std::vector<LinkFigures> heard;
  for (const auto& l : s.links)
    if (l.heard_s_ago) heard.push_back(l);
  family(out, "vrdma_link_last_heard_seconds", "gauge", "Seconds since the router of another host last spoke.", heard, by,
         [](L l) { return fmt::format("{:.3f}", *l.heard_s_ago); });
  family(out, "vrdma_link_qps", "gauge", "This router's QPs whose peers that router serves.", s.links, by, [](L l) { return l.qps; });
  auto none = [](int) { return std::string(); };
  std::vector<int> one{0};
  family(out, "vrdma_router_cpu_seconds_total", "counter", "CPU the router has used.", one, none,
         [&](int) { return fmt::format("{:.3f}", s.router.cpu_s); });
  family(out, "vrdma_router_uptime_seconds", "gauge", "Seconds since the router started.", one, none,
         [&](int) { return fmt::format("{:.3f}", s.router.up_s); });
  family(out, "vrdma_router_routed_qps", "gauge", "QPs whose bytes the router moves.", one, none,
         [&](int) { return s.router.routed_qps; });
  family(out, "vrdma_router_link_requests", "gauge", "Requests in flight to other hosts' routers.", one, none,
         [&](int) { return s.router.link_ops; });
  family(out, "vrdma_router_link_bytes", "gauge", "Bytes in flight to other hosts' routers.", one, none,
         [&](int) { return s.router.link_bytes; });
  family(out, "vrdma_router_link_bytes_peak", "gauge", "The most bytes in flight to other hosts' routers at once.", one,
         none, [&](int) { return s.router.link_bytes_peak; });
  family(out, "vrdma_router_link_refused_total", "counter",
         "Link connections refused because their other end did not prove the cluster's key.", one, none,
         [&](int) { return s.router.link_refused; });
}

}  // namespace

std::string stats_prometheus(const StatsSnapshot& s) {
  std::string out;
  tenant_families(out, s.tenants);
  if (s.admin) router_families(out, s);
  return out;
}

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
  out += out.size() + links.size() + 240 <= room ? links : fmt::format("({} links: too many to show)\n", s.links.size());
  return out + router_line(s.router);
}

std::string stats_json(const StatsSnapshot& s, size_t room) {
  nlohmann::json out = {{"tenants", nlohmann::json::array()}};
  size_t used = 240, left_out = 0;  // room kept for the rest of the object
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
    if (used + links.dump().size() + 280 <= room) out["links"] = std::move(links);
    else out["more_links"] = s.links.size();
    out["router"] = {{"cpu_s", s.router.cpu_s}, {"up_s", s.router.up_s}, {"routed_qps", s.router.routed_qps},
                     {"data_thread_turns", s.router.data_thread_turns}, {"link_ops", s.router.link_ops},
                     {"link_bytes", s.router.link_bytes}, {"link_bytes_peak", s.router.link_bytes_peak},
                     {"link_refused", s.router.link_refused}};
  }
  return out.dump();
}

}  // namespace rb::vrdma
