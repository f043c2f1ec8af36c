#pragma once
// libfabric transport: RDM endpoints with FI_MSG | FI_RMA (and FI_ATOMIC where offered) on any
// provider (shm and tcp here; verbs, efa, cxi on clusters). Differences between providers that
// matter to a benchmark are folded into Caps: offset vs virtual-address MRs, target-driven
// progress, queue sizes, atomics, remote CQ data, CQ wait objects.
#include "transport/registry.hh"

namespace rb::transport::ofi {
TransportEntry registry_entry();
// `variant` is the libfabric provider (empty: libfabric picks); `domain` a libfabric domain.
Result<std::unique_ptr<Domain>> open_domain(const OpenArgs& opt);
std::vector<Availability> probe();
}  // namespace rb::transport::ofi
