#pragma once
// UCX (UCP) as a transport: the other communication library RDMA users run on, measured with
// the same runner and statistics as ofi. -t ucx:TLS passes a UCX_TLS-style transport list.
// See ucx_endpoint.hh for how each op maps onto UCP, and docs/transports.md.
#include "transport/entry.hh"

namespace rb::transport::ucx {
TransportEntry registry_entry();
Result<std::unique_ptr<Domain>> open_domain(const OpenArgs& args);
}  // namespace rb::transport::ucx
