#include "vrdma/router/slow_closes.hh"

#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <deque>
#include <iterator>
#include <map>
#include <mutex>
#include <set>
#include <utility>

namespace rb::vrdma {
namespace {

constexpr size_t kStackBytes = 64 * 1024;  // close() and a lock: a stuck thread costs little

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

struct SlowCloses::State {
  struct Owner {
    size_t open = 0;                 // given and not closed yet
    std::multiset<int64_t> started;  // when each of them in a close now (on a thread) began it
    std::deque<int> parked;
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
  int64_t started_ns;
  SlowCloses::State::Key key;
};

// The next parked descriptor a thread may take (its owner under its share of threads), or none.
bool next_parked(SlowCloses::State& st, Job& job) {
  auto take = [&](const SlowCloses::State::Key& key, SlowCloses::State::Owner& o) {
    if (o.parked.empty() || o.started.size() >= SlowCloses::kMaxThreadsPerOwner) return false;
    job.fd = o.parked.front();
    job.key = key;
    job.started_ns = now_ns();
    o.parked.pop_front();
    o.started.insert(job.started_ns);
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
    it->second.started.erase(it->second.started.find(job->started_ns));
    if (--it->second.open == 0) job->st->owners.erase(it);
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

void SlowCloses::close(int fd, int64_t owner, bool socket) {
  if (fd < 0) return;
  State::Key key{owner, socket};
  int64_t now = now_ns();
  std::lock_guard lk(st_->mu);
  bool stuck = false;
  for (bool s : {false, true})
    if (auto it = st_->owners.find({owner, s}); it != st_->owners.end() && !it->second.started.empty())
      stuck = stuck || *it->second.started.begin() <= now - kStuckAfterNs;
  State::Owner& o = st_->owners[key];
  ++o.open;
  size_t most = stuck ? kMaxThreads : kMaxThreadsAll;
  if (o.started.size() < kMaxThreadsPerOwner && st_->threads < most) {
    auto* job = new Job{st_, fd, now, key};
    o.started.insert(job->started_ns);
    ++st_->threads;
    if (start_thread(job)) return;
    o.started.erase(o.started.find(job->started_ns));
    --st_->threads;
    delete job;
  }
  o.parked.push_back(fd);  // a thread of its owner's takes it when one returns
}

size_t SlowCloses::open_from(int64_t owner) const {
  std::lock_guard lk(st_->mu);
  size_t open = 0;
  for (bool socket : {false, true})
    if (auto it = st_->owners.find({owner, socket}); it != st_->owners.end()) open += it->second.open;
  return open;
}

size_t SlowCloses::stuck_from(int64_t owner, int64_t older_than_ns) const {
  int64_t cutoff = now_ns() - older_than_ns;
  std::lock_guard lk(st_->mu);
  size_t stuck = 0;
  for (bool socket : {false, true}) {
    auto it = st_->owners.find({owner, socket});
    if (it == st_->owners.end()) continue;
    const auto& started = it->second.started;
    stuck += size_t(std::distance(started.begin(), started.upper_bound(cutoff)));
  }
  return stuck;
}

size_t SlowCloses::threads() const {
  std::lock_guard lk(st_->mu);
  return st_->threads;
}

}  // namespace rb::vrdma
