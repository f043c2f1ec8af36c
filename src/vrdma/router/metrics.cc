#include "vrdma/router/metrics.hh"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include <fmt/format.h>

#include "vrdma/router/tcp_owners.hh"

namespace rb::vrdma {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kDeadlineMs = 1000;     // a connection's whole life: request in, answer out
constexpr size_t kMaxRequest = 4096;  // a scrape's request line and headers
// Connections at once: from one uid of this host (or one address of another host), and in all.
// One uid holding connections open once held the endpoint from every other scraper.
constexpr size_t kPerPeer = 4, kMaxScrapes = 64;

std::string http(const char* status, const std::string& type, const std::string& body) {
  return fmt::format("HTTP/1.1 {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}", status, type,
                     body.size(), body);
}

int ms_until(Clock::time_point t) {
  return int(std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::milliseconds>(t - Clock::now()).count() + 1));
}

}  // namespace

// One scraper's connection: its request read, then its answer written, within its deadline.
struct MetricsServer::Scrape {
  UniqueFd fd;
  Clock::time_point until;
  uint64_t order = 0;  // when it came, among the others
  std::string who;     // whom it counts against: its uid, or its address off this host
  MetricsAsk ask;
  std::string in, out;
  size_t sent = 0;
  bool answered = false;
};

Result<std::unique_ptr<MetricsServer>> MetricsServer::open(const std::string& host, uint16_t port) {
  std::unique_ptr<MetricsServer> m(new MetricsServer());
  sockaddr_storage ss{};
  socklen_t len = 0;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&ss);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&ss);
  if (inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET, v4->sin_port = htons(port), len = sizeof *v4;
  } else if (inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6, v6->sin6_port = htons(port), len = sizeof *v6;
  } else {
    return Status(Errc::invalid_argument, fmt::format("--metrics {}: give a numeric address, e.g. 127.0.0.1:9478", host));
  }
  m->listen_.reset(socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));  // accepts what waits, no more
  int one = 1;
  setsockopt(m->listen_.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (!m->listen_ || bind(m->listen_.get(), reinterpret_cast<sockaddr*>(&ss), len) != 0 || listen(m->listen_.get(), 16) != 0)
    return Status(Errc::unavailable, fmt::format("--metrics {}:{}: {}", host, port, std::strerror(errno)));
  socklen_t got = sizeof ss;
  getsockname(m->listen_.get(), reinterpret_cast<sockaddr*>(&ss), &got);
  m->port_ = ntohs(ss.ss_family == AF_INET ? v4->sin_port : v6->sin6_port);
  m->wake_.reset(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  m->stop_.reset(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!m->wake_ || !m->stop_) return Status(Errc::io, "eventfd");
  m->thread_ = std::thread([p = m.get()] { p->serve(); });
  return m;
}

MetricsServer::~MetricsServer() {
  if (thread_.joinable()) {
    uint64_t one = 1;
    (void)write(stop_.get(), &one, sizeof one);
    {
      std::lock_guard lk(mu_);
      answer_ = "";  // a waiting ask ends now
    }
    answered_.notify_all();
    thread_.join();
  }
}

// One thread serves every connection, each as far as it can go without waiting, so a silent
// or slow scraper holds a slot for at most its deadline and never the others.
void MetricsServer::serve() {
  std::vector<std::unique_ptr<Scrape>> open;
  std::vector<pollfd> p;
  while (true) {
    p.assign({{listen_.get(), POLLIN, 0}, {stop_.get(), POLLIN, 0}});
    Clock::time_point soonest = Clock::now() + std::chrono::milliseconds(kDeadlineMs);
    for (const auto& c : open) {
      p.push_back({c->fd.get(), short(c->answered ? POLLOUT : POLLIN), 0});
      soonest = std::min(soonest, c->until);
    }
    if (poll(p.data(), p.size(), ms_until(soonest)) < 0 && errno != EINTR) return;
    if (p[1].revents) return;
    for (size_t i = 0; i < open.size(); ++i)
      if (p[i + 2].revents) go_on(*open[i]);
    auto now = Clock::now();
    std::erase_if(open, [&](const auto& c) { return !c->fd || now >= c->until; });
    if (p[0].revents & POLLIN) take_newcomers(open);
  }
}

// Accepts what waits, each within its peer's share of the connections.
void MetricsServer::take_newcomers(std::vector<std::unique_ptr<Scrape>>& open) {
  for (int i = 0; i < 16; ++i) {
    UniqueFd fd(accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!fd) return;
    auto c = std::make_unique<Scrape>();
    c->fd = std::move(fd);
    c->until = Clock::now() + std::chrono::milliseconds(kDeadlineMs);
    c->order = ++arrivals_;
    identify(*c);
    auto of = [&](const std::string& who) {
      return size_t(std::count_if(open.begin(), open.end(), [&](const auto& o) { return o->who == who; }));
    };
    if (of(c->who) >= kPerPeer) continue;  // closed: its peer has its share open
    if (open.size() >= kMaxScrapes) {      // the oldest of whoever holds the most makes room
      auto most = std::max_element(open.begin(), open.end(), [&](const auto& a, const auto& b) {
        size_t na = of(a->who), nb = of(b->who);
        return na != nb ? na < nb : a->order > b->order;
      });
      open.erase(most);
    }
    open.push_back(std::move(c));
  }
}

// Who asks: a uid of this host, a socket of this host not found, or another host.
void MetricsServer::identify(Scrape& c) {
  sockaddr_storage peer{}, self{};
  socklen_t pl = sizeof peer, sl = sizeof self;
  getpeername(c.fd.get(), reinterpret_cast<sockaddr*>(&peer), &pl);
  getsockname(c.fd.get(), reinterpret_cast<sockaddr*>(&self), &sl);
  if (auto uid = local_peer_uid(peer, self)) {
    c.ask = {true, *uid};
    c.who = fmt::format("uid {}", *uid);
  } else if (from_this_host(peer, self)) {
    c.ask.unknown = true;
    c.who = "this host";
  } else {
    c.who = proc_net_text(peer);
    c.who.resize(c.who.find(':'));  // the address, whatever the port
  }
}

// Reads what has come of the request, answers it once whole, writes what the socket takes.
void MetricsServer::go_on(Scrape& c) {
  if (!c.answered) {
    char buf[1024];
    ssize_t n = recv(c.fd.get(), buf, sizeof buf, MSG_DONTWAIT);
    if (n < 0 && errno == EAGAIN) return;
    if (n <= 0) return c.fd.reset();
    c.in.append(buf, size_t(n));
    if (c.in.find("\r\n\r\n") == std::string::npos) {
      if (c.in.size() >= kMaxRequest) c.fd.reset();
      return;
    }
    c.out = answer_to(c);
    c.answered = true;
  }
  ssize_t n = send(c.fd.get(), c.out.data() + c.sent, c.out.size() - c.sent, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (n < 0 && errno == EAGAIN) return;
  if (n > 0) c.sent += size_t(n);
  if (n <= 0 || c.sent == c.out.size()) c.fd.reset();
}

std::string MetricsServer::answer_to(const Scrape& c) {
  if (c.in.rfind("GET /metrics ", 0) != 0 && c.in.rfind("GET / ", 0) != 0)
    return http("404 Not Found", "text/plain", "vrdmad serves GET /metrics\n");
  auto body = body_for(c.ask);
  if (!body) return http("503 Service Unavailable", "text/plain", "the router did not answer in time\n");
  return http("200 OK", "text/plain; version=0.0.4; charset=utf-8", *body);
}

std::optional<std::string> MetricsServer::body_for(const MetricsAsk& ask) {
  std::unique_lock lk(mu_);
  pending_ = ask;
  answer_.reset();
  uint64_t one = 1;
  (void)write(wake_.get(), &one, sizeof one);
  answered_.wait_for(lk, std::chrono::milliseconds(kDeadlineMs / 2), [&] { return answer_.has_value(); });
  pending_.reset();
  return answer_;
}

void MetricsServer::answer(const std::function<std::string(const MetricsAsk&)>& render) {
  uint64_t n;
  (void)read(wake_.get(), &n, sizeof n);
  std::lock_guard lk(mu_);
  if (!pending_ || answer_) return;
  answer_ = render(*pending_);
  answered_.notify_all();
}

}  // namespace rb::vrdma
