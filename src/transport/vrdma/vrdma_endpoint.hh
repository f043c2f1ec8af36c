#pragma once
#include <vrdma/vrdma.h>

#include "transport/transport.hh"

namespace rb::transport::vrdma {

constexpr uint32_t kInlineBytes = 256;  // what an endpoint copies at post time (wr_flag::inject)

Result<std::unique_ptr<Endpoint>> open_endpoint(vrdma_context* ctx, vrdma_pd* pd, const EndpointOptions& o);

}  // namespace rb::transport::vrdma
