#include "vrdma/router/slow_closes.hh"

#include <pthread.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <iterator>
#include <tuple>
#include <utility>

namespace rb::vrdma {
namespace {

// Filesystems whose close() flushes nothing to another party (statfs f_type). Overlay is not
// among them: it passes FLUSH on to the filesystem under it, which a user namespace can make a
// FUSE mount of its own.
constexpr std::array<unsigned long, 21> kLocalFilesystems = {
    0x534F434B,  // sockfs
    0x50495045,  // pipefs
    0x09041934,  // anon inodes: eventfd, epoll, timerfd, ...
    0x01021994,  // tmpfs, shmem: memfds
    0x958458f6,  // hugetlbfs: huge-page memfds
    0x858458f6,  // ramfs
    0x9fa0,      // proc
    0x62656572,  // sysfs
    0x6e736673,  // nsfs
    0x50494446,  // pidfs
    0x63677270,  // cgroup2
    0x0027e0eb,  // cgroup
    0xcafe4a11,  // bpf
    0x64626720,  // debugfs
    0x74726163,  // tracefs
    0xEF53,      // ext2, ext3, ext4
    0x58465342,  // xfs
    0x9123683E,  // btrfs
    0xF2F52010,  // f2fs
    0x73717368,  // squashfs
    0xE0F5E1E2,  // erofs
};

constexpr size_t kStackBytes = 64 * 1024;  // close() and a lock: a stuck thread costs little

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

bool close_may_wait(int fd) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return false;  // not open: nothing to wait for
  if (S_ISSOCK(st.st_mode) || S_ISFIFO(st.st_mode)) return false;
  // A driver's flush may wait (a tty's output is dropped first); the memory devices' (/dev/null,
  // /dev/zero, /dev/urandom: major 1) never do, and need no thread each.
  if (S_ISCHR(st.st_mode)) return major(st.st_rdev) != 1 && !isatty(fd);
  if (S_ISBLK(st.st_mode)) return true;
  struct statfs fs {};
  if (fstatfs(fd, &fs) != 0) return true;
  auto type = static_cast<unsigned long>(fs.f_type) & 0xffffffffUL;
  return std::find(kLocalFilesystems.begin(), kLocalFilesystems.end(), type) == kLocalFilesystems.end();
}

struct SlowCloses::State {
  struct Owner {
    std::multiset<int64_t> given;  // when each given and not closed yet was given
    size_t threads = 0;            // of them, in a close now
    std::deque<std::pair<int, int64_t>> parked;  // descriptor, when given
  };
  // A socket's close waits only on what is queued in it; it is never parked behind its owner's
  // files, whose closes may never return: each kind has its owner's share of threads.
  using Key = std::pair<int64_t, bool>;  // owner, a socket
  std::mutex mu;
  std::map<Key, Owner> owners;
  size_t threads = 0;
};

namespace {

struct Job {
  std::shared_ptr<SlowCloses::State> st;
  int fd;
  int64_t given_ns;
  SlowCloses::State::Key key;
};

// The next parked descriptor a thread may take (its owner under its share of threads), or none.
bool next_parked(SlowCloses::State& st, Job& job) {
  auto take = [&](const SlowCloses::State::Key& key, SlowCloses::State::Owner& o) {
    if (o.parked.empty() || o.threads >= SlowCloses::kMaxThreadsPerOwner) return false;
    std::tie(job.fd, job.given_ns) = o.parked.front();
    job.key = key;
    o.parked.pop_front();
    ++o.threads;
    return true;
  };
  if (auto it = st.owners.find(job.key); it != st.owners.end() && take(it->first, it->second)) return true;
  for (auto& [key, o] : st.owners)
    if (take(key, o)) return true;
  return false;
}

// Reads what is queued in a socket without taking its descriptors: the kernel drops them unread,
// so no file among them is ever flushed here (a lingering socket among them waits, on this
// thread). Its sender then sees what the router last sent it, not a reset for unread input.
void drain(int fd) {
  char buf[4096];
  for (int packets = 0; packets < 64 && recv(fd, buf, sizeof buf, MSG_DONTWAIT) > 0; ++packets) {
  }
}

// Closes the job's descriptor, then any parked one it may take, and ends when there is none.
void* close_on_this_thread(void* arg) {
  Job* job = static_cast<Job*>(arg);
  while (true) {
    if (job->key.second) drain(job->fd);
    ::close(job->fd);
    std::lock_guard lk(job->st->mu);
    auto it = job->st->owners.find(job->key);
    it->second.given.erase(it->second.given.find(job->given_ns));
    --it->second.threads;
    if (it->second.given.empty()) job->st->owners.erase(it);
    if (!next_parked(*job->st, *job)) {
      --job->st->threads;
      break;
    }
  }
  delete job;
  return nullptr;
}

// A detached thread with a small stack: one whose close never returns keeps it, never the
// router's exit. False when none can be had.
bool start_thread(Job* job) {
  pthread_attr_t attr;
  if (pthread_attr_init(&attr) != 0) return false;
  pthread_attr_setstacksize(&attr, kStackBytes);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_t t;
  bool ok = pthread_create(&t, &attr, close_on_this_thread, job) == 0;
  pthread_attr_destroy(&attr);
  return ok;
}

}  // namespace

SlowCloses::SlowCloses() : st_(std::make_shared<State>()) {}

void SlowCloses::close(int fd, int64_t owner) {
  if (fd < 0) return;
  struct stat st {};
  State::Key key{owner, fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode)};
  int64_t given = now_ns();
  std::lock_guard lk(st_->mu);
  State::Owner& o = st_->owners[key];
  o.given.insert(given);
  if (o.threads < kMaxThreadsPerOwner && st_->threads < kMaxThreads) {
    auto* job = new Job{st_, fd, given, key};
    ++o.threads;
    ++st_->threads;
    if (start_thread(job)) return;
    --o.threads;
    --st_->threads;
    delete job;
  }
  o.parked.emplace_back(fd, given);  // a thread of its owner's takes it when one returns
}

size_t SlowCloses::open_from(int64_t owner, int64_t older_than_ns) const {
  int64_t cutoff = now_ns() - older_than_ns;
  std::lock_guard lk(st_->mu);
  size_t open = 0;
  for (bool socket : {false, true}) {
    auto it = st_->owners.find({owner, socket});
    if (it == st_->owners.end()) continue;
    const auto& given = it->second.given;
    open += size_t(std::distance(given.begin(), given.upper_bound(cutoff)));
  }
  return open;
}

size_t SlowCloses::threads() const {
  std::lock_guard lk(st_->mu);
  return st_->threads;
}

}  // namespace rb::vrdma
