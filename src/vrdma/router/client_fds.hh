#pragma once
// Descriptors that come from clients. A client chooses what it passes, and what it passes is
// shared with it (one open file description): the router must never block on one. So each is
// checked for the kind its message takes before anything uses it, a wrong one is refused, the
// router writes a client's eventfd only through ring_doorbell, and every close that a client
// could make slow (a socket with SO_LINGER, a tty with output pending, a session socket with
// descriptors still queued in it) happens on a thread of its own, never on a loop's.
#include <cstdint>
#include <memory>
#include <thread>

#include "core/unique_fd.hh"

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
// wait out of them where it can: an abortive close for sockets, output dropped for ttys, and a
// Unix socket emptied first of the descriptors queued in it (each then closed the same way; a
// TCP socket with a long SO_LINGER sent inside one would otherwise close, and wait, in here for
// as long as its sender chose). Freeing the last mapping of gigabytes a client touched takes
// the kernel a quarter of a second: that happens here too, not on a loop.
//
// Some waits cannot be taken out: close() of a file on a FUSE mount waits for its server's answer
// to FLUSH, for ever if it never comes. So a close that takes over kStuckNs is left to its thread
// and a fresh one goes on with the rest (at most kMaxStuck left at once). And the descriptors
// waiting here are bounded: a Unix socket its sender keeps filling (with copies of itself) is
// emptied only while fewer than kMaxWaiting wait, and copies of a socket already held are closed
// at once (not the last reference, so nothing waits). A descriptor a client passed is counted
// against its uid until its close returns (waiting_from), so the router can stop taking more from
// a uid whose closes do not return.
class FdCloser {
 public:
  static constexpr int64_t kStuckNs = 1'000'000'000;
  static constexpr int kMaxStuck = 16;
  static constexpr size_t kMaxWaiting = 2048;
  static constexpr int64_t kNoOwner = -1;

  FdCloser();
  ~FdCloser();
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;
  // `owner`: the uid that passed it (and whatever is queued in it), or kNoOwner for the router's own.
  void close_later(UniqueFd fd, int64_t owner = kNoOwner);
  void drop_later(std::shared_ptr<void> thing);
  int stuck() const;                         // threads left in a close that has not returned
  size_t waiting_from(int64_t owner) const;  // the owner's descriptors not closed yet

  struct Shared;  // the work, shared with the threads (a stuck one outlives this object)
  struct Worker;

 private:
  void watch();
  void start_worker();
  std::shared_ptr<Shared> sh_;
  std::shared_ptr<Worker> worker_;
  std::thread watcher_;
};

}  // namespace rb::vrdma
