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

[[noreturn]] void child_main(const ChildBody& body, pid_t parent,
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

int exit_code_of(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

}  // namespace

Result<pid_t> spawn_child(const ChildBody& body, const ChildOptions& opt) {
  std::fflush(stdout);  // or the child would print the parent's buffered output again
  std::fflush(stderr);
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) return Status(Errc::io, fmt::format("fork: {}", strerror(errno)));
  if (pid == 0) child_main(body, parent, opt);
  return pid;
}

Result<int> run_in_child(const ChildBody& body, const std::atomic<bool>& stop, const ChildOptions& opt) {
  auto pid = spawn_child(body, opt);
  if (!pid) return pid.status();
  using clock = std::chrono::steady_clock;
  clock::time_point kill_at{};
  bool forwarded = false;
  while (true) {
    int status = 0;
    pid_t r = waitpid(*pid, &status, WNOHANG);
    if (r == *pid) return exit_code_of(status);
    if (r < 0 && errno != EINTR) return Status(Errc::io, fmt::format("waitpid: {}", strerror(errno)));
    if (stop.load() && !forwarded) {
      forwarded = true;
      kill(*pid, SIGTERM);
      kill_at = clock::now() + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(opt.grace_s));
    }
    if (forwarded && clock::now() > kill_at) kill(*pid, SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

ChildGroup::~ChildGroup() {
  for (pid_t p : pids_) {
    kill(p, SIGKILL);
    while (waitpid(p, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
}

Result<pid_t> ChildGroup::spawn(const ChildBody& body, const ChildOptions& opt) {
  auto pid = spawn_child(body, opt);
  if (pid) pids_.push_back(*pid);
  return pid;
}

std::vector<ChildGroup::Ended> ChildGroup::reap() {
  std::vector<Ended> out;
  for (size_t i = 0; i < pids_.size();) {
    int status = 0;
    pid_t r = waitpid(pids_[i], &status, WNOHANG);
    if (r == pids_[i] || (r < 0 && errno == ECHILD)) {
      out.push_back({pids_[i], r == pids_[i] ? exit_code_of(status) : 128 + SIGKILL});
      pids_.erase(pids_.begin() + long(i));
    } else {
      ++i;
    }
  }
  return out;
}

std::vector<ChildGroup::Ended> ChildGroup::stop_all(double grace_s) {
  for (pid_t p : pids_) kill(p, SIGTERM);
  auto kill_at = std::chrono::steady_clock::now() + std::chrono::duration<double>(grace_s);
  std::vector<Ended> out;
  while (!pids_.empty()) {
    auto ended = reap();
    out.insert(out.end(), ended.begin(), ended.end());
    if (pids_.empty()) break;
    if (std::chrono::steady_clock::now() > kill_at)
      for (pid_t p : pids_) kill(p, SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return out;
}

}  // namespace rb
