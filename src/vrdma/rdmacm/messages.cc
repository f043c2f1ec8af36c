// What the CM messages on an id's socket do: a connect request makes an id of its own on the
// listener's channel, a reply connects the active side's QP, and each end learns of the other's
// disconnect. A socket that ends or brings garbage ends the connection as a lost peer would.
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>

#include "vrdma/rdmacm/state.hh"

namespace rb::rdmacm {

void set_deadlines(int fd) {
  timeval tv{kMessageSeconds, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

ibv_gid local_gid() {
  ibv_gid g{};
  if (ibv_context* ctx = device()) ibv_query_gid(ctx, 1, 0, &g);
  return g;
}

namespace {

// IB CM's reject reason for a consumer's reject, which rdma_cm reports as the REJECTED status.
constexpr int kRejectedByConsumer = 28;

// A connection to the listener: an id of its own, not the program's until its REQ comes.
void accept_one(Id& listener) {
  sockaddr_storage peer{};
  socklen_t len = sizeof peer;
  int fd = accept4(listener.sock.get(), reinterpret_cast<sockaddr*>(&peer), &len, SOCK_CLOEXEC);
  if (fd < 0) return;
  set_deadlines(fd);
  auto* child = new Id();
  child->sock.reset(fd);
  child->base.verbs = device();  // a connection has the device, even where its listener has none
  child->base.context = listener.base.context;
  child->base.ps = listener.base.ps;
  child->base.port_num = 1;
  child->base.qp_type = listener.base.qp_type;
  child->channel = listener.channel;
  child->base.channel = &listener.channel->base;
  child->listener = &listener;
  child->state = State::awaiting_req;
  std::memcpy(&child->base.route.addr.dst_storage, &peer, len);
  len = sizeof child->base.route.addr.src_storage;
  getsockname(fd, &child->base.route.addr.src_addr, &len);
  child->base.route.addr.addr.ibaddr.sgid = local_gid();
  watch_locked(*child);
  set_deadline_locked(*child, monotonic_ns() + kStepSeconds * 1'000'000'000);
  listener.awaiting.push_back(child);
  if (listener.awaiting.size() > std::max<size_t>(kMinAwaiting, size_t(listener.backlog)))
    drop_awaiting(*listener.awaiting.front());
}

void forget_awaiting(Id& child) {
  auto& list = child.listener->awaiting;
  list.erase(std::remove(list.begin(), list.end(), &child), list.end());
}

// The peer went (its socket ended, or spoke garbage) before or after the connection was made.
void lost(Id& id) {
  close_locked(id);
  switch (id.state) {
    case State::awaiting_req:  // never the program's: nobody else knows of it
      forget_awaiting(id);
      delete &id;
      return;
    case State::connecting:
      id.state = State::idle;
      post(id, RDMA_CM_EVENT_UNREACHABLE, -ECONNRESET);
      return;
    case State::accepting:
    case State::connected:
      id.state = State::disconnected;
      qp_to_error(id);
      post(id, RDMA_CM_EVENT_DISCONNECTED, 0);
      return;
    default: return;
  }
}

// Said once a process: a program's stderr is not another tenant's to fill.
void say_other_tenant(const char* what) {
  static std::once_flag once;
  std::call_once(once, [&] { say("%s came from another tenant (or a router of another cluster): refused", what); });
}

// The router did not MAC a peer's message (it did not answer, or is gone): the message is
// refused, and the program is told why, not that another tenant sent it.
void say_unchecked(const char* what, int err) {
  static std::once_flag once;
  std::call_once(once, [&] { say("%s could not be checked for its tenant: the router: %s: refused", what, std::strerror(err)); });
}

void say_stale_req() {
  static std::once_flag once;
  std::call_once(once, [] {
    say("a connection request made for another address, sent before this listener began or over %d s ago, or taken "
        "before (a replay): refused",
        int(kReqSkewNs / 1'000'000'000));
  });
}

// Whether a REQ of our tenant that came on `child`'s connection is one to take: made for this
// listener's address, lately, and not taken before.
bool fresh_req_locked(Id& child, const Message& m) {
  if (!req_for_here_and_now(m, child.sock.get()) || !child.listener || m.sent_ns < child.listener->listening_since_ns)
    return false;
  auto& taken = child.listener->taken_nonces;
  while (!taken.empty() && (taken.front().second < m.sent_ns - 2 * kReqSkewNs || taken.size() >= 4096))
    taken.pop_front();  // past the window a replay fails on its time; the oldest go first
  std::array<uint8_t, 16> nonce;
  std::memcpy(nonce.data(), m.nonce, nonce.size());
  for (const auto& [n, sent] : taken)
    if (n == nonce) return false;
  taken.emplace_back(nonce, m.sent_ns);
  return true;
}

void on_reply(Id& id, const Message& m) {
  Sender sender = std::memcmp(m.nonce, id.req_nonce, sizeof m.nonce) == 0 ? sender_of(m) : Sender::another_tenant;
  int err = errno ? errno : EIO;
  if (sender != Sender::our_tenant) {
    if (sender == Sender::another_tenant) say_other_tenant("a connect's reply");
    else say_unchecked("a connect's reply", err);
    close_locked(id);
    id.state = State::idle;
    return post(id, RDMA_CM_EVENT_UNREACHABLE, sender == Sender::another_tenant ? -EACCES : -err);
  }
  id.peer = m;
  std::memcpy(id.base.route.addr.addr.ibaddr.dgid.raw, m.gid, 16);
  if (id.base.ps == RDMA_PS_UDP) {  // the remote QP and Q_Key: the program makes its address handle
    set_deadline_locked(id, 0);
    close_locked(id);
    id.state = State::connected;
    return post(id, RDMA_CM_EVENT_ESTABLISHED, 0, &m);
  }
  if (!id.base.qp) {  // the program connects its own QP (rdma_init_qp_attr), then rdma_establish
    post(id, RDMA_CM_EVENT_CONNECT_RESPONSE, 0, &m);
    return;
  }
  if (connect_qp(id) != 0) {
    close_locked(id);
    id.state = State::idle;
    post(id, RDMA_CM_EVENT_CONNECT_ERROR, -errno);
    return;
  }
  Message rtu;
  rtu.kind = Kind::rtu;
  send_message(id.sock.get(), rtu);
  id.state = State::connected;
  set_deadline_locked(id, 0);
  post(id, RDMA_CM_EVENT_ESTABLISHED, 0, &m);
}

}  // namespace

void expire_locked(Id& id) {
  id.deadline_ns = 0;
  switch (id.state) {
    case State::awaiting_req: return drop_awaiting(id);
    case State::connecting:  // no reply: as IB CM's REQ timing out
      close_locked(id);
      id.state = State::idle;
      return post(id, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT);
    case State::accepting:  // no RTU
      close_locked(id);
      id.state = State::idle;
      qp_to_error(id);
      return post(id, RDMA_CM_EVENT_CONNECT_ERROR, -ETIMEDOUT);
    default: return;
  }
}

void drop_awaiting(Id& child) {
  forget_awaiting(child);
  close_locked(child);
  delete &child;
}

void on_readable(Id& id) {
  if (id.state == State::listening) return accept_one(id);
  Message m;
  switch (id.reader.read(id.sock.get(), m)) {
    case MessageReader::Got::nothing: return;
    case MessageReader::Got::ended: return lost(id);
    case MessageReader::Got::message: break;
  }
  // No more private data than InfiniBand carries in each message: a program may size its
  // buffer by it.
  uint8_t most = m.kind == Kind::req ? kReqPrivate : m.kind == Kind::rep ? kRepPrivate : m.kind == Kind::rej ? kRejPrivate : 0;
  m.private_len = std::min(m.private_len, most);
  switch (m.kind) {
    case Kind::req:
      if (id.state != State::awaiting_req) return lost(id);
      if (Sender sender = sender_of(m); sender != Sender::our_tenant) {  // never the program's: it hears nothing of it
        if (sender == Sender::another_tenant) say_other_tenant("a connection request");
        else say_unchecked("a connection request", errno ? errno : EIO);
        return lost(id);
      }
      if (!fresh_req_locked(id, m)) {  // a replay, or one relayed from where its sender dialed
        say_stale_req();
        return lost(id);
      }
      id.peer = m;
      std::memcpy(id.base.route.addr.addr.ibaddr.dgid.raw, m.gid, 16);
      id.state = State::requested;
      set_deadline_locked(id, 0);  // the program accepts or rejects when it will
      forget_awaiting(id);
      return post(id, RDMA_CM_EVENT_CONNECT_REQUEST, 0, &m, id.listener);
    case Kind::rep:
      if (id.state != State::connecting) return lost(id);
      return on_reply(id, m);
    case Kind::rtu:
      if (id.state != State::accepting) return lost(id);
      id.state = State::connected;
      set_deadline_locked(id, 0);
      return post(id, RDMA_CM_EVENT_ESTABLISHED, 0);
    case Kind::rej:
      if (id.state != State::connecting) return lost(id);
      close_locked(id);
      id.state = State::idle;
      return post(id, RDMA_CM_EVENT_REJECTED, kRejectedByConsumer, &m);
    case Kind::dreq:
      return lost(id);
  }
}

}  // namespace rb::rdmacm
