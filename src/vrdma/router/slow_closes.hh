#pragma once
// Closes that another party can hold up for as long as it likes, each on a thread of its own.
//
// close() of a file on a FUSE mount sends FLUSH to the mount's server and waits for its answer:
// for ever, if the server never gives one (uninterruptibly: not even SIGKILL ends that wait; a
// network filesystem's server, or a driver behind a character device, can wait the same way).
// Every close of the descriptor pays it, not only the last. So such a close never runs where
// another close or unmapping queues behind it: it gets a thread with a small stack. close()
// frees the descriptor before it waits, so a stuck close holds a thread, never a slot in the
// router's table. Threads are bounded per owner (the tenant that passed the descriptor) and in all;
// past that a descriptor is parked behind its own owner's closes, never behind another's (and a
// socket never behind its owner's files: a stalled tenant's connections still close). What
// each owner passed and is not closed yet is counted, so the router can stop taking descriptors
// from a tenant whose closes do not return.
#include <cstddef>
#include <cstdint>
#include <memory>

namespace rb::vrdma {

class SlowCloses {
 public:
  // Threads in all for owners with a close stuck (begun over kStuckAfterNs ago, not returned);
  // an owner with none may still start one up to kMaxThreadsAll, so other owners' stuck closes
  // never hold up its own.
  static constexpr size_t kMaxThreads = 1024, kMaxThreadsAll = 4096;
  static constexpr size_t kMaxThreadsPerOwner = 32;
  static constexpr int64_t kStuckAfterNs = 100'000'000;
  static constexpr int64_t kNoOwner = -1;

  SlowCloses();
  SlowCloses(const SlowCloses&) = delete;
  SlowCloses& operator=(const SlowCloses&) = delete;
  // Takes `fd` and closes it on a thread of its own; `owner`: whom it counts against. A socket
  // (the caller says which: asking the file could wait too) is read empty first, its descriptors
  // left to the kernel to drop untaken.
  void close(int fd, int64_t owner, bool socket);
  size_t open_from(int64_t owner) const;  // the owner's descriptors given here and not closed yet
  // Of them, those in a close on a thread that began over `older_than_ns` ago: parked ones wait
  // for a thread, which may be another owner's doing (all 1,024 busy), never count.
  size_t stuck_from(int64_t owner, int64_t older_than_ns) const;
  size_t threads() const;  // threads in a close now

  struct State;  // shared with the threads: one stuck for good outlives the router's objects

 private:
  std::shared_ptr<State> st_;
};

}  // namespace rb::vrdma
