#include "vrdma/router/client_fds.hh"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

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
  }
  cv_.notify_one();
}

bool FdCloser::stalled(int64_t owner) const { return owner != kNoOwner && slow_.open_from(owner) >= kStalledAt; }

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
    close_one(fd, owner);
    lk.lock();
  }
}

void FdCloser::close_one(int fd, int64_t owner) {
  if (stalled(owner)) return slow_.close(fd, owner);  // its wait, if any, on a thread of its own
  struct stat st {};
  if (fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode)) {
    int domain = 0;
    socklen_t len = sizeof domain;
    // One not emptied closes on a thread of its own: the kernel drops what is left in it there.
    if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) == 0 && domain == AF_UNIX && !empty_unix_socket(fd, owner))
      return slow_.close(fd, owner);
    linger now{1, 0};  // abortive: a close that waits for unsent data waits for nobody
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &now, sizeof now);
  } else if (isatty(fd)) {
    tcflush(fd, TCOFLUSH);  // a tty's close waits for its output to drain
  } else if (close_may_wait(fd)) {
    return slow_.close(fd, owner);
  }
  close(fd);
}

namespace {

// A listening socket's unaccepted connections hold queues of their own, which its close drops.
bool listening(int fd) {
  int on = 0;
  socklen_t len = sizeof on;
  return getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &on, &len) == 0 && on;
}

bool stream(int fd) {
  int type = 0;
  socklen_t len = sizeof type;
  return getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 && type == SOCK_STREAM;
}

}  // namespace

// Takes everything queued in a Unix socket, so that its close drops nothing: the kernel closes
// what it drops on the closing thread, where a TCP socket with unsent data and SO_LINGER waits
// out its linger. Each descriptor taken is closed in turn the same way; one whose close may wait
// goes to slow_ at once (counted against its owner now, not when its turn comes); a copy of a
// socket already seen (this one included) is closed at once: a socket has no flush, and another
// reference is held, so nothing waits.
//
// True only when the queue was seen empty (EAGAIN, or a stream's end). False when it stopped
// short or cannot tell: a listening socket (its unaccepted connections hold queues of their own),
// more than kMaxWaiting descriptors waiting here, kMaxPackets packets (a sender refills it as fast
// as it is read), an owner stalled meanwhile, or a packet of 0 bytes and no descriptors (on a
// datagram or seqpacket socket, that or its peer's end: a zero-length packet once hid a lingering
// socket behind it). The caller then closes it on a thread of the owner's (see SlowCloses), where
// whatever the kernel drops waits for no one else.
bool FdCloser::empty_unix_socket(int fd, int64_t owner) {
  constexpr size_t kMaxWaiting = 2048;
  constexpr int kMaxPackets = 256;
  std::vector<struct stat> seen(1);
  if (fstat(fd, &seen[0]) != 0 || listening(fd)) return false;
  bool eof_ends = stream(fd);
  for (int packets = 0; packets < kMaxPackets; ++packets) {
    {
      std::lock_guard lk(mu_);
      if (fds_.size() >= kMaxWaiting) return false;
    }
    if (stalled(owner)) return false;
    char data[4096];
    iovec iov{data, sizeof data};
    alignas(cmsghdr) char ctl[CMSG_SPACE(253 * sizeof(int))];
    msghdr m{};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = ctl;
    m.msg_controllen = sizeof ctl;
    ssize_t n = recvmsg(fd, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK;
    if (n == 0 && !m.msg_controllen) return eof_ends;
    std::vector<int> fresh = take_descriptors(m, seen, owner);
    std::lock_guard lk(mu_);
    for (int f : fresh) fds_.emplace_back(f, owner);
  }
  return false;
}

// The descriptors a packet brought, but those closed at once (copies of a socket seen) and those
// given to slow_; the rest, in order, for the closer's queue.
std::vector<int> FdCloser::take_descriptors(msghdr& m, std::vector<struct stat>& seen, int64_t owner) {
  std::vector<int> fresh;
  for (cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t k = 0; k < count; ++k) {
      int inner;
      std::memcpy(&inner, CMSG_DATA(c) + k * sizeof(int), sizeof inner);
      struct stat st {};
      bool socket = fstat(inner, &st) == 0 && S_ISSOCK(st.st_mode);
      auto same = [&](const struct stat& s) { return s.st_dev == st.st_dev && s.st_ino == st.st_ino; };
      if (socket && std::any_of(seen.begin(), seen.end(), same)) {
        close(inner);
        continue;
      }
      if (socket && seen.size() < 1024) seen.push_back(st);
      if (close_may_wait(inner)) {  // never a socket or a tty
        slow_.close(inner, owner);
        continue;
      }
      fresh.push_back(inner);
    }
  }
  return fresh;
}

}  // namespace rb::vrdma
