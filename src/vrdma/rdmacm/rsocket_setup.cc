// rsockets made, bound, listening, accepted, connected and closed: each over an rdma_cm id of its
// own event channel, whose fd is the socket's. A connect that fails stays failed: librspreload
// answers a failed rconnect by moving the program's socket to the kernel's TCP, so the socket
// refuses what that move asks first (rgetsockname into no buffer), and the program sees the
// connect's own error instead of a connection that quietly left vrdma.
#include <fcntl.h>
#include <link.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "vrdma/rdmacm/rsocket.hh"
#include "vrdma/rdmacm/state.hh"

namespace rb::rsock {
namespace {

using rdmacm::fail;
using rdmacm::say;

constexpr int kCmWaitMs = 12'000;  // beyond the cm's own bounds (5 s a handshake step)

void set_nonblocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

int errno_of(rdma_cm_event_type t, int status) {
  switch (t) {
    case RDMA_CM_EVENT_REJECTED: return ECONNREFUSED;
    case RDMA_CM_EVENT_ADDR_ERROR:
    case RDMA_CM_EVENT_ROUTE_ERROR:
    case RDMA_CM_EVENT_UNREACHABLE: return status == -ETIMEDOUT ? ETIMEDOUT : EHOSTUNREACH;
    case RDMA_CM_EVENT_DISCONNECTED: return ECONNRESET;
    default: return status < 0 ? -status : ECONNABORTED;
  }
}

Socket* fresh_socket(int domain, bool nonblocking) {
  auto* s = new Socket;
  s->domain = domain;
  s->nonblocking = nonblocking;
  s->flags = nonblocking ? O_NONBLOCK : 0;
  s->channel = rdma_create_event_channel();
  if (!s->channel || rdma_create_id(s->channel, &s->id, s, RDMA_PS_TCP) != 0) {
    int err = errno;
    if (s->channel) rdma_destroy_event_channel(s->channel);
    delete s;
    errno = err;
    return nullptr;
  }
  s->fd = s->channel->fd;
  set_nonblocking(s->fd);
  return add(s);
}

RingInfo my_rings(const Socket& s) {
  RingInfo r;
  r.ring = kRing;
  r.ring_addr = reinterpret_cast<uint64_t>(s.recv_ring());
  r.rkey = s.mr->rkey;
  r.recv_depth = kRecvDepth;
  return r;
}

bool take_peer(Socket& s, const rdma_conn_param& p) {
  if (p.private_data_len < sizeof(RingInfo)) return false;
  std::memcpy(&s.peer, p.private_data, sizeof s.peer);
  return s.peer.magic == RingInfo{}.magic && s.peer.ring == kRing && s.peer.recv_depth >= 8;
}

rdma_conn_param conn_param(const RingInfo& mine) {
  rdma_conn_param p{};
  p.private_data = &mine;
  p.private_data_len = sizeof mine;
  p.responder_resources = 1;
  p.initiator_depth = 1;
  p.retry_count = 7;
  p.rnr_retry_count = 7;
  return p;
}

int connect_now(Socket& s, const sockaddr* addr) {
  rdma_cm_event* e = nullptr;
  if (rdma_resolve_addr(s.id, nullptr, const_cast<sockaddr*>(addr), 2000) != 0) return -1;
  if (wait_event(s, RDMA_CM_EVENT_ADDR_RESOLVED, &e) != 0) return -1;
  rdma_ack_cm_event(e);
  if (rdma_resolve_route(s.id, 2000) != 0) return -1;
  if (wait_event(s, RDMA_CM_EVENT_ROUTE_RESOLVED, &e) != 0) return -1;
  rdma_ack_cm_event(e);
  if (make_resources(s) != 0) return -1;
  RingInfo mine = my_rings(s);
  rdma_conn_param p = conn_param(mine);
  if (rdma_connect(s.id, &p) != 0) return -1;
  if (wait_event(s, RDMA_CM_EVENT_ESTABLISHED, &e) != 0) return -1;
  bool ok = take_peer(s, e->param.conn);
  rdma_ack_cm_event(e);
  if (!ok) {
    say("rconnect: the peer is not an rsocket of vrdma's (its connect reply carries no rings)");
    return fail(ECONNREFUSED);
  }
  s.phase = Phase::connected;
  return 0;
}

// A connect request on a listener becomes a socket of its own: its id moves to a new channel,
// gets its rings, and is accepted with them.
Socket* accept_request(rdma_cm_event* e) {
  RingInfo theirs;
  rdma_cm_id* child = e->id;
  if (e->param.conn.private_data_len < sizeof theirs) {
    rdma_reject(child, nullptr, 0);
    return nullptr;
  }
  auto* s = new Socket;
  s->domain = child->route.addr.src_addr.sa_family;
  s->id = child;
  s->channel = rdma_create_event_channel();
  if (!s->channel || rdma_migrate_id(child, s->channel) != 0 || !take_peer(*s, e->param.conn)) {
    rdma_reject(child, nullptr, 0);
    if (s->channel) rdma_destroy_event_channel(s->channel);
    rdma_destroy_id(child);
    delete s;
    return nullptr;
  }
  s->fd = s->channel->fd;
  set_nonblocking(s->fd);
  child->context = s;
  return add(s);
}

int finish_accept(Socket& s) {
  if (make_resources(s) != 0) return -1;
  RingInfo mine = my_rings(s);
  rdma_conn_param p = conn_param(mine);
  if (rdma_accept(s.id, &p) != 0) return -1;
  rdma_cm_event* e = nullptr;
  if (wait_event(s, RDMA_CM_EVENT_ESTABLISHED, &e) != 0) return -1;
  rdma_ack_cm_event(e);
  s.phase = Phase::connected;
  return 0;
}

void close_socket(Socket& s) {
  if (s.phase == Phase::connected) {
    if (!s.fin_sent) send_fin(s);
    // The stream's last bytes and its end must reach the peer before the QP goes: a signaled
    // end, and its completion (RC completes in order), waited for a bounded time.
    int64_t until = now_ns() + 2'000'000'000;
    while (s.sends_out && !s.broken && now_ns() < until)
      if (progress(s) && s.sends_out) wait_socket(s, 10);
    rdma_disconnect(s.id);
  }
  free_resources(s);
  if (s.id) rdma_destroy_id(s.id);
  if (s.channel) rdma_destroy_event_channel(s.channel);
  s.phase = Phase::closed;
}

bool rspreload_loaded() {
  return dl_iterate_phdr([](dl_phdr_info* info, size_t, void*) { return info->dlpi_name && std::strstr(info->dlpi_name, "librspreload") ? 1 : 0; },
                         nullptr) != 0;
}

}  // namespace

int make_resources(Socket& s) {
  ibv_context* ctx = s.id->verbs;
  if (!ctx) return fail(ENODEV);
  s.pd = ibv_alloc_pd(ctx);
  s.cq_channel = s.pd ? ibv_create_comp_channel(ctx) : nullptr;
  if (!s.cq_channel) return -1;
  set_nonblocking(s.cq_channel->fd);
  s.cq = ibv_create_cq(ctx, int(kSendDepth + kRecvDepth + 8), &s, s.cq_channel, 0);
  if (!s.cq) return -1;
  s.region = static_cast<uint8_t*>(std::aligned_alloc(4096, kRegionBytes));
  if (!s.region) return fail(ENOMEM);
  std::memset(s.region, 0, kRegionBytes);
  s.mr = ibv_reg_mr(s.pd, s.region, kRegionBytes, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (!s.mr) return -1;
  ibv_qp_init_attr a{};
  a.send_cq = a.recv_cq = s.cq;
  a.qp_type = IBV_QPT_RC;
  a.cap.max_send_wr = kSendDepth;
  a.cap.max_recv_wr = kRecvDepth;
  a.cap.max_send_sge = a.cap.max_recv_sge = 1;
  a.cap.max_inline_data = kInline;
  if (rdma_create_qp(s.id, s.pd, &a) != 0) return -1;
  post_receives(s, kRecvDepth);
  return 0;
}

void free_resources(Socket& s) {
  if (s.id && s.id->qp) rdma_destroy_qp(s.id);
  if (s.mr) ibv_dereg_mr(s.mr);
  if (s.cq) {
    disarm(s);
    ibv_destroy_cq(s.cq);
  }
  if (s.cq_channel) ibv_destroy_comp_channel(s.cq_channel);
  if (s.pd) ibv_dealloc_pd(s.pd);
  std::free(s.region);
  s.mr = nullptr;
  s.cq = nullptr;
  s.cq_channel = nullptr;
  s.pd = nullptr;
  s.region = nullptr;
}

int wait_event(Socket& s, rdma_cm_event_type want, rdma_cm_event** event) {
  int64_t until = now_ns() + int64_t(kCmWaitMs) * 1'000'000;
  while (true) {
    if (rdma_get_cm_event(s.channel, event) == 0) {
      if ((*event)->event == want) return 0;
      int err = errno_of((*event)->event, (*event)->status);
      rdma_ack_cm_event(*event);
      return fail(err);
    }
    if (errno != EAGAIN) return -1;
    int left_ms = int((until - now_ns()) / 1'000'000);
    if (left_ms <= 0) return fail(ETIMEDOUT);
    pollfd p{s.fd, POLLIN, 0};
    poll(&p, 1, left_ms);
  }
}

void post_rsocket_refusal(int type) {
  static bool said = false;
  if (said) return;
  said = true;
  say("rsocket: IP sockets of type %d are not carried by vrdma (stream sockets are); %s", type,
      rspreload_loaded() ? "librspreload gives this one the kernel's socket" : "refused");
}

}  // namespace rb::rsock

using namespace rb::rsock;
using rb::rdmacm::fail;
using rb::rdmacm::say;

RDMACM_EXPORT int rsocket(int domain, int type, int protocol) {
  int kind = type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (domain != AF_INET && domain != AF_INET6) return fail(EAFNOSUPPORT);  // a unix socket is no network's
  if (kind != SOCK_STREAM || (protocol && protocol != IPPROTO_TCP)) {
    post_rsocket_refusal(kind);
    return fail(EPROTONOSUPPORT);
  }
  Socket* s = fresh_socket(domain, type & SOCK_NONBLOCK);
  return s ? s->fd : -1;
}

RDMACM_EXPORT int rbind(int fd, const sockaddr* addr, socklen_t len) {
  Socket* s = find(fd);
  if (!s) return fail(EBADF);
  if (s->phase != Phase::fresh) return fail(EINVAL);
  if (!addr || len < sizeof(sockaddr_in)) return fail(EINVAL);
  if (rdma_bind_addr(s->id, const_cast<sockaddr*>(addr)) != 0) return -1;
  s->phase = Phase::bound;
  return 0;
}

RDMACM_EXPORT int rlisten(int fd, int backlog) {
  Socket* s = find(fd);
  if (!s) return fail(EBADF);
  if (s->phase != Phase::bound && s->phase != Phase::fresh) return fail(EINVAL);
  if (rdma_listen(s->id, backlog) != 0) return -1;
  s->phase = Phase::listening;
  return 0;
}

RDMACM_EXPORT int raccept(int fd, sockaddr* addr, socklen_t* len) {
  Socket* s = find(fd);
  if (!s) return fail(EBADF);
  if (s->phase != Phase::listening) return fail(EINVAL);
  while (true) {
    rdma_cm_event* e = nullptr;
    if (rdma_get_cm_event(s->channel, &e) != 0) {
      if (errno != EAGAIN) return -1;
      if (s->nonblocking) return fail(EAGAIN);
      pollfd p{s->fd, POLLIN, 0};
      poll(&p, 1, -1);
      continue;
    }
    if (e->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
      rdma_ack_cm_event(e);
      continue;
    }
    Socket* c = accept_request(e);
    rdma_ack_cm_event(e);
    if (!c) continue;
    if (finish_accept(*c) != 0) {
      close_socket(*c);
      remove(c->fd);
      continue;
    }
    if (addr && len) {
      sockaddr* peer = rdma_get_peer_addr(c->id);
      socklen_t n = peer->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
      std::memcpy(addr, peer, std::min(*len, n));
      *len = n;
    }
    return c->fd;
  }
}

RDMACM_EXPORT int rconnect(int fd, const sockaddr* addr, socklen_t len) {
  Socket* s = find(fd);
  if (!s) return fail(EBADF);
  if (s->phase == Phase::connected) return fail(EISCONN);
  if (s->phase != Phase::fresh && s->phase != Phase::bound) return fail(EINVAL);
  if (!addr || len < sizeof(sockaddr_in)) return fail(EINVAL);
  if (connect_now(*s, addr) == 0) return 0;
  s->error = errno;
  say("rconnect: %s; the socket stays on vrdma, failed (no fall back to the kernel's TCP)", std::strerror(s->error));
  return fail(s->error);
}

RDMACM_EXPORT int rshutdown(int fd, int how) {
  Socket* s = find(fd);
  if (!s) return fail(EBADF);
  if (s->phase != Phase::connected) return fail(ENOTCONN);
  if ((how == SHUT_WR || how == SHUT_RDWR) && !s->fin_sent) return send_fin(*s);
  return 0;
}

RDMACM_EXPORT int rclose(int fd) {
  Socket* s = find(fd);
  if (!s) return fail(EBADF);
  close_socket(*s);
  remove(fd);
  return 0;
}
