#pragma once
// A copy engine executes memory-to-memory copies asynchronously and reports their completion,
// the way a DMA engine does: submit a batch, ring the doorbell once, reap completions later.
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "core/status.hh"
#include "transport/transport.hh"

namespace rb::transport::dma {

struct Copy {
  void* dst;
  const void* src;
  size_t len;
  uint64_t wr_id;
  Op op;
  bool signal;
};

class CopyEngine {
 public:
  virtual ~CopyEngine() = default;
  // Queues a prefix of `copies`; returns how many were taken (fewer = queue full), -1 on error.
  // `doorbell` false means more copies follow at once (the engine may wait for them).
  virtual int submit(std::span<const Copy> copies, bool doorbell) = 0;
  virtual int reap(std::span<Completion> out) = 0;
  // Waits until every submitted copy has finished (completions of signaled ones stay queued).
  virtual Status drain(double timeout_s) = 0;
  virtual const std::string& last_error() const = 0;
  // Endpoint::arm_wait for the engine's completions: 1 and a descriptor to sleep on, 0 when a
  // completion is queued already, -1 when this engine cannot wake a sleeper.
  virtual int arm_wait(WaitHandle& out) = 0;
};

std::unique_ptr<CopyEngine> make_cpu_engine(uint32_t depth);

}  // namespace rb::transport::dma
