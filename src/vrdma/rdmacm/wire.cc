#include "vrdma/rdmacm/wire.hh"

#include <sys/socket.h>

namespace rb::rdmacm {

bool send_message(int fd, const Message& m) {
  return send(fd, &m, sizeof m, MSG_NOSIGNAL) == ssize_t(sizeof m);
}

bool receive_message(int fd, Message& m) {
  if (recv(fd, &m, sizeof m, MSG_WAITALL) != ssize_t(sizeof m)) return false;
  return m.magic == Message::kMagic && m.version == Message::kVersion && m.kind >= Kind::req && m.kind <= Kind::dreq;
}

}  // namespace rb::rdmacm
