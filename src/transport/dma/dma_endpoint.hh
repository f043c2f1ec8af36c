#pragma once
// One dma endpoint: work requests become copies for its engine. Its far side is the peer's
// region mapped from shared memory (dma:cpu) or a device buffer standing in for it (dma:cuda).
#include <memory>

#include "transport/dma/copy_engine.hh"
#include "transport/dma/cuda_runtime.hh"

namespace rb::transport::dma {

enum class EngineKind {
  cpu,        // dma:cpu: a copy thread
  cuda_copy,  // dma:cuda -o engine=copy: the GPU's copy engines
  cuda_sm,    // dma:cuda -o engine=sm: GPU threads (a persistent kernel)
};

inline bool on_gpu(EngineKind k) { return k != EngineKind::cpu; }

// `validate`: the server checks its region after each quiesce (EndpointOptions::validate), so a
// device far side is loaded from the peer's region before a phase's first op and its written
// ranges copied back at quiesce.
std::unique_ptr<Endpoint> make_dma_endpoint(EngineKind kind, std::unique_ptr<CopyEngine> engine,
                                            std::shared_ptr<CudaRuntime> rt, bool validate);

}  // namespace rb::transport::dma
