#include "core/child_process.hh"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <thread>

#include <fmt/core.h>

namespace rb {
namespace {

[[noreturn]] void child_main(const std::function<int(const std::atomic<bool>&)>& body, pid_t parent,
                             const ChildOptions& opt) {
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (getppid() != parent) std::_Exit(1);  // the parent died before prctl took effect
  if (opt.in_child_first) opt.in_child_first();
  // Only the forking thread exists in the child: the parent's signal thread is not here, so the
  // child takes its own SIGINT/SIGTERM (still blocked, inherited) with a thread of its own.
  auto* stop = new std::atomic<bool>(false);  // never freed: the child never returns, it exits
  const double grace = opt.child_grace_s;
  std::thread([stop, grace] {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    int sig = 0;
    while (sigwait(&set, &sig) != 0) {
    }
    stop->store(true);
    // The work should now wind down on its own; if it is stuck (a provider call that never
    // returns), the grace ends the child anyway. Further signals change nothing: a Ctrl-C reaches
    // the child twice (from the terminal, and forwarded by the parent).
    std::this_thread::sleep_for(std::chrono::duration<double>(grace));
    fmt::print(stderr, "rdmabench: this run's process did not end within {:g} s of being stopped; exiting\n", grace);
    std::fflush(stderr);
    std::quick_exit(130);  // no destructors (the work may still be running); at_quick_exit hooks only
  }).detach();
  int code = 1;
  try {
    code = body(*stop);
  } catch (const std::exception& e) {  // must not unwind into the parent's frames, copied here
    fmt::print(stderr, "rdmabench: internal error in a run's process: {}\n", e.what());
  } catch (...) {
    fmt::print(stderr, "rdmabench: internal error in a run's process\n");
  }
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(code);
}

}  // namespace

Result<int> run_in_child(const std::function<int(const std::atomic<bool>&)>& body, const std::atomic<bool>& stop,
                         const ChildOptions& opt) {
  std::fflush(stdout);  // or the child would print the parent's buffered output again
  std::fflush(stderr);
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) return Status(Errc::io, fmt::format("fork: {}", strerror(errno)));
  if (pid == 0) child_main(body, parent, opt);

  using clock = std::chrono::steady_clock;
  clock::time_point kill_at{};
  bool forwarded = false;
  while (true) {
    int status = 0;
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (r < 0 && errno != EINTR) return Status(Errc::io, fmt::format("waitpid: {}", strerror(errno)));
    if (stop.load() && !forwarded) {
      forwarded = true;
      kill(pid, SIGTERM);
      kill_at = clock::now() + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(opt.grace_s));
    }
    if (forwarded && clock::now() > kill_at) kill(pid, SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace rb
