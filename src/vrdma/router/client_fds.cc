#include "vrdma/router/client_fds.hh"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <string>

#include <fmt/format.h>

namespace rb::vrdma {
namespace {

std::string link_of(int fd) {
  char buf[128];
  ssize_t n = readlink(fmt::format("/proc/self/fd/{}", fd).c_str(), buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, size_t(n)) : std::string();
}

// The signal that cuts a doorbell write short: its handler does nothing, and it is installed
// without SA_RESTART, so the write returns EINTR.
constexpr int kCutShort = SIGUSR2;

void cut_short(int) {}

// A timer of the calling thread's, that signals it (and no other thread) when it expires.
class ThreadTimer {
 public:
  ThreadTimer() {
    struct sigaction sa {};
    sa.sa_handler = cut_short;
    sigemptyset(&sa.sa_mask);
    sigaction(kCutShort, &sa, nullptr);  // the same handler each time: idempotent
    sigevent ev{};
    ev.sigev_notify = SIGEV_THREAD_ID;
    ev.sigev_signo = kCutShort;
    ev._sigev_un._tid = pid_t(syscall(SYS_gettid));
    ok_ = timer_create(CLOCK_MONOTONIC, &ev, &timer_) == 0;
  }
  ~ThreadTimer() {
    if (ok_) timer_delete(timer_);
  }
  void arm(long ns) {
    if (!ok_) return;
    itimerspec t{{0, 0}, {0, ns}};
    timer_settime(timer_, 0, &t, nullptr);
  }

 private:
  timer_t timer_{};
  bool ok_ = false;
};

}  // namespace

FdKind fd_kind(int fd) {
  if (fd < 0) return FdKind::none;
  std::string l = link_of(fd);
  if (l == "anon_inode:[eventfd]") return FdKind::eventfd;
  if (l.rfind("/memfd:", 0) == 0) return FdKind::memfd;
  return FdKind::other;
}

const char* fd_kind_name(FdKind k) {
  switch (k) {
    case FdKind::none: return "no descriptor";
    case FdKind::memfd: return "a memfd";
    case FdKind::eventfd: return "an eventfd";
    case FdKind::other: break;
  }
  return "a descriptor of another kind";
}

void ring_doorbell(int fd) {
  if (fd < 0) return;
  int flags = fcntl(fd, F_GETFL);
  if (flags >= 0 && !(flags & O_NONBLOCK)) fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  thread_local ThreadTimer timer;
  uint64_t one = 1;
  timer.arm(20'000'000);
  (void)!write(fd, &one, sizeof one);  // EAGAIN: its counter is full, so it is readable: awake
  timer.arm(0);
}

FdCloser::FdCloser() : thread_([this] { run(); }) {}

FdCloser::~FdCloser() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  thread_.join();
}

void FdCloser::close_later(UniqueFd fd) {
  if (!fd) return;
  {
    std::lock_guard lk(mu_);
    fds_.push_back(fd.release());
  }
  cv_.notify_one();
}

void FdCloser::run() {
  std::unique_lock lk(mu_);
  while (true) {
    cv_.wait(lk, [&] { return stop_ || !fds_.empty(); });
    if (fds_.empty()) return;
    int fd = fds_.front();
    fds_.pop_front();
    lk.unlock();
    struct stat st {};
    if (fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode)) {
      linger now{1, 0};  // abortive: a close that waits for unsent data waits for nobody
      setsockopt(fd, SOL_SOCKET, SO_LINGER, &now, sizeof now);
    } else if (isatty(fd)) {
      tcflush(fd, TCOFLUSH);  // a tty's close waits for its output to drain
    }
    close(fd);
    lk.lock();
  }
}

}  // namespace rb::vrdma
