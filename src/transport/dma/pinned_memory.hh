#pragma once
// dma:cuda's host memory: shared memory (a memfd, as dma:cpu's) page-locked with
// cudaHostRegister, so the GPU's copy engines and the sm engine's kernel reach it directly (UVA:
// the same address on the GPU), and a peer can still map it (--validate reads the server's
// region, which the device buffer stands in for, through that mapping).
#include <memory>

#include "core/shm.hh"
#include "transport/dma/cuda_runtime.hh"
#include "transport/transport.hh"

namespace rb::transport::dma {

class PinnedSharedMemory final : public HostMemory {
 public:
  static Result<std::unique_ptr<PinnedSharedMemory>> create(std::shared_ptr<CudaRuntime> rt, size_t len) {
    auto m = SharedMemory::create("rdmabench-dma", len);
    if (!m) return m.status();
    std::unique_ptr<PinnedSharedMemory> p(new PinnedSharedMemory(std::move(rt), std::move(*m)));
    // cudaHostRegisterPortable | cudaHostRegisterMapped: every context, and mapped for kernels.
    Status s = p->rt_->check(p->rt_->HostRegister(p->m_.data(), std::max<size_t>(len, 1), 1 | 2), "cudaHostRegister");
    if (!s) return s;
    p->registered_ = true;
    return p;
  }
  ~PinnedSharedMemory() override {
    if (registered_) rt_->HostUnregister(m_.data());
  }
  uint8_t* data() const override { return m_.data(); }
  size_t size() const override { return m_.size(); }
  const SharedMemory& shared() const { return m_; }

 private:
  PinnedSharedMemory(std::shared_ptr<CudaRuntime> rt, SharedMemory m) : rt_(std::move(rt)), m_(std::move(m)) {}
  std::shared_ptr<CudaRuntime> rt_;
  SharedMemory m_;
  bool registered_ = false;
};

}  // namespace rb::transport::dma
