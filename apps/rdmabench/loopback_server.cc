#include "loopback_server.hh"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <mutex>
#include <vector>
#include <cstring>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "registry/registry.hh"

namespace rb::app {
namespace {

// The children started and not reaped yet. A second Ctrl-C quick_exits past every destructor:
// PDEATHSIG would still kill a child then, but no one would reap it, so the hook below does.
std::mutex live_mutex;
std::vector<pid_t> live_children;

void remember(pid_t pid) {
  std::lock_guard lock(live_mutex);
  live_children.push_back(pid);
}

void forget(pid_t pid) {
  std::lock_guard lock(live_mutex);
  std::erase(live_children, pid);
}

// Asks each child to stop (so it removes its shared memory names), kills it if it has not within
// a second, then reaps it.
void stop_and_reap(pid_t pid) {
  kill(pid, SIGTERM);
  for (int i = 0; i < 100; ++i) {
    if (waitpid(pid, nullptr, WNOHANG) == pid) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  transport::remove_leftovers_of(pid);
}

void reap_live_children_at_quick_exit() {
  std::lock_guard lock(live_mutex);
  for (pid_t pid : live_children) stop_and_reap(pid);
  live_children.clear();
}

void reap_at_quick_exit_once() {
  static std::once_flag registered;
  std::call_once(registered, [] { at_quick_exit(reap_live_children_at_quick_exit); });
}

}  // namespace

Result<LoopbackServer> LoopbackServer::start(const std::vector<int>& cpus, bool once) {
  reap_at_quick_exit_once();
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return Status(Errc::io, fmt::format("pipe: {}", strerror(errno)));
  std::string cpu_list;
  for (int c : cpus) cpu_list += (cpu_list.empty() ? "" : ",") + std::to_string(c);
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    int err = errno;
    close(fds[0]);
    close(fds[1]);
    return Status(Errc::io, fmt::format("fork: {}", strerror(err)));
  }
  if (pid == 0) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(1);
    int wfd = dup(fds[1]);  // without O_CLOEXEC, so it survives exec
    std::string fd = std::to_string(wfd);
    std::vector<std::string> args = {"rdmabench", "--server", "--quiet", "--addr", "127.0.0.1:0", "--ready-fd", fd};
    if (once) args.push_back("--once");
    if (!cpu_list.empty()) {
      args.push_back("--cpus");
      args.push_back(cpu_list);
    }
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    sigset_t none;
    sigemptyset(&none);
    pthread_sigmask(SIG_SETMASK, &none, nullptr);
    execv("/proc/self/exe", argv.data());
    _exit(127);
  }
  close(fds[1]);
  remember(pid);
  LoopbackServer s;
  s.pid_ = pid;
  std::string got;
  char buf[32];
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (got.find('\n') == std::string::npos && std::chrono::steady_clock::now() < deadline) {
    pollfd p{fds[0], POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    ssize_t n = read(fds[0], buf, sizeof buf);
    if (n <= 0) break;
    got.append(buf, size_t(n));
  }
  close(fds[0]);
  if (got.find('\n') == std::string::npos) {
    s.finish(1);
    return Status(Errc::io, "--loopback: the server child did not start (see its error above)");
  }
  s.port_ = uint16_t(std::stoi(got));
  return s;
}

bool LoopbackServer::alive() {
  if (pid_ < 0) return false;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) != pid_) return true;
  forget(pid_);
  pid_ = -1;
  return false;
}

int LoopbackServer::finish(double timeout_s) {
  if (pid_ < 0) return 0;
  int code = wait_or_kill(timeout_s);
  forget(pid_);
  pid_ = -1;
  return code;
}

int LoopbackServer::wait_or_kill(double timeout_s) {
  int status = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < deadline) {
    pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(pid_, SIGTERM);
  for (int i = 0; i < 200; ++i) {
    if (waitpid(pid_, &status, WNOHANG) == pid_) return 128 + SIGTERM;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(pid_, SIGKILL);
  waitpid(pid_, &status, 0);
  return 128 + SIGKILL;
}

LoopbackServer::~LoopbackServer() { finish(0.5); }

}  // namespace rb::app
