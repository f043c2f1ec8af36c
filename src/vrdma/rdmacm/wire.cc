#include "vrdma/rdmacm/wire.hh"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

namespace rb::rdmacm {

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
