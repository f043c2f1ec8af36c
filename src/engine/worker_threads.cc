#include "engine/worker_threads.hh"

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include <fmt/core.h>

namespace rb::engine {

void WorkerThreads::join_within(const Cause& why) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(grace_s_);
  while (!all_returned() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (!all_returned()) {
    size_t stuck = threads_.size() - count_.load();
    Status cause = why ? why() : Status{};
    std::fflush(stdout);
    fmt::print(stderr,
               "rdmabench: error: {}{}{} worker thread(s) still inside the transport {:.0f} s after being told to stop "
               "(the provider is waiting on a peer that is gone); exiting without cleanup\n",
               cause.is_ok() ? "" : cause.message(), cause.is_ok() ? "" : "; ", stuck, grace_s_);
    std::fflush(stderr);
    std::quick_exit(1);  // no destructors (a worker still uses them); at_quick_exit hooks only
  }
  for (auto& th : threads_)
    if (th.joinable()) th.join();
}

double worker_grace_s(double timeout_s, int endpoints_per_thread) {
  return endpoints_per_thread * timeout_s + 2.0;
}

}  // namespace rb::engine
