#pragma once
// An RDM endpoint of the ofi transport: its CQ, its address vector, and the contexts the provider
// owns from post to completion.
#include <memory>

#include "transport/ofi/ofi_fabric.hh"
#include "transport/transport.hh"

namespace rb::transport::ofi {

// `contexts`: how many operations can be outstanding at once (posted and the provider's own queues).
Result<std::unique_ptr<Endpoint>> open_endpoint(std::shared_ptr<Fabric> f, uint64_t contexts, const EpSetup& setup,
                                                const EndpointOptions& o);

}  // namespace rb::transport::ofi
