#pragma once
// Runs one piece of work in a forked child process, so that whatever goes wrong inside it (a
// thread stuck in a provider on a dead peer's lock, a provider crash, a leak) ends with the child
// and not with the process that forked it.
#include <atomic>
#include <functional>

#include "core/status.hh"

namespace rb {

struct ChildOptions {
  // Run in the child before `body`: drop what the child must not hold (a listening socket).
  std::function<void()> in_child_first;
  // Once stopped (SIGINT/SIGTERM, or its parent died), the child ends itself this long after,
  // whatever it is doing.
  double child_grace_s = 30;
  // After `stop` is forwarded as SIGTERM, the parent SIGKILLs a child still there this long after.
  double grace_s = 60;
};

// Forks; the child runs `body` and exits with the code it returns. The child gets its own stop
// flag, set by SIGINT or SIGTERM (which the caller must block in every thread, as rdmabench does),
// and a SIGTERM if the parent dies. The parent waits, forwarding its own `stop` as SIGTERM.
// Returns the child's exit code, or 128 + the signal that killed it.
Result<int> run_in_child(const std::function<int(const std::atomic<bool>& stop)>& body, const std::atomic<bool>& stop,
                         const ChildOptions& opt = {});

}  // namespace rb
