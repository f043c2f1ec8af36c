#pragma once
// Pages held read-only while the mapping under them changes. Mapping shared memory under a
// caller's pages copies them first; heap pages are written by every thread (malloc's records,
// the library's own maps), so a write another thread made between the copy and the remap was
// lost, and one made while the pages were given back read zeros: four threads registering small
// buffers crashed within seconds. While a WriteFence stands, the pages are read-only: a thread
// that writes there takes a fault, waits in this library's SIGSEGV handler until the fence comes
// down (the new mapping is in place by then), and its write goes to the new mapping. Readers
// never wait; no thread is interrupted that does not touch the pages.
//
// What it cannot hold: a system call writing there meanwhile (read() into a buffer on those very
// pages) fails with EFAULT; a program that installs a SIGSEGV handler of its own after its first
// registration takes the faults itself. Faults that are not the fence's go to the handler the
// program had before, or end the process as they would have.
//
// One fence stands at a time in the process, whatever context raises it (the handler's view of
// it is one range): each holds the process's fence lock while it stands. Two contexts' fences at
// once made the later one's range the only one the handler knew, and writers under the other
// spun on their fault instead of waiting. No fence stands at a fork (fork_copy.cc holds every
// context's lock, under which fences are raised).
#include <cstdint>
#include <mutex>

namespace rb::vrdma {

class WriteFence {
 public:
  // In a child of fork(): the parent's fences are none of the child's faults (fork_copy.cc).
  static void forget_in_child();

  // Makes [start, end) (whole pages) read-only; up() is false if mprotect refused (errno set),
  // or if the pages are this thread's own stack (left as they are).
  WriteFence(uintptr_t start, uintptr_t end);
  // Lets the waiting writers go: whatever is mapped there now must be writable.
  ~WriteFence();
  WriteFence(const WriteFence&) = delete;
  WriteFence& operator=(const WriteFence&) = delete;
  bool up() const { return up_; }

 private:
  std::unique_lock<std::mutex> one_at_a_time_;
  bool up_ = false;
};

}  // namespace rb::vrdma
