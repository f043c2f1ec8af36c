#include "bootstrap/channel.hh"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include <fmt/format.h>

namespace rb::bootstrap {
namespace {

using Clock = std::chrono::steady_clock;

// No delay for the small control frames, and keepalive probes so that a peer whose host vanished
// (no FIN, no RST) fails a wait on this channel within about 25 s instead of never.
void tune_control_socket(int fd) {
  int one = 1, idle = 10, interval = 5, probes = 3;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &probes, sizeof probes);
}

std::string sockaddr_ip(const sockaddr_storage& ss) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET)
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(ss).sin_addr, buf, sizeof buf);
  else if (ss.ss_family == AF_INET6)
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(ss).sin6_addr, buf, sizeof buf);
  return buf;
}

Status errno_status(const std::string& what) { return {Errc::io, fmt::format("{}: {}", what, strerror(errno))}; }

}  // namespace

Result<HostPort> parse_host_port(const std::string& text, uint16_t default_port, const char* flag) {
  HostPort hp;
  std::string port;
  if (!text.empty() && text[0] == '[') {
    auto close = text.find(']');
    if (close == std::string::npos)
      return Status(Errc::invalid_argument, fmt::format("{} '{}': missing ']' in an IPv6 address, e.g. [::1]:7471", flag, text));
    hp.host = text.substr(1, close - 1);
    if (close + 1 < text.size()) {
      if (text[close + 1] != ':') return Status(Errc::invalid_argument, fmt::format("{} '{}': expected ':' after ']'", flag, text));
      port = text.substr(close + 2);
    }
  } else {
    auto colon = text.rfind(':');
    if (colon != std::string::npos && text.find(':') == colon) {
      hp.host = text.substr(0, colon);
      port = text.substr(colon + 1);
    } else {
      hp.host = text;
    }
  }
  if (hp.host.empty()) return Status(Errc::invalid_argument, fmt::format("{} '{}': give HOST:PORT, e.g. 127.0.0.1:7471", flag, text));
  hp.port = default_port;
  if (!port.empty()) {
    char* end = nullptr;
    long v = strtol(port.c_str(), &end, 10);
    if (*end || v < 0 || v > 65535)
      return Status(Errc::invalid_argument, fmt::format("{} '{}': port must be 0..65535", flag, text));
    hp.port = uint16_t(v);
  }
  return hp;
}

std::string host_port_text(const HostPort& hp) {
  if (hp.host.find(':') != std::string::npos) return fmt::format("[{}]:{}", hp.host, hp.port);
  return fmt::format("{}:{}", hp.host, hp.port);
}

Channel& Channel::operator=(Channel&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
    link_ = std::move(o.link_);
  }
  return *this;
}

Channel::~Channel() {
  if (fd_ >= 0) close(fd_);
}

Result<Channel> Channel::connect(const HostPort& hp, double timeout_s) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_socktype = SOCK_STREAM;
  int rc = getaddrinfo(hp.host.c_str(), std::to_string(hp.port).c_str(), &hints, &res);
  if (rc != 0) return Status(Errc::invalid_argument, fmt::format("--addr {}: cannot resolve: {}", hp.host, gai_strerror(rc)));
  Status last(Errc::io, "no address");
  for (addrinfo* ai = res; ai; ai = ai->ai_next) {
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    Channel ch(fd);
    if (::connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS) {
      last = Status(Errc::peer_gone, fmt::format("cannot connect to {}: {}", host_port_text(hp), strerror(errno)));
      continue;
    }
    pollfd p{fd, POLLOUT, 0};
    int pr = ::poll(&p, 1, int(timeout_s * 1000));
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (pr <= 0 || err) {
      last = Status(pr == 0 ? Errc::timeout : Errc::peer_gone,
                    fmt::format("cannot connect to {}: {}{}", host_port_text(hp), pr == 0 ? "timed out" : strerror(err),
                                " (is `rdmabench --server` running there?)"));
      continue;
    }
    tune_control_socket(fd);
    freeaddrinfo(res);
    return ch;
  }
  freeaddrinfo(res);
  return last;
}

Status Channel::send_frame(char kind, const void* data, size_t len) {
  if (link_) return link_->send_frame(kind, data, len);
  uint8_t hdr[5] = {uint8_t(kind)};
  uint32_t n = uint32_t(len);
  std::memcpy(hdr + 1, &n, 4);
  auto write_all = [&](const void* p, size_t l) -> Status {
    auto* c = static_cast<const uint8_t*>(p);
    while (l) {
      ssize_t w = ::send(fd_, c, l, MSG_NOSIGNAL);
      if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
        pollfd pf{fd_, POLLOUT, 0};
        ::poll(&pf, 1, 100);
        continue;
      }
      if (w <= 0) return {Errc::peer_gone, fmt::format("peer {} closed the control connection ({})", peer(), strerror(errno))};
      c += w;
      l -= size_t(w);
    }
    return {};
  };
  Status s = write_all(hdr, 5);
  if (!s) return s;
  return write_all(data, len);
}

Result<std::vector<uint8_t>> Channel::recv_frame(char kind, uint64_t max_len, double timeout_s,
                                                 const std::atomic<bool>* stop) {
  if (link_) return link_->recv_frame(kind, max_len, timeout_s, stop);
  auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  auto read_all = [&](uint8_t* p, size_t l) -> Status {
    while (l) {
      if (stop && stop->load()) return {Errc::interrupted, "interrupted"};
      if (Clock::now() > deadline)
        return {Errc::timeout, fmt::format("the peer at {} sent nothing for {:g} s (--timeout)", peer(), timeout_s)};
      pollfd pf{fd_, POLLIN, 0};
      int pr = ::poll(&pf, 1, 100);
      if (pr < 0 && errno != EINTR) return errno_status("poll");
      if (pr <= 0) continue;
      ssize_t r = ::recv(fd_, p, l, 0);
      if (r < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      if (r <= 0) return {Errc::peer_gone, fmt::format("peer {} closed the control connection", peer())};
      p += r;
      l -= size_t(r);
    }
    return {};
  };
  uint8_t hdr[5];
  Status s = read_all(hdr, 5);
  if (!s) return s;
  uint32_t n;
  std::memcpy(&n, hdr + 1, 4);
  if (char(hdr[0]) != kind)
    return Status(Errc::io, fmt::format("control protocol error from {}: a frame of kind {:#04x} where '{}' was due "
                                        "(is the peer an rdmabench of this version?)", peer(), hdr[0], kind));
  if (n > max_len)
    return Status(Errc::io, fmt::format("control protocol error from {}: a frame of {} B, over the {} B such a frame "
                                        "can be", peer(), n, max_len));
  std::vector<uint8_t> data(n);
  s = read_all(data.data(), n);
  if (!s) return s;
  return data;
}

bool Channel::readable() const {
  if (link_) return link_->readable();
  pollfd pf{fd_, POLLIN, 0};
  return ::poll(&pf, 1, 0) > 0;
}

std::string Channel::local_ip() const {
  if (link_) return link_->local_ip();
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (getsockname(fd_, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "";
  return sockaddr_ip(ss);
}

std::string Channel::peer() const {
  if (link_) return link_->peer();
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (getpeername(fd_, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "(peer)";
  return sockaddr_ip(ss);
}

Listener::~Listener() {
  if (fd_ >= 0) close(fd_);
}

Result<Listener> Listener::listen(const HostPort& hp) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  int rc = getaddrinfo(hp.host.c_str(), std::to_string(hp.port).c_str(), &hints, &res);
  if (rc != 0) return Status(Errc::invalid_argument, fmt::format("--addr {}: cannot resolve: {}", hp.host, gai_strerror(rc)));
  Listener l;
  l.fd_ = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  int one = 1;
  setsockopt(l.fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(l.fd_, res->ai_addr, res->ai_addrlen) != 0) {
    Status s(Errc::io, fmt::format("--addr {}: cannot listen: {}{}", host_port_text(hp), strerror(errno),
                                   errno == EADDRINUSE ? " (another server runs there; pick another port)" : ""));
    freeaddrinfo(res);
    return s;
  }
  freeaddrinfo(res);
  // Clients of a cluster run connect all at once: the backlog must hold them while the accept
  // loop hands each to a child.
  if (::listen(l.fd_, SOMAXCONN) != 0) return errno_status("listen");
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  getsockname(l.fd_, reinterpret_cast<sockaddr*>(&ss), &len);
  l.port_ = ntohs(ss.ss_family == AF_INET ? reinterpret_cast<sockaddr_in&>(ss).sin_port
                                          : reinterpret_cast<sockaddr_in6&>(ss).sin6_port);
  return l;
}

Result<Channel> Listener::accept(double wait_s) {
  pollfd pf{fd_, POLLIN, 0};
  int pr = ::poll(&pf, 1, int(wait_s * 1000));
  if (pr < 0 && errno != EINTR) return errno_status("poll");
  if (pr <= 0) return Channel();
  int fd = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd < 0) {
    // The client gave up before we got to it, or we are out of descriptors: either way not fatal.
    if (errno == EAGAIN || errno == ECONNABORTED || errno == EINTR || errno == EMFILE || errno == ENFILE) return Channel();
    return errno_status("accept");
  }
  tune_control_socket(fd);
  return Channel(fd);
}

}  // namespace rb::bootstrap
