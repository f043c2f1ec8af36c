// Connections: listen, connect, accept, reject, disconnect. The active side opens a TCP connection
// to the passive side's (IP, port) and the two exchange REQ, REP and RTU on it (wire.hh); each side
// connects its QP to the other's through the routers.
#include <netinet/in.h>
#include <sys/random.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <ctime>

#include "vrdma/rdmacm/state.hh"

namespace rb::rdmacm {
namespace {

// IB CM's reject reason for a REQ no one listens for, which rdma_cm reports as REJECTED.
constexpr int kNoListener = 8;

uint32_t random_psn() {
  uint32_t r = 0;
  (void)!getrandom(&r, sizeof r, 0);
  return r & 0xffffff;
}

// The message that carries our side of the connection: our QP (or the program's, by number), our
// first PSN, GID 0, and the program's private data, within `max` bytes.
int fill(Id& id, Message& m, Kind kind, const rdma_conn_param* p, uint8_t max) {
  m.kind = kind;
  m.qp_num = id.base.qp ? id.base.qp->qp_num : p ? p->qp_num : 0;
  m.psn = id.psn;
  ibv_gid g = local_gid();
  std::memcpy(m.gid, g.raw, 16);
  if (p) {
    if (p->private_data_len > max) {
      say("private data of %u bytes: at most %u go with this message", unsigned(p->private_data_len), unsigned(max));
      return fail(EINVAL);
    }
    if (p->private_data_len) std::memcpy(m.private_data, p->private_data, p->private_data_len);
    m.private_len = p->private_data_len;
    m.responder_resources = p->responder_resources;
    m.initiator_depth = p->initiator_depth;
    m.retry_count = p->retry_count;
    m.rnr_retry_count = p->rnr_retry_count;
    m.srq = p->srq;
  }
  m.srq = m.srq || (id.base.qp && id.base.qp->srq);
  return 0;
}

// A UD id's accept (IB's SIDR reply): the QP's number and Q_Key go back, and the exchange ends;
// no RTU comes and no ESTABLISHED is posted on this side.
int accept_datagrams(Id& id, const Message& rep) {
  std::lock_guard lock(id.channel->read_mu);
  bool sent = send_message(id.sock.get(), rep);
  close_locked(id);
  id.state = sent ? State::connected : State::idle;
  return sent ? 0 : fail(ECONNRESET);
}

socklen_t length_of(const sockaddr_storage& a) {
  return a.ss_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
}

// IB and iWARP refuse a REQ no one listens for at once, but there the active side's address and
// route resolution and its QP's creation each take a fabric round trip or a firmware call, so a
// listen its program makes after telling its peer to go (perftest -R's second listen, right after
// its handshake) is up before the peer's REQ comes. Here those steps cost microseconds and the REQ
// can come first: a refused connect is tried again, after 1, 2, 4 .. 256 ms (511 ms in all),
// before the program is told REJECTED.
constexpr int kRefusedRetries = 9;

// A TCP connection to `dst` (blocking, with the message deadlines), or none with `err` set.
rb::UniqueFd connect_while_refused(const sockaddr_storage& dst, int& err) {
  for (int attempt = 0;; ++attempt) {
    rb::UniqueFd s(kernel_socket(dst.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!s) {
      err = errno;
      return {};
    }
    set_deadlines(s.get());
    if (connect(s.get(), reinterpret_cast<const sockaddr*>(&dst), length_of(dst)) == 0) return s;
    err = errno;
    if (err != ECONNREFUSED || attempt == kRefusedRetries) return {};
    timespec pause{0, (1L << attempt) * 1'000'000L};
    nanosleep(&pause, nullptr);
  }
}

}  // namespace
}  // namespace rb::rdmacm

using namespace rb::rdmacm;

RDMACM_EXPORT int rdma_listen(rdma_cm_id* cm_id, int backlog) {
  if (!cm_id) return fail(EINVAL);
  Id& id = *of(cm_id);
  if (id.state == State::idle) {
    sockaddr_in any{};
    any.sin_family = AF_INET;
    if (rdma_bind_addr(cm_id, reinterpret_cast<sockaddr*>(&any)) != 0) return -1;
  }
  if (id.state != State::bound) return fail(EINVAL);
  id.listening_since_ns = wall_ns();  // before listen(): every REQ that can come is stamped later
  if (listen(id.sock.get(), backlog > 0 ? backlog : 128) != 0) return -1;
  id.backlog = backlog;
  id.state = State::listening;
  watch(id);
  return 0;
}

RDMACM_EXPORT int rdma_connect(rdma_cm_id* cm_id, rdma_conn_param* param) {
  if (!cm_id) return fail(EINVAL);
  Id& id = *of(cm_id);
  if (id.state != State::route_resolved) return fail(EINVAL);
  id.psn = random_psn();
  Message req;
  if (fill(id, req, Kind::req, param, kReqPrivate) != 0) return -1;
  if (param) id.responder_resources = param->responder_resources, id.initiator_depth = param->initiator_depth;
  const sockaddr_storage& dst = id.base.route.addr.dst_storage;
  int err = 0;
  rb::UniqueFd s = connect_while_refused(dst, err);
  if (!s) {
    if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM) return fail(err);
    id.state = State::idle;
    if (err == ECONNREFUSED) post(id, RDMA_CM_EVENT_REJECTED, kNoListener);
    else post(id, RDMA_CM_EVENT_UNREACHABLE, -(err == EINPROGRESS || err == EAGAIN ? ETIMEDOUT : err));
    return id.sync ? wait_for(id, RDMA_CM_EVENT_ESTABLISHED) : 0;
  }
  // Stamped once connected, so after the listener began (a client retrying its connect while
  // the server starts was stamped before, and refused).
  address_req(req, dst);
  fresh_nonce(req.nonce);
  std::memcpy(id.req_nonce, req.nonce, sizeof id.req_nonce);
  if (!sign(req) || !send_message(s.get(), req)) return -1;
  id.sock = std::move(s);
  id.state = State::connecting;
  {
    std::lock_guard lock(id.channel->read_mu);
    watch_locked(id);
    set_deadline_locked(id, monotonic_ns() + kStepSeconds * 1'000'000'000);
  }
  return id.sync ? wait_for(id, RDMA_CM_EVENT_ESTABLISHED) : 0;
}

RDMACM_EXPORT int rdma_accept(rdma_cm_id* cm_id, rdma_conn_param* param) {
  if (!cm_id) return fail(EINVAL);
  Id& id = *of(cm_id);
  if (id.state != State::requested || !id.sock) return fail(id.state == State::requested ? ECONNRESET : EINVAL);
  id.psn = random_psn();
  if (param) {
    id.responder_resources = std::min(param->responder_resources, id.peer.initiator_depth);
    id.initiator_depth = std::min(param->initiator_depth, id.peer.responder_resources);
  }
  Message rep;
  if (fill(id, rep, Kind::rep, param, kRepPrivate) != 0) return -1;
  std::memcpy(rep.nonce, id.peer.nonce, sizeof rep.nonce);  // the REP answers this REQ only
  if (id.base.ps == RDMA_PS_UDP) rep.psn = RDMA_UDP_QKEY;  // a datagram reply carries the Q_Key where a connection's has its PSN
  if (!sign(rep)) return -1;
  if (id.base.ps == RDMA_PS_UDP) return accept_datagrams(id, rep);
  if (connect_qp(id) != 0) return -1;
  {
    std::lock_guard lock(id.channel->read_mu);
    if (!send_message(id.sock.get(), rep)) {
      int err = errno ? errno : ECONNRESET;
      close_locked(id);
      return fail(err);
    }
    id.state = State::accepting;
    set_deadline_locked(id, monotonic_ns() + kStepSeconds * 1'000'000'000);
  }
  return id.sync ? wait_for(id, RDMA_CM_EVENT_ESTABLISHED) : 0;
}

RDMACM_EXPORT int rdma_reject(rdma_cm_id* cm_id, const void* private_data, uint8_t len) {
  if (!cm_id) return fail(EINVAL);
  Id& id = *of(cm_id);
  if (id.state != State::requested) return fail(EINVAL);
  rdma_conn_param p{};
  p.private_data = private_data;
  p.private_data_len = len;
  Message rej;
  if (fill(id, rej, Kind::rej, &p, kRejPrivate) != 0) return -1;
  std::lock_guard lock(id.channel->read_mu);
  if (id.sock) send_message(id.sock.get(), rej);
  close_locked(id);
  id.state = State::idle;
  return 0;
}

RDMACM_EXPORT int rdma_reject_ece(rdma_cm_id* cm_id, const void* private_data, uint8_t len) {
  return rdma_reject(cm_id, private_data, len);
}

RDMACM_EXPORT int rdma_establish(rdma_cm_id* cm_id) {
  if (!cm_id) return fail(EINVAL);
  Id& id = *of(cm_id);
  if (id.state != State::connecting) return fail(EINVAL);
  Message rtu;
  rtu.kind = Kind::rtu;
  std::lock_guard lock(id.channel->read_mu);
  if (!send_message(id.sock.get(), rtu)) return fail(ECONNRESET);
  id.state = State::connected;
  return 0;
}

RDMACM_EXPORT int rdma_disconnect(rdma_cm_id* cm_id) {
  if (!cm_id) return fail(EINVAL);
  Id& id = *of(cm_id);
  {
    std::lock_guard lock(id.channel->read_mu);
    bool live = id.state == State::connected || id.state == State::accepting || id.state == State::connecting;
    if (!live) return id.state == State::disconnected ? 0 : fail(EINVAL);
    Message dreq;
    dreq.kind = Kind::dreq;
    if (id.sock) send_message(id.sock.get(), dreq);
    close_locked(id);
    id.state = State::disconnected;
  }
  qp_to_error(id);
  post(id, RDMA_CM_EVENT_DISCONNECTED, 0);
  return id.sync ? wait_for(id, RDMA_CM_EVENT_DISCONNECTED) : 0;
}
