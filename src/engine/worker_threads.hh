#pragma once
// The threads of one phase, joined within a bounded time.
//
// Worker threads call into transports, and a transport call can block for good when the peer dies
// at the wrong moment: libfabric's shm provider spins on a lock inside the shared memory of a
// killed peer that held it. Such a thread can be neither interrupted nor joined, and tearing the
// transport down under it is unsafe, so rather than hang the process reports why and exits.
#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "core/status.hh"

namespace rb::engine {

class WorkerThreads {
 public:
  // `abort` and `release` are the phase's flags: set on the way out so the workers stop.
  WorkerThreads(std::atomic<bool>& abort, std::atomic<bool>& release, double grace_s)
      : abort_(abort), release_(release), grace_s_(grace_s) {}
  WorkerThreads(const WorkerThreads&) = delete;
  WorkerThreads& operator=(const WorkerThreads&) = delete;
  ~WorkerThreads() {
    stop_and_join([] { return Status(Errc::io, "the phase ended early"); });
  }

  // Worker i (in spawn order) runs f(args...).
  template <class F, class... A>
  void spawn(F&& f, A&&... args) {
    std::atomic<bool>& flag = returned_.emplace_back(false);  // a deque: the flag never moves
    threads_.emplace_back([this, &flag, f = std::forward<F>(f), ... args = std::forward<A>(args)]() mutable {
      f(args...);
      flag.store(true, std::memory_order_release);
      count_.fetch_add(1, std::memory_order_release);
    });
  }

  bool all_returned() const { return count_.load(std::memory_order_acquire) == threads_.size(); }
  // Worker i has returned: what it wrote before that may be read.
  bool returned(size_t i) const { return returned_[i].load(std::memory_order_acquire); }

  // Why the workers are being joined, asked only if one of them is stuck (and read only from
  // workers that returned(): the stuck one may still hold what it was writing).
  using Cause = std::function<Status()>;

  // Lets the workers finish on their own (release only), then joins them.
  void join(const Cause& cause) {
    release_.store(true);
    join_within(cause);
  }
  // Tells the workers to stop (abort and release), then joins them.
  void stop_and_join(const Cause& cause) {
    abort_.store(true);
    join(cause);
  }

 private:
  // A worker that has not returned `grace_s` after this call is stuck inside the transport: the
  // process then reports the cause and that, and exits with status 1 through std::quick_exit (it does not return).
  void join_within(const Cause& cause);

  std::atomic<bool>& abort_;
  std::atomic<bool>& release_;
  double grace_s_;
  std::vector<std::thread> threads_;
  std::deque<std::atomic<bool>> returned_;
  std::atomic<size_t> count_{0};
};

// How long workers may take to leave a phase once told to: each endpoint's cleanup is bounded by
// --timeout, plus scheduling slack for busy cores.
double worker_grace_s(double timeout_s, int endpoints_per_thread);

}  // namespace rb::engine
