#pragma once
// The router's figures as `vrdmactl stats` shows them: one snapshot, rendered as the table or as
// JSON (`vrdmactl stats --json`). A tenant's snapshot holds its own row; an admin's (root, or the
// config's admin_uids) every tenant's, the links and the router's own CPU.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace rb::vrdma {

struct TenantFigures {
  std::string name;
  uint64_t clients = 0, pds = 0, mrs = 0, qps = 0, reg_bytes = 0, ring_bytes = 0;
  uint64_t requests = 0, errors = 0, refused = 0, routed_ops = 0, routed_bytes = 0, throttled_ms = 0;
  uint64_t queued = 0;  // requests waiting in its router-path QPs' send rings
};

struct LinkFigures {
  std::string router;                 // its address
  bool configured = false;            // named by --peer (else learned from a QP's address)
  std::optional<double> heard_s_ago;  // none: never heard from
  bool unreachable = false;
  uint64_t qps = 0;                   // this router's QPs whose peers it serves
};

struct RouterFigures {
  double cpu_s = 0, up_s = 0;
  uint64_t routed_qps = 0;
  // On the links to other hosts' routers now, and the most at once since it started: requests
  // and bytes, every tenant's together (link_use.hh bounds them).
  uint64_t link_ops = 0, link_bytes = 0, link_bytes_peak = 0;
  uint64_t link_refused = 0;  // link connections refused: their other end did not prove the key
  std::vector<uint64_t> data_thread_turns;  // busy turns per data thread; empty: the control thread moves bytes
};

struct StatsSnapshot {
  std::vector<TenantFigures> tenants;
  bool admin = false;  // links and router are filled only for an admin
  std::vector<LinkFigures> links;
  RouterFigures router;
};

// The table, at most `room` bytes (tenants past it counted, not shown).
std::string stats_table(const StatsSnapshot& s, size_t room);
// The same as one JSON object, at most `room` bytes likewise ("more_tenants").
std::string stats_json(const StatsSnapshot& s, size_t room);
// The same in Prometheus' text format (vrdmad --metrics), every tenant: a scrape has no packet
// to fit in.
std::string stats_prometheus(const StatsSnapshot& s);

}  // namespace rb::vrdma
