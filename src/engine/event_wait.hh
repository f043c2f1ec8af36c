#pragma once
// --event: a thread sleeps until one of its endpoints may have a completion, on the wait objects
// the transports hand out (Endpoint::arm_wait), instead of spinning on poll().
#include <span>
#include <vector>

#include "core/status.hh"
#include "core/unique_fd.hh"
#include "transport/transport.hh"

namespace rb::engine {

class EventWaiter {
 public:
  EventWaiter() = default;
  // Sleeps until an endpoint of `eps` may have a completion or `timeout_ms` passes. Returns at
  // once when one already may (an endpoint declined to arm). Errors name the endpoint's reason.
  Status sleep(std::span<transport::Endpoint* const> eps, int timeout_ms);

 private:
  Status watch(size_t i, const transport::WaitHandle& h);

  UniqueFd epoll_;
  std::vector<transport::WaitHandle> watched_;  // what the epoll set holds for endpoint i
};

}  // namespace rb::engine
