#include "transport/dma/cuda_runtime.hh"

#include <cstdlib>
#include <vector>

#include <fmt/format.h>

#include "transport/dma/shared_library.hh"

namespace rb::transport::dma {

Result<std::shared_ptr<CudaRuntime>> CudaRuntime::load() {
  std::vector<std::string> names;
  if (const char* env = std::getenv("RDMABENCH_CUDART")) names.push_back(env);
  for (const char* n : {"libcudart.so", "libcudart.so.13", "libcudart.so.12", "/usr/local/cuda/lib64/libcudart.so"})
    names.push_back(n);
  auto rt = std::make_shared<CudaRuntime>();
  OpenedLibrary lib = open_first(names);
  rt->lib_ = lib.handle;
  rt->path = lib.path;
  const std::string& tried = lib.tried;
  if (!rt->lib_)
    return Status(Errc::unavailable, fmt::format("CUDA runtime not found (tried {}; set RDMABENCH_CUDART=/path/libcudart.so)", tried));
  auto sym = [&](auto& fn, const char* name) { return bind_symbol(rt->lib_, fn, name); };
  bool ok = sym(rt->GetDeviceCount, "cudaGetDeviceCount") && sym(rt->SetDevice, "cudaSetDevice") &&
            sym(rt->Malloc, "cudaMalloc") && sym(rt->Free, "cudaFree") && sym(rt->HostAlloc, "cudaHostAlloc") &&
            sym(rt->FreeHost, "cudaFreeHost") &&
            sym(rt->HostRegister, "cudaHostRegister") && sym(rt->HostUnregister, "cudaHostUnregister") &&
            sym(rt->Memcpy, "cudaMemcpy") && sym(rt->Memset, "cudaMemset") &&
            sym(rt->StreamCreateWithFlags, "cudaStreamCreateWithFlags") && sym(rt->StreamDestroy, "cudaStreamDestroy") &&
            sym(rt->StreamSynchronize, "cudaStreamSynchronize") && sym(rt->MemcpyAsync, "cudaMemcpyAsync") &&
            sym(rt->EventCreateWithFlags, "cudaEventCreateWithFlags") && sym(rt->EventRecord, "cudaEventRecord") &&
            sym(rt->EventQuery, "cudaEventQuery") && sym(rt->EventDestroy, "cudaEventDestroy") &&
            sym(rt->GetErrorString, "cudaGetErrorString") && sym(rt->DeviceGetPCIBusId, "cudaDeviceGetPCIBusId");
  if (!ok) return Status(Errc::unavailable, fmt::format("{} lacks a CUDA runtime entry point rdmabench needs", rt->path));
  int (*get_version)(int*) = nullptr;
  if (sym(get_version, "cudaRuntimeGetVersion")) get_version(&rt->version);
  void* batch = dlsym(rt->lib_, "cudaMemcpyBatchAsync");
  if (batch && rt->version >= 13000) rt->batch13 = reinterpret_cast<decltype(rt->batch13)>(batch);
  else if (batch && rt->version >= 12080) rt->batch12 = reinterpret_cast<decltype(rt->batch12)>(batch);
  int rc = rt->GetDeviceCount(&rt->devices);
  if (rc != kSuccess || rt->devices == 0)
    return Status(Errc::unavailable, fmt::format("CUDA runtime {} loaded, but no GPU is usable: {}", rt->version,
                                                 rc ? rt->error(rc) : "no device"));
  return rt;
}

CudaRuntime::~CudaRuntime() {
  // The runtime stays loaded: unloading it under live CUDA state is not supported.
}

std::string CudaRuntime::error(int code) const {
  const char* s = GetErrorString ? GetErrorString(code) : nullptr;
  return fmt::format("{} ({})", s ? s : "CUDA error", code);
}

Status CudaRuntime::check(int code, const char* what) const {
  if (code == kSuccess) return {};
  return {Errc::io, fmt::format("{}: {}", what, error(code))};
}

std::string CudaRuntime::pci_bus_id(int dev) const {
  char buf[64] = {};
  if (DeviceGetPCIBusId(buf, sizeof buf, dev) != kSuccess) return "?";
  return buf;
}

}  // namespace rb::transport::dma
