#pragma once
// The threads of one phase, joined within a bounded time.
//
// Worker threads call into transports, and a transport call can block for good when the peer dies
// at the wrong moment: libfabric's shm provider spins on a lock inside the shared memory of a
// killed peer that held it. Such a thread can be neither interrupted nor joined, and tearing the
// transport down under it is unsafe, so rather than hang the process reports why and exits.
#include <atomic>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "core/status.hh"

namespace rb::bench {

class WorkerThreads {
 public:
  // `abort` and `release` are the phase's flags: set on the way out so the workers stop.
  WorkerThreads(std::atomic<bool>& abort, std::atomic<bool>& release, double grace_s)
      : abort_(abort), release_(release), grace_s_(grace_s) {}
  WorkerThreads(const WorkerThreads&) = delete;
  WorkerThreads& operator=(const WorkerThreads&) = delete;
  ~WorkerThreads() { stop_and_join(Status(Errc::io, "the phase ended early")); }

  template <class F, class... A>
  void spawn(F&& f, A&&... args) {
    threads_.emplace_back([this, f = std::forward<F>(f), ... args = std::forward<A>(args)]() mutable {
      f(args...);
      returned_.fetch_add(1, std::memory_order_release);
    });
  }

  bool all_returned() const { return returned_.load(std::memory_order_acquire) == threads_.size(); }

  // Lets the workers finish on their own (release only), then joins them.
  void join(const Status& cause) {
    release_.store(true);
    join_within(cause);
  }
  // Tells the workers to stop (abort and release), then joins them.
  void stop_and_join(const Status& cause) {
    abort_.store(true);
    join(cause);
  }

 private:
  // A worker that has not returned `grace_s` after this call is stuck inside the transport: the
  // process then reports `cause` and that, and exits with status 1 (it does not return).
  void join_within(const Status& cause);

  std::atomic<bool>& abort_;
  std::atomic<bool>& release_;
  double grace_s_;
  std::vector<std::thread> threads_;
  std::atomic<size_t> returned_{0};
};

// How long workers may take to leave a phase once told to: each endpoint's cleanup is bounded by
// --timeout, plus scheduling slack for busy cores.
double worker_grace_s(double timeout_s, int endpoints_per_thread);

}  // namespace rb::bench
