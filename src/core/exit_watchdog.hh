#pragma once
// Ends the process if a stretch of code does not finish in time: for code that may block inside a
// library for good (closing a transport whose peer died while holding a lock the close needs).
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace rb {

class ExitWatchdog {
 public:
  // Unless destroyed within `seconds`, prints `message` (one line, on stderr) and ends the process with std::quick_exit(code).
  ExitWatchdog(double seconds, std::string message, int code);
  ~ExitWatchdog();
  ExitWatchdog(const ExitWatchdog&) = delete;
  ExitWatchdog& operator=(const ExitWatchdog&) = delete;

 private:
  std::mutex m_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace rb
