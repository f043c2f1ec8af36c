// The sm engine: GPU threads as a DMA engine. The endpoint's thread is the ring's producer
// (sm_ring.h's host side); a persistent kernel, launched once per engine, is its consumer. A copy
// is complete when its slot reads done, which the kernel makes true only after the copied bytes
// are fenced to the system, so completions are reaped from host memory with no CUDA call.
#include "transport/dma/sm_engine.hh"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <vector>

#include "transport/dma/sm_ring.h"

namespace rb::transport::dma {
namespace {

constexpr unsigned kHealthEvery = 4096;  // idle polls between two looks at the kernel's stream

uint64_t pow2_at_least(uint64_t n) {
  uint64_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

// The ring's memory: slots and control block in pinned host memory the GPU maps, the consumers'
// claim counter in device memory. Freed in reverse, after the kernel has stopped.
class RingMemory {
 public:
  explicit RingMemory(std::shared_ptr<SmKernel> k) : k_(std::move(k)) {}
  ~RingMemory() {
    CudaDriver& d = k_->driver();
    if (head_) d.MemFree(head_);
    if (host_) d.MemFreeHost(host_);
  }
  // `stream` is the kernel's: the head is zeroed in its order, so the kernel never reads it before.
  Status init(uint64_t capacity, CUstream stream) {
    CudaDriver& d = k_->driver();
    size_t bytes = capacity * sizeof(smr_slot) + sizeof(smr_ctrl);
    Status s = d.check(d.MemHostAlloc(&host_, bytes, CudaDriver::kHostAllocPortable | CudaDriver::kHostAllocDeviceMap),
                       "cuMemHostAlloc of the sm engine's ring");
    CUdeviceptr mapped = 0;
    if (s) s = d.check(d.MemHostGetDevicePointer(&mapped, host_, 0), "cuMemHostGetDevicePointer");
    if (s) s = d.check(d.MemAlloc(&head_, sizeof(uint64_t)), "cuMemAlloc of the ring's head");
    if (s) s = d.check(d.MemsetD8Async(head_, 0, sizeof(uint64_t), stream), "cuMemsetD8Async");
    if (!s) return s;
    auto* slots = static_cast<smr_slot*>(host_);
    auto* ctrl = reinterpret_cast<smr_ctrl*>(slots + capacity);
    host_view_ = {slots, capacity, ctrl, &host_head_};
    smr_init(&host_view_);  // host_head_ stands in for head: the device's is zeroed above
    device_view_ = {reinterpret_cast<smr_slot*>(mapped), capacity,
                    reinterpret_cast<smr_ctrl*>(mapped + capacity * sizeof(smr_slot)), reinterpret_cast<uint64_t*>(head_)};
    return {};
  }
  bool ready() const { return host_view_.ctrl != nullptr; }
  const smr_ring* host() const { return &host_view_; }
  smr_ring* device() { return &device_view_; }

 private:
  std::shared_ptr<SmKernel> k_;
  void* host_ = nullptr;
  CUdeviceptr head_ = 0;
  uint64_t host_head_ = 0;
  smr_ring host_view_{}, device_view_{};
};

struct Pending {
  uint64_t pos;
  Copy copy;
};

class SmEngine final : public CopyEngine {
 public:
  SmEngine(std::shared_ptr<SmKernel> k, uint32_t threads) : k_(std::move(k)), threads_(threads), ring_(k_) {}

  Status init(uint64_t capacity) {
    CudaDriver& d = k_->driver();
    // Non-blocking: the legacy default stream's work (the runtime's memsets and copies) must not
    // wait for this kernel, which runs until the engine goes.
    Status s = k_->make_current();
    if (s) s = d.check(d.StreamCreate(&stream_, CudaDriver::kStreamNonBlocking), "cuStreamCreate");
    if (s) s = ring_.init(capacity, stream_);
    if (!s) return s;
    // One warp per block: the warps spread over the SMs, each with its own completion counter.
    void* args[] = {ring_.device()};
    s = d.check(d.LaunchKernel(k_->function(), threads_ / 32, 1, 1, 32, 1, 1, 0, stream_, args, nullptr),
                "cuLaunchKernel of the sm engine's kernel");
    launched_ = s.is_ok();
    if (launched_) k_->track(&ring_.host()->ctrl->stop.value);
    return s;
  }

  ~SmEngine() override {
    (void)k_->make_current();  // for the driver calls here and in ~RingMemory
    if (ring_.ready()) smr_stop(ring_.host());  // every warp sees it and returns, so the stream drains
    if (launched_) {
      k_->untrack(&ring_.host()->ctrl->stop.value);
      k_->stop_all();  // see SmKernel::track: the frees below must not wait on another engine's kernel
    }
    if (stream_) {
      k_->driver().StreamSynchronize(stream_);
      k_->driver().StreamDestroy(stream_);
    }
  }

  int submit(std::span<const Copy> copies, bool) override {
    int n = 0;
    for (const auto& c : copies) {
      if (c.len > UINT32_MAX) {  // a slot's length field is 32 bits (sm_ring.h)
        err_ = fmt::format("sm engine: a copy of {} bytes is over the ring's 4 GiB bound", c.len);
        return n ? n : -1;
      }
      uint64_t pos = 0;
      int rc = smr_try_post(ring_.host(), uint64_t(uintptr_t(c.src)), uint64_t(uintptr_t(c.dst)), c.len, c.wr_id, &pos);
      if (rc == SMR_FULL) break;  // back-pressure: the caller retries what was not taken
      if (rc == SMR_STOPPED) {
        err_ = "sm engine: the ring is stopped";
        return n ? n : -1;
      }
      pending_.push_back({pos, c});
      ++n;
    }
    return n;
  }

  int reap(std::span<Completion> out) override {
    collect();
    size_t n = 0;
    while (n < out.size() && !done_.empty()) {
      out[n++] = done_.front();
      done_.pop_front();
    }
    if (!pending_.empty() && n == 0 && ++idle_polls_ % kHealthEvery == 0 && !kernel_alive()) return -1;
    return int(n);
  }

  Status drain(double timeout_s) override {
    auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    for (unsigned spins = 0;; ++spins) {
      collect();
      if (pending_.empty()) return {};
      if (spins % kHealthEvery == 0 && !kernel_alive()) return {Errc::io, err_};
      if (std::chrono::steady_clock::now() > end)
        return {Errc::timeout, fmt::format("sm engine: {} copies not done after {} s", pending_.size(), timeout_s)};
    }
  }

  const std::string& last_error() const override { return err_; }
  int arm_wait(WaitHandle&) override {
    err_ = "sm engine: no wait object (completions are found by polling the ring)";
    return -1;
  }

 private:
  // Moves the copies done so far, oldest first, to done_ (the signaled ones) and off pending_.
  void collect() {
    while (!pending_.empty() && smr_is_done(ring_.host(), pending_.front().pos)) {
      const Copy& c = pending_.front().copy;
      if (c.signal) done_.push_back({c.wr_id, c.op, uint32_t(c.len), WcStatus::success, 0});
      pending_.pop_front();
    }
  }

  // The kernel runs until stopped: a stream that is idle or failed means copies will never finish.
  bool kernel_alive() {
    if (!launched_) return false;
    (void)k_->make_current();
    int rc = k_->driver().StreamQuery(stream_);
    if (rc == CudaDriver::kNotReady) return true;
    err_ = rc == CudaDriver::kSuccess ? "sm engine: the kernel exited while copies were pending"
                                      : "sm engine: the kernel failed: " + k_->driver().error(rc);
    return false;
  }

  std::shared_ptr<SmKernel> k_;
  uint32_t threads_;
  RingMemory ring_;
  CUstream stream_ = nullptr;
  bool launched_ = false;
  std::deque<Pending> pending_;
  std::deque<Completion> done_;
  uint64_t idle_polls_ = 0;
  std::string err_;
};

}  // namespace

Result<std::unique_ptr<CopyEngine>> make_sm_engine(std::shared_ptr<SmKernel> kernel, uint32_t depth, uint32_t threads) {
  if (threads == 0 || threads % 32 || threads / 32 > SMR_MAX_CONSUMERS)
    return Status(Errc::invalid_argument,
                  fmt::format("sm engine: {} threads is not 1 to {} whole warps (-o sm_warps)", threads, SMR_MAX_CONSUMERS));
  auto e = std::make_unique<SmEngine>(std::move(kernel), threads);
  Status s = e->init(pow2_at_least(std::max<uint32_t>({depth, threads, 64u})));  // a slot for every lane's claim
  if (!s) return s;
  return std::unique_ptr<CopyEngine>(std::move(e));
}

}  // namespace rb::transport::dma
