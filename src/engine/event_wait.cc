#include "engine/event_wait.hh"

#include <sys/epoll.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace rb::engine {

Status EventWaiter::watch(size_t i, const transport::WaitHandle& h) {
  if (watched_.size() <= i) watched_.resize(i + 1);
  transport::WaitHandle& w = watched_[i];
  if (w.fd == h.fd && w.events == h.events) return {};
  epoll_event ev{};
  ev.events = h.events;
  ev.data.u64 = i;
  // The descriptor may be shared by endpoints or changed by the transport: modify, else add.
  int rc = w.fd == h.fd ? epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, h.fd, &ev) : -1;
  if (rc != 0) {
    if (w.fd >= 0 && w.fd != h.fd) epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, w.fd, nullptr);
    rc = epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, h.fd, &ev);
    if (rc != 0 && errno == EEXIST) rc = epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, h.fd, &ev);
  }
  if (rc != 0) return {Errc::io, fmt::format("--event: epoll_ctl on the completion fd {}: {}", h.fd, std::strerror(errno))};
  w = h;
  return {};
}

Status EventWaiter::sleep(std::span<transport::Endpoint* const> eps, int timeout_ms) {
  if (!epoll_) {
    epoll_ = UniqueFd(epoll_create1(EPOLL_CLOEXEC));
    if (!epoll_) return {Errc::io, fmt::format("--event: epoll_create1: {}", std::strerror(errno))};
  }
  for (size_t i = 0; i < eps.size(); ++i) {
    transport::WaitHandle h;
    int armed = eps[i]->arm_wait(h);
    if (armed < 0) return {Errc::io, fmt::format("--event: {}", eps[i]->last_error())};
    if (armed == 0) return {};
    if (Status st = watch(i, h); !st) return st;
  }
  epoll_event ev[8];
  int n = epoll_wait(epoll_.get(), ev, 8, timeout_ms);
  if (n < 0 && errno != EINTR) return {Errc::io, fmt::format("--event: epoll_wait: {}", std::strerror(errno))};
  return {};
}

}  // namespace rb::engine
