#include "transport/dma/dma_transport.hh"

#include <unistd.h>

#include <cstring>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "core/shm.hh"
#include "transport/dma/cuda_engine.hh"
#include "transport/dma/pinned_memory.hh"

namespace rb::transport::dma {
namespace {

enum class Engine { cpu, cuda };

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

Caps engine_caps(Engine kind) {
  Caps c;
  c.write = c.read = true;
  c.max_msg = 1ull << 31;
  c.tx_depth = kQueueDepth;
  c.selective_completion = true;
  c.engine_thread = kind == Engine::cpu;
  c.can_wait = kind == Engine::cpu;  // the engine thread signals an eventfd; CUDA events cannot be epolled
  c.checks_bounds = true;
  // The cuda engine's far side is a device buffer: invisible to the server, and nobody there polls it.
  c.peer_sees_writes = c.peer_memory_readable = kind == Engine::cpu;
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

class DmaEp final : public Endpoint {
 public:
  DmaEp(Engine kind, std::unique_ptr<CopyEngine> engine, std::shared_ptr<CudaRuntime> rt)
      : kind_(kind), engine_(std::move(engine)), rt_(std::move(rt)) {
    copies_.reserve(256);
  }
  ~DmaEp() override {
    engine_.reset();  // stop the engine before the memory it copies into goes away
    if (device_) rt_->Free(device_);
  }

  std::vector<uint8_t> address() const override {
    uint32_t pid = uint32_t(getpid());
    std::vector<uint8_t> a(4);
    std::memcpy(a.data(), &pid, 4);
    return a;
  }
  Status connect(std::span<const uint8_t>) override { return {}; }

  Status set_remote(const RemoteRegion& r) override {
    remote_len_ = r.len;
    if (kind_ == Engine::cpu) {
      auto h = ProcFdHandle::decode(r.handle);
      if (!h) return Status(h.status().code(), "dma: " + h.status().message());
      auto m = PeerMapping::map(*h);
      if (!m) return Status(m.status().code(), "dma: " + m.status().message());
      peer_ = std::move(*m);
      remote_ = peer_->base();
      return {};
    }
    // The GPU's memory stands in for the far side: a device buffer the size of the peer region.
    if (device_) rt_->Free(device_);
    device_ = nullptr;
    Status s = rt_->check(rt_->Malloc(&device_, std::max<uint64_t>(r.len, 1)), "cudaMalloc of the device region");
    if (!s) return s;
    s = rt_->check(rt_->Memset(device_, 0, r.len), "cudaMemset");
    remote_ = static_cast<uint8_t*>(device_);
    return s;
  }

  int post(std::span<const WorkRequest> wrs) override {
    copies_.clear();
    size_t taken = 0;
    for (const auto& w : wrs) {
      if (w.op != Op::write && w.op != Op::read) {
        err_ = fmt::format("dma engines move memory only: {} is not supported", op_name(w.op));
        return taken ? int(taken) : -1;
      }
      if (w.remote_off > remote_len_ || w.len > remote_len_ - w.remote_off) {
        // Out of the peer's registered range: fails like a NIC's protection error, nothing is touched.
        if (!submit_copies(true, taken)) return int(taken);
        local_done_.push_back({w.wr_id, w.op, w.len, WcStatus::remote_access, EFAULT});
        ++taken;
        continue;
      }
      uint8_t* local = static_cast<uint8_t*>(w.mr->addr()) + w.local_off;
      uint8_t* remote = remote_ + w.remote_off;
      bool sig = w.flags & wr_flag::signal;
      copies_.push_back(w.op == Op::write ? Copy{remote, local, w.len, w.wr_id, w.op, sig}
                                          : Copy{local, remote, w.len, w.wr_id, w.op, sig});
    }
    bool doorbell = wrs.empty() || !(wrs.back().flags & wr_flag::more);
    submit_copies(doorbell, taken);
    return int(taken);
  }

  int poll(std::span<Completion> out) override {
    size_t n = 0;
    while (n < out.size() && !local_done_.empty()) {
      out[n++] = local_done_.back();
      local_done_.pop_back();
    }
    int r = engine_->reap(out.subspan(n));
    if (r < 0) {
      err_ = engine_->last_error();
      return -1;
    }
    return int(n) + r;
  }

  Status quiesce(double timeout_s) override {
    Status s = engine_->drain(timeout_s);
    Completion sink[64];
    while (engine_->reap(sink) > 0) {
    }
    local_done_.clear();
    return s;
  }

  std::string describe_error(const Completion& c) const override {
    if (c.vendor_err == EFAULT) return fmt::format("{}: outside the peer's registered region", wc_status_name(c.status));
    return fmt::format("{}: copy failed ({}): {}", wc_status_name(c.status), c.vendor_err, engine_->last_error());
  }
  const std::string& last_error() const override { return err_; }
  int arm_wait(WaitHandle& out) override {
    if (!local_done_.empty()) return 0;
    int r = engine_->arm_wait(out);
    if (r < 0) err_ = engine_->last_error();
    return r;
  }

 private:
  // Hands the collected copies to the engine; advances `taken` by what it accepted.
  bool submit_copies(bool doorbell, size_t& taken) {
    if (copies_.empty()) return true;
    int a = engine_->submit(copies_, doorbell);
    if (a < 0) {
      err_ = engine_->last_error();
      copies_.clear();
      return false;
    }
    taken += size_t(a);
    bool all = size_t(a) == copies_.size();
    copies_.clear();
    return all;
  }

  Engine kind_;
  std::unique_ptr<CopyEngine> engine_;
  std::shared_ptr<CudaRuntime> rt_;
  std::optional<PeerMapping> peer_;
  void* device_ = nullptr;
  uint8_t* remote_ = nullptr;
  uint64_t remote_len_ = 0;
  std::vector<Copy> copies_;
  std::vector<Completion> local_done_;
  std::string err_;
};

class DmaDomain final : public Domain {
 public:
  DmaDomain(Engine kind, std::shared_ptr<CudaRuntime> rt, int dev)
      : kind_(kind), rt_(std::move(rt)), dev_(dev), caps_(engine_caps(kind)) {
    if (kind == Engine::cpu) {
      info_ = {"dma", "cpu", "host-memory", "memfd", ""};
    } else {
      info_ = {"dma", "cuda", "cuda", fmt::format("gpu{} {}", dev, rt_->pci_bus_id(dev)),
               fmt::format("cudart {}.{}", rt_->version / 1000, rt_->version % 1000 / 10)};
    }
  }
  const Caps& caps() const override { return caps_; }
  const DomainInfo& info() const override { return info_; }

  Result<std::unique_ptr<HostMemory>> allocate(size_t len) override {
    if (kind_ == Engine::cuda) {
      auto m = PinnedMemory::create(rt_, len);
      if (!m) return m.status();
      return std::unique_ptr<HostMemory>(std::move(m.value()));
    }
    auto m = SharedMemory::create("rdmabench-dma", len);
    if (!m) return m.status();
    auto host = std::make_unique<SharedHostMemory>(std::move(*m));
    allocations_.push_back({host->data(), len, host->shared().handle(0)});
    return std::unique_ptr<HostMemory>(std::move(host));
  }

  Result<std::unique_ptr<MemoryRegion>> register_memory(void* addr, size_t len) override {
    std::vector<uint8_t> handle;
    if (kind_ == Engine::cpu) {
      auto* p = static_cast<uint8_t*>(addr);
      const Allocation* owner = nullptr;
      for (auto& a : allocations_)
        if (p >= a.p && p + len <= a.p + a.len) owner = &a;
      if (!owner) return Status(Errc::invalid_argument, "dma:cpu registers only memory from its own allocate()");
      ProcFdHandle h = owner->whole;
      h.offset = uint64_t(p - owner->p);
      handle = h.encode();
    }
    return std::unique_ptr<MemoryRegion>(new DmaMr(addr, len, next_key_++, std::move(handle)));
  }

  Result<std::unique_ptr<Endpoint>> open_endpoint(const EndpointOptions& o) override {
    if (o.event && !caps_.can_wait) return Status(Errc::unsupported, "dma:cuda cannot wake a sleeper: no event endpoints");
    std::unique_ptr<CopyEngine> engine;
    if (kind_ == Engine::cpu) {
      engine = make_cpu_engine(kQueueDepth);
    } else {
      auto e = make_cuda_engine(rt_, dev_, kQueueDepth, true);
      if (!e) return e.status();
      engine = std::move(e.value());
    }
    return std::unique_ptr<Endpoint>(new DmaEp(kind_, std::move(engine), rt_));
  }

 private:
  Engine kind_;
  std::shared_ptr<CudaRuntime> rt_;
  int dev_;
  Caps caps_;
  DomainInfo info_;
  std::vector<Allocation> allocations_;
  uint64_t next_key_ = 1;
};

}  // namespace

Result<std::unique_ptr<Domain>> open_domain(const OpenArgs& opt) {
  if (opt.variant.empty() || opt.variant == "cpu") {
    if (!opt.domain.empty())
      return Status(Errc::invalid_argument, "--domain: dma:cpu has no devices to choose; drop --domain");
    return std::unique_ptr<Domain>(new DmaDomain(Engine::cpu, nullptr, 0));
  }
  auto rt = CudaRuntime::load();
  if (!rt) return Status(Errc::unavailable, "-t dma:cuda: " + rt.status().message());
  int dev = 0;
  if (!opt.domain.empty()) {
    char* end = nullptr;
    long d = strtol(opt.domain.c_str(), &end, 10);
    if (*end || d < 0 || d >= rt.value()->devices)
      return Status(Errc::invalid_argument, fmt::format("--domain {}: dma:cuda takes a GPU index 0..{}", opt.domain,
                                                        rt.value()->devices - 1));
    dev = int(d);
  }
  return std::unique_ptr<Domain>(new DmaDomain(Engine::cuda, std::move(rt.value()), dev));
}

TransportEntry registry_entry() {
  TransportEntry e;
  e.name = "dma";
  e.description = "copy engines moving memory as a NIC's DMA would (the DMA experiment); write and read only";
  e.variant_help = "the copy engine";
  e.variants = {{"cpu", "a copy thread per queue, into the peer's region in shared memory; the default"},
                {"cuda", "the GPU's copy engines, pinned host buffers to and from device memory"}};
  e.domain_help = "dma:cuda: the GPU index (default 0); dma:cpu takes none";
  e.test_variants = {"cpu", "cuda"};
  e.open = open_domain;
  e.probe = [] {
    std::vector<Availability> out;
    out.push_back({"dma:cpu", true, "memcpy by one engine thread per queue; server region in shared memory (memfd)",
                   engine_caps(Engine::cpu)});
    auto rt = CudaRuntime::load();
    if (!rt) {
      out.push_back({"dma:cuda", false, rt.status().message()});
    } else {
      auto& r = *rt.value();
      out.push_back({"dma:cuda", true,
                     fmt::format("{} GPU(s), runtime {}.{} ({}), cudaMemcpyBatchAsync {}", r.devices, r.version / 1000,
                                 r.version % 1000 / 10, r.path, r.has_batch() ? "yes" : "no (one cudaMemcpyAsync per op)"),
                     engine_caps(Engine::cuda)});
    }
    return out;
  };
  return e;
}

}  // namespace rb::transport::dma
