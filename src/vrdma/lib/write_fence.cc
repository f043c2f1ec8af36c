#include "vrdma/lib/write_fence.hh"

#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <algorithm>
#include <climits>
#include <mutex>

namespace rb::vrdma {
namespace {

// The one fence of the process and the handler's view of it: process-wide by nature (a signal
// handler reaches nothing else). The library raises one fence at a time (UserSpans' lock).
std::atomic<uintptr_t> g_start{0}, g_end{0};  // the standing fence's pages
std::atomic<uint32_t> g_standing{0};          // non-zero while it stands: writers wait on it
// The last fences' pages: a write that faulted under one may reach the handler only after it came
// down and the next went up elsewhere; it is made again (the pages are writable by then).
constexpr int kRecent = 8;
std::atomic<uintptr_t> g_recent_start[kRecent], g_recent_end[kRecent];
std::atomic<uint32_t> g_fences{0};
struct sigaction g_previous {};

std::mutex& fence_lock() {
  static std::mutex* m = new std::mutex;  // never destroyed: a fence or fork during exit still finds it
  return *m;
}

bool fenced(uintptr_t a) { return a >= g_start.load() && a < g_end.load(); }

bool recently_fenced(uintptr_t a) {
  for (int i = 0; i < kRecent; ++i)
    if (a >= g_recent_start[i].load() && a < g_recent_end[i].load()) return true;
  return false;
}

void on_fault(int sig, siginfo_t* info, void* context) {
  auto at = reinterpret_cast<uintptr_t>(info->si_addr);
  if (info->si_code == SEGV_ACCERR && fenced(at)) {
    int saved = errno;
    for (uint32_t s; (s = g_standing.load()) != 0 && fenced(at);)
      syscall(SYS_futex, reinterpret_cast<uint32_t*>(&g_standing), FUTEX_WAIT_PRIVATE, s, nullptr, nullptr, 0);
    errno = saved;
    return;  // the write is made again, to the new mapping
  }
  if (info->si_code == SEGV_ACCERR && recently_fenced(at)) return;
  // Not the fence's: as the program would have had it.
  if ((g_previous.sa_flags & SA_SIGINFO) && g_previous.sa_sigaction) return g_previous.sa_sigaction(sig, info, context);
  if (g_previous.sa_handler == SIG_IGN) return;
  if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler) return g_previous.sa_handler(sig);
  signal(SIGSEGV, SIG_DFL);  // the faulting instruction runs again and takes the default action
}

void install_handler() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa {};
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &g_previous);
  });
}

}  // namespace

// No fence stood at the fork, and the child's one thread was in no fault: a fault
// of the child's in a range its parent fenced lately is none of the fence's, and must not be
// made again for ever (a page that could not be made private is PROT_NONE: the child hung).
void WriteFence::forget_in_child() {
  for (int i = 0; i < kRecent; ++i) g_recent_start[i] = g_recent_end[i] = 0;
  g_start = g_end = 0;
  g_standing = 0;
}

WriteFence::WriteFence(uintptr_t start, uintptr_t end) : one_at_a_time_(fence_lock()) {
  // Not over this thread's own stack (a buffer on it registered): its next call would fault on
  // a page it holds read-only, with no stack left to take the fault on. Those pages are
  // remapped unfenced, as before.
  char here = 0;
  uintptr_t sp = reinterpret_cast<uintptr_t>(&here);
  if (start < sp + 4096 && end > sp - std::min<uintptr_t>(sp, 256 * 1024)) return;
  install_handler();
  uint32_t n = g_fences.fetch_add(1) % kRecent;
  g_recent_start[n] = 0;  // emptied first, so no moment holds a range that was never fenced
  g_recent_end[n] = end;
  g_recent_start[n] = start;
  g_standing = 1;
  g_start = start, g_end = end;
  up_ = mprotect(reinterpret_cast<void*>(start), end - start, PROT_READ) == 0;
  if (!up_) g_standing = 0;
}

WriteFence::~WriteFence() {
  if (!up_) return;
  g_standing = 0;
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&g_standing), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
}

}  // namespace rb::vrdma
