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
//   max_qps = 16           # (0 or absent: unlimited)
//   max_reg_bytes = "4G"   # registered memory at once (0 or absent: unlimited)
//   path = "direct"        # same-host peers: "direct" (the default) or "router"
//
// Without a config every uid is a tenant of its own, named uid-<n>, with no limits.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.hh"

namespace rb::vrdma {

struct Tenant {
  std::string name;
  std::vector<uint32_t> uids;
  uint64_t rate_bytes = 0, rate_ops = 0;  // per second; 0: unlimited
  uint64_t qp_rate_bytes = 0, qp_rate_ops = 0;  // per QP, per second; 0: unlimited
  uint32_t max_qps = 0;                   // 0: unlimited
  uint64_t max_reg_bytes = 0;             // 0: unlimited
  bool direct = true;                     // same-host peers may map each other's regions
  bool rate_limited() const { return rate_bytes || rate_ops || qp_rate_bytes || qp_rate_ops; }
};

class Tenants {
 public:
  // Every uid its own tenant, unlimited.
  Tenants() = default;
  // Parses a config's text; `origin` names it in errors ("--config /etc/vrdma.toml").
  static Result<Tenants> parse(const std::string& text, const std::string& origin);
  static Result<Tenants> load(const std::string& path);

  // The tenant of `uid`, or an error naming the uid and the config when none has it.
  Result<Tenant> of_uid(uint32_t uid) const;
  const std::vector<Tenant>& configured() const { return list_; }
  bool from_config() const { return from_config_; }

 private:
  std::vector<Tenant> list_;
  bool from_config_ = false;
  std::string origin_;
};

}  // namespace rb::vrdma
