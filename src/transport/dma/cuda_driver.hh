#pragma once
// The CUDA driver API (libcuda.so.1), loaded at run time (dlopen) so rdmabench builds and runs
// without CUDA: the sm engine loads its NVRTC-compiled kernel and launches it with it. Only the
// entry points that engine needs, with their C ABI spelled out here.
#include <cstdint>
#include <memory>
#include <string>

#include "core/status.hh"

namespace rb::transport::dma {

using CUdevice = int;
using CUcontext = void*;
using CUmodule = void*;
using CUfunction = void*;
using CUstream = void*;
using CUdeviceptr = uint64_t;

class CudaDriver {
 public:
  // Tries $RDMABENCH_CUDA_DRIVER, then libcuda.so.1 and libcuda.so; runs cuInit.
  static Result<std::shared_ptr<CudaDriver>> load();
  CudaDriver(const CudaDriver&) = delete;
  CudaDriver& operator=(const CudaDriver&) = delete;

  std::string path;
  int version = 0;  // the driver's CUDA version, e.g. 12090
  std::string error(int code) const;
  Status check(int code, const char* what) const;
  // "sm_90" for GPU `dev`, or the error.
  Result<std::string> arch_of(int dev) const;

  int (*DeviceGet)(CUdevice*, int) = nullptr;
  int (*DeviceGetAttribute)(int*, int, CUdevice) = nullptr;
  int (*PrimaryCtxRetain)(CUcontext*, CUdevice) = nullptr;
  int (*PrimaryCtxRelease)(CUdevice) = nullptr;
  int (*CtxSetCurrent)(CUcontext) = nullptr;
  int (*ModuleLoadData)(CUmodule*, const void*) = nullptr;
  int (*ModuleUnload)(CUmodule) = nullptr;
  int (*ModuleGetFunction)(CUfunction*, CUmodule, const char*) = nullptr;
  int (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream, void**,
                      void**) = nullptr;
  int (*StreamCreate)(CUstream*, unsigned) = nullptr;
  int (*StreamDestroy)(CUstream) = nullptr;
  int (*StreamQuery)(CUstream) = nullptr;
  int (*StreamSynchronize)(CUstream) = nullptr;
  int (*MemHostAlloc)(void**, size_t, unsigned) = nullptr;
  int (*MemFreeHost)(void*) = nullptr;
  int (*MemHostGetDevicePointer)(CUdeviceptr*, void*, unsigned) = nullptr;
  int (*MemAlloc)(CUdeviceptr*, size_t) = nullptr;
  int (*MemFree)(CUdeviceptr) = nullptr;
  int (*MemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream) = nullptr;

  static constexpr int kSuccess = 0, kNotReady = 600;
  static constexpr unsigned kHostAllocPortable = 1, kHostAllocDeviceMap = 2;
  static constexpr unsigned kStreamNonBlocking = 1;
  static constexpr int kAttrComputeMajor = 75, kAttrComputeMinor = 76;

 private:
  CudaDriver() = default;
  int (*GetErrorString)(int, const char**) = nullptr;
  void* lib_ = nullptr;
};

}  // namespace rb::transport::dma
