#pragma once
// Runs one piece of work in a forked child process, so that whatever goes wrong inside it (a
// thread stuck in a provider on a dead peer's lock, a provider crash, a leak) ends with the child
// and not with the process that forked it.
#include <sys/types.h>

#include <atomic>
#include <functional>
#include <vector>

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

using ChildBody = std::function<int(const std::atomic<bool>& stop)>;

// Forks a child that runs `body` as run_in_child describes, and returns its pid at once.
Result<pid_t> spawn_child(const ChildBody& body, const ChildOptions& opt = {});

// Children running side by side (a server's runs), each reaped as it ends.
class ChildGroup {
 public:
  struct Ended {
    pid_t pid;
    int code;  // exit code, or 128 + the signal that killed it
  };
  ChildGroup() = default;
  ChildGroup(const ChildGroup&) = delete;
  ChildGroup& operator=(const ChildGroup&) = delete;
  ~ChildGroup();  // SIGKILLs and reaps what is left

  Result<pid_t> spawn(const ChildBody& body, const ChildOptions& opt = {});
  size_t running() const { return pids_.size(); }
  // The children that ended since the last call; never blocks.
  std::vector<Ended> reap();
  // SIGTERM to every child, then waits up to grace_s for them, SIGKILLs the rest and reaps them.
  std::vector<Ended> stop_all(double grace_s);

 private:
  std::vector<pid_t> pids_;
};

}  // namespace rb
