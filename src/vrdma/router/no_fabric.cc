// A vrdmad built without libfabric serves the tenants of its own host; --listen, the link to
// other hosts' routers, is what it cannot do.
#include <fmt/format.h>

#include "vrdma/router/fabric.hh"

namespace rb::vrdma {

Result<std::unique_ptr<Fabric>> open_fabric(const std::string& provider, const proto::RouterAddress&, LinkAuth&) {
  return Status(Errc::unavailable,
                fmt::format("--listen (fabric {}): this vrdmad was built without libfabric ({}); routers of other hosts "
                            "are out of its reach. Install libfabric-dev and rebuild, or run it without --listen",
                            provider, VRDMA_NO_FABRIC_REASON));
}

}  // namespace rb::vrdma
