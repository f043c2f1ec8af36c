// The floor under dma:cuda -o engine=sm's tail: how often, and for how long, the GPU stops a
// persistent kernel that nothing else competes with. Warps of one block each loop for --seconds,
// reading the GPU's own clock (%globaltimer) every look and napping between looks as the sm
// engine's idle warps do; a gap between two looks over --threshold-us is a pause of the kernel,
// not of any host. With --poll-host each look also reads a word of mapped pinned host memory over
// PCIe, as the engine's warps poll their ring: pauses only then are the path to host memory's.
//
// usage: gpu_pause_floor [--seconds S] [--warps N] [--threshold-us U] [--poll-host] [--gpu I]
//        gpu_pause_floor --compile ARCH [--venv DIR]   (NVRTC only, no GPU: the kernel compiles)
// Prints one line; exits 0, 1 on a CUDA error, 2 on a bad flag, 77 when there is no GPU or NVRTC.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "transport/dma/cuda_driver.hh"
#include "transport/dma/nvrtc.hh"

namespace {

using rb::transport::dma::CudaDriver;
using rb::transport::dma::Nvrtc;

constexpr const char* kKernel = R"cuda(
struct pause_count { unsigned long long looks, held, held_ns, longest_ns; };

__device__ __forceinline__ unsigned long long gpu_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// As the sm engine's warps read their ring's slots (sm_ring.h's smr_load_acquire).
__device__ __forceinline__ void read_host(const unsigned long long* p) {
  unsigned long long v;
  asm volatile("ld.acquire.sys.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
}

extern "C" __global__ void pause_probe(pause_count* out, const unsigned long long* host_word,
                                       unsigned long long run_ns, unsigned long long threshold_ns) {
  if ((threadIdx.x & 31) != 0) return;  // a lane a warp: the warps are what the engine runs
  const unsigned warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  pause_count c = {0, 0, 0, 0};
  const unsigned long long start = gpu_ns();
  unsigned long long last = start, now = start;
  while (now - start < run_ns) {
    if (host_word) read_host(host_word);
    __nanosleep(256);
    now = gpu_ns();
    const unsigned long long gap = now - last;
    if (gap > threshold_ns) {
      ++c.held;
      c.held_ns += gap;
      if (gap > c.longest_ns) c.longest_ns = gap;
    }
    last = now;
    ++c.looks;
  }
  out[warp] = c;
}
)cuda";

struct PauseCount {
  unsigned long long looks, held, held_ns, longest_ns;
};

struct Flags {
  double seconds = 1.0, threshold_us = 100;
  unsigned warps = 8;
  int gpu = 0;
  bool poll_host = false;
  std::string compile_arch, venv;
};

[[noreturn]] void bad_flag(const std::string& flag, const std::string& value, const char* fix) {
  std::fprintf(stderr, "gpu_pause_floor: %s '%s': %s\n", flag.c_str(), value.c_str(), fix);
  std::exit(2);
}

Flags parse(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) bad_flag(a, "", "needs a value");
      return argv[++i];
    };
    if (a == "--seconds") {
      std::string v = value();
      f.seconds = std::atof(v.c_str());
      if (f.seconds <= 0 || f.seconds > 60) bad_flag(a, v, "give 0 to 60 seconds");
    } else if (a == "--warps") {
      std::string v = value();
      f.warps = unsigned(std::atoi(v.c_str()));
      if (f.warps < 1 || f.warps > 1024) bad_flag(a, v, "give 1 to 1024 warps");
    } else if (a == "--threshold-us") {
      std::string v = value();
      f.threshold_us = std::atof(v.c_str());
      if (f.threshold_us <= 0) bad_flag(a, v, "give a positive number of microseconds");
    } else if (a == "--gpu") {
      f.gpu = std::atoi(value().c_str());
    } else if (a == "--poll-host") {
      f.poll_host = true;
    } else if (a == "--compile") {
      f.compile_arch = value();
    } else if (a == "--venv") {
      f.venv = value();
    } else {
      bad_flag("argument", a, "see the usage at the top of bench/tools/gpu_pause_floor.cc");
    }
  }
  return f;
}

int unavailable(const std::string& why) {
  std::fprintf(stderr, "gpu_pause_floor: %s\n", why.c_str());
  return 77;
}

int failed(const rb::Status& s) {
  std::fprintf(stderr, "gpu_pause_floor: %s\n", s.message().c_str());
  return 1;
}

int measure(const Flags& f, const Nvrtc& nvrtc) {
  auto loaded = CudaDriver::load();
  if (!loaded) return unavailable(loaded.status().message());
  CudaDriver& d = *loaded.value();
  auto arch = d.arch_of(f.gpu);
  if (!arch) return unavailable(arch.status().message());
  int dev = 0;
  void* ctx = nullptr;
  rb::Status s = d.check(d.DeviceGet(&dev, f.gpu), "cuDeviceGet");
  if (s) s = d.check(d.PrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  if (s) s = d.check(d.CtxSetCurrent(ctx), "cuCtxSetCurrent");
  if (!s) return failed(s);
  auto image = nvrtc.compile(kKernel, "gpu_pause_floor.cu", *arch);
  if (!image) return failed(image.status());
  void *module = nullptr, *fn = nullptr, *host = nullptr;
  s = d.check(d.ModuleLoadData(&module, image->data()), "cuModuleLoadData");
  if (s) s = d.check(d.ModuleGetFunction(&fn, module, "pause_probe"), "cuModuleGetFunction");
  size_t bytes = f.warps * sizeof(PauseCount) + 64;
  if (s) s = d.check(d.MemHostAlloc(&host, bytes, CudaDriver::kHostAllocDeviceMap), "cuMemHostAlloc");
  if (!s) return failed(s);
  std::memset(host, 0, bytes);
  rb::transport::dma::CUdeviceptr mapped = 0;
  s = d.check(d.MemHostGetDevicePointer(&mapped, host, 0), "cuMemHostGetDevicePointer");
  if (!s) return failed(s);
  unsigned long long out = mapped, word = f.poll_host ? mapped + f.warps * sizeof(PauseCount) : 0;
  unsigned long long run_ns = (unsigned long long)(f.seconds * 1e9), threshold_ns = (unsigned long long)(f.threshold_us * 1e3);
  void* args[] = {&out, &word, &run_ns, &threshold_ns};
  s = d.check(d.LaunchKernel(fn, f.warps, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr), "cuLaunchKernel");
  if (s) s = d.check(d.StreamSynchronize(nullptr), "cuStreamSynchronize");
  if (!s) return failed(s);
  PauseCount total{0, 0, 0, 0};
  const auto* per_warp = static_cast<const PauseCount*>(host);
  for (unsigned w = 0; w < f.warps; ++w) {
    total.looks += per_warp[w].looks;
    total.held += per_warp[w].held;
    total.held_ns += per_warp[w].held_ns;
    total.longest_ns = std::max(total.longest_ns, per_warp[w].longest_ns);
  }
  double held_share = double(total.held_ns) / (f.seconds * 1e9 * f.warps);
  std::printf("gpu_pause_floor: GPU %d %s, %u warps, %.1f s%s: %llu looks, %llu pauses over %.0f us "
              "(%.1f a second a warp), %.1f%% of the time, longest %.0f us\n",
              f.gpu, arch->c_str(), f.warps, f.seconds, f.poll_host ? ", polling host memory" : "", total.looks, total.held,
              f.threshold_us, double(total.held) / f.warps / f.seconds, held_share * 100, total.longest_ns / 1e3);
  d.MemFreeHost(host);
  d.ModuleUnload(module);
  d.PrimaryCtxRelease(dev);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Flags f = parse(argc, argv);
  // NVRTC from --venv's wheel when given (and RDMABENCH_NVRTC is not set), else as the sm engine finds it.
  auto nvrtc = Nvrtc::load(f.venv.empty() || std::getenv("RDMABENCH_NVRTC") ? "" : rb::transport::dma::nvrtc_in_venv(f.venv));
  if (!nvrtc) return unavailable(nvrtc.status().message());
  if (!f.compile_arch.empty()) {
    auto image = nvrtc.value()->compile(kKernel, "gpu_pause_floor.cu", f.compile_arch);
    if (!image) return failed(image.status());
    std::printf("gpu_pause_floor: the probe compiles for %s: %zu bytes\n", f.compile_arch.c_str(), image->size());
    return 0;
  }
  return measure(f, *nvrtc.value());
}
