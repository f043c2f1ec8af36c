#pragma once
// The per-thread hot loops of both sides, and the state they share with the orchestrating
// thread. Workers touch only their own ThreadState (single writer); the orchestrator reads the
// atomics for live lines and everything else after joining.
#include <atomic>
#include <cstdint>
#include <vector>

#include "engine/model.hh"
#include "core/clock.hh"
#include "core/cpu_usage.hh"
#include "core/histogram.hh"
#include "transport/transport.hh"

namespace rb::engine {

// Granule coverage of the remote region by validated writes (one byte per 64 B).
constexpr uint8_t kCoverNone = 0, kCoverPartial = 1, kCoverFull = 2;

// The warm-up boundary all threads meet at. Unlike a plain barrier, a waiting thread keeps
// polling its endpoints: a peer thread may need that progress to finish its own warm-up (tcp
// needs the target to poll, and with --bidir both sides are targets). The last to arrive
// records when measurement starts.
class StartBarrier {
 public:
  StartBarrier(int n, std::atomic<uint64_t>* tick, const Clock* clock, CpuTimes* cpu = nullptr)
      : n_(n), tick_(tick), clock_(clock), cpu_(cpu) {}
  // Returns true for the thread that completed the barrier.
  bool arrive() {
    if (arrived_.fetch_add(1) + 1 == n_) {
      if (cpu_) *cpu_ = CpuTimes::now();  // published by the tick store below
      tick_->store(clock_->now());
      open_.store(true, std::memory_order_release);
      return true;
    }
    return false;
  }
  bool open() const { return open_.load(std::memory_order_acquire); }

 private:
  int n_;
  std::atomic<int> arrived_{0};
  std::atomic<bool> open_{false};
  std::atomic<uint64_t>* tick_;
  const Clock* clock_;
  CpuTimes* cpu_;
};

struct PhaseContext {
  const RunSpec* spec = nullptr;
  Phase phase{};
  const Clock* clock = nullptr;
  uint64_t seed = 0;                   // per-phase data seed
  uint64_t inject_max = 0;
  bool target_progress = true;         // the passive side must poll for data to move
  // Where it need not, a side spinning on a polled byte looks at the queue only this often (in
  // spins): a poll between arrival and the next look delays every ping-pong.
  static constexpr uint32_t kPassivePollEvery = 64;
  bool yield_to_engine = false;        // a copy-engine thread of ours needs a core while we wait
  uint64_t remote_base = 0;            // added to every remote offset (--bidir: the client's landing slots)
  // --bidir: after its own stream a thread keeps polling (the peer's stream may need our progress)
  // until `release` is set; `done` is raised when the stream itself has finished.
  std::atomic<bool>* release = nullptr;             // latency ops up to this size go inline, without a completion
  std::atomic<bool>* abort = nullptr;  // set by the orchestrator (peer gone, Ctrl-C, other thread failed)
  std::atomic<uint64_t> measure_tick{0};  // when every thread finished warm-up
};

struct ThreadState {
  int index = 0;
  std::vector<transport::Endpoint*> eps;  // rails x qps endpoints; endpoint e of thread t is global t*eps+e
  int first_ep = 0;                       // global index of eps[0] (names message streams)
  int qps = 1;                            // endpoints per rail: eps[r*qps + q] is on rail r
  std::vector<const transport::MemoryRegion*> lane_mrs;  // mr as registered in each endpoint's domain
  std::vector<uint64_t> lane_total;       // ops per endpoint, warm-up included (what the peer saw)
  std::vector<uint64_t> lane_measured;    // ops per endpoint in the measured window
  const transport::MemoryRegion* mr = nullptr;  // local memory (all threads')
  uint64_t area_off = 0;                        // this thread's area inside mr
  Histogram hist;
  std::atomic<uint64_t> ops{0}, bytes{0};
  std::atomic<bool> measuring{false};
  uint64_t warmup_ops = 0;  // ops done before the warm-up boundary (the peer saw them too)
  std::atomic<bool> done{false};
  uint64_t t_begin = 0, t_end = 0;
  Status status;
  std::vector<uint8_t> coverage;  // client, validated writes
  std::atomic<bool> exited{false};  // server: the loop ended (error or stop)

  uint8_t* area() const { return static_cast<uint8_t*>(mr->addr()) + area_off; }
};

// Ends the phase on every endpoint of `t`; a failure to settle becomes t.status unless it already
// holds one. After a failure the peer may be gone, so the wait is short then: the error is
// reported within about --timeout.
void quiesce_lanes(ThreadState& t, double timeout_s);

// Client side: warm-up, wait at `start`, measure; records into t.
void run_client_thread(ThreadState& t, PhaseContext& pc, StartBarrier& start);

// Server side: serve the phase until pc.abort is set (the orchestrator sets it at "end").
// `remote_echo_off` is where this thread's echo slot sits in the client's memory.
void run_server_thread(ThreadState& t, PhaseContext& pc, uint64_t slot_off, uint64_t remote_echo_off,
                       uint32_t rx_slots, int cpu);

}  // namespace rb::engine
