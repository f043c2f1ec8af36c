#include "core/exit_watchdog.hh"

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include <fmt/core.h>

namespace rb {

ExitWatchdog::ExitWatchdog(double seconds, std::string message, int code) {
  thread_ = std::thread([this, seconds, message = std::move(message), code] {
    std::unique_lock lk(m_);
    if (cv_.wait_for(lk, std::chrono::duration<double>(seconds), [this] { return done_; })) return;
    std::fflush(stdout);
    fmt::print(stderr, "{}\n", message);
    std::fflush(stderr);
    std::quick_exit(code);  // no destructors (the watched code still runs); at_quick_exit hooks only
  });
}

ExitWatchdog::~ExitWatchdog() {
  {
    std::lock_guard lk(m_);
    done_ = true;
  }
  cv_.notify_one();
  thread_.join();
}

}  // namespace rb
