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
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
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

struct FdCloser::Worker {
  int64_t busy_since_ns = 0;  // guarded by Shared::mu; 0 when between items
  bool left = false;          // a fresh worker took over: end after the close in hand
  bool done = false;          // it has ended
};

struct FdCloser::Shared {
  struct Item {
    int fd;
    int64_t owner;
  };
  std::mutex mu;
  std::condition_variable work_cv, watch_cv;
  std::deque<Item> fds;
  std::map<int64_t, size_t> by_owner;  // descriptors queued or in a close, per owner
  std::deque<std::shared_ptr<void>> things;
  bool stop = false;
  int stuck = 0;  // workers left in a close
};

namespace {

int64_t mono_ns() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return int64_t(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}

bool same_file(const struct stat& a, const struct stat& b) { return a.st_dev == b.st_dev && a.st_ino == b.st_ino; }

// Takes the descriptors queued in a Unix socket, to be closed in turn the same way; stops while
// kMaxWaiting wait already. A socket it has seen (this one included) is closed at once: a copy,
// whose close releases nothing. A sender that keeps the queue full of copies of the socket itself
// once took the router to its descriptor limit through here.
void empty_unix_socket(FdCloser::Shared& sh, int fd, int64_t owner) {
  std::vector<struct stat> seen(1);
  if (fstat(fd, &seen[0]) != 0) return;
  for (int packets = 0; packets < 100000; ++packets) {
    {
      std::lock_guard lk(sh.mu);
      if (sh.fds.size() >= FdCloser::kMaxWaiting) return;
    }
    char data[4096];
    iovec iov{data, sizeof data};
    alignas(cmsghdr) char ctl[CMSG_SPACE(253 * sizeof(int))];
    msghdr m{};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = ctl;
    m.msg_controllen = sizeof ctl;
    ssize_t n = recvmsg(fd, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n <= 0 && !(n == 0 && m.msg_controllen)) return;
    std::vector<int> fresh;
    for (cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t k = 0; k < count; ++k) {
        int inner;
        std::memcpy(&inner, CMSG_DATA(c) + k * sizeof(int), sizeof inner);
        struct stat st {};
        bool socket = fstat(inner, &st) == 0 && S_ISSOCK(st.st_mode);
        if (socket && std::any_of(seen.begin(), seen.end(), [&](const struct stat& s) { return same_file(s, st); })) {
          close(inner);  // a socket has no flush, and another reference is held: returns at once
          continue;
        }
        if (socket && seen.size() < 1024) seen.push_back(st);
        fresh.push_back(inner);
      }
    }
    std::lock_guard lk(sh.mu);
    for (int f : fresh) sh.fds.push_back({f, owner});
    if (owner != FdCloser::kNoOwner) sh.by_owner[owner] += fresh.size();
  }
}

void close_one(FdCloser::Shared& sh, int fd, int64_t owner) {
  struct stat st {};
  if (fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode)) {
    int domain = 0;
    socklen_t len = sizeof domain;
    if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) == 0 && domain == AF_UNIX) empty_unix_socket(sh, fd, owner);
    linger now{1, 0};  // abortive: a close that waits for unsent data waits for nobody
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &now, sizeof now);
  } else if (isatty(fd)) {
    tcflush(fd, TCOFLUSH);  // a tty's close waits for its output to drain
  }
  close(fd);
}

// One worker: takes the next descriptor or mapping and lets go of it, until stopped or left.
void work(std::shared_ptr<FdCloser::Shared> sh, std::shared_ptr<FdCloser::Worker> me) {
  std::unique_lock lk(sh->mu);
  while (true) {
    sh->work_cv.wait(lk, [&] { return sh->stop || me->left || !sh->fds.empty() || !sh->things.empty(); });
    if (me->left || (sh->fds.empty() && sh->things.empty())) break;
    me->busy_since_ns = mono_ns();
    sh->watch_cv.notify_one();
    if (!sh->things.empty()) {
      std::shared_ptr<void> thing = std::move(sh->things.front());
      sh->things.pop_front();
      lk.unlock();
      thing.reset();  // the last reference: unmapped here
    } else {
      auto item = sh->fds.front();
      sh->fds.pop_front();
      lk.unlock();
      close_one(*sh, item.fd, item.owner);
      lk.lock();
      if (auto it = sh->by_owner.find(item.owner); it != sh->by_owner.end() && --it->second == 0) sh->by_owner.erase(it);
      lk.unlock();
    }
    lk.lock();
    me->busy_since_ns = 0;
    sh->watch_cv.notify_one();
  }
  if (me->left) --sh->stuck;
  me->done = true;
  sh->watch_cv.notify_all();
}

}  // namespace

FdCloser::FdCloser() : sh_(std::make_shared<Shared>()) {
  start_worker();
  watcher_ = std::thread([this] { watch(); });
}

FdCloser::~FdCloser() {
  {
    std::lock_guard lk(sh_->mu);
    sh_->stop = true;
  }
  sh_->work_cv.notify_all();
  sh_->watch_cv.notify_all();
  watcher_.join();
  // What is queued is let go of before the router ends, unless a close is stuck for good.
  std::unique_lock lk(sh_->mu);
  sh_->watch_cv.wait_for(lk, std::chrono::nanoseconds(kStuckNs), [&] { return worker_->done; });
}

void FdCloser::start_worker() {
  worker_ = std::make_shared<Worker>();
  std::thread(work, sh_, worker_).detach();  // ends on stop, or after its close when left
}

// Waits while the worker is idle; while it is busy, until its item has taken kStuckNs, when it
// is left to it and a fresh worker takes the rest.
void FdCloser::watch() {
  std::unique_lock lk(sh_->mu);
  while (!sh_->stop) {
    int64_t since = worker_->busy_since_ns;
    if (!since) {
      sh_->watch_cv.wait(lk, [&] { return sh_->stop || worker_->busy_since_ns != 0; });
      continue;
    }
    int64_t left_ns = since + kStuckNs - mono_ns();
    if (left_ns > 0) {
      sh_->watch_cv.wait_for(lk, std::chrono::nanoseconds(left_ns), [&] { return sh_->stop || worker_->busy_since_ns != since; });
      continue;
    }
    if (sh_->stuck >= kMaxStuck) {  // the rest waits for one of them to return
      sh_->watch_cv.wait(lk, [&] { return sh_->stop || worker_->busy_since_ns != since || sh_->stuck < kMaxStuck; });
      continue;
    }
    worker_->left = true;
    ++sh_->stuck;
    fmt::print(stderr, "vrdmad: a close has not returned in {} s (a client's file on a stalled filesystem?); "
                       "{} thread(s) left to such closes, a fresh one goes on\n", kStuckNs / 1'000'000'000, sh_->stuck);
    start_worker();
  }
}

int FdCloser::stuck() const {
  std::lock_guard lk(sh_->mu);
  return sh_->stuck;
}

void FdCloser::drop_later(std::shared_ptr<void> thing) {
  if (!thing) return;
  {
    std::lock_guard lk(sh_->mu);
    sh_->things.push_back(std::move(thing));
  }
  sh_->work_cv.notify_all();
}

size_t FdCloser::waiting_from(int64_t owner) const {
  std::lock_guard lk(sh_->mu);
  auto it = sh_->by_owner.find(owner);
  return it == sh_->by_owner.end() ? 0 : it->second;
}

void FdCloser::close_later(UniqueFd fd, int64_t owner) {
  if (!fd) return;
  {
    std::lock_guard lk(sh_->mu);
    sh_->fds.push_back({fd.release(), owner});
    if (owner != kNoOwner) ++sh_->by_owner[owner];
  }
  sh_->work_cv.notify_all();
}

}  // namespace rb::vrdma
