// The GPU's copy engines as a DMA engine: copies between pinned host memory and device memory
// on one CUDA stream per queue. A batch (the copies up to a doorbell) is issued with one
// cudaMemcpyBatchAsync where the runtime has it (else one cudaMemcpyAsync each) and closed with
// one event; completions are reported when the batch's event has fired.
#include <fmt/format.h>

#include <vector>

#include "transport/dma/cuda_engine.hh"

namespace rb::transport::dma {
namespace {

class CudaEngine final : public CopyEngine {
 public:
  CudaEngine(std::shared_ptr<CudaRuntime> rt, int dev, uint32_t depth, bool use_batch)
      : rt_(std::move(rt)), dev_(dev), depth_(depth), use_batch_(use_batch && rt_->has_batch()) {}

  Status init() {
    Status s = rt_->check(rt_->SetDevice(dev_), "cudaSetDevice");
    if (!s) return s;
    s = rt_->check(rt_->StreamCreateWithFlags(&stream_, 1 /* non-blocking */), "cudaStreamCreateWithFlags");
    if (!s) return s;
    events_.resize(depth_);
    for (auto& e : events_) {
      s = rt_->check(rt_->EventCreateWithFlags(&e, 2 /* disable timing */), "cudaEventCreateWithFlags");
      if (!s) return s;
    }
    batches_.resize(depth_);
    done_.reserve(depth_);
    return {};
  }

  ~CudaEngine() override {
    if (stream_) rt_->StreamSynchronize(stream_);
    for (auto e : events_)
      if (e) rt_->EventDestroy(e);
    if (stream_) rt_->StreamDestroy(stream_);
  }

  int submit(std::span<const Copy> copies, bool doorbell) override {
    int n = 0;
    for (const auto& c : copies) {
      // One event per batch: keep a slot free for the batch this copy may close.
      if (in_flight_ + staged_.size() >= depth_ || open_batches_ + 1 >= depth_) break;
      staged_.push_back(c);
      ++n;
    }
    if (doorbell || n < int(copies.size())) {
      if (!flush()) return -1;
    }
    return n;
  }

  int reap(std::span<Completion> out) override {
    size_t n = 0;
    while (!done_.empty() && n < out.size()) {
      out[n++] = done_.back();
      done_.pop_back();
    }
    while (open_batches_ && n < out.size()) {
      Batch& b = batches_[head_ % depth_];
      int rc = rt_->EventQuery(events_[head_ % depth_]);
      if (rc == CudaRuntime::kNotReady) break;
      int err = rc == CudaRuntime::kSuccess ? 0 : rc;
      if (err) err_ = rt_->error(rc);
      // A failed copy leaves the stream unusable (CUDA errors are sticky): nothing to retry.
      WcStatus status = err ? WcStatus::fatal : WcStatus::success;
      for (auto& c : b.signaled) {
        Completion done{c.wr_id, c.op, uint32_t(c.len), status, err};
        if (n < out.size()) out[n++] = done;
        else done_.push_back(done);
      }
      in_flight_ -= b.copies;
      b.signaled.clear();
      ++head_;
      --open_batches_;
    }
    return int(n);
  }

  Status drain(double) override {
    if (!flush()) return {Errc::io, err_};
    return rt_->check(rt_->StreamSynchronize(stream_), "cudaStreamSynchronize");
  }
  const std::string& last_error() const override { return err_; }
  int arm_wait(WaitHandle&) override {
    err_ = "cuda copy engine: no wait object (completions are found by querying CUDA events)";
    return -1;
  }

 private:
  struct Batch {
    std::vector<Copy> signaled;
    size_t copies = 0;
  };

  bool flush() {
    if (staged_.empty()) return true;
    int rc = CudaRuntime::kSuccess;
    if (use_batch_) {
      dsts_.clear();
      srcs_.clear();
      sizes_.clear();
      for (auto& c : staged_) {
        dsts_.push_back(c.dst);
        srcs_.push_back(const_cast<void*>(c.src));
        sizes_.push_back(c.len);
      }
      CudaMemcpyAttributes attr{1, {0, 0}, {0, 0}, 0};
      size_t attr_idx = 0, fail_idx = 0;
      rc = rt_->batch13 ? rt_->batch13(dsts_.data(), srcs_.data(), sizes_.data(), staged_.size(), &attr, &attr_idx, 1, stream_)
                        : rt_->batch12(dsts_.data(), srcs_.data(), sizes_.data(), staged_.size(), &attr, &attr_idx, 1,
                                       &fail_idx, stream_);
    } else {
      for (auto& c : staged_) {
        rc = rt_->MemcpyAsync(c.dst, c.src, c.len, CudaRuntime::kMemcpyDefault, stream_);
        if (rc) break;
      }
    }
    if (rc == CudaRuntime::kSuccess) rc = rt_->EventRecord(events_[tail_ % depth_], stream_);
    if (rc != CudaRuntime::kSuccess) {
      err_ = fmt::format("{}: {}", use_batch_ ? "cudaMemcpyBatchAsync" : "cudaMemcpyAsync", rt_->error(rc));
      staged_.clear();
      return false;
    }
    Batch& b = batches_[tail_ % depth_];
    b.copies = staged_.size();
    for (auto& c : staged_)
      if (c.signal) b.signaled.push_back(c);
    in_flight_ += staged_.size();
    staged_.clear();
    ++tail_;
    ++open_batches_;
    return true;
  }

  std::shared_ptr<CudaRuntime> rt_;
  int dev_;
  uint32_t depth_;
  bool use_batch_;
  cudaStream_t stream_ = nullptr;
  std::vector<cudaEvent_t> events_;
  std::vector<Batch> batches_;
  uint64_t head_ = 0, tail_ = 0, open_batches_ = 0, in_flight_ = 0;
  std::vector<Copy> staged_;
  std::vector<Completion> done_;
  std::vector<void*> dsts_, srcs_;
  std::vector<size_t> sizes_;
  std::string err_;
};

}  // namespace

Result<std::unique_ptr<CopyEngine>> make_cuda_engine(std::shared_ptr<CudaRuntime> rt, int dev, uint32_t depth,
                                                     bool use_batch) {
  auto e = std::make_unique<CudaEngine>(std::move(rt), dev, std::max<uint32_t>(depth, 4), use_batch);
  Status s = e->init();
  if (!s) return s;
  return std::unique_ptr<CopyEngine>(std::move(e));
}

}  // namespace rb::transport::dma
