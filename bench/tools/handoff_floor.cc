// The cheapest hand-off between two processes on this machine, the floor under any path that
// passes a message through a third process (vrdma's router path): two processes ping-pong a
// counter in shared memory, 10^5 round trips, and the one-way time is half a round trip.
//   same core: both pinned to CPU 0, each yielding while it waits (two spinners on one core
//              would each wait out the other's time slice)
//   two cores: CPU 0 and CPU 1, each spinning
// Prints "same_core_ns two_cores_ns" on one line, each the best of three passes.
//   handoff_floor [ROUND_TRIPS]   (default 100000; fewer where busy loops share the cores, each
//                                 round trip then waiting for their time slices)
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace {

constexpr long kRoundTrips = 100000;  // unless argv[1] says

// Two counters on cache lines of their own: one each way.
struct Shared {
  alignas(64) std::atomic<long> ping{0};
  alignas(64) std::atomic<long> pong{0};
};

void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof set, &set) != 0) {
    std::perror("handoff_floor: sched_setaffinity");
    std::exit(1);
  }
}

void wait_for(const std::atomic<long>& v, long want, bool yield) {
  while (v.load(std::memory_order_acquire) != want)
    if (yield) sched_yield();
}

// One pass: ns one way.
double pass(int cpu_a, int cpu_b, bool yield, long round_trips) {
  void* m = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) {
    std::perror("handoff_floor: mmap");
    std::exit(1);
  }
  auto* s = new (m) Shared;
  pid_t echo = fork();
  if (echo == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // a parent killed (a timed-out run) leaves no echo behind
    pin(cpu_b);
    for (long i = 1; i <= round_trips; ++i) {
      wait_for(s->ping, i, yield);
      s->pong.store(i, std::memory_order_release);
    }
    _exit(0);
  }
  pin(cpu_a);
  auto t0 = std::chrono::steady_clock::now();
  for (long i = 1; i <= round_trips; ++i) {
    s->ping.store(i, std::memory_order_release);
    wait_for(s->pong, i, yield);
  }
  double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
  waitpid(echo, nullptr, 0);
  munmap(m, sizeof(Shared));
  return ns / double(round_trips) / 2;
}

double best_of_three(int cpu_a, int cpu_b, bool yield, long round_trips) {
  double best = pass(cpu_a, cpu_b, yield, round_trips);
  for (int i = 0; i < 2; ++i) best = std::min(best, pass(cpu_a, cpu_b, yield, round_trips));
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  long round_trips = argc > 1 ? std::max(1L, std::atol(argv[1])) : kRoundTrips;
  std::printf("%.1f %.1f\n", best_of_three(0, 0, true, round_trips), best_of_three(0, 1, false, round_trips));
  return 0;
}
