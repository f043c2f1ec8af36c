// An id's QP: made on vrdma0 and brought to INIT by rdma_create_qp, to RTR and RTS when the
// connection is made (to the peer's QP and router, from its REQ or REP), to ERR when it ends.
#include <algorithm>
#include <cstring>

#include "vrdma/rdmacm/state.hh"

namespace rb::rdmacm {
namespace {

constexpr int kInitAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                            IBV_ACCESS_REMOTE_ATOMIC;

// A UD id's QP (RDMA_PS_UDP): rdma_cm's Q_Key, and no peer; it takes datagrams from RTR on.
int ud_step_attr(Id& id, ibv_qp_attr& a, int& mask) {
  switch (a.qp_state) {
    case IBV_QPS_INIT:
      a.pkey_index = 0, a.port_num = 1, a.qkey = RDMA_UDP_QKEY;
      mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY;
      return 0;
    case IBV_QPS_RTR: mask = IBV_QP_STATE; return 0;
    case IBV_QPS_RTS:
      a.sq_psn = id.psn;
      mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
      return 0;
    default: return fail(EINVAL);
  }
}

// The attributes of each step, as rdma_init_qp_attr gives them to programs with QPs of their own.
int step_attr(Id& id, ibv_qp_attr& a, int& mask) {
  ibv_qp_state want = a.qp_state;
  a = {};
  a.qp_state = want;
  if (id.base.ps == RDMA_PS_UDP) return ud_step_attr(id, a, mask);
  switch (want) {
    case IBV_QPS_INIT:
      a.pkey_index = 0, a.port_num = 1, a.qp_access_flags = kInitAccess;
      mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
      return 0;
    case IBV_QPS_RTR: {
      ibv_port_attr port{};
      a.path_mtu = ibv_query_port(id.base.verbs, 1, &port) == 0 ? port.active_mtu : IBV_MTU_1024;
      a.dest_qp_num = id.peer.qp_num;
      a.rq_psn = id.peer.psn;
      a.max_dest_rd_atomic = std::max<uint8_t>(id.responder_resources, 1);
      a.min_rnr_timer = 12;
      a.ah_attr.is_global = 1;
      std::memcpy(a.ah_attr.grh.dgid.raw, id.peer.gid, 16);
      a.ah_attr.grh.hop_limit = 64;
      a.ah_attr.port_num = 1;
      mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
             IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
      return 0;
    }
    case IBV_QPS_RTS:
      a.timeout = 14, a.retry_cnt = 7, a.rnr_retry = 7, a.sq_psn = id.psn;
      a.max_rd_atomic = std::max<uint8_t>(id.initiator_depth, 1);
      mask = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC;
      return 0;
    default: return fail(EINVAL);
  }
}

int move(Id& id, ibv_qp_state to) {
  ibv_qp_attr a{};
  a.qp_state = to;
  int mask = 0;
  if (step_attr(id, a, mask) != 0) return -1;
  if (int r = ibv_modify_qp(id.base.qp, &a, mask); r != 0) return fail(r);
  return 0;
}

}  // namespace

int connect_qp(Id& id) {
  if (!id.base.qp) return 0;
  if (move(id, IBV_QPS_RTR) != 0 || move(id, IBV_QPS_RTS) != 0) return -1;
  return 0;
}

void qp_to_error(Id& id) {
  if (!id.base.qp) return;
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_ERR;
  ibv_modify_qp(id.base.qp, &a, IBV_QP_STATE);
}

}  // namespace rb::rdmacm

using namespace rb::rdmacm;

namespace {

// The CQs rdma_create_qp makes when the program gives none, each with a completion channel (as
// rdma_get_send_comp and rdma_get_recv_comp wait on them).
int make_cqs(Id& id, ibv_qp_init_attr& a) {
  ibv_context* ctx = id.base.verbs;
  id.own_cqs = !a.send_cq || !a.recv_cq;
  if (!a.send_cq) {
    id.base.send_cq_channel = ibv_create_comp_channel(ctx);
    id.base.send_cq = id.base.send_cq_channel ? ibv_create_cq(ctx, std::max<int>(a.cap.max_send_wr, 1), &id.base,
                                                              id.base.send_cq_channel, 0) : nullptr;
    if (!id.base.send_cq) return -1;
    a.send_cq = id.base.send_cq;
  }
  if (!a.recv_cq) {
    id.base.recv_cq_channel = ibv_create_comp_channel(ctx);
    id.base.recv_cq = id.base.recv_cq_channel ? ibv_create_cq(ctx, std::max<int>(a.cap.max_recv_wr, 1), &id.base,
                                                              id.base.recv_cq_channel, 0) : nullptr;
    if (!id.base.recv_cq) return -1;
    a.recv_cq = id.base.recv_cq;
  }
  return 0;
}

void free_cqs(Id& id) {
  if (!id.own_cqs) return;
  if (id.base.send_cq) ibv_destroy_cq(id.base.send_cq);
  if (id.base.recv_cq) ibv_destroy_cq(id.base.recv_cq);
  if (id.base.send_cq_channel) ibv_destroy_comp_channel(id.base.send_cq_channel);
  if (id.base.recv_cq_channel) ibv_destroy_comp_channel(id.base.recv_cq_channel);
  id.base.send_cq = id.base.recv_cq = nullptr;
  id.base.send_cq_channel = id.base.recv_cq_channel = nullptr;
  id.own_cqs = false;
}

}  // namespace

RDMACM_EXPORT int rdma_create_qp(rdma_cm_id* cm_id, ibv_pd* pd, ibv_qp_init_attr* attr) {
  if (!cm_id || !attr) return fail(EINVAL);
  Id& id = *of(cm_id);
  if (!id.base.verbs) {
    say("rdma_create_qp: the id has no device yet (bind or resolve an address first)");
    return fail(EINVAL);
  }
  if (!pd) pd = id.base.pd ? id.base.pd : device_pd();
  if (!pd) return -1;
  ibv_qp_init_attr a = *attr;
  if (!a.srq) a.srq = id.base.srq;
  if (make_cqs(id, a) != 0) {
    free_cqs(id);
    return -1;
  }
  ibv_qp* qp = ibv_create_qp(pd, &a);
  if (!qp) {
    int err = errno;
    free_cqs(id);
    return fail(err ? err : ENOMEM);
  }
  id.base.qp = qp;
  id.base.pd = pd;
  id.base.qp_type = a.qp_type;
  attr->cap = a.cap;
  ibv_qp_attr init{};
  init.qp_state = IBV_QPS_INIT;
  int mask = 0;
  ibv_qp_attr step = init;
  bool ud = id.base.ps == RDMA_PS_UDP;
  if (rdma_init_qp_attr(cm_id, &step, &mask) != 0 || ibv_modify_qp(qp, &step, mask) != 0 ||
      (ud && (move(id, IBV_QPS_RTR) != 0 || move(id, IBV_QPS_RTS) != 0))) {
    int err = errno;
    rdma_destroy_qp(cm_id);
    return fail(err ? err : EINVAL);
  }
  return 0;
}

RDMACM_EXPORT int rdma_create_qp_ex(rdma_cm_id* cm_id, ibv_qp_init_attr_ex* ex) {
  if (!cm_id || !ex) return fail(EINVAL);
  ibv_qp_init_attr a{};
  a.qp_context = ex->qp_context;
  a.send_cq = ex->send_cq;
  a.recv_cq = ex->recv_cq;
  a.srq = ex->srq;
  a.cap = ex->cap;
  a.qp_type = ex->qp_type;
  a.sq_sig_all = ex->sq_sig_all;
  int r = rdma_create_qp(cm_id, (ex->comp_mask & IBV_QP_INIT_ATTR_PD) ? ex->pd : nullptr, &a);
  ex->cap = a.cap;
  return r;
}

RDMACM_EXPORT void rdma_destroy_qp(rdma_cm_id* cm_id) {
  if (!cm_id) return;
  Id& id = *of(cm_id);
  if (id.base.qp) ibv_destroy_qp(id.base.qp);
  id.base.qp = nullptr;
  free_cqs(id);
}

RDMACM_EXPORT int rdma_init_qp_attr(rdma_cm_id* cm_id, ibv_qp_attr* attr, int* mask) {
  if (!cm_id || !attr || !mask) return fail(EINVAL);
  return step_attr(*of(cm_id), *attr, *mask);
}

RDMACM_EXPORT int rdma_create_srq(rdma_cm_id* cm_id, ibv_pd* pd, ibv_srq_init_attr* attr) {
  if (!cm_id || !attr) return fail(EINVAL);
  Id& id = *of(cm_id);
  if (!pd) pd = id.base.pd ? id.base.pd : device_pd();
  ibv_srq* srq = pd ? ibv_create_srq(pd, attr) : nullptr;
  if (!srq) return -1;
  id.base.srq = srq;
  id.base.pd = pd;
  return 0;
}

RDMACM_EXPORT int rdma_create_srq_ex(rdma_cm_id* cm_id, ibv_srq_init_attr_ex* ex) {
  if (!cm_id || !ex) return fail(EINVAL);
  ibv_srq_init_attr a{};
  a.srq_context = ex->srq_context;
  a.attr = ex->attr;
  return rdma_create_srq(cm_id, (ex->comp_mask & IBV_SRQ_INIT_ATTR_PD) ? ex->pd : nullptr, &a);
}

RDMACM_EXPORT void rdma_destroy_srq(rdma_cm_id* cm_id) {
  if (!cm_id || !of(cm_id)->base.srq) return;
  ibv_destroy_srq(of(cm_id)->base.srq);
  of(cm_id)->base.srq = nullptr;
}
