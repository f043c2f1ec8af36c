#include "vrdma/router/host_share.hh"

#include <sys/resource.h>

#include <algorithm>
#include <fstream>

#include <fmt/format.h>

namespace rb::vrdma {

HostShare HostShare::of_this_process() {
  uint64_t max_maps = 65530;  // the kernel's default, should /proc not say
  std::ifstream("/proc/sys/vm/max_map_count") >> max_maps;
  rlimit lim{};
  uint64_t max_fds = getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY ? lim.rlim_cur : 1u << 20;
  // The router's own: libraries, threads, the listening socket, the fabric's connections.
  return {max_maps - std::min<uint64_t>(max_maps / 2, 4096), max_fds - std::min<uint64_t>(max_fds / 4, 1024)};
}

bool HostShare::within(uint64_t mine, uint64_t all, uint64_t more, uint64_t budget, size_t tenants) {
  if (all + more > budget) return false;
  if (all + more <= budget / 2) return true;
  // Half of an even share among at least two (one tenant alone is sharing with the next to
  // come): what tenants that came early hold past it leaves the others room.
  return mine + more <= budget / (2 * std::max<size_t>(tenants, 2));
}

bool HostShare::allows(const HostCost& mine, const HostCost& all, size_t tenants, const HostCost& more,
                       std::string* why) const {
  if (!within(mine.mappings, all.mappings, more.mappings, maps_, tenants)) {
    // What others hold together is theirs to know: the tenant learns only its own count.
    *why = fmt::format("the router's mappings are shared out among its tenants, and this tenant holds {} of "
                       "them (vm.max_map_count bounds them); free some, or raise vm.max_map_count",
                       mine.mappings);
    return false;
  }
  if (!within(mine.descriptors, all.descriptors, more.descriptors, fds_, tenants)) {
    *why = fmt::format("the router's descriptors are shared out among its tenants, and this tenant holds {} of "
                       "them (its RLIMIT_NOFILE bounds them); free some, or raise vrdmad's LimitNOFILE",
                       mine.descriptors);
    return false;
  }
  return true;
}

}  // namespace rb::vrdma
