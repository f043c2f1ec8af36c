#include "transport/dma/dma_transport.hh"

#include <fmt/format.h>

#include "core/shm.hh"
#include "transport/dma/cuda_engine.hh"
#include "transport/dma/dma_endpoint.hh"
#include "transport/dma/pinned_memory.hh"
#include "transport/dma/sm_engine.hh"

namespace rb::transport::dma {
namespace {

constexpr uint32_t kQueueDepth = 4096;

// Host memory the peer can map: a memfd.
class SharedHostMemory final : public HostMemory {
 public:
  explicit SharedHostMemory(SharedMemory m) : m_(std::move(m)) {}
  uint8_t* data() const override { return m_.data(); }
  size_t size() const override { return m_.size(); }
  const SharedMemory& shared() const { return m_; }

 private:
  SharedMemory m_;
};

Caps engine_caps(EngineKind kind) {
  Caps c;
  c.write = c.read = true;
  c.max_msg = 1ull << 31;
  c.tx_depth = kQueueDepth;
  c.selective_completion = true;
  c.engine_thread = kind == EngineKind::cpu;
  c.can_wait = kind == EngineKind::cpu;  // the engine thread signals an eventfd; CUDA events and the sm ring cannot be epolled
  c.checks_bounds = true;
  // The cuda engines' far side is a device buffer: invisible to the server, and nobody there polls
  // it; with --validate it is loaded from and copied back to the server's region around each phase.
  c.peer_sees_writes = c.peer_memory_readable = kind == EngineKind::cpu;
  c.peer_memory_at_quiesce = kind != EngineKind::cpu;
  return c;
}

// Registered ranges remember which shared allocation (memfd) they live in.
struct Allocation {
  uint8_t* p;
  size_t len;
  ProcFdHandle whole;
};

class DmaMr final : public MemoryRegion {
 public:
  DmaMr(void* a, size_t l, uint64_t key, std::vector<uint8_t> handle) : a_(a), l_(l), key_(key), handle_(std::move(handle)) {}
  void* addr() const override { return a_; }
  size_t len() const override { return l_; }
  void* desc() const override { return nullptr; }
  RemoteRegion remote() const override { return {0, key_, l_, handle_}; }

 private:
  void* a_;
  size_t l_;
  uint64_t key_;
  std::vector<uint8_t> handle_;
};

// What a cuda domain runs on: the runtime, its GPU and, for engine=sm, the loaded kernel.
struct Gpu {
  std::shared_ptr<CudaRuntime> rt;
  int dev = 0;
  std::shared_ptr<SmKernel> kernel;
  uint32_t sm_threads = 0;
};

DomainInfo domain_info(EngineKind kind, const Gpu& g) {
  if (kind == EngineKind::cpu) return {"dma", "cpu", "host-memory", "memfd", ""};
  std::string lib = fmt::format("cudart {}.{}", g.rt->version / 1000, g.rt->version % 1000 / 10);
  if (kind == EngineKind::cuda_copy) return {"dma", "cuda", "cuda", fmt::format("gpu{} {}", g.dev, g.rt->pci_bus_id(g.dev)), lib};
  return {"dma", "cuda-sm", "cuda", fmt::format("gpu{} {} {} threads/queue", g.dev, g.rt->pci_bus_id(g.dev), g.sm_threads),
          fmt::format("{}, kernel for {}", lib, g.kernel->arch())};
}

class DmaDomain final : public Domain {
 public:
  DmaDomain(EngineKind kind, Gpu gpu) : kind_(kind), gpu_(std::move(gpu)), caps_(engine_caps(kind)), info_(domain_info(kind, gpu_)) {}
  const Caps& caps() const override { return caps_; }
  const DomainInfo& info() const override { return info_; }

  Result<std::unique_ptr<HostMemory>> allocate(size_t len) override {
    if (on_gpu(kind_)) {
      auto m = PinnedSharedMemory::create(gpu_.rt, len);
      if (!m) return m.status();
      allocations_.push_back({m.value()->data(), len, m.value()->shared().handle(0)});
      return std::unique_ptr<HostMemory>(std::move(m.value()));
    }
    auto m = SharedMemory::create("rdmabench-dma", len);
    if (!m) return m.status();
    auto host = std::make_unique<SharedHostMemory>(std::move(*m));
    allocations_.push_back({host->data(), len, host->shared().handle(0)});
    return std::unique_ptr<HostMemory>(std::move(host));
  }

  Result<std::unique_ptr<MemoryRegion>> register_memory(void* addr, size_t len) override {
    auto* p = static_cast<uint8_t*>(addr);
    const Allocation* owner = nullptr;
    for (auto& a : allocations_)
      if (p >= a.p && p + len <= a.p + a.len) owner = &a;
    if (!owner) return Status(Errc::invalid_argument, "dma registers only memory from its own allocate()");
    ProcFdHandle h = owner->whole;
    h.offset = uint64_t(p - owner->p);
    return std::unique_ptr<MemoryRegion>(new DmaMr(addr, len, next_key_++, h.encode()));
  }

  Result<std::unique_ptr<Endpoint>> open_endpoint(const EndpointOptions& o) override {
    if (o.event && !caps_.can_wait) return Status(Errc::unsupported, "dma:cuda cannot wake a sleeper: no event endpoints");
    auto engine = make_engine();
    if (!engine) return engine.status();
    return make_dma_endpoint(kind_, std::move(engine.value()), gpu_.rt, o.validate);
  }

 private:
  Result<std::unique_ptr<CopyEngine>> make_engine() {
    if (kind_ == EngineKind::cpu) return make_cpu_engine(kQueueDepth);
    if (kind_ == EngineKind::cuda_sm) {
      // The runtime's calls on this thread (the endpoint's device buffer) go to the kernel's GPU.
      Status s = gpu_.rt->check(gpu_.rt->SetDevice(gpu_.dev), "cudaSetDevice");
      if (!s) return s;
      return make_sm_engine(gpu_.kernel, kQueueDepth, gpu_.sm_threads);
    }
    return make_cuda_engine(gpu_.rt, gpu_.dev, kQueueDepth, true);
  }

  EngineKind kind_;
  Gpu gpu_;
  Caps caps_;
  DomainInfo info_;
  std::vector<Allocation> allocations_;
  uint64_t next_key_ = 1;
};

Result<int> gpu_index(const std::string& domain, int devices) {
  if (domain.empty()) return 0;
  char* end = nullptr;
  long d = strtol(domain.c_str(), &end, 10);
  if (*end || d < 0 || d >= devices)
    return Status(Errc::invalid_argument, fmt::format("--domain {}: dma:cuda takes a GPU index 0..{}", domain, devices - 1));
  return int(d);
}

// engine=sm's kernel for GPU `dev`: the driver, NVRTC and a compile for that GPU.
Result<std::shared_ptr<SmKernel>> load_sm_kernel(int dev) {
  auto driver = CudaDriver::load();
  if (!driver) return Status(Errc::unavailable, "-t dma:cuda -o engine=sm: " + driver.status().message());
  auto nvrtc = Nvrtc::load();
  if (!nvrtc) return Status(Errc::unavailable, "-t dma:cuda -o engine=sm: " + nvrtc.status().message());
  return SmKernel::load(std::move(driver.value()), *nvrtc.value(), dev);
}

}  // namespace

Caps dma_caps(bool gpu) { return engine_caps(gpu ? EngineKind::cuda_copy : EngineKind::cpu); }

Result<std::unique_ptr<Domain>> open_domain(const OpenArgs& opt) {
  const bool sm = opt.options.text("engine") == "sm";
  if (opt.variant.empty() || opt.variant == "cpu") {
    if (!opt.domain.empty())
      return Status(Errc::invalid_argument, "--domain: dma:cpu has no devices to choose; drop --domain");
    if (sm)
      return Status(Errc::invalid_argument, "-o engine=sm: dma:cpu has one engine (a copy thread); use -t dma:cuda -o engine=sm "
                                            "or drop -o engine");
    return std::unique_ptr<Domain>(new DmaDomain(EngineKind::cpu, {}));
  }
  auto rt = CudaRuntime::load();
  if (!rt) return Status(Errc::unavailable, "-t dma:cuda: " + rt.status().message());
  auto dev = gpu_index(opt.domain, rt.value()->devices);
  if (!dev) return dev.status();
  Gpu g{std::move(rt.value()), *dev, nullptr, uint32_t(opt.options.number("sm_warps")) * 32};
  if (!sm) return std::unique_ptr<Domain>(new DmaDomain(EngineKind::cuda_copy, std::move(g)));
  auto kernel = load_sm_kernel(g.dev);
  if (!kernel) return kernel.status();
  g.kernel = std::move(kernel.value());
  return std::unique_ptr<Domain>(new DmaDomain(EngineKind::cuda_sm, std::move(g)));
}

}  // namespace rb::transport::dma
