// The floor under a message between two hosts that passes a relay on each (vrdma's routers): the
// sender hands it to a relay on its host through shared memory, the relay sends it over TCP, the
// far host's relay takes it and hands it to the receiver through shared memory. 64 B messages;
// each round trip is timed, the one-way time is half of it. Two designs, each the cheapest of
// its kind:
//   polling:  every process polls and yields the core each empty turn (four processes sharing
//             two cores; a blocked reader would pay a wake-up, see wakeup_floor)
//   sleeping: a relay finding nothing says it is parked and sleeps in poll() on its socket and an
//             eventfd that its endpoint writes only while it is parked; the endpoints spin. Beside
//             busy loops a yield waits out a loop's time slice and a woken sleeper does not.
//   relay_floor --serve PORT                         on the far host: relay and echo, for one run
//   relay_floor HOST:PORT [ROUND_TRIPS] [--sleeping]  on the near host: prints "p50_ns p99_ns"
//                                                    one way
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr long kRoundTrips = 20000;  // unless argv says
constexpr long kWarm = 1000;  // at most; a tenth of a short run
constexpr size_t kMessage = 64;

// One host's hand-off: `out` from the endpoint to its relay, `in` from the relay to the endpoint;
// sleeping, the relay's eventfd and whether it is parked on it.
struct Handoff {
  alignas(64) std::atomic<long> out{0};
  alignas(64) std::atomic<long> in{0};
  alignas(64) std::atomic<bool> parked{false};
  int wake = -1;  // sleeping only
};

[[noreturn]] void die(const char* what) {
  std::perror(what);
  std::exit(1);
}

Handoff* shared_handoff(bool sleeping) {
  void* m = mmap(nullptr, sizeof(Handoff), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) die("relay_floor: mmap");
  auto* h = new (m) Handoff;
  if (sleeping && (h->wake = eventfd(0, EFD_NONBLOCK)) < 0) die("relay_floor: eventfd");
  return h;
}

// The endpoint: waits for message `want` (spinning while its relay sleeps), and hands one over.
void wait_for(const Handoff* h, long want) {
  while (h->in.load(std::memory_order_acquire) != want)
    if (h->wake < 0) sched_yield();
}
void hand_over(Handoff* h, long i) {
  h->out.store(i);
  uint64_t one = 1;
  if (h->wake >= 0 && h->parked.load() && write(h->wake, &one, sizeof one) != ssize_t(sizeof one)) die("relay_floor: write");
}

// A sleeping relay with nothing to do: parked until its socket or its endpoint has something.
void park(Handoff* h, int sock, long sent) {
  h->parked.store(true);  // then look again: an endpoint that handed over before this saw no one parked
  if (h->out.load() == sent) {
    pollfd p[2] = {{sock, POLLIN, 0}, {h->wake, POLLIN, 0}};
    if (poll(p, 2, -1) < 0) die("relay_floor: poll");
    uint64_t n;
    (void)!read(h->wake, &n, sizeof n);
  }
  h->parked.store(false);
}

// The relay: what the endpoint hands over goes out on `sock`, what comes in goes to the endpoint.
// Returns after `round_trips` messages each way.
void relay(Handoff* h, int sock, long round_trips) {
  long sent = 0, got = 0;
  char buf[kMessage] = {};
  size_t have = 0;
  while (sent < round_trips || got < round_trips) {
    bool moved = false;
    if (long o = h->out.load(std::memory_order_acquire); o > sent) {
      std::memcpy(buf, &o, sizeof o);
      if (send(sock, buf, kMessage, MSG_NOSIGNAL) != ssize_t(kMessage)) die("relay_floor: send");
      sent = o;
      moved = true;
    }
    char in[kMessage];
    ssize_t n = recv(sock, in + have, kMessage - have, MSG_DONTWAIT);
    if (n == 0) die("relay_floor: the other relay went");
    if (n > 0 && (have += size_t(n)) == kMessage) {
      std::memcpy(&got, in, sizeof got);
      h->in.store(got, std::memory_order_release);
      have = 0;
      moved = true;
    }
    if (moved) continue;
    if (h->wake >= 0) park(h, sock, sent);
    else sched_yield();
  }
}

int tcp_nodelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

// The far host: one connection; the echo hands each message straight back.
int serve(int port) {
  int l = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  if (bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a) || listen(l, 1)) die("relay_floor: listen");
  int c = tcp_nodelay(accept(l, nullptr, nullptr));
  long round_trips = 0;
  if (recv(c, &round_trips, sizeof round_trips, MSG_WAITALL) != ssize_t(sizeof round_trips)) die("relay_floor: recv");
  Handoff* h = shared_handoff(round_trips < 0);  // the near host says which design: sleeping as a negative count
  round_trips = std::labs(round_trips);
  if (fork() == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    for (long i = 1; i <= round_trips; ++i) {
      wait_for(h, i);
      hand_over(h, i);
    }
    _exit(0);
  }
  relay(h, c, round_trips);
  wait(nullptr);
  return 0;
}

int measure(const std::string& where, long round_trips, bool sleeping) {
  size_t colon = where.rfind(':');
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(std::atoi(where.c_str() + colon + 1)));
  if (colon == std::string::npos || inet_pton(AF_INET, where.substr(0, colon).c_str(), &a.sin_addr) != 1) {
    std::fprintf(stderr, "relay_floor: HOST:PORT '%s' is not an IPv4 address and port; give e.g. 10.0.0.1:7000\n",
                 where.c_str());
    return 2;
  }
  int s = tcp_nodelay(socket(AF_INET, SOCK_STREAM, 0));
  if (connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a)) die("relay_floor: connect");
  long warm = std::min(kWarm, round_trips / 10);
  long total = round_trips + warm;
  long told = sleeping ? -total : total;
  if (send(s, &told, sizeof told, 0) != ssize_t(sizeof told)) die("relay_floor: send");
  Handoff* h = shared_handoff(sleeping);
  if (fork() == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    relay(h, s, total);
    _exit(0);
  }
  std::vector<double> one_way;
  one_way.reserve(size_t(round_trips));
  for (long i = 1; i <= total; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    hand_over(h, i);
    wait_for(h, i);
    if (i > warm) one_way.push_back(std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / 2);
  }
  wait(nullptr);
  std::sort(one_way.begin(), one_way.end());
  std::printf("%.0f %.0f\n", one_way[one_way.size() / 2], one_way[one_way.size() * 99 / 100]);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 3 && std::string(argv[1]) == "--serve") return serve(std::atoi(argv[2]));
  if (argc < 2) {
    std::fprintf(stderr, "usage: relay_floor --serve PORT | relay_floor HOST:PORT [ROUND_TRIPS] [--sleeping]\n");
    return 2;
  }
  bool sleeping = std::string(argv[argc - 1]) == "--sleeping";
  if (sleeping) --argc;
  return measure(argv[1], argc > 2 ? std::max(1L, std::atol(argv[2])) : kRoundTrips, sleeping);
}
