#pragma once
// Page-locked host memory from the CUDA runtime, so the GPU's copy engines can reach it directly.
#include <cstring>
#include <memory>

#include "transport/dma/cuda_runtime.hh"
#include "transport/transport.hh"

namespace rb::transport::dma {

class PinnedMemory final : public HostMemory {
 public:
  static Result<std::unique_ptr<PinnedMemory>> create(std::shared_ptr<CudaRuntime> rt, size_t len) {
    std::unique_ptr<PinnedMemory> m(new PinnedMemory);
    m->rt_ = std::move(rt);
    void* p = nullptr;
    Status s = m->rt_->check(m->rt_->HostAlloc(&p, std::max<size_t>(len, 1), 1 /* portable */), "cudaHostAlloc");
    if (!s) return s;
    m->p_ = static_cast<uint8_t*>(p);
    m->len_ = len;
    std::memset(m->p_, 0, len);
    return m;
  }
  ~PinnedMemory() override {
    if (p_) rt_->FreeHost(p_);
  }
  uint8_t* data() const override { return p_; }
  size_t size() const override { return len_; }

 private:
  PinnedMemory() = default;
  std::shared_ptr<CudaRuntime> rt_;
  uint8_t* p_ = nullptr;
  size_t len_ = 0;
};

}  // namespace rb::transport::dma
