#pragma once
#include <vrdma/vrdma.h>

#include <atomic>
#include <memory>

#include "transport/transport.hh"

namespace rb::transport::vrdma {

constexpr uint32_t kInlineBytes = 256;  // what an endpoint copies at post time (wr_flag::inject)

// router_path: ask for the router path (VRDMA_QP_ROUTER_PATH); else the tenant's config decides.
// `routed` is set once the endpoint connects on the router path (a peer on another host takes it
// whatever was asked).
Result<std::unique_ptr<Endpoint>> open_endpoint(vrdma_context* ctx, vrdma_pd* pd, const EndpointOptions& o,
                                                bool router_path, std::shared_ptr<std::atomic<bool>> routed);

}  // namespace rb::transport::vrdma
