#pragma once
// What every tenant's objects take from the router's own process: a mapping each (regions, QPs,
// SRQs; the kernel allows vm.max_map_count of them) and descriptors (a memfd a region or SRQ, a
// memfd and up to two doorbells a QP; RLIMIT_NOFILE). Per-tenant limits do not bound the sum, so
// many tenants (or uids) within their limits could take it all. Past half of either budget, a
// tenant grows only while it holds less than half an even share of it (shared with at least one
// more), so no tenant holds more than half, and tenants that came early, or many together,
// cannot starve the others (it takes a few hundred tenants, each taking all it may, to fill the
// budget). A connection is a descriptor: tenants that only connect count too. Tenants are what
// the config says, and a user's subordinate uids are that user's tenant (tenants.hh), so a
// user's containers do not multiply their share.
#include <cstddef>
#include <cstdint>
#include <string>

namespace rb::vrdma {

struct HostCost {
  uint64_t mappings = 0, descriptors = 0;
};

class HostShare {
 public:
  // The budgets: the kernel's limits less what the router keeps for itself.
  static HostShare of_this_process();
  HostShare(uint64_t mappings, uint64_t descriptors) : maps_(mappings), fds_(descriptors) {}

  // Whether a tenant holding `mine` (of `all`, over `tenants` tenants that hold any) may take
  // `more`; else `why` says which budget it would exceed.
  bool allows(const HostCost& mine, const HostCost& all, size_t tenants, const HostCost& more, std::string* why) const;

 private:
  static bool within(uint64_t mine, uint64_t all, uint64_t more, uint64_t budget, size_t tenants);
  uint64_t maps_, fds_;
};

}  // namespace rb::vrdma
