#include "vrdma/router/metrics.hh"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include <fmt/format.h>

#include "vrdma/router/tcp_owners.hh"

namespace rb::vrdma {
namespace {

constexpr int kDeadlineMs = 1000;     // a connection's whole life: request in, answer out
constexpr size_t kMaxRequest = 4096;  // a scrape's request line and headers

// Writes all of `text` before the deadline, or gives up.
void send_all(int fd, const std::string& text, std::chrono::steady_clock::time_point until) {
  size_t done = 0;
  while (done < text.size()) {
    int left = int(std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now()).count());
    pollfd p{fd, POLLOUT, 0};
    if (left <= 0 || poll(&p, 1, left) <= 0) return;
    ssize_t n = send(fd, text.data() + done, text.size() - done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n <= 0 && errno != EAGAIN) return;
    if (n > 0) done += size_t(n);
  }
}

// The request's head, read before the deadline; empty when it did not come whole.
std::string read_head(int fd, std::chrono::steady_clock::time_point until) {
  std::string head;
  char buf[1024];
  while (head.find("\r\n\r\n") == std::string::npos && head.size() < kMaxRequest) {
    int left = int(std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now()).count());
    pollfd p{fd, POLLIN, 0};
    if (left <= 0 || poll(&p, 1, left) <= 0) return "";
    ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n < 0 && errno == EAGAIN) continue;  // woken for nothing: wait again, within the deadline
    if (n <= 0) return "";
    head.append(buf, size_t(n));
  }
  return head;
}

std::string http(const char* status, const std::string& type, const std::string& body) {
  return fmt::format("HTTP/1.1 {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}", status, type,
                     body.size(), body);
}

}  // namespace

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
  m->listen_.reset(socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
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

void MetricsServer::serve() {
  while (true) {
    pollfd p[2] = {{listen_.get(), POLLIN, 0}, {stop_.get(), POLLIN, 0}};
    if (poll(p, 2, -1) < 0 && errno != EINTR) return;
    if (p[1].revents) return;
    if (!(p[0].revents & POLLIN)) continue;
    UniqueFd c(accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (c) serve_one(c.get());
  }
}

void MetricsServer::serve_one(int fd) {
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(kDeadlineMs);
  std::string head = read_head(fd, until);
  if (head.empty()) return;
  if (head.rfind("GET /metrics ", 0) != 0 && head.rfind("GET / ", 0) != 0)
    return send_all(fd, http("404 Not Found", "text/plain", "vrdmad serves GET /metrics\n"), until);
  sockaddr_storage peer{}, self{};
  socklen_t pl = sizeof peer, sl = sizeof self;
  getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &pl);
  getsockname(fd, reinterpret_cast<sockaddr*>(&self), &sl);
  MetricsAsk ask;
  if (auto uid = local_peer_uid(peer, self)) ask = {true, *uid};
  else if (from_this_host(peer, self)) ask.unknown = true;
  auto body = body_for(ask);
  if (!body) return send_all(fd, http("503 Service Unavailable", "text/plain", "the router did not answer in time\n"), until);
  send_all(fd, http("200 OK", "text/plain; version=0.0.4; charset=utf-8", *body), until);
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
