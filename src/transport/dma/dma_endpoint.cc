#include "transport/dma/dma_endpoint.hh"

#include <unistd.h>

#include <cstring>
#include <optional>

#include <fmt/format.h>

#include "core/shm.hh"
#include "transport/dma/written_ranges.hh"

namespace rb::transport::dma {
namespace {

class DmaEp final : public Endpoint {
 public:
  DmaEp(EngineKind kind, std::unique_ptr<CopyEngine> engine, std::shared_ptr<CudaRuntime> rt, bool validate)
      : kind_(kind), engine_(std::move(engine)), rt_(std::move(rt)), validate_(validate) {
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
    if (!on_gpu(kind_) || validate_) {
      Status s = map_peer(r);
      if (!s || !on_gpu(kind_)) return s;
    }
    // The GPU's memory stands in for the far side: a device buffer the size of the peer region.
    if (device_) rt_->Free(device_);
    device_ = nullptr;
    Status s = rt_->check(rt_->Malloc(&device_, std::max<uint64_t>(r.len, 1)), "cudaMalloc of the device region");
    if (!s) return s;
    s = rt_->check(rt_->Memset(device_, 0, r.len), "cudaMemset");
    // The engines' streams are non-blocking, so nothing orders them after this memset but this
    // wait (on the legacy stream alone: a device-wide one would wait for engine=sm's kernels).
    if (s) s = rt_->check(rt_->StreamSynchronize(nullptr), "cudaStreamSynchronize");
    remote_ = static_cast<uint8_t*>(device_);
    load_device_ = validate_;
    return s;
  }

  int post(std::span<const WorkRequest> wrs) override {
    if (load_device_ && !load_device_from_peer()) return -1;
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
    if (s && device_ && validate_) s = store_device_to_peer();
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
  Status map_peer(const RemoteRegion& r) {
    auto h = ProcFdHandle::decode(r.handle);
    if (!h) return Status(h.status().code(), "dma: " + h.status().message());
    auto m = PeerMapping::map(*h);
    if (!m) return Status(m.status().code(), "dma: " + m.status().message());
    peer_ = std::move(*m);
    remote_ = peer_->base();
    return {};
  }

  // --validate on a GPU: the phase starts from the server's bytes (a read phase's pattern, a
  // write phase's zeros), loaded once before its first op.
  bool load_device_from_peer() {
    load_device_ = false;
    written_.clear();
    Status s = rt_->check(rt_->Memcpy(device_, peer_->base(), remote_len_, CudaRuntime::kMemcpyDefault),
                          "--validate: cudaMemcpy of the peer's region to the device");
    // From pageable memory cudaMemcpy returns once the bytes are staged, before they land; the
    // engines' non-blocking streams would race that landing (seen: a write's bytes overwritten
    // with the phase's zeros). Wait for it on the legacy stream, as set_remote does.
    if (s) s = rt_->check(rt_->StreamSynchronize(nullptr), "cudaStreamSynchronize");
    if (!s) err_ = s.message();
    return s.is_ok();
  }

  // --validate on a GPU: what this endpoint wrote goes back to the server's region for its check;
  // the next phase reloads the device buffer first.
  Status store_device_to_peer() {
    Status s;
    written_.for_each([&](uint64_t off, uint64_t len) {
      if (s) s = rt_->check(rt_->Memcpy(peer_->base() + off, remote_ + off, len, CudaRuntime::kMemcpyDefault),
                            "--validate: cudaMemcpy of the device region to the peer's");
    });
    written_.clear();
    load_device_ = true;
    return s;
  }

  // Hands the collected copies to the engine; advances `taken` by what it accepted.
  bool submit_copies(bool doorbell, size_t& taken) {
    if (copies_.empty()) return true;
    int a = engine_->submit(copies_, doorbell);
    if (a < 0) {
      err_ = engine_->last_error();
      copies_.clear();
      return false;
    }
    if (validate_ && device_)
      for (int i = 0; i < a; ++i)
        if (copies_[size_t(i)].op == Op::write)
          written_.add(uint64_t(static_cast<uint8_t*>(copies_[size_t(i)].dst) - remote_), copies_[size_t(i)].len);
    taken += size_t(a);
    bool all = size_t(a) == copies_.size();
    copies_.clear();
    return all;
  }

  EngineKind kind_;
  std::unique_ptr<CopyEngine> engine_;
  std::shared_ptr<CudaRuntime> rt_;
  bool validate_;
  std::optional<PeerMapping> peer_;
  void* device_ = nullptr;
  uint8_t* remote_ = nullptr;
  uint64_t remote_len_ = 0;
  bool load_device_ = false;
  WrittenRanges written_;
  std::vector<Copy> copies_;
  std::vector<Completion> local_done_;
  std::string err_;
};

}  // namespace

std::unique_ptr<Endpoint> make_dma_endpoint(EngineKind kind, std::unique_ptr<CopyEngine> engine,
                                            std::shared_ptr<CudaRuntime> rt, bool validate) {
  return std::make_unique<DmaEp>(kind, std::move(engine), std::move(rt), validate);
}

}  // namespace rb::transport::dma
