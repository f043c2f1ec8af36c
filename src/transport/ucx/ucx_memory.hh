#pragma once
// Memory for UCX. Domain::allocate lets UCP allocate it (ucp_mem_map with ALLOCATE, as
// ucx_perftest does): a shared-memory transport (posix, sysv) then hands the peer a key it maps,
// and a put or an atomic is a store into the target's pages by the initiator, with no work at the
// target. Registering memory of that allocation reuses UCP's handle for it; other memory is
// registered as it is, and reaches the peer through a transport that can register it (cma, tcp,
// rc) or UCX's emulation over active messages.
#include <mutex>
#include <vector>

#include "transport/transport.hh"
#include "transport/ucx/ucx_context.hh"

namespace rb::transport::ucx {

// One domain's live allocations, so that register_region finds the handle UCP made for them.
class Allocations {
 public:
  void add(void* addr, size_t len, ucp_mem_h memh);
  void remove(ucp_mem_h memh);
  // The handle of the allocation holding [addr, addr+len), or null.
  ucp_mem_h covering(const void* addr, size_t len) const;

 private:
  struct Entry {
    const uint8_t* addr;
    size_t len;
    ucp_mem_h memh;
  };
  mutable std::mutex mu_;
  std::vector<Entry> entries_;
};

// `len` zeroed bytes from UCP, page aligned.
Result<std::unique_ptr<HostMemory>> allocate(std::shared_ptr<Context> ctx, std::shared_ptr<Allocations> allocs, size_t len);
// A region whose RemoteRegion carries the packed rkey in `handle` and the virtual address in `base`.
Result<std::unique_ptr<MemoryRegion>> register_region(std::shared_ptr<Context> ctx, const Allocations& allocs, void* addr,
                                                      size_t len);

}  // namespace rb::transport::ucx
