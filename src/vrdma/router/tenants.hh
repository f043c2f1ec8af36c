#pragma once
// Who may use the router, and within what. A client is known by the uid the kernel reports for
// its socket (SO_PEERCRED), never by anything it says; the config maps uids to tenants:
//
//   [[tenant]]
//   name = "alpha"
//   uids = [1000, 1001]
//   rate_bytes = "1G"      # bytes per second over all its QPs (0 or absent: unlimited)
//   rate_ops = 100000      # work requests per second (0 or absent: unlimited)
//   qp_rate_bytes = "100M" # the same, for each of its QPs alone (0 or absent: unlimited)
//   qp_rate_ops = 10000
//   max_qps = 16           # QPs at once, and SRQs at once (absent: 1024; 0: unlimited)
//   max_mrs = 256          # memory regions at once (absent: 4096; 0: unlimited)
//   max_pds = 64           # protection domains at once (absent: 1024; 0: unlimited)
//   max_reg_bytes = "4G"   # registered memory, QP and SRQ memory at once (absent: a quarter of the host's; 0: unlimited)
//   path = "direct"        # same-host peers: "direct" (the default) or "router"
//
//   [router]               # optional: the router's own limits
//   admin_uids = [1000]    # besides root, who sees every tenant's statistics
//   max_clients_per_uid = 64  # connections one uid holds at once (absent: 64)
//   max_link_conns_per_host = 32  # TCP connections to the --listen port from one host (absent: 32)
//   link_key = "/etc/vrdma/link.key"  # the cluster's key: with --listen, routers prove it (link_auth.hh)
//
// Without a config every uid is a tenant of its own, named uid-<n>, with the default limits: a
// router shared by strangers is never unlimited unless its config says so.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/status.hh"
#include "vrdma/proto/link.hh"

namespace rb::vrdma {

struct Tenant {
  std::string name;
  std::vector<uint32_t> uids;
  uint64_t rate_bytes = 0, rate_ops = 0;  // per second; 0: unlimited
  uint64_t qp_rate_bytes = 0, qp_rate_ops = 0;  // per QP, per second; 0: unlimited
  uint32_t max_qps = 0;                   // 0: unlimited
  uint32_t max_mrs = 0;                   // 0: unlimited
  uint32_t max_pds = 0;                   // 0: unlimited
  uint64_t max_reg_bytes = 0;             // 0: unlimited
  bool direct = true;                     // same-host peers may map each other's regions
  bool rate_limited() const { return rate_bytes || rate_ops || qp_rate_bytes || qp_rate_ops; }
};

// What a tenant gets where its config says nothing (and every tenant without a config).
struct TenantDefaults {
  uint32_t max_qps = 1024;
  uint32_t max_mrs = 4096;
  uint32_t max_pds = 1024;
  uint64_t max_reg_bytes = 0;  // set from the host's memory: a quarter of it
};
TenantDefaults tenant_defaults();

// The router's own limits, from the config's [router] table.
struct RouterLimits {
  std::vector<uint32_t> admin_uids;  // see every tenant's statistics (root always does)
  uint32_t max_clients_per_uid = 64;
  uint32_t max_link_conns_per_host = 32;  // a peer of this host counts by its uid
  std::string link_key;  // a key file's path; empty: none
  // Where the routers a tenant may name are (its QPs' peers, its address handles); empty: anywhere.
  std::vector<proto::RouterNetwork> link_networks;
  bool may_link(const proto::RouterAddress& at) const;
  bool is_admin(uint32_t uid) const;
};

// A user's subordinate uids (/etc/subuid: the uids a rootless container of theirs runs as).
struct SubordinateUids {
  uint32_t first = 0, count = 0;
  uint32_t owner = 0;
  bool contains(uint32_t uid) const { return uid >= first && uid - first < count; }
};
// Parses /etc/subuid's text ("name-or-uid:first:count" lines); `uid_of` names an owner's uid (none:
// the line is skipped). Malformed lines are skipped, as shadow-utils skips them.
std::vector<SubordinateUids> parse_subuid(const std::string& text,
                                         const std::function<std::optional<uint32_t>(const std::string&)>& uid_of);

class Tenants {
 public:
  // Every uid its own tenant, with the default limits.
  Tenants() = default;
  // Parses a config's text; `origin` names it in errors ("--config /etc/vrdma.toml").
  static Result<Tenants> parse(const std::string& text, const std::string& origin);
  static Result<Tenants> load(const std::string& path);

  // The tenant of `uid`, or an error naming the uid and the config when none has it. A uid in
  // no tenant that is another user's subordinate uid is that user's: one person's container
  // uids are one tenant, not 65,536 (each with a share of the router's descriptors).
  Result<Tenant> of_uid(uint32_t uid) const;
  void set_subordinate_uids(std::vector<SubordinateUids> ranges) { subordinate_ = std::move(ranges); }
  const std::vector<Tenant>& configured() const { return list_; }
  bool from_config() const { return from_config_; }
  const RouterLimits& router() const { return router_; }

 private:
  std::vector<Tenant> list_;
  RouterLimits router_;
  TenantDefaults defaults_ = tenant_defaults();
  bool from_config_ = false;
  std::string origin_;
  std::vector<SubordinateUids> subordinate_;
  Result<Tenant> named_tenant_of(uint32_t uid) const;
};

}  // namespace rb::vrdma
