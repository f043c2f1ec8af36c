// The rest of librdmacm's r* API: reads and writes in their socket forms, rpoll (rsockets and
// the kernel's descriptors together, as librspreload's poll and select ask), names, options and
// flags.
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <rdma/rsocket.h>
#include <sys/select.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstring>
#include <vector>

#include "vrdma/rdmacm/rsocket.hh"
#include "vrdma/rdmacm/state.hh"

namespace rb::rsock {
namespace {

using rdmacm::fail;

ssize_t recv_iov(int fd, const iovec* iov, int n, int flags) {
  Socket* s = find(fd);
  return s ? stream_recv(*s, iov, n, flags) : fail(EBADF);
}

ssize_t send_iov(int fd, const iovec* iov, int n, int flags) {
  Socket* s = find(fd);
  return s ? stream_send(*s, iov, n, flags) : fail(EBADF);
}

int copy_name(const sockaddr* from, sockaddr* to, socklen_t* len) {
  if (!to || !len) return fail(EFAULT);
  socklen_t n = from->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  std::memcpy(to, from, std::min(*len, n));
  *len = n;
  return 0;
}

template <typename T>
int put_option(void* value, socklen_t* len, T v) {
  if (!value || !len || *len < sizeof(T)) return fail(EINVAL);
  std::memcpy(value, &v, sizeof v);
  *len = sizeof v;
  return 0;
}

int socket_option(Socket& s, int name, void* value, socklen_t* len) {
  switch (name) {
    case SO_ERROR: {
      int e = s.broken ? s.error : 0;
      return put_option(value, len, e);
    }
    case SO_TYPE: return put_option(value, len, int(SOCK_STREAM));
    case SO_REUSEADDR: return put_option(value, len, s.reuseaddr);
    case SO_KEEPALIVE: return put_option(value, len, s.keepalive);
    case SO_SNDBUF: return put_option(value, len, s.sndbuf);
    case SO_RCVBUF: return put_option(value, len, s.rcvbuf);
    case SO_DOMAIN: return put_option(value, len, s.domain);
    case SO_PROTOCOL: return put_option(value, len, int(IPPROTO_TCP));
    case SO_ACCEPTCONN: return put_option(value, len, int(s.phase == Phase::listening));
    default: return fail(ENOPROTOOPT);
  }
}

// TCP's options as a program asks them: the stream has no segments or congestion control of the
// kernel's, so TCP_INFO is zero but for its state, and the congestion control is named "vrdma".
int tcp_option(Socket& s, int name, void* value, socklen_t* len) {
  switch (name) {
    case TCP_NODELAY: return put_option(value, len, s.nodelay);
    case TCP_MAXSEG: return put_option(value, len, 65535);  // no segments; the most a program believes
    case TCP_INFO: {
      if (!value || !len) return fail(EFAULT);
      tcp_info info{};
      info.tcpi_state = s.phase == Phase::connected ? 1 /* TCP_ESTABLISHED */ : 7 /* TCP_CLOSE */;
      info.tcpi_snd_mss = info.tcpi_rcv_mss = 65535;
      socklen_t n = std::min<socklen_t>(*len, sizeof info);
      std::memcpy(value, &info, n);
      *len = n;
      return 0;
    }
    case TCP_CONGESTION: {
      if (!value || !len) return fail(EFAULT);
      static const char kName[] = "vrdma";
      socklen_t n = std::min<socklen_t>(*len, sizeof kName);
      std::memcpy(value, kName, n);
      *len = n;
      return 0;
    }
    default: return fail(ENOPROTOOPT);
  }
}

int int_value(const void* value, socklen_t len) {
  int v = 0;
  if (value && len >= sizeof v) std::memcpy(&v, value, sizeof v);
  return v;
}

// How many of `fds` have events now; rsockets make progress here.
int ready_now(pollfd* fds, nfds_t n, std::vector<pollfd>& kernel, std::vector<nfds_t>& kernel_at) {
  int ready = 0;
  kernel.clear();
  kernel_at.clear();
  for (nfds_t i = 0; i < n; ++i) {
    fds[i].revents = 0;
    if (Socket* s = find(fds[i].fd)) {
      fds[i].revents = ready_events(*s, fds[i].events);
    } else {
      kernel.push_back({fds[i].fd, fds[i].events, 0});
      kernel_at.push_back(i);
    }
  }
  if (!kernel.empty() && poll(kernel.data(), kernel.size(), 0) > 0)
    for (size_t k = 0; k < kernel.size(); ++k) fds[kernel_at[k]].revents = kernel[k].revents;
  for (nfds_t i = 0; i < n; ++i) ready += fds[i].revents != 0;
  return ready;
}

// Sleeps until an rsocket's CQ or cm channel, or one of the kernel's descriptors, has something.
int sleep_on(pollfd* fds, nfds_t n, int timeout_ms) {
  std::vector<pollfd> all;
  std::vector<std::pair<Socket*, size_t>> armed;  // and where its channel's fd is in `all`
  for (nfds_t i = 0; i < n; ++i) {
    Socket* s = find(fds[i].fd);
    if (!s) {
      all.push_back({fds[i].fd, fds[i].events, 0});
      continue;
    }
    if (arm(*s) != 0) return -1;
    if (ready_events(*s, fds[i].events)) return 0;  // it came as we armed
    if (s->cq_channel) all.push_back({s->cq_channel->fd, POLLIN, 0});
    armed.emplace_back(s, all.size());
    all.push_back({s->fd, POLLIN, 0});
  }
  int r = poll(all.data(), all.size(), timeout_ms);
  for (auto [s, at] : armed) {
    disarm(*s);
    // A connected socket's peer's end comes on its channel: unread, it was never seen, and a
    // waiter on a peer that died (no end of stream sent) waited for ever. (A listener's channel
    // holds connection requests, for raccept.)
    if (all[at].revents && s->phase == Phase::connected) read_cm_events(*s);
  }
  return r < 0 ? -1 : 0;
}

}  // namespace
}  // namespace rb::rsock

using namespace rb::rsock;
using rb::rdmacm::fail;

RDMACM_EXPORT ssize_t rrecv(int fd, void* buf, size_t len, int flags) {
  iovec v{buf, len};
  return recv_iov(fd, &v, 1, flags);
}

RDMACM_EXPORT ssize_t rrecvfrom(int fd, void* buf, size_t len, int flags, sockaddr* from, socklen_t* fromlen) {
  ssize_t n = rrecv(fd, buf, len, flags);
  if (n >= 0 && from && fromlen) {
    Socket* s = find(fd);
    if (s && s->id) copy_name(rdma_get_peer_addr(s->id), from, fromlen);
  }
  return n;
}

RDMACM_EXPORT ssize_t rrecvmsg(int fd, msghdr* msg, int flags) {
  if (!msg) return fail(EFAULT);
  msg->msg_controllen = 0;
  msg->msg_flags = 0;
  return recv_iov(fd, msg->msg_iov, int(msg->msg_iovlen), flags);
}

RDMACM_EXPORT ssize_t rread(int fd, void* buf, size_t len) { return rrecv(fd, buf, len, 0); }
RDMACM_EXPORT ssize_t rreadv(int fd, const iovec* iov, int n) { return recv_iov(fd, iov, n, 0); }

RDMACM_EXPORT ssize_t rsend(int fd, const void* buf, size_t len, int flags) {
  iovec v{const_cast<void*>(buf), len};
  return send_iov(fd, &v, 1, flags);
}

RDMACM_EXPORT ssize_t rsendto(int fd, const void* buf, size_t len, int flags, const sockaddr*, socklen_t) {
  return rsend(fd, buf, len, flags);  // a connected stream ignores the address, as TCP does
}

RDMACM_EXPORT ssize_t rsendmsg(int fd, const msghdr* msg, int flags) {
  if (!msg) return fail(EFAULT);
  return send_iov(fd, msg->msg_iov, int(msg->msg_iovlen), flags);
}

RDMACM_EXPORT ssize_t rwrite(int fd, const void* buf, size_t len) { return rsend(fd, buf, len, 0); }
RDMACM_EXPORT ssize_t rwritev(int fd, const iovec* iov, int n) { return send_iov(fd, iov, n, 0); }

RDMACM_EXPORT int rpoll(pollfd* fds, nfds_t n, int timeout_ms) {
  std::vector<pollfd> kernel;
  std::vector<nfds_t> kernel_at;
  int64_t start = now_ns(), spin_until = start + spin_ns();
  while (true) {
    int ready = ready_now(fds, n, kernel, kernel_at);
    if (ready || timeout_ms == 0) return ready;
    int64_t now = now_ns();
    int left = timeout_ms < 0 ? -1 : int(std::max<int64_t>(0, timeout_ms - (now - start) / 1'000'000));
    if (timeout_ms > 0 && left == 0) return 0;
    if (now < spin_until) continue;
    if (sleep_on(fds, n, left) != 0) return -1;
  }
}

RDMACM_EXPORT int rselect(int nfds, fd_set* readfds, fd_set* writefds, fd_set* exceptfds, timeval* timeout) {
  std::vector<pollfd> fds;
  for (int fd = 0; fd < nfds; ++fd) {
    short ev = short((readfds && FD_ISSET(fd, readfds) ? POLLIN : 0) | (writefds && FD_ISSET(fd, writefds) ? POLLOUT : 0));
    if (ev || (exceptfds && FD_ISSET(fd, exceptfds))) fds.push_back({fd, ev, 0});
  }
  int ms = timeout ? int(timeout->tv_sec * 1000 + timeout->tv_usec / 1000) : -1;
  int r = rpoll(fds.data(), fds.size(), ms);
  if (r < 0) return r;
  if (readfds) FD_ZERO(readfds);
  if (writefds) FD_ZERO(writefds);
  if (exceptfds) FD_ZERO(exceptfds);
  int count = 0;
  for (const pollfd& p : fds) {
    if (readfds && (p.revents & (POLLIN | POLLHUP))) FD_SET(p.fd, readfds), ++count;
    if (writefds && (p.revents & POLLOUT)) FD_SET(p.fd, writefds), ++count;
    if (exceptfds && (p.revents & POLLERR)) FD_SET(p.fd, exceptfds), ++count;
  }
  return count;
}

RDMACM_EXPORT int rgetpeername(int fd, sockaddr* addr, socklen_t* len) {
  Socket* s = find(fd);
  if (!s) return fail(EBADF);
  if (s->phase != Phase::connected) return fail(ENOTCONN);
  return copy_name(rdma_get_peer_addr(s->id), addr, len);
}

RDMACM_EXPORT int rgetsockname(int fd, sockaddr* addr, socklen_t* len) {
  Socket* s = find(fd);
  if (!s) return fail(EBADF);
  // librspreload moves a socket whose rconnect failed to the kernel's TCP, and asks this first,
  // with no buffer: the answer is the connect's error, so the program sees it and stays here.
  if (!addr) return fail(s->error ? s->error : EFAULT);
  return copy_name(rdma_get_local_addr(s->id), addr, len);
}

RDMACM_EXPORT int rsetsockopt(int fd, int level, int name, const void* value, socklen_t len) {
  Socket* s = find(fd);
  if (!s) return fail(EBADF);
  int v = int_value(value, len);
  if (level == SOL_SOCKET) {
    switch (name) {
      case SO_REUSEADDR: s->reuseaddr = v; return 0;
      case SO_KEEPALIVE: s->keepalive = v; return 0;
      case SO_SNDBUF: s->sndbuf = v; return 0;  // the ring's size is the stream's
      case SO_RCVBUF: s->rcvbuf = v; return 0;
      case SO_LINGER:
      case SO_REUSEPORT:
      case SO_PRIORITY: return 0;
    }
  } else if (level == IPPROTO_TCP) {
    switch (name) {
      case TCP_NODELAY: s->nodelay = v; return 0;  // every send goes at once
      case TCP_MAXSEG:
      case TCP_CONGESTION:
      case TCP_KEEPIDLE:
      case TCP_KEEPINTVL:
      case TCP_KEEPCNT: return 0;
    }
  } else if (level == IPPROTO_IP || level == IPPROTO_IPV6) {
    return 0;  // TOS, TTL, v6only: the stream carries none of IP's fields
  } else if (level == SOL_RDMA) {
    return 0;  // queue sizes and inline: the stream's own are used
  }
  return fail(ENOPROTOOPT);
}

RDMACM_EXPORT int rgetsockopt(int fd, int level, int name, void* value, socklen_t* len) {
  Socket* s = find(fd);
  if (!s) return fail(EBADF);
  if (level == SOL_SOCKET) return socket_option(*s, name, value, len);
  if (level == IPPROTO_TCP) return tcp_option(*s, name, value, len);
  return fail(ENOPROTOOPT);
}

RDMACM_EXPORT int rfcntl(int fd, int cmd, ...) {
  Socket* s = find(fd);
  if (!s) return fail(EBADF);
  va_list args;
  va_start(args, cmd);
  long arg = va_arg(args, long);
  va_end(args);
  switch (cmd) {
    case F_GETFL: return s->flags | O_RDWR;
    case F_SETFL:
      s->nonblocking = arg & O_NONBLOCK;
      s->flags = int(arg) & O_NONBLOCK;
      return 0;
    case F_SETOWN: s->owner = int(arg); return 0;  // no SIGIO or SIGURG comes of an rsocket
    case F_GETOWN: return s->owner;
    case F_GETFD: return fcntl(fd, F_GETFD);
    case F_SETFD: return fcntl(fd, F_SETFD, arg);
    default: return fail(EINVAL);
  }
}
