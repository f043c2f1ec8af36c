#pragma once
#include "transport/dma/copy_engine.hh"
#include "transport/dma/sm_kernel.hh"

namespace rb::transport::dma {
// One engine queue whose copies are made by the persistent kernel's `threads` GPU threads (a
// multiple of 32), fed through a descriptor ring of `depth` slots (rounded up to a power of two).
Result<std::unique_ptr<CopyEngine>> make_sm_engine(std::shared_ptr<SmKernel> kernel, uint32_t depth, uint32_t threads);
}  // namespace rb::transport::dma
