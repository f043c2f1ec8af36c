#pragma once
#include "transport/dma/copy_engine.hh"
#include "transport/dma/cuda_runtime.hh"

namespace rb::transport::dma {
// One engine queue on GPU `dev`; `use_batch` asks for cudaMemcpyBatchAsync when the runtime has it.
Result<std::unique_ptr<CopyEngine>> make_cuda_engine(std::shared_ptr<CudaRuntime> rt, int dev, uint32_t depth,
                                                     bool use_batch);
}  // namespace rb::transport::dma
