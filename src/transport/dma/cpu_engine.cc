// The software copy engine: one thread per queue takes copies off a ring and memcpy's them.
// It spins briefly when the ring runs dry, then parks on a futex (std::atomic::wait) until the
// next doorbell, so an idle engine costs no core.
#include <sys/epoll.h>
#include <sys/eventfd.h>

#include <atomic>
#include <thread>

#include <fmt/format.h>

#include "core/spsc_ring.hh"
#include "core/unique_fd.hh"
#include "transport/dma/copy_engine.hh"

namespace rb::transport::dma {
namespace {

class CpuEngine final : public CopyEngine {
 public:
  explicit CpuEngine(uint32_t depth) : sq_(depth), cq_(depth) {
    worker_ = std::thread([this] { loop(); });
  }
  ~CpuEngine() override {
    stop_.store(true);
    ring_doorbell();
    worker_.join();
  }

  int submit(std::span<const Copy> copies, bool doorbell) override {
    int n = 0;
    for (const auto& c : copies) {
      if (!sq_.push(c)) break;
      ++n;
    }
    submitted_ += uint64_t(n);
    if (doorbell || n < int(copies.size())) ring_doorbell();
    return n;
  }

  int reap(std::span<Completion> out) override {
    size_t n = 0;
    while (n < out.size() && cq_.pop(out[n])) ++n;
    return int(n);
  }

  Status drain(double timeout_s) override {
    ring_doorbell();
    auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    while (done_.load(std::memory_order_acquire) < submitted_) {
      if (std::chrono::steady_clock::now() > end)
        return {Errc::timeout, fmt::format("cpu copy engine: {} copies unfinished after {:.0f} s",
                                           submitted_ - done_.load(), timeout_s)};
      std::this_thread::yield();
    }
    return {};
  }
  const std::string& last_error() const override { return err_; }

  // The consumer announces that it will sleep, then looks at the queue once more; the engine
  // pushes, then looks for a sleeper. With a full fence on each side one of them sees the other.
  int arm_wait(WaitHandle& out) override {
    uint64_t drained;
    (void)!read(ready_.get(), &drained, 8);
    sleeper_.store(true, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (!cq_.empty()) {
      sleeper_.store(false, std::memory_order_relaxed);
      return 0;
    }
    out = {ready_.get(), EPOLLIN};
    return 1;
  }

 private:
  void wake_sleeper() {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (sleeper_.load(std::memory_order_relaxed) && sleeper_.exchange(false)) {
      uint64_t one = 1;
      (void)!write(ready_.get(), &one, 8);
    }
  }

  void ring_doorbell() {
    bell_.fetch_add(1, std::memory_order_release);
    if (parked_.load(std::memory_order_acquire)) bell_.notify_one();
  }

  void loop() {
    Copy c;
    int idle = 0;
    while (!stop_.load(std::memory_order_relaxed)) {
      if (!sq_.pop(c)) {
        if (++idle < 4096) continue;
        // Park until the next doorbell; re-check after announcing, so none is missed.
        uint32_t seen = bell_.load(std::memory_order_acquire);
        parked_.store(true, std::memory_order_seq_cst);
        if (sq_.empty() && !stop_.load()) bell_.wait(seen, std::memory_order_acquire);
        parked_.store(false, std::memory_order_relaxed);
        idle = 0;
        continue;
      }
      idle = 0;
      copy_last_byte_last(c.dst, c.src, c.len);  // a peer may poll the last byte (write latency)
      if (c.signal) {
        while (!cq_.push(Completion{c.wr_id, c.op, uint32_t(c.len)})) std::this_thread::yield();
        wake_sleeper();
      }
      done_.fetch_add(1, std::memory_order_release);
    }
  }

  LocalSpscRing<Copy> sq_;
  LocalSpscRing<Completion> cq_;
  uint64_t submitted_ = 0;  // producer side only
  std::atomic<uint64_t> done_{0};
  std::atomic<uint32_t> bell_{0};
  std::atomic<bool> parked_{false}, stop_{false}, sleeper_{false};
  UniqueFd ready_{eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)};
  std::string err_;
  std::thread worker_;
};

}  // namespace

std::unique_ptr<CopyEngine> make_cpu_engine(uint32_t depth) { return std::make_unique<CpuEngine>(depth); }

}  // namespace rb::transport::dma
