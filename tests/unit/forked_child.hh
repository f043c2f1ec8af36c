#pragma once
// A test's second process: runs a function in a forked child whose return value is its exit
// code. Assertions cannot cross fork, so the child reports through that code; the parent checks
// it. The child dies with the parent, and a child still running when the parent stops waiting is
// killed.
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

namespace rb::test {

class ForkedChild {
 public:
  static constexpr int kTimedOut = -1;
  static constexpr int kLost = -2;  // no child to wait for (fork or waitpid failed)

  template <class F>
  explicit ForkedChild(F&& body) {
    pid_ = fork();
    if (pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      _exit(body());
    }
  }
  ForkedChild(const ForkedChild&) = delete;
  ~ForkedChild() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  bool started() const { return pid_ > 0; }

  // The child's exit code, 128 + the signal that ended it, kTimedOut (the destructor kills it)
  // or kLost.
  int wait(double timeout_s) {
    if (pid_ <= 0) return kLost;
    auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    int st = 0;
    pid_t r;
    while ((r = waitpid(pid_, &st, WNOHANG)) == 0) {
      if (std::chrono::steady_clock::now() > end) return kTimedOut;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    if (r != pid_) return kLost;
    pid_ = -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }

 private:
  pid_t pid_ = -1;
};

}  // namespace rb::test
