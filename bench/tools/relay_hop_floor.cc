// The floor under a one-host path through a third process (vrdma's router path) where that
// process has no core of its own: a client on CPU 0 and a server on CPU 1 ping-pong a counter,
// every message going through a relay that may run on either CPU. Each round trip is timed; the
// one-way time is half of it. Two designs, each the cheapest of its kind:
//   sleeps: the relay, finding nothing, says it is parked and blocks on an eventfd, which a
//           sender writes after its message only while the relay is parked (a router parked in
//           epoll, kicked by its clients); the client and server spin on their lines
//   spins:  the relay polls both lines, and every process gives the core away between looks
//           (a spinning router; beside waiters that never yield it gets no core on two CPUs)
// Prints "sleeps_p50_ns sleeps_p99_ns spins_p50_ns spins_p99_ns" on one line. Beside busy loops
// (bench/floors.py --loaded) the relay must take a core from someone, and that is the measure.
//   relay_hop_floor [ROUND_TRIPS]   (default 20000, after a tenth as many, at most 1,000, to warm up)
#include <sched.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <vector>

namespace {

constexpr long kRoundTrips = 20000;  // unless argv[1] says

// Each process's line: what it has sent, and what the relay has delivered to it.
struct Line {
  alignas(64) std::atomic<long> sent{0};
  alignas(64) std::atomic<long> delivered{0};
};
struct Shared {
  Line client, server;
  alignas(64) std::atomic<bool> parked{false};
  std::atomic<bool> done{false};
};

void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  sched_setaffinity(0, sizeof set, &set);  // best effort: a 1-CPU machine still measures something
}

// After a message: wakes the relay if it sleeps.
void kick(Shared* s, int fd) {
  uint64_t one = 1;
  if (fd >= 0 && s->parked.load() && write(fd, &one, sizeof one) != sizeof one) _exit(1);
}

// Moves what each side sent to the other until told to stop.
[[noreturn]] void relay(Shared* s, int wake) {
  long to_server = 0, to_client = 0;
  auto move = [&] {
    bool moved = false;
    if (long v = s->client.sent.load(); v != to_server) {
      s->server.delivered.store(to_server = v, std::memory_order_release);
      moved = true;
    }
    if (long v = s->server.sent.load(); v != to_client) {
      s->client.delivered.store(to_client = v, std::memory_order_release);
      moved = true;
    }
    return moved;
  };
  while (!s->done.load(std::memory_order_acquire)) {
    if (move()) continue;
    if (wake < 0) {
      sched_yield();
      continue;
    }
    s->parked.store(true);  // then look again: a message sent before this saw no one parked
    uint64_t n;
    if (!move() && !s->done.load()) (void)!read(wake, &n, sizeof n);
    s->parked.store(false);
  }
  _exit(0);
}

void wait_for(const std::atomic<long>& v, long want, bool yield) {
  while (v.load(std::memory_order_acquire) != want)
    if (yield) sched_yield();
}

// One pass: the one-way times, sorted.
std::vector<double> pass(bool sleeps, long round_trips) {
  const bool yield = !sleeps;
  const long warm = std::min(1000L, round_trips / 10);
  void* m = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) std::perror("relay_hop_floor: mmap"), std::exit(1);
  auto* s = new (m) Shared;
  int wake = sleeps ? eventfd(0, EFD_CLOEXEC) : -1;
  pid_t r = fork();
  if (r == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // a parent killed (a timed-out run) leaves nothing behind
    relay(s, wake);
  }
  pid_t echo = fork();
  if (echo == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    pin(1);
    for (long i = 1; i <= warm + round_trips; ++i) {
      wait_for(s->server.delivered, i, yield);
      s->server.sent.store(i);
      kick(s, wake);
    }
    _exit(0);
  }
  pin(0);
  std::vector<double> one_way;
  one_way.reserve(size_t(round_trips));
  for (long i = 1; i <= warm + round_trips; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    s->client.sent.store(i);
    kick(s, wake);
    wait_for(s->client.delivered, i, yield);
    if (i > warm) one_way.push_back(std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / 2);
  }
  s->done.store(true);
  if (wake >= 0) {
    uint64_t one = 1;
    (void)!write(wake, &one, sizeof one);
  }
  waitpid(echo, nullptr, 0);
  waitpid(r, nullptr, 0);
  if (wake >= 0) close(wake);
  munmap(m, sizeof(Shared));
  std::sort(one_way.begin(), one_way.end());
  return one_way;
}

}  // namespace

int main(int argc, char** argv) {
  long round_trips = argc > 1 ? std::max(100L, std::atol(argv[1])) : kRoundTrips;
  std::vector<double> sleeps = pass(true, round_trips), spins = pass(false, round_trips);
  auto p = [](const std::vector<double>& t, size_t pct) { return t[t.size() * pct / 100]; };
  std::printf("%.0f %.0f %.0f %.0f\n", p(sleeps, 50), p(sleeps, 99), p(spins, 50), p(spins, 99));
  return 0;
}
