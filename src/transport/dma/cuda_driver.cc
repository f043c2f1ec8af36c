#include "transport/dma/cuda_driver.hh"

#include <cstdlib>
#include <vector>

#include <fmt/format.h>

#include "transport/dma/shared_library.hh"

namespace rb::transport::dma {

Result<std::shared_ptr<CudaDriver>> CudaDriver::load() {
  std::vector<std::string> names;
  if (const char* env = std::getenv("RDMABENCH_CUDA_DRIVER")) names.push_back(env);
  for (const char* n : {"libcuda.so.1", "libcuda.so"}) names.push_back(n);
  std::shared_ptr<CudaDriver> d(new CudaDriver);
  OpenedLibrary lib = open_first(names);
  d->lib_ = lib.handle;
  d->path = lib.path;
  const std::string& tried = lib.tried;
  if (!d->lib_)
    return Status(Errc::unavailable, fmt::format("CUDA driver not found (tried {}; is the NVIDIA driver installed?)", tried));
  auto sym = [&](auto& fn, const char* name) { return bind_symbol(d->lib_, fn, name); };
  int (*init)(unsigned) = nullptr;
  int (*driver_version)(int*) = nullptr;
  bool ok = sym(init, "cuInit") && sym(driver_version, "cuDriverGetVersion") && sym(d->GetErrorString, "cuGetErrorString") &&
            sym(d->DeviceGet, "cuDeviceGet") && sym(d->DeviceGetAttribute, "cuDeviceGetAttribute") &&
            sym(d->PrimaryCtxRetain, "cuDevicePrimaryCtxRetain") && sym(d->PrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2") &&
            sym(d->CtxSetCurrent, "cuCtxSetCurrent") && sym(d->ModuleLoadData, "cuModuleLoadData") &&
            sym(d->ModuleUnload, "cuModuleUnload") && sym(d->ModuleGetFunction, "cuModuleGetFunction") &&
            sym(d->LaunchKernel, "cuLaunchKernel") && sym(d->StreamCreate, "cuStreamCreate") &&
            sym(d->StreamDestroy, "cuStreamDestroy_v2") && sym(d->StreamQuery, "cuStreamQuery") &&
            sym(d->StreamSynchronize, "cuStreamSynchronize") && sym(d->MemHostAlloc, "cuMemHostAlloc") &&
            sym(d->MemFreeHost, "cuMemFreeHost") && sym(d->MemHostGetDevicePointer, "cuMemHostGetDevicePointer_v2") &&
            sym(d->MemAlloc, "cuMemAlloc_v2") && sym(d->MemFree, "cuMemFree_v2") && sym(d->MemsetD8Async, "cuMemsetD8Async");
  if (!ok) return Status(Errc::unavailable, fmt::format("{} lacks a CUDA driver entry point rdmabench needs", d->path));
  int rc = init(0);
  if (rc != kSuccess) return Status(Errc::unavailable, fmt::format("cuInit: {}", d->error(rc)));
  driver_version(&d->version);
  return d;
}

std::string CudaDriver::error(int code) const {
  const char* s = nullptr;
  if (GetErrorString) GetErrorString(code, &s);
  return fmt::format("{} ({})", s ? s : "CUDA driver error", code);
}

Status CudaDriver::check(int code, const char* what) const {
  if (code == kSuccess) return {};
  return {Errc::io, fmt::format("{}: {}", what, error(code))};
}

Result<std::string> CudaDriver::arch_of(int dev) const {
  CUdevice d = 0;
  int major = 0, minor = 0;
  Status s = check(DeviceGet(&d, dev), "cuDeviceGet");
  if (s) s = check(DeviceGetAttribute(&major, kAttrComputeMajor, d), "cuDeviceGetAttribute");
  if (s) s = check(DeviceGetAttribute(&minor, kAttrComputeMinor, d), "cuDeviceGetAttribute");
  if (!s) return s;
  return fmt::format("sm_{}{}", major, minor);
}

}  // namespace rb::transport::dma
