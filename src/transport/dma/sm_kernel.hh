#pragma once
// The sm engine's persistent kernel, ready to launch on one GPU: compiled by NVRTC for that GPU's
// architecture (a CUBIN, so no PTX JIT and no driver newer than NVRTC's major is needed), loaded
// with the driver API in the device's primary context (the one the CUDA runtime uses too, so the
// runtime's pinned buffers and device memory are valid in it). One per domain, shared by its
// endpoints' engines.
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "transport/dma/cuda_driver.hh"
#include "transport/dma/nvrtc.hh"

namespace rb::transport::dma {

class SmKernel {
 public:
  static Result<std::shared_ptr<SmKernel>> load(std::shared_ptr<CudaDriver> driver, const Nvrtc& nvrtc, int dev);
  ~SmKernel();
  SmKernel(const SmKernel&) = delete;
  SmKernel& operator=(const SmKernel&) = delete;

  CudaDriver& driver() const { return *driver_; }
  CUfunction function() const { return fn_; }
  const std::string& arch() const { return arch_; }
  // Makes the device's primary context current on the calling thread (driver calls need it).
  Status make_current() const { return driver_->check(driver_->CtxSetCurrent(ctx_), "cuCtxSetCurrent"); }

  // The rings of this GPU's live engines (their stop flags, in host memory). Freeing CUDA memory
  // may wait for the whole device, and a persistent kernel never ends by itself: an engine going
  // away first stops every kernel here (they all go at a session's end), so no free waits forever.
  void track(uint64_t* stop_flag);
  void untrack(uint64_t* stop_flag);
  void stop_all();

 private:
  SmKernel() = default;
  std::shared_ptr<CudaDriver> driver_;
  CUdevice dev_ = 0;
  CUcontext ctx_ = nullptr;
  CUmodule module_ = nullptr;
  CUfunction fn_ = nullptr;
  std::string arch_;
  std::mutex mu_;
  std::vector<uint64_t*> stop_flags_;
};

// Why the sm engine cannot run on GPU `dev` here (driver, NVRTC, architecture), or "" when it
// can; for --list, without compiling anything.
std::string sm_engine_unavailable_reason(int dev);

}  // namespace rb::transport::dma
