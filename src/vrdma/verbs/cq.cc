// Completion queues, completion channels and their events. A channel's descriptor is an epoll
// set over its CQs' event descriptors, so a program may poll() it as it would a NIC's.
#include <fcntl.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <new>

#include "vrdma/verbs/export.hh"
#include "vrdma/verbs/objects.hh"
#include "vrdma/verbs/ops.hh"

namespace rb::verbs {

ibv_wc_status wc_status(int s) {
  switch (s) {
    case VRDMA_WC_SUCCESS: return IBV_WC_SUCCESS;
    case VRDMA_WC_LOC_LEN_ERR: return IBV_WC_LOC_LEN_ERR;
    case VRDMA_WC_LOC_PROT_ERR: return IBV_WC_LOC_PROT_ERR;
    case VRDMA_WC_WR_FLUSH_ERR: return IBV_WC_WR_FLUSH_ERR;
    case VRDMA_WC_REM_ACCESS_ERR: return IBV_WC_REM_ACCESS_ERR;
    case VRDMA_WC_RNR_RETRY_EXC_ERR: return IBV_WC_RNR_RETRY_EXC_ERR;
    case VRDMA_WC_REM_INV_REQ_ERR: return IBV_WC_REM_INV_REQ_ERR;
    case VRDMA_WC_REM_OP_ERR: return IBV_WC_REM_OP_ERR;
    case VRDMA_WC_LOC_QP_OP_ERR: return IBV_WC_LOC_QP_OP_ERR;
    case VRDMA_WC_RETRY_EXC_ERR: return IBV_WC_RETRY_EXC_ERR;
    default: return IBV_WC_GENERAL_ERR;
  }
}

static_assert(int(IBV_WC_SEND) == VRDMA_WC_SEND && int(IBV_WC_RDMA_WRITE) == VRDMA_WC_RDMA_WRITE &&
              int(IBV_WC_RDMA_READ) == VRDMA_WC_RDMA_READ && int(IBV_WC_COMP_SWAP) == VRDMA_WC_COMP_SWAP &&
              int(IBV_WC_FETCH_ADD) == VRDMA_WC_FETCH_ADD && int(IBV_WC_RECV) == VRDMA_WC_RECV &&
              int(IBV_WC_RECV_RDMA_WITH_IMM) == VRDMA_WC_RECV_RDMA_WITH_IMM);

// Only a receive reports immediate data in verbs; vrdma also marks the sender's completion. A
// datagram's receive begins with its routing header.
unsigned wc_flags_of(const vrdma_wc& v) {
  unsigned f = (v.wc_flags & VRDMA_WC_WITH_IMM) && (v.opcode & VRDMA_WC_RECV) ? IBV_WC_WITH_IMM : 0;
  return f | (v.wc_flags & VRDMA_WC_GRH ? unsigned(IBV_WC_GRH) : 0u);
}

namespace {

void to_ibv(const vrdma_wc& v, ibv_wc& w) {
  w.wr_id = v.wr_id;
  w.status = wc_status(v.status);
  w.opcode = ibv_wc_opcode(v.opcode);
  w.vendor_err = v.status == VRDMA_WC_SUCCESS ? 0 : uint32_t(v.status);
  w.byte_len = v.byte_len;
  w.imm_data = v.imm_data;  // as the sender gave it (network order in verbs)
  w.qp_num = v.qp_num;
  w.src_qp = v.src_qp;  // a datagram's sender; 0 on RC, as verbs leaves it
  w.wc_flags = wc_flags_of(v);
  w.pkey_index = 0;
  w.slid = 0;
  w.sl = 0;
  w.dlid_path_bits = 0;
}

}  // namespace

int poll_cq(ibv_cq* cq, int n, ibv_wc* wc) {
  Cq* c = ours<Cq>(cq);
  constexpr int kChunk = 32;
  vrdma_wc got[kChunk];
  int total = 0;
  while (total < n) {
    int want = n - total < kChunk ? n - total : kChunk;
    int r = vrdma_poll_cq(c->v, want, got);
    if (r < 0) return total ? total : -1;  // verbs: a negative count on an error of the CQ itself
    for (int i = 0; i < r; ++i) to_ibv(got[i], wc[total + i]);
    total += r;
    if (r < want) break;
  }
  return total;
}

// Verbs raises an event for the next completion added after the call, not for one waiting
// already (programs poll after arming). libvrdma's "may be waiting" answer is therefore not an
// event: the CQ stays armed for what comes next.
int req_notify_cq(ibv_cq* cq, int) {
  int r = vrdma_req_notify_cq(ours<Cq>(cq)->v);
  return r < 0 ? -r : 0;
}

// A CQ on `channel` (may be null), as ibv_create_cq and create_cq_ex both make it.
Cq* make_cq(ibv_context* ctx, int cqe, void* cq_context, ibv_comp_channel* channel) {
  auto* c = new (std::nothrow) Cq;
  if (!c) return fail_null<Cq>(ENOMEM);
  c->v = vrdma_create_cq(Context::of(ctx)->v, cqe);
  if (!c->v) {
    int err = errno;
    say("create_cq: %s", vrdma_last_error());
    delete c;
    return fail_null<Cq>(err);
  }
  if (channel) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = c;
    if (epoll_ctl(channel->fd, EPOLL_CTL_ADD, vrdma_cq_event_fd(c->v), &ev) < 0) {
      int err = errno;
      vrdma_destroy_cq(c->v);
      delete c;
      return fail_null<Cq>(err);
    }
    ++channel->refcnt;
  }
  ibv_cq* cq = c->cq();
  cq->context = ctx;
  cq->channel = channel;
  cq->cq_context = cq_context;
  cq->cqe = cqe;
  pthread_mutex_init(&cq->mutex, nullptr);
  pthread_cond_init(&cq->cond, nullptr);
  return c;
}

}  // namespace rb::verbs

using namespace rb::verbs;

VERBS_EXPORT ibv_comp_channel* ibv_create_comp_channel(ibv_context* ctx) {
  auto* ch = new (std::nothrow) CompChannel;
  if (!ch) return fail_null<ibv_comp_channel>(ENOMEM);
  ch->ch.fd = epoll_create1(EPOLL_CLOEXEC);
  if (ch->ch.fd < 0) {
    int err = errno;
    delete ch;
    return fail_null<ibv_comp_channel>(err);
  }
  ch->ch.context = ctx;
  return &ch->ch;
}

VERBS_EXPORT int ibv_destroy_comp_channel(ibv_comp_channel* channel) {
  if (channel->refcnt) {
    errno = EBUSY;
    return -1;
  }
  close(channel->fd);
  delete ours<CompChannel>(channel);
  return 0;
}

VERBS_EXPORT ibv_cq* ibv_create_cq(ibv_context* ctx, int cqe, void* cq_context, ibv_comp_channel* channel, int) {
  Cq* c = make_cq(ctx, cqe, cq_context, channel);
  return c ? c->cq() : nullptr;
}

VERBS_EXPORT int ibv_destroy_cq(ibv_cq* cq) {
  Cq* c = ours<Cq>(cq);
  int fd = vrdma_cq_event_fd(c->v);
  if (cq->channel) epoll_ctl(cq->channel->fd, EPOLL_CTL_DEL, fd, nullptr);
  if (int r = vrdma_destroy_cq(c->v); r < 0) {
    if (cq->channel) {
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.ptr = c;
      epoll_ctl(cq->channel->fd, EPOLL_CTL_ADD, fd, &ev);
    }
    return -r;
  }
  if (cq->channel) --cq->channel->refcnt;
  pthread_mutex_destroy(&cq->mutex);
  pthread_cond_destroy(&cq->cond);
  delete c;
  return 0;
}

VERBS_EXPORT int ibv_resize_cq(ibv_cq*, int) { return EOPNOTSUPP; }

// Blocks (unless the channel's descriptor was made non-blocking) until one of the channel's armed
// CQs has an event; a signal interrupts it with EINTR, as a read of a NIC's channel would.
VERBS_EXPORT int ibv_get_cq_event(ibv_comp_channel* channel, ibv_cq** cq, void** cq_context) {
  bool nonblocking = fcntl(channel->fd, F_GETFL) & O_NONBLOCK;
  while (true) {
    epoll_event ev{};
    int n = epoll_wait(channel->fd, &ev, 1, nonblocking ? 0 : -1);
    if (n < 0) return -1;
    if (n == 0) {
      errno = EAGAIN;
      return -1;
    }
    Cq* c = static_cast<Cq*>(ev.data.ptr);
    uint64_t v;
    if (read(vrdma_cq_event_fd(c->v), &v, sizeof v) != sizeof v) continue;  // another thread took it
    *cq = c->cq();
    *cq_context = c->cq()->cq_context;
    return 0;
  }
}

VERBS_EXPORT void ibv_ack_cq_events(ibv_cq* cq, unsigned int n) {
  pthread_mutex_lock(&cq->mutex);
  cq->comp_events_completed += n;
  pthread_cond_signal(&cq->cond);
  pthread_mutex_unlock(&cq->mutex);
}
