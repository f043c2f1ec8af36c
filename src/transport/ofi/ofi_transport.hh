#pragma once
// libfabric transport: RDM endpoints with FI_MSG | FI_RMA (and FI_ATOMIC where offered) on any
// provider (shm and tcp here; verbs, efa, cxi on clusters). Differences between providers that
// matter to a benchmark are folded into Caps: offset vs virtual-address MRs, target-driven
// progress, queue sizes, atomics, remote CQ data, CQ wait objects. Split as UCX is: the domain
// (ofi_domain), endpoints (ofi_endpoint), memory regions (ofi_memory), the entry (here).
#include "transport/entry.hh"

namespace rb::transport::ofi {
TransportEntry registry_entry();
std::vector<Availability> probe();
}  // namespace rb::transport::ofi
