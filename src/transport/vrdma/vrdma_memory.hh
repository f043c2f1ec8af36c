#pragma once
// Memory for the vrdma transport: regions libvrdma allocates from the router (vrdma_alloc_mr),
// and registration of ranges inside them (the runner registers the memory it was given).
#include <memory>
#include <mutex>
#include <vector>

#include <vrdma/vrdma.h>

#include "transport/transport.hh"

namespace rb::transport::vrdma {

// The regions a domain allocated, so register_memory finds the one holding a range.
class Regions {
 public:
  void add(vrdma_mr* mr);
  void remove(vrdma_mr* mr);
  vrdma_mr* covering(const void* addr, size_t len) const;

 private:
  mutable std::mutex mu_;
  std::vector<vrdma_mr*> list_;
};

Result<std::unique_ptr<HostMemory>> allocate(vrdma_pd* pd, std::shared_ptr<Regions> regions, size_t len);
// A range of an allocated region, or else the caller's own page-aligned memory (vrdma_reg_mr).
Result<std::unique_ptr<MemoryRegion>> register_range(vrdma_pd* pd, const Regions& regions, void* addr, size_t len);

}  // namespace rb::transport::vrdma
