#include "vrdma/lib/fork_copy.hh"

#include "vrdma/lib/write_fence.hh"

#include <pthread.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>
#include <mutex>
#include <set>

namespace rb::vrdma {
namespace {

// The one list pthread_atfork's handlers can reach.
struct Registry {
  std::mutex mu;
  std::set<ForkCopies::Entry*> entries;
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: a fork during exit still finds it
  return *r;
}

// Every context's locks: no registration is half done (nor a write fence up) at the fork.
void prepare() {
  Registry& r = registry();
  r.mu.lock();
  for (ForkCopies::Entry* e : r.entries) ForkCopies::lock(*e, true);
}

void in_parent() {
  Registry& r = registry();
  for (ForkCopies::Entry* e : r.entries) ForkCopies::lock(*e, false);
  r.mu.unlock();
}

void in_child() {
  Registry& r = registry();
  WriteFence::forget_in_child();
  for (ForkCopies::Entry* e : r.entries) ForkCopies::privatize(*e);
  in_parent();
}

}  // namespace

void ForkCopies::lock(Entry& e, bool on) { e.hooks_.lock(on); }

void ForkCopies::privatize(Entry& e) {
  e.hooks_.ranges(make_private);
  if (e.hooks_.in_child) e.hooks_.in_child();
}

ForkCopies::Entry::Entry(Hooks h) : hooks_(std::move(h)) {
  static std::once_flag once;
  std::call_once(once, [] { pthread_atfork(prepare, in_parent, in_child); });
  std::lock_guard lk(registry().mu);
  registry().entries.insert(this);
}

ForkCopies::Entry::~Entry() {
  std::lock_guard lk(registry().mu);
  registry().entries.erase(this);
}

namespace {

// Pages that cannot be made private are taken away rather than left shared (a child whose
// parent had used up its mappings was left sharing them), and rather than given zeros where the
// copy could not be made: the child's first touch there ends it with SIGSEGV.
void take_away(void* at, size_t len) {
  // Out of mappings (a process near vm.max_map_count), the last two need none of their own.
  if (mmap(at, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED &&
      mprotect(at, len, PROT_NONE) != 0)
    munmap(at, len);
}

}  // namespace

// The copy is moved into place where the kernel lets it (one copy of the bytes); where it refuses
// (mremap has answered EPERM here, with other threads of the parent busy at the fork), private
// memory is mapped in place and the copy copied into it.
void ForkCopies::make_private(uintptr_t start, uintptr_t end) {
  size_t len = end - start;
  void* at = reinterpret_cast<void*>(start);
  void* copy = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (copy == MAP_FAILED) return take_away(at, len);
  std::memcpy(copy, at, len);
  // The system call itself: UCX's hook of mremap (a program may load UCX over vrdma) drops the
  // new address and leaves the copy wherever it puts it.
  if (reinterpret_cast<void*>(syscall(SYS_mremap, copy, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, at)) == at) return;
  bool placed = mmap(at, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != MAP_FAILED;
  if (placed) std::memcpy(at, copy, len);
  munmap(copy, len);
  if (!placed) take_away(at, len);
}

}  // namespace rb::vrdma
