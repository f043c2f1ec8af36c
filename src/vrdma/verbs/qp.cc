// QPs: create, the RESET-INIT-RTR-RTS walk (an RC or UC QP connected at RTR to the peer's QP
// number at the router its GID names; a UD QP ready at RTR with its Q_Key), query and destroy. An unreliable-connected (UC) QP is carried as an
// RC one: what vrdma delivers arrives, in order, which is all UC asks; it takes SENDs and WRITEs
// only, as UC does (READ and atomics are refused at post).
#include <algorithm>
#include <atomic>
#include <cstring>
#include <optional>
#include <new>

#include "vrdma/verbs/export.hh"
#include "vrdma/verbs/objects.hh"
#include "vrdma/verbs/ops.hh"

namespace rb::verbs {
namespace {

constexpr uint32_t kMaxInline = 64;  // what the router path carries in a request itself
constexpr uint64_t kSendOps = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND |
                              IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ |
                              IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;

ibv_qp* make_qp(ibv_pd* pd, const ibv_qp_init_attr_ex& a) {
  // Programs probe a device's limits by asking for less and less (libfabric's verbs provider
  // asks for 128 B inline, then 96, 80, ..., and for a UD QP twice): each kind of refusal is
  // said once a process, not once a try.
  static std::atomic<bool> said_type{false}, said_caps{false};
  if (a.qp_type == IBV_QPT_XRC_SEND || a.qp_type == IBV_QPT_XRC_RECV) {
    say("create_qp: XRC QPs are not supported on vrdma (RC and UC are)");
    return fail_null<ibv_qp>(EOPNOTSUPP);
  }
  if (a.qp_type != IBV_QPT_RC && a.qp_type != IBV_QPT_UC && a.qp_type != IBV_QPT_UD) {
    if (!said_type.exchange(true)) say("create_qp: only RC, UC and UD QPs are supported (asked for type %d)", int(a.qp_type));
    return fail_null<ibv_qp>(EOPNOTSUPP);
  }
  bool ud = a.qp_type == IBV_QPT_UD;
  if (ud && a.srq) {
    say("create_qp: a UD QP with an SRQ is not supported on vrdma; give it its own receive queue");
    return fail_null<ibv_qp>(EOPNOTSUPP);
  }
  if (!a.send_cq || !a.recv_cq) return fail_null<ibv_qp>(EINVAL);
  if (a.cap.max_send_sge > VRDMA_MAX_SGE || a.cap.max_recv_sge > VRDMA_MAX_SGE || a.cap.max_inline_data > kMaxInline) {
    if (!said_caps.exchange(true))
      say("create_qp: at most %d SGEs and %u B inline (asked for %u/%u SGEs, %u B)", VRDMA_MAX_SGE, kMaxInline,
          a.cap.max_send_sge, a.cap.max_recv_sge, a.cap.max_inline_data);
    return fail_null<ibv_qp>(EINVAL);
  }
  auto* q = new (std::nothrow) Qp;
  if (!q) return fail_null<ibv_qp>(ENOMEM);
  vrdma_qp_init_attr va{};
  va.send_cq = ours<Cq>(a.send_cq)->v;
  va.recv_cq = ours<Cq>(a.recv_cq)->v;
  va.max_send_wr = a.cap.max_send_wr;
  va.max_recv_wr = a.cap.max_recv_wr;
  va.max_inline_data = kMaxInline;
  va.sq_sig_all = a.sq_sig_all;
  va.flags = ud ? VRDMA_QP_DATAGRAM : VRDMA_QP_KEEP_RECVS;
  va.srq = a.srq ? ours<Srq>(a.srq)->v : nullptr;
  q->v = vrdma_create_qp(ours<Pd>(pd)->v, &va);
  if (!q->v) {
    int err = errno;
    say("create_qp: %s", vrdma_last_error());
    delete q;
    return fail_null<ibv_qp>(err);
  }
  q->ctx = Context::of(pd->context);
  q->ud = ud;
  q->cap = a.cap;
  q->cap.max_send_sge = q->cap.max_recv_sge = VRDMA_MAX_SGE;
  q->cap.max_inline_data = kMaxInline;
  q->sq_sig_all = a.sq_sig_all;
  ibv_qp& b = q->ex.qp_base;
  b.context = pd->context;
  b.qp_context = a.qp_context;
  b.pd = pd;
  b.send_cq = a.send_cq;
  b.recv_cq = a.recv_cq;
  b.srq = a.srq;
  b.qp_num = vrdma_qp_num(q->v);
  b.handle = b.qp_num;
  b.state = IBV_QPS_RESET;
  b.qp_type = a.qp_type;
  pthread_mutex_init(&b.mutex, nullptr);
  pthread_cond_init(&b.cond, nullptr);
  install_wr_ops(&q->ex);
  return &b;
}

int connect(Qp& q, const ibv_qp_attr& attr, int mask) {
  if (!(mask & IBV_QP_AV) || !(mask & IBV_QP_DEST_QPN)) {
    say("modify_qp to RTR needs the peer's address and QP number (IBV_QP_AV, IBV_QP_DEST_QPN)");
    return EINVAL;
  }
  auto where = router_of(*q.ctx, attr.ah_attr);
  if (!where) {
    say("modify_qp to RTR: the peer's GID is another host's link-local one (GID index 1), which names no router "
        "to reach; across hosts use GID index 0 (perftest -x 0), the router's address");
    return EINVAL;
  }
  vrdma_router_address at = *where;
  if (q.connected) {  // RESET and back to the same peer: the connection was kept
    if (attr.dest_qp_num == q.attr.dest_qp_num && !std::memcmp(&at, &q.peer_router, sizeof at)) return 0;
    say("modify_qp: QP %#x was connected to QP %#x; connecting it to another is not supported", q.ex.qp_base.qp_num,
        q.attr.dest_qp_num);
    return EOPNOTSUPP;
  }
  if (int r = vrdma_connect_qp_at(q.v, &at, attr.dest_qp_num); r < 0) {
    say("modify_qp to RTR: connecting QP %#x to QP %#x: %s", q.ex.qp_base.qp_num, attr.dest_qp_num,
        vrdma_last_error());
    return -r;
  }
  q.connected = true;
  q.peer_router = at;
  return 0;
}

// A UD QP connects to nobody: from RTR on it takes datagrams with its Q_Key (set at INIT, or
// changed at any step after).
int ud_ready(Qp& q, const ibv_qp_attr& attr, int mask) {
  uint32_t qkey = mask & IBV_QP_QKEY ? attr.qkey : q.attr.qkey;
  if (int r = vrdma_ud_ready(q.v, qkey); r < 0) {
    say("modify_qp: making UD QP %#x ready: %s", q.ex.qp_base.qp_num, vrdma_last_error());
    return -r;
  }
  return 0;
}

// Keeps what the program set, for query_qp.
void remember(Qp& q, const ibv_qp_attr& a, int mask) {
  ibv_qp_attr& m = q.attr;
  if (mask & IBV_QP_CUR_STATE) m.cur_qp_state = a.cur_qp_state;
  if (mask & IBV_QP_ACCESS_FLAGS) m.qp_access_flags = a.qp_access_flags;
  if (mask & IBV_QP_PKEY_INDEX) m.pkey_index = a.pkey_index;
  if (mask & IBV_QP_PORT) m.port_num = a.port_num;
  if (mask & IBV_QP_AV) m.ah_attr = a.ah_attr;
  if (mask & IBV_QP_PATH_MTU) m.path_mtu = a.path_mtu;
  if (mask & IBV_QP_TIMEOUT) m.timeout = a.timeout;
  if (mask & IBV_QP_RETRY_CNT) m.retry_cnt = a.retry_cnt;
  if (mask & IBV_QP_RNR_RETRY) m.rnr_retry = a.rnr_retry;
  if (mask & IBV_QP_RQ_PSN) m.rq_psn = a.rq_psn;
  if (mask & IBV_QP_MAX_QP_RD_ATOMIC) m.max_rd_atomic = a.max_rd_atomic;
  if (mask & IBV_QP_MIN_RNR_TIMER) m.min_rnr_timer = a.min_rnr_timer;
  if (mask & IBV_QP_SQ_PSN) m.sq_psn = a.sq_psn;
  if (mask & IBV_QP_MAX_DEST_RD_ATOMIC) m.max_dest_rd_atomic = a.max_dest_rd_atomic;
  if (mask & IBV_QP_DEST_QPN) m.dest_qp_num = a.dest_qp_num;
  if (mask & IBV_QP_QKEY) m.qkey = a.qkey;
}

// How long an RC QP retries a request nobody answers before it gives up: retry_cnt + 1 tries of
// 4.096 us x 2^timeout each. vrdma waits that long after a peer has gone before it fails the QP,
// so a program whose peer exits while answers are on their way ends as it would on hardware.
// Timeout 0 waits for ever on InfiniBand: here, as long as vrdma allows.
uint64_t retry_window_ns(const ibv_qp_attr& a) {
  if (a.timeout == 0) return VRDMA_MAX_PEER_TIMEOUT_NS;
  uint64_t ns = (uint64_t(4096) << (a.timeout & 31)) * ((a.retry_cnt & 7) + 1u);
  return std::min<uint64_t>(ns, VRDMA_MAX_PEER_TIMEOUT_NS);
}

int move_to(Qp& q, ibv_qp_state to, const ibv_qp_attr& attr, int mask) {
  ibv_qp_state from = q.ex.qp_base.state;
  switch (to) {
    case IBV_QPS_RESET:
      // Out of error with the connection kept; a peer that is gone stays gone, and posts fail.
      if (from == IBV_QPS_ERR) vrdma_recover_qp(q.v);
      return 0;
    case IBV_QPS_INIT: return from == IBV_QPS_RESET || from == IBV_QPS_INIT ? 0 : EINVAL;
    case IBV_QPS_RTR:
      if (from != IBV_QPS_INIT) return EINVAL;
      return q.ud ? ud_ready(q, attr, mask) : connect(q, attr, mask);
    case IBV_QPS_RTS:
      if (from != IBV_QPS_RTR && from != IBV_QPS_RTS) return EINVAL;
      return q.ud && (mask & IBV_QP_QKEY) ? ud_ready(q, attr, mask) : 0;
    case IBV_QPS_ERR:
      vrdma_withdraw_recvs(q.v);  // verbs flushes the posted receives on the way into error
      return 0;
    default:
      say("modify_qp: state %d is not supported", int(to));
      return EOPNOTSUPP;
  }
}

}  // namespace

ibv_qp* create_qp_ex(ibv_context*, ibv_qp_init_attr_ex* attr) {
  constexpr uint32_t kKnown = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || (attr->comp_mask & ~kKnown)) {
    say("create_qp_ex: give a PD; comp_mask bits %#x are not supported", attr->comp_mask & ~kKnown);
    return fail_null<ibv_qp>(attr->comp_mask & IBV_QP_INIT_ATTR_PD ? EOPNOTSUPP : EINVAL);
  }
  if ((attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) && (attr->send_ops_flags & ~kSendOps)) {
    say("create_qp_ex: send ops %#llx are not supported", (unsigned long long)(attr->send_ops_flags & ~kSendOps));
    return fail_null<ibv_qp>(EOPNOTSUPP);
  }
  if (attr->create_flags) {
    say("create_qp_ex: create flags %#x are not supported", attr->create_flags);
    return fail_null<ibv_qp>(EOPNOTSUPP);
  }
  return make_qp(attr->pd, *attr);
}

}  // namespace rb::verbs

using namespace rb::verbs;

VERBS_EXPORT ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* attr) {
  ibv_qp_init_attr_ex ex{};
  ex.qp_context = attr->qp_context;
  ex.send_cq = attr->send_cq;
  ex.recv_cq = attr->recv_cq;
  ex.srq = attr->srq;
  ex.cap = attr->cap;
  ex.qp_type = attr->qp_type;
  ex.sq_sig_all = attr->sq_sig_all;
  ibv_qp* qp = make_qp(pd, ex);
  if (qp) attr->cap = Qp::of(qp)->cap;
  return qp;
}

VERBS_EXPORT int ibv_modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int mask) {
  Qp& q = *Qp::of(qp);
  if (mask & IBV_QP_STATE) {
    if (int err = move_to(q, attr->qp_state, *attr, mask)) return err;
    qp->state = attr->qp_state;
  }
  remember(q, *attr, mask);
  if (mask & (IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT)) vrdma_set_peer_timeout(q.v, retry_window_ns(q.attr));
  return 0;
}

VERBS_EXPORT int ibv_query_qp(ibv_qp* qp, ibv_qp_attr* attr, int, ibv_qp_init_attr* init) {
  Qp& q = *Qp::of(qp);
  *attr = q.attr;
  attr->qp_state = attr->cur_qp_state = qp->state;
  attr->cap = q.cap;
  std::memset(init, 0, sizeof *init);
  init->qp_context = qp->qp_context;
  init->send_cq = qp->send_cq;
  init->recv_cq = qp->recv_cq;
  init->srq = qp->srq;
  init->cap = q.cap;
  init->qp_type = qp->qp_type;
  init->sq_sig_all = q.sq_sig_all;
  return 0;
}

VERBS_EXPORT int ibv_destroy_qp(ibv_qp* qp) {
  Qp* q = Qp::of(qp);
  if (int r = vrdma_destroy_qp(q->v); r < 0) return -r;
  pthread_mutex_destroy(&qp->mutex);
  pthread_cond_destroy(&qp->cond);
  delete q;
  return 0;
}

VERBS_EXPORT ibv_qp_ex* ibv_qp_to_qp_ex(ibv_qp* qp) { return &Qp::of(qp)->ex; }

VERBS_EXPORT int ibv_query_qp_data_in_order(ibv_qp*, ibv_wr_opcode, uint32_t) {
  return 0;  // a memcpy promises no order among the bytes of one message
}
