#pragma once
// Copy engines as a transport (the DMA experiment): `dma:cpu` moves bytes with a copy thread
// per queue between this process's buffers and the server's region in shared memory; `dma:cuda`
// moves them between pinned host buffers and device memory with the GPU's copy engines (-o
// engine=copy) or with a persistent kernel's threads fed through a descriptor ring (-o engine=sm).
#include "transport/entry.hh"

namespace rb::transport::dma {
TransportEntry registry_entry();
// `variant` is the engine (cpu, the default, or cuda); `domain` the GPU index for cuda; -o engine
// picks cuda's copy engines or its threads.
Result<std::unique_ptr<Domain>> open_domain(const OpenArgs& opt);
// The capabilities of dma:cpu (gpu false) or of dma:cuda's engines (gpu true).
Caps dma_caps(bool gpu);
}  // namespace rb::transport::dma
