#include "transport/dma/sm_kernel.hh"

#include <fmt/format.h>

#include <algorithm>

#include "transport/dma/sm_kernel_source.hh"
#include "transport/dma/sm_ring.h"

namespace rb::transport::dma {
namespace {

// ld.acquire.sys / st.release.sys and __nanosleep, which the ring protocol uses, need Volta.
constexpr int kMinMajor = 7;

bool arch_too_old(const std::string& arch) { return arch.size() < 5 || std::stoi(arch.substr(3)) < kMinMajor * 10; }

}  // namespace

Result<std::shared_ptr<SmKernel>> SmKernel::load(std::shared_ptr<CudaDriver> driver, const Nvrtc& nvrtc, int dev) {
  std::shared_ptr<SmKernel> k(new SmKernel);
  k->driver_ = std::move(driver);
  CudaDriver& d = *k->driver_;
  auto arch = d.arch_of(dev);
  if (!arch) return arch.status();
  if (arch_too_old(*arch))
    return Status(Errc::unsupported, fmt::format("-o engine=sm: GPU {} is {}; the sm engine needs sm_70 or later", dev, *arch));
  k->arch_ = *arch;
  Status s = d.check(d.DeviceGet(&k->dev_, dev), "cuDeviceGet");
  if (s) s = d.check(d.PrimaryCtxRetain(&k->ctx_, k->dev_), "cuDevicePrimaryCtxRetain");
  if (!s) return s;
  s = k->make_current();
  if (!s) return s;
  auto image = nvrtc.compile(sm_kernel_source(), "sm_kernel.cu", k->arch_);
  if (!image) return image.status();
  s = d.check(d.ModuleLoadData(&k->module_, image->data()), "cuModuleLoadData of the sm engine's kernel");
  if (s) s = d.check(d.ModuleGetFunction(&k->fn_, k->module_, kSmKernelName), "cuModuleGetFunction");
  if (!s) return s;
  return k;
}

SmKernel::~SmKernel() {
  if (module_) {
    (void)make_current();
    driver_->ModuleUnload(module_);
  }
  if (ctx_) driver_->PrimaryCtxRelease(dev_);
}

void SmKernel::track(uint64_t* stop_flag) {
  std::lock_guard lock(mu_);
  stop_flags_.push_back(stop_flag);
}

void SmKernel::untrack(uint64_t* stop_flag) {
  std::lock_guard lock(mu_);
  stop_flags_.erase(std::remove(stop_flags_.begin(), stop_flags_.end(), stop_flag), stop_flags_.end());
}

void SmKernel::stop_all() {
  std::lock_guard lock(mu_);
  for (uint64_t* f : stop_flags_) smr_store_release(f, 1);  // smr_stop's store, by the flag's address
}

std::string sm_engine_unavailable_reason(int dev) {
  auto driver = CudaDriver::load();
  if (!driver) return driver.status().message();
  auto arch = driver.value()->arch_of(dev);
  if (!arch) return fmt::format("GPU {}: {}", dev, arch.status().message());
  if (arch_too_old(*arch)) return fmt::format("GPU {} is {}; the sm engine needs sm_70 or later", dev, *arch);
  auto nvrtc = Nvrtc::load();
  if (!nvrtc) return nvrtc.status().message();
  return "";
}

}  // namespace rb::transport::dma
