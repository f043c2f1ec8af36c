#pragma once
// A child of fork() inherits the mappings vrdma put under registered memory as they are:
// MAP_SHARED over memfds the router and peers map too. The child's writes to its copy of a
// registered buffer reached the parent (and could reach a peer's reads). As Linux does for
// pinned RDMA memory since 5.13, the child gets private copies of those pages instead, taken
// in the child as fork returns (a write of the parent's in that moment may be in the copy).
//
// pthread_atfork handlers are process-wide, so the contexts that have such memory are listed
// process-wide too: ForkCopies::Entry joins the list for the life of a context.
#include <cstdint>
#include <functional>

namespace rb::vrdma {

class ForkCopies {
 public:
  // What a context gives the handlers: taking and dropping its locks around fork(), and the
  // ranges of shared memory under the caller's buffers, each to be made private in a child.
  struct Hooks {
    std::function<void(bool)> lock;  // true: before fork; false: after, in parent and child
    std::function<void(const std::function<void(uintptr_t, uintptr_t)>&)> ranges;
    std::function<void()> in_child;  // after the copies: what else the child must not share
  };
  class Entry {
   public:
    explicit Entry(Hooks h);
    ~Entry();
    Entry(const Entry&) = delete;
    Entry& operator=(const Entry&) = delete;

   private:
    Hooks hooks_;
    friend class ForkCopies;
  };

  // [start, end) (page-aligned) becomes private anonymous memory holding what it held, or, where
  // that cannot be made (no memory for the copy), memory the child cannot touch.
  static void make_private(uintptr_t start, uintptr_t end);
  static void lock(Entry& e, bool on);
  static void privatize(Entry& e);  // ranges made private, then in_child
};

}  // namespace rb::vrdma
