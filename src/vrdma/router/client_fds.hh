#pragma once
// Descriptors that come from clients. A client chooses what it passes, and what it passes is
// shared with it (one open file description): the router must never block on one. So each is
// checked for the kind its message takes before anything uses it, a wrong one is refused, the
// router writes a client's eventfd only through ring_doorbell, and every close that a client
// could make slow (a socket with SO_LINGER, a tty with output pending, a session socket with
// descriptors still queued in it) happens on a thread of its own, never on a loop's.
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "core/unique_fd.hh"

namespace rb::vrdma {

enum class FdKind { none, memfd, eventfd, other };
FdKind fd_kind(int fd);
const char* fd_kind_name(FdKind k);

// Wakes the client sleeping on `fd`, a client's eventfd: never blocks the caller. The file is made
// non-blocking first; a client that makes it blocking again at that instant and fills its counter
// finds the write cut short by a timer after 20 ms, and its wake-up lost.
void ring_doorbell(int fd);

// Closes descriptors on a thread of its own, after taking the wait out of them where it can
// (abortive close for sockets, output dropped for ttys).
class FdCloser {
 public:
  FdCloser();
  ~FdCloser();
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;
  void close_later(UniqueFd fd);

 private:
  void run();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<int> fds_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace rb::vrdma
