#include "vrdma/rdmacm/wire.hh"

#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstring>

namespace rb::rdmacm {
namespace {

// An address as a REQ names it: 16 bytes (IPv4 as ::ffff:a.b.c.d) and a port.
void name_of(const sockaddr_storage& a, uint8_t ip[16], uint16_t& port) {
  std::memset(ip, 0, 16);
  if (a.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(a);
    ip[10] = ip[11] = 0xff;
    std::memcpy(ip + 12, &v4.sin_addr, 4);
    port = ntohs(v4.sin_port);
  } else {
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(a);
    std::memcpy(ip, &v6.sin6_addr, 16);
    port = ntohs(v6.sin6_port);
  }
}

}  // namespace

int64_t wall_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void address_req(Message& m, const sockaddr_storage& dialed) {
  name_of(dialed, m.to_ip, m.to_port);
  m.sent_ns = wall_ns();
}

bool req_for_here_and_now(const Message& m, int fd) {
  sockaddr_storage here{};
  socklen_t len = sizeof here;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&here), &len) != 0) return false;
  uint8_t ip[16];
  uint16_t port = 0;
  name_of(here, ip, port);
  int64_t now = wall_ns();  // sent_ns is anything a sender wrote: compared, never subtracted from
  return std::memcmp(ip, m.to_ip, sizeof ip) == 0 && port == m.to_port && m.sent_ns >= now - kReqSkewNs &&
         m.sent_ns <= now + kReqSkewNs;
}

bool send_message(int fd, const Message& m) {
  return send(fd, &m, sizeof m, MSG_NOSIGNAL) == ssize_t(sizeof m);
}

MessageReader::Got MessageReader::read(int fd, Message& out) {
  ssize_t n = recv(fd, buf_ + have_, sizeof buf_ - have_, MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return Got::nothing;
  if (n <= 0) return Got::ended;
  have_ += size_t(n);
  if (have_ < sizeof buf_) return Got::nothing;
  have_ = 0;
  std::memcpy(&out, buf_, sizeof out);
  bool ours = out.magic == Message::kMagic && out.version == Message::kVersion && out.kind >= Kind::req &&
              out.kind <= Kind::dreq;
  return ours ? Got::message : Got::ended;
}

}  // namespace rb::rdmacm
