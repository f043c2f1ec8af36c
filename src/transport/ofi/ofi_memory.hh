#pragma once
// A region registered with the ofi domain; deregistered on destruction, and it keeps the domain open.
#include <memory>

#include "transport/ofi/ofi_fabric.hh"
#include "transport/transport.hh"

namespace rb::transport::ofi {

// `virt`: the provider addresses RMA by virtual address (FI_MR_VIRT_ADDR), else by offset.
std::unique_ptr<MemoryRegion> make_memory_region(std::shared_ptr<Fabric> f, fid_mr* mr, void* addr, size_t len, bool virt);

}  // namespace rb::transport::ofi
