#include "vrdma/ipc/seqpacket.hh"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace rb::vrdma::ipc {
namespace {

Status sys_error(const std::string& what) {
  int e = errno;
  Errc c = (e == EPIPE || e == ECONNRESET || e == ENOTCONN) ? Errc::peer_gone : Errc::io;
  return {c, fmt::format("{}: {}", what, std::strerror(e))};
}

Result<sockaddr_un> address_of(const std::string& path) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof a.sun_path)
    return Status(Errc::invalid_argument,
                  fmt::format("socket path \"{}\": must be 1 to {} characters", path, sizeof a.sun_path - 1));
  std::memcpy(a.sun_path, path.data(), path.size());
  return a;
}

}  // namespace

Status send_packet(int sock, std::span<const uint8_t> bytes, int fd, int fd2) {
  iovec iov{const_cast<uint8_t*>(bytes.data()), bytes.size()};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  alignas(cmsghdr) char ctl[CMSG_SPACE(2 * sizeof(int))] = {};
  int fds[2] = {fd, fd2};
  size_t nfd = fd < 0 ? 0 : fd2 < 0 ? 1 : 2;
  if (nfd) {
    m.msg_control = ctl;
    m.msg_controllen = CMSG_SPACE(nfd * sizeof(int));
    cmsghdr* c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(nfd * sizeof(int));
    std::memcpy(CMSG_DATA(c), fds, nfd * sizeof(int));
  }
  while (true) {
    ssize_t n = sendmsg(sock, &m, MSG_NOSIGNAL);
    if (n == ssize_t(bytes.size())) return {};
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return sys_error("sendmsg");
    return {Errc::io, "sendmsg: packet cut short"};
  }
}

Result<Packet> recv_packet(int sock, size_t max, int timeout_ms, const std::function<void(UniqueFd)>& stray) {
  pollfd p{sock, POLLIN, 0};
  int r;
  while ((r = poll(&p, 1, timeout_ms)) < 0 && errno == EINTR) {
  }
  if (r < 0) return sys_error("poll");
  if (r == 0) return Status(Errc::timeout, fmt::format("no answer within {} ms", timeout_ms));
  Packet out;
  out.bytes.resize(max + 1);  // one more: a longer packet shows as MSG_TRUNC
  iovec iov{out.bytes.data(), out.bytes.size()};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  // Room for as many descriptors as a packet can carry (SCM_MAX_FD): any the kernel had to drop
  // it would close itself, in this thread, where a client's socket or tty could make it wait.
  alignas(cmsghdr) char ctl[CMSG_SPACE(253 * sizeof(int))] = {};
  m.msg_control = ctl;
  m.msg_controllen = sizeof ctl;
  ssize_t n;
  while ((n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR) {
  }
  if (n < 0) return sys_error("recvmsg");
  size_t total_fds = 0;
  for (cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t n_fds = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t k = 0; k < n_fds; ++k, ++total_fds) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + k * sizeof(int), sizeof fd);
      UniqueFd taken(fd);
      if (total_fds == 0) out.fd = std::move(taken);  // taken even when the packet is refused
      else if (total_fds == 1) out.fd2 = std::move(taken);
      else if (stray) stray(std::move(taken));
    }
  }
  // With room for SCM_MAX_FD, a cut control part means this process could not take them (out of
  // descriptors): the packet is the sender's as sent, and the caller says so rather than dropping it.
  bool lost = (m.msg_flags & MSG_CTRUNC) && !(m.msg_flags & MSG_TRUNC) && size_t(n) <= max && total_fds <= 2;
  if (!lost && ((m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || size_t(n) > max || total_fds > 2)) {
    if (stray) {
      stray(std::move(out.fd));
      stray(std::move(out.fd2));
    }
    return Status(Errc::io, fmt::format("a packet over {} B (or with more than two descriptors) was refused", max));
  }
  out.bytes.resize(size_t(n));
  out.fds_lost = lost;
  return out;
}

namespace {
#ifdef SO_PASSRIGHTS
constexpr int kPassRights = SO_PASSRIGHTS;
#else
constexpr int kPassRights = 83;  // include/uapi/asm-generic/socket.h, Linux 6.16
#endif
}  // namespace

bool let_pass_descriptors(int sock, bool allowed) {
  int on = allowed ? 1 : 0;
  return setsockopt(sock, SOL_SOCKET, kPassRights, &on, sizeof on) == 0;
}

bool refuses_descriptors(int sock) {
  int on = 1;
  socklen_t len = sizeof on;
  return getsockopt(sock, SOL_SOCKET, kPassRights, &on, &len) == 0 && on == 0;
}

Result<UniqueFd> listen_at(const std::string& path) {
  auto a = address_of(path);
  if (!a) return a.status();
  UniqueFd s(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!s) return sys_error("socket");
  (void)let_pass_descriptors(s.get(), false);  // before listen(): no connection ever came in without it
  struct stat st{};
  if (lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode))
      return Status(Errc::invalid_argument, fmt::format("--socket {}: exists and is not a socket; give another path", path));
    unlink(path.c_str());
  }
  if (bind(s.get(), reinterpret_cast<const sockaddr*>(&*a), sizeof *a) < 0)
    return Status(Errc::invalid_argument, fmt::format("--socket {}: cannot bind: {}", path, std::strerror(errno)));
  chmod(path.c_str(), 0666);
  if (listen(s.get(), 64) < 0) return sys_error("listen");
  return s;
}

Result<UniqueFd> connect_to(const std::string& path) {
  auto a = address_of(path);
  if (!a) return a.status();
  UniqueFd s(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (!s) return sys_error("socket");
  if (connect(s.get(), reinterpret_cast<const sockaddr*>(&*a), sizeof *a) < 0)
    return Status(Errc::unavailable, fmt::format("no vrdma router at {}: {}", path, std::strerror(errno)));
  return s;
}

Result<PeerCred> peer_cred(int sock) {
  ucred c{};
  socklen_t len = sizeof c;
  if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &c, &len) < 0) return sys_error("SO_PEERCRED");
  return PeerCred{uint32_t(c.pid), uint32_t(c.uid), uint32_t(c.gid)};
}

}  // namespace rb::vrdma::ipc
