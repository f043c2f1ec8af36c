#pragma once
// The CUDA runtime, loaded at run time (dlopen) so rdmabench builds and runs without CUDA.
// Only the handful of entry points the copy engine needs, with their C ABI spelled out here.
#include <memory>
#include <string>

#include "core/status.hh"

namespace rb::transport::dma {

using cudaStream_t = void*;
using cudaEvent_t = void*;

struct CudaMemLocation {
  int type;  // 1 device, 2 host
  int id;
};
struct CudaMemcpyAttributes {
  int src_access_order;  // 1 = stream order
  CudaMemLocation src_hint, dst_hint;
  unsigned flags;
};

class CudaRuntime {
 public:
  // Tries $RDMABENCH_CUDART, then libcudart.so, .so.13, .so.12; the message says why not.
  static Result<std::shared_ptr<CudaRuntime>> load();
  ~CudaRuntime();

  int version = 0;  // e.g. 13000
  int devices = 0;
  std::string path;
  std::string error(int code) const;
  Status check(int code, const char* what) const;
  std::string pci_bus_id(int dev) const;
  bool has_batch() const { return batch12 || batch13; }

  int (*GetDeviceCount)(int*) = nullptr;
  int (*SetDevice)(int) = nullptr;
  int (*Malloc)(void**, size_t) = nullptr;
  int (*Free)(void*) = nullptr;
  int (*HostAlloc)(void**, size_t, unsigned) = nullptr;
  int (*FreeHost)(void*) = nullptr;
  int (*HostRegister)(void*, size_t, unsigned) = nullptr;
  int (*HostUnregister)(void*) = nullptr;
  int (*Memcpy)(void*, const void*, size_t, int) = nullptr;
  int (*Memset)(void*, int, size_t) = nullptr;
  int (*StreamCreateWithFlags)(cudaStream_t*, unsigned) = nullptr;
  int (*StreamDestroy)(cudaStream_t) = nullptr;
  int (*StreamSynchronize)(cudaStream_t) = nullptr;
  int (*MemcpyAsync)(void*, const void*, size_t, int, cudaStream_t) = nullptr;
  int (*EventCreateWithFlags)(cudaEvent_t*, unsigned) = nullptr;
  int (*EventRecord)(cudaEvent_t, cudaStream_t) = nullptr;
  int (*EventQuery)(cudaEvent_t) = nullptr;
  int (*EventDestroy)(cudaEvent_t) = nullptr;
  const char* (*GetErrorString)(int) = nullptr;
  int (*DeviceGetPCIBusId)(char*, int, int) = nullptr;
  // cudaMemcpyBatchAsync: CUDA 12.8/12.9 have a failIdx argument that CUDA 13 dropped.
  int (*batch12)(void**, void**, size_t*, size_t, CudaMemcpyAttributes*, size_t*, size_t, size_t*, cudaStream_t) = nullptr;
  int (*batch13)(void* const*, const void* const*, const size_t*, size_t, CudaMemcpyAttributes*, size_t*, size_t,
                 cudaStream_t) = nullptr;

  static constexpr int kSuccess = 0, kNotReady = 600;
  static constexpr int kMemcpyDefault = 4;

 private:
  void* lib_ = nullptr;
};

}  // namespace rb::transport::dma
