// The cheapest wake-up between two processes on this machine, the floor under any path whose
// receiver sleeps until told (vrdma --event, perftest -e): two processes, on CPU 0 and CPU 1,
// ping-pong through two eventfds, each blocked in read() until the other writes. 20,000 round
// trips after 1,000 to warm up; each round trip is timed, and the one-way time is half of it.
// Prints "p50_ns p99_ns" of the one-way time on one line. With --same-cpu both processes are on
// CPU 0: the wake-up then costs no interrupt to another CPU (what a hand-off that sleeps pays
// where its two sides share a core).
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

constexpr int kWarm = 1000;
constexpr int kRoundTrips = 20000;

void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  sched_setaffinity(0, sizeof set, &set);  // best effort: a 1-CPU machine still measures something
}

bool take(int fd) {
  uint64_t v;
  return read(fd, &v, sizeof v) == ssize_t(sizeof v);
}

bool give(int fd) {
  uint64_t one = 1;
  return write(fd, &one, sizeof one) == ssize_t(sizeof one);
}

}  // namespace

int main(int argc, char** argv) {
  bool same_cpu = argc == 2 && std::strcmp(argv[1], "--same-cpu") == 0;
  if (argc > 2 || (argc == 2 && !same_cpu)) {
    std::fprintf(stderr, "wakeup_floor: unknown argument '%s': give none (CPUs 0 and 1) or --same-cpu (both on CPU 0)\n",
                 argv[argc - 1]);
    return 2;
  }
  int ping = eventfd(0, EFD_CLOEXEC), pong = eventfd(0, EFD_CLOEXEC);
  if (ping < 0 || pong < 0) return perror("eventfd"), 1;
  pid_t child = fork();
  if (child < 0) return perror("fork"), 1;
  if (child == 0) {  // the echo: wakes on ping, answers on pong
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // a parent killed (a timed-out run) leaves no echo behind
    pin(same_cpu ? 0 : 1);
    for (int i = 0; i < kWarm + kRoundTrips; ++i)
      if (!take(ping) || !give(pong)) _exit(1);
    _exit(0);
  }
  pin(0);
  std::vector<double> one_way_ns;
  one_way_ns.reserve(kRoundTrips);
  for (int i = 0; i < kWarm + kRoundTrips; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    if (!give(ping) || !take(pong)) return perror("eventfd ping-pong"), 1;
    auto t1 = std::chrono::steady_clock::now();
    if (i >= kWarm) one_way_ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / 2);
  }
  int status = 0;
  waitpid(child, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return std::fputs("wakeup_floor: the echo failed\n", stderr), 1;
  std::sort(one_way_ns.begin(), one_way_ns.end());
  std::printf("%.0f %.0f\n", one_way_ns[one_way_ns.size() / 2], one_way_ns[one_way_ns.size() * 99 / 100]);
  return 0;
}
