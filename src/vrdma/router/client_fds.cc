#include "vrdma/router/client_fds.hh"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
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
  // The name alone is a path any filesystem may have (a FUSE mount at /memfd:x, whose pages the
  // router would then fault on); F_GET_SEALS is answered by shared memory alone.
  if (l.rfind("/memfd:", 0) == 0 && fcntl(fd, F_GET_SEALS) >= 0) return FdKind::memfd;
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

bool ring_doorbell(int fd) {
  if (fd < 0) return true;
  int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || !(flags & O_NONBLOCK)) return false;
  thread_local ThreadTimer timer;
  uint64_t one = 1;
  timer.arm(2'000'000);
  ssize_t n = write(fd, &one, sizeof one);  // EAGAIN: its counter is full, so it is readable: awake
  int err = errno;
  timer.arm(0);
  return n == ssize_t(sizeof one) || err == EAGAIN;
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

void FdCloser::drop_later(std::shared_ptr<void> thing) {
  if (!thing) return;
  {
    std::lock_guard lk(mu_);
    things_.push_back(std::move(thing));
  }
  cv_.notify_one();
}

void FdCloser::close_later(UniqueFd fd, int64_t owner) {
  if (!fd) return;
  {
    std::lock_guard lk(mu_);
    fds_.emplace_back(fd.release(), owner);
    ++queued_[owner];
  }
  cv_.notify_one();
}

bool FdCloser::stalled(int64_t owner) const {
  if (owner == kNoOwner) return false;
  size_t queued = 0;
  {
    std::lock_guard lk(mu_);
    if (auto it = queued_.find(owner); it != queued_.end()) queued = it->second;
  }
  return slow_.stuck_from(owner, kStuckAfterNs) >= kStalledAt || queued + slow_.open_from(owner) >= kMostPending;
}

void FdCloser::run() {
  std::unique_lock lk(mu_);
  while (true) {
    cv_.wait(lk, [&] { return stop_ || !fds_.empty() || !things_.empty(); });
    if (fds_.empty() && things_.empty()) return;
    if (!things_.empty()) {
      std::shared_ptr<void> thing = std::move(things_.front());
      things_.pop_front();
      lk.unlock();
      thing.reset();  // the last reference: unmapped here
      lk.lock();
      continue;
    }
    auto [fd, owner] = fds_.front();
    fds_.pop_front();
    lk.unlock();
    close_one(fd, owner);  // given to slow_ (counted there) before it stops counting here
    lk.lock();
    if (auto it = queued_.find(owner); it != queued_.end() && --it->second == 0) queued_.erase(it);
  }
}

CloseKind close_kind(int fd) {
  std::string l = link_of(fd);
  if (l.rfind("socket:[", 0) == 0) {
    int domain = 0;
    socklen_t len = sizeof domain;
    bool unix_domain = getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) == 0 && domain == AF_UNIX;
    return unix_domain ? CloseKind::unix_socket : CloseKind::socket;
  }
  // Shared memory (a memfd; F_GET_SEALS is the kernel's answer alone) closes at once: no epoll set
  // can watch it. Any file one can (a pipe, an eventfd, an epoll set) may wait: its last close
  // takes the lock of each set watching it, which a client holds as long as it likes (an
  // epoll_wait whose event buffer faults on a FUSE file it never answers). A file with a path may
  // flush to its filesystem's server, or a tty wait for its output.
  if (l.empty() || l[0] != '/') return CloseKind::may_wait;  // pipe:[...], anon_inode:[eventfd], ...
  return fcntl(fd, F_GET_SEALS) >= 0 ? CloseKind::at_once : CloseKind::may_wait;
}

void FdCloser::close_one(int fd, int64_t owner) {
  CloseKind kind = close_kind(fd);
  if (kind == CloseKind::at_once && !stalled(owner)) {
    close(fd);
    return;
  }
  if (kind == CloseKind::socket) {
    linger now{1, 0};  // abortive: a close that waits for unsent data waits for nobody
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &now, sizeof now);
  }
  slow_.close(fd, owner, kind == CloseKind::socket || kind == CloseKind::unix_socket);
}

}  // namespace rb::vrdma
