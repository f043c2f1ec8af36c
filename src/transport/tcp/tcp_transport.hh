#pragma once
// Kernel TCP as a transport: the RDMA-vs-TCP baseline from the same tool. SEND/RECV are framed
// messages; WRITE and READ are requests the target's endpoint applies to, or serves from, its
// registered region (keys and bounds checked), so addressing and validation work as over ofi;
// fadd/cswap are requests it applies atomically and answers with the old value. Each endpoint
// pair shares one connection that carries both directions, and arm_wait sleeps on its socket.
#include "transport/entry.hh"

namespace rb::transport::tcp {
TransportEntry registry_entry();
Result<std::unique_ptr<Domain>> open_domain(const OpenArgs& opt);
}  // namespace rb::transport::tcp
