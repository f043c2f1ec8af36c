#pragma once
// Descriptors that come from clients. A client chooses what it passes, and what it passes is
// shared with it (one open file description): the router must never block on one. So each is
// checked for the kind its message takes before anything uses it, a wrong one is refused, the
// router writes a client's eventfd only through ring_doorbell, and every close that a client
// could make slow (a socket with SO_LINGER, a tty with output pending, a session socket with
// descriptors still queued in it) happens on a thread of its own, never on a loop's.
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <sys/socket.h>
#include <sys/stat.h>

#include "core/unique_fd.hh"
#include "vrdma/router/slow_closes.hh"

namespace rb::vrdma {

enum class FdKind { none, memfd, eventfd, other };
FdKind fd_kind(int fd);
const char* fd_kind_name(FdKind k);

// Wakes the client sleeping on `fd`, a client's eventfd, without ever waiting on it: true when it
// was rung (or is readable already), false when the client made it blocking (libvrdma makes its
// eventfds non-blocking; only a hostile client changes that) or the write had to be cut short.
// On false the caller drops the doorbell for good. A client that makes it blocking between the
// check and the write, with its counter full, costs the caller one 2 ms timer, once.
bool ring_doorbell(int fd);

// Closes descriptors, and lets go of a client's memory, on a thread of its own, after taking the
// wait out of them where it can: an abortive close for sockets, output dropped for ttys. Freeing
// the last mapping of gigabytes a client touched takes the kernel a quarter of a second: that
// happens here too, not on a loop.
//
// A wait that cannot be taken out is never had here: such a close goes to SlowCloses, a thread of
// its own. That is a file on a FUSE mount whose server never answers FLUSH, and every Unix socket
// (what is queued in one closes where it is closed, and a client holding a copy can hold up even
// a non-blocking read of it). A descriptor is counted against its owner (the tenant of the uid
// that passed it) until its close returns; an owner with kStalledAt of them not closed after
// kStuckAfterNs is `stalled`, and everything more of its is closed on its own threads.
class FdCloser {
 public:
  static constexpr int64_t kNoOwner = SlowCloses::kNoOwner;
  static constexpr size_t kStalledAt = 8;
  // A close that takes longer is taken to be stuck (a burst of a tenant's programs ending closes
  // many of its sockets at once, each in microseconds: that is not a stall).
  static constexpr int64_t kStuckAfterNs = 100'000'000;

  FdCloser();
  ~FdCloser();
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;
  // `owner`: whom it counts against (never a negative number but kNoOwner, the router's own).
  void close_later(UniqueFd fd, int64_t owner = kNoOwner);
  void drop_later(std::shared_ptr<void> thing);
  // True while kStalledAt or more of the descriptors `owner` passed wait in closes not returned.
  bool stalled(int64_t owner) const;

 private:
  void run();
  void close_one(int fd, int64_t owner);
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<int, int64_t>> fds_;  // descriptor, owner
  std::deque<std::shared_ptr<void>> things_;
  bool stop_ = false;
  SlowCloses slow_;
  std::thread thread_;
};

}  // namespace rb::vrdma
