#pragma once
// Copy engines as a transport (the DMA experiment): `dma:cpu` moves bytes with a copy thread
// per queue between this process's buffers and the server's region in shared memory; `dma:cuda`
// moves them with the GPU's copy engines between pinned host buffers and device memory.
#include "transport/entry.hh"

namespace rb::transport::dma {
TransportEntry registry_entry();
// `variant` is the engine (cpu, the default, or cuda); `domain` the GPU index for cuda.
Result<std::unique_ptr<Domain>> open_domain(const OpenArgs& opt);
}  // namespace rb::transport::dma
