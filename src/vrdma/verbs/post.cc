// The hot path: post_send, post_recv and post_srq_recv, reached through context->ops. A receive request has
// libvrdma's layout exactly, so it passes through; a send request is translated in batches on
// the stack.
#include <cstddef>

#include "vrdma/verbs/export.hh"
#include "vrdma/verbs/objects.hh"
#include "vrdma/verbs/ops.hh"

namespace rb::verbs {
namespace {

static_assert(sizeof(ibv_sge) == sizeof(vrdma_sge) && offsetof(ibv_sge, addr) == offsetof(vrdma_sge, addr) &&
              offsetof(ibv_sge, length) == offsetof(vrdma_sge, length) && offsetof(ibv_sge, lkey) == offsetof(vrdma_sge, lkey));
static_assert(sizeof(ibv_recv_wr) == sizeof(vrdma_recv_wr) && offsetof(ibv_recv_wr, next) == offsetof(vrdma_recv_wr, next) &&
              offsetof(ibv_recv_wr, sg_list) == offsetof(vrdma_recv_wr, sg_list) &&
              offsetof(ibv_recv_wr, num_sge) == offsetof(vrdma_recv_wr, num_sge));
static_assert(int(IBV_WR_RDMA_WRITE) == int(VRDMA_WR_RDMA_WRITE) && int(IBV_WR_RDMA_WRITE_WITH_IMM) == int(VRDMA_WR_RDMA_WRITE_WITH_IMM) &&
              int(IBV_WR_SEND) == int(VRDMA_WR_SEND) && int(IBV_WR_SEND_WITH_IMM) == int(VRDMA_WR_SEND_WITH_IMM) &&
              int(IBV_WR_RDMA_READ) == int(VRDMA_WR_RDMA_READ) && int(IBV_WR_ATOMIC_CMP_AND_SWP) == int(VRDMA_WR_ATOMIC_CMP_AND_SWP) &&
              int(IBV_WR_ATOMIC_FETCH_AND_ADD) == int(VRDMA_WR_ATOMIC_FETCH_AND_ADD));

// False for what vrdma does not carry out (memory windows, invalidation, TSO, atomic write).
// What UC QPs do not carry (on a NIC as here): READ and atomics need a response.
bool needs_response(int opcode) {
  return opcode == IBV_WR_RDMA_READ || opcode == IBV_WR_ATOMIC_CMP_AND_SWP || opcode == IBV_WR_ATOMIC_FETCH_AND_ADD;
}

bool translate(const Qp& q, const ibv_send_wr& w, vrdma_send_wr& v) {
  bool uc = q.ex.qp_base.qp_type == IBV_QPT_UC;
  if (w.opcode > IBV_WR_ATOMIC_FETCH_AND_ADD || (uc && needs_response(w.opcode))) return false;
  if (q.ud && (w.opcode != IBV_WR_SEND && w.opcode != IBV_WR_SEND_WITH_IMM)) return false;
  if (q.ud && !ud_destination(q, w.wr.ud.ah, w.wr.ud.remote_qpn, w.wr.ud.remote_qkey, v)) return false;
  v.wr_id = w.wr_id;
  v.next = nullptr;
  v.sg_list = reinterpret_cast<vrdma_sge*>(w.sg_list);
  v.num_sge = w.num_sge;
  v.opcode = int(w.opcode);
  v.send_flags = (w.send_flags & IBV_SEND_SIGNALED ? unsigned(VRDMA_SEND_SIGNALED) : 0u) |
                 (w.send_flags & IBV_SEND_INLINE ? unsigned(VRDMA_SEND_INLINE) : 0u);
  v.imm_data = w.imm_data;
  if (w.opcode == IBV_WR_ATOMIC_CMP_AND_SWP || w.opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
    v.remote_addr = w.wr.atomic.remote_addr;
    v.rkey = w.wr.atomic.rkey;
    v.compare_add = w.wr.atomic.compare_add;
    v.swap = w.wr.atomic.swap;
  } else if (!q.ud) {
    v.remote_addr = w.wr.rdma.remote_addr;
    v.rkey = w.wr.rdma.rkey;
  }
  return true;
}

bool can_send(const ibv_qp* qp) { return qp->state == IBV_QPS_RTS || qp->state == IBV_QPS_RTR; }

}  // namespace

int post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
  Qp* q = Qp::of(qp);
  if (!can_send(qp)) {
    *bad = wr;
    return EINVAL;
  }
  constexpr int kBatch = 16;
  vrdma_send_wr batch[kBatch];
  ibv_send_wr* from[kBatch];
  while (wr) {
    int n = 0;
    ibv_send_wr* refused = nullptr;
    for (; wr && n < kBatch; wr = wr->next, ++n) {
      if (!translate(*q, *wr, batch[n])) {
        refused = wr;
        break;  // post what came before it, then report it
      }
      from[n] = wr;
      if (n) batch[n - 1].next = &batch[n];
    }
    vrdma_send_wr* vbad = nullptr;
    if (n) {
      if (int err = vrdma_post_send(q->v, batch, &vbad)) {
        *bad = from[vbad ? vbad - batch : 0];
        return err;
      }
    }
    if (refused) {
      *bad = refused;
      return EINVAL;
    }
  }
  return 0;
}

int post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  if (qp->state == IBV_QPS_RESET) {
    *bad = wr;
    return EINVAL;
  }
  return vrdma_post_recv(Qp::of(qp)->v, reinterpret_cast<vrdma_recv_wr*>(wr), reinterpret_cast<vrdma_recv_wr**>(bad));
}

int post_srq_recv(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  return vrdma_post_srq_recv(ours<Srq>(srq)->v, reinterpret_cast<vrdma_recv_wr*>(wr), reinterpret_cast<vrdma_recv_wr**>(bad));
}

}  // namespace rb::verbs
