#pragma once
// Keeps what UCX logs on this thread, while an instance lives, instead of letting UCX print it:
// a probe that fails should say why in one --list line, not spray UCX's own lines over the
// listing. UCX's log handlers take no argument, so the sink is found through a thread_local that
// only a live LogCapture sets; other threads' messages go on to UCX's printer as before.
#include <string>

namespace rb::transport::ucx {

class LogCapture {
 public:
  LogCapture();
  ~LogCapture();
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;
  // The first warning or error UCX logged, without its source position; empty if none.
  const std::string& first() const { return first_; }

 private:
  std::string first_;
  std::string* outer_ = nullptr;  // a capture this one nests in, restored when it ends
};

}  // namespace rb::transport::ucx
