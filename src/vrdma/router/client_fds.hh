#pragma once
// Descriptors that come from clients. A client chooses what it passes, and what it passes is
// shared with it (one open file description): the router must never block on one. So each is
// checked for the kind its message takes before anything uses it, a wrong one is refused, the
// router writes a client's eventfd only through ring_doorbell, and every close that a client
// could make slow (a socket with SO_LINGER, a tty with output pending, a session socket with
// descriptors still queued in it) happens on a thread of its own, never on a loop's.
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

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

// What closing a client's descriptor may wait on, told without a call into its file's filesystem
// (a FUSE server can hold fstat, fstatfs and ioctl for as long as it holds a close, and refuse
// root's fstat outright): from its /proc/self/fd link and fcntl(F_GET_SEALS), which the kernel
// answers alone. at_once: a memfd (shared memory no epoll set can watch); socket: not a Unix one
// (closed abortively); unix_socket: what is queued in it closes where it is closed, and a client
// holding a copy can hold up even a non-blocking read of it; may_wait: any other file (a pipe, an
// eventfd or other anonymous inode: the last close of a file an epoll set watches takes that
// set's lock, which its owner can hold; a FUSE, NFS or disk file, a device, a tty). Sockets of
// either kind wait for the same lock.
enum class CloseKind { at_once, socket, unix_socket, may_wait };
CloseKind close_kind(int fd);

// Closes descriptors, and lets go of a client's memory, on a thread of its own, after taking the
// wait out of them where it can (an abortive close for sockets). Freeing the last mapping of
// gigabytes a client touched takes the kernel a quarter of a second: that happens here too, not
// on a loop.
//
// Only what closes at once is closed here (close_kind: memfds); every other close goes to
// SlowCloses, a thread of the owner's. A descriptor is counted against its owner (the tenant of the uid that passed
// it) until its close returns; an owner is `stalled` with kStalledAt of them in closes begun over
// kStuckAfterNs ago, or kMostPending of them not closed, and everything more of its is closed on
// its own threads.
class FdCloser {
 public:
  static constexpr int64_t kNoOwner = SlowCloses::kNoOwner;
  static constexpr size_t kStalledAt = 8;
  // A close that takes longer is taken to be stuck (a burst of a tenant's programs ending closes
  // many of its sockets at once, each in microseconds: that is not a stall).
  static constexpr int64_t kStuckAfterNs = SlowCloses::kStuckAfterNs;
  // Descriptors waiting for a thread of their owner's sit in the router's table: 64 connections
  // of one uid, 253 of a stuck file on each, once parked 16,000 of them in 1.3 ms.
  static constexpr size_t kMostPending = 1024;

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
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<int, int64_t>> fds_;  // descriptor, owner
  std::map<int64_t, size_t> queued_;         // of fds_, each owner's
  std::deque<std::shared_ptr<void>> things_;
  bool stop_ = false;
  SlowCloses slow_;
  std::thread thread_;
};

}  // namespace rb::vrdma
