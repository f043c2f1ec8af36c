// The ibv_wr_* calls of an ibv_qp_ex: requests built one call at a time between wr_start and
// wr_complete, posted together at wr_complete. A call vrdma does not carry out (memory windows,
// invalidation, XRC addressing, TSO, atomic write; UD addressing but on a UD QP, to this host)
// makes wr_complete fail with EOPNOTSUPP and post nothing, as a provider does for an op the QP
// was not created with.
#include <cstring>

#include "vrdma/verbs/export.hh"
#include "vrdma/verbs/objects.hh"
#include "vrdma/verbs/ops.hh"

namespace rb::verbs {
namespace {

Qp& qp_of(ibv_qp_ex* x) { return *Qp::of(&x->qp_base); }

PendingWr& begin(ibv_qp_ex* x, int opcode) {
  Qp& q = qp_of(x);
  PendingWr& p = q.pending.emplace_back();
  p.wr.wr_id = x->wr_id;
  p.wr.opcode = opcode;
  p.wr.send_flags = (x->wr_flags & IBV_SEND_SIGNALED ? unsigned(VRDMA_SEND_SIGNALED) : 0u);
  return p;
}

// The request the data calls describe: the last one begun (none: the batch is refused).
PendingWr* last(ibv_qp_ex* x) {
  Qp& q = qp_of(x);
  if (q.pending.empty()) {
    q.pending_bad = true;
    return nullptr;
  }
  return &q.pending.back();
}

void rdma(ibv_qp_ex* x, int opcode, uint32_t rkey, uint64_t addr) {
  PendingWr& p = begin(x, opcode);
  p.wr.rkey = rkey;
  p.wr.remote_addr = addr;
}

void wr_rdma_write(ibv_qp_ex* x, uint32_t rkey, uint64_t addr) { rdma(x, VRDMA_WR_RDMA_WRITE, rkey, addr); }
void wr_rdma_read(ibv_qp_ex* x, uint32_t rkey, uint64_t addr) { rdma(x, VRDMA_WR_RDMA_READ, rkey, addr); }
void wr_rdma_write_imm(ibv_qp_ex* x, uint32_t rkey, uint64_t addr, __be32 imm) {
  rdma(x, VRDMA_WR_RDMA_WRITE_WITH_IMM, rkey, addr);
  qp_of(x).pending.back().wr.imm_data = imm;
}
void wr_send(ibv_qp_ex* x) { begin(x, VRDMA_WR_SEND); }
void wr_send_imm(ibv_qp_ex* x, __be32 imm) { begin(x, VRDMA_WR_SEND_WITH_IMM).wr.imm_data = imm; }

void wr_cmp_swp(ibv_qp_ex* x, uint32_t rkey, uint64_t addr, uint64_t compare, uint64_t swap) {
  rdma(x, VRDMA_WR_ATOMIC_CMP_AND_SWP, rkey, addr);
  qp_of(x).pending.back().wr.compare_add = compare;
  qp_of(x).pending.back().wr.swap = swap;
}
void wr_fetch_add(ibv_qp_ex* x, uint32_t rkey, uint64_t addr, uint64_t add) {
  rdma(x, VRDMA_WR_ATOMIC_FETCH_AND_ADD, rkey, addr);
  qp_of(x).pending.back().wr.compare_add = add;
}

void wr_set_sge(ibv_qp_ex* x, uint32_t lkey, uint64_t addr, uint32_t length) {
  if (PendingWr* p = last(x)) {
    p->sge[0] = {addr, length, lkey};
    p->wr.num_sge = 1;
  }
}

void wr_set_sge_list(ibv_qp_ex* x, size_t n, const ibv_sge* list) {
  PendingWr* p = last(x);
  if (!p) return;
  if (n > VRDMA_MAX_SGE) {
    qp_of(x).pending_bad = true;
    return;
  }
  for (size_t i = 0; i < n; ++i) p->sge[i] = {list[i].addr, list[i].length, list[i].lkey};
  p->wr.num_sge = int(n);
}

// Inline data is copied now: the caller may reuse its buffer as soon as the call returns.
void wr_set_inline_data_list(ibv_qp_ex* x, size_t n, const ibv_data_buf* bufs) {
  PendingWr* p = last(x);
  if (!p) return;
  p->inline_bytes.clear();
  for (size_t i = 0; i < n; ++i) {
    auto* b = static_cast<const uint8_t*>(bufs[i].addr);
    p->inline_bytes.insert(p->inline_bytes.end(), b, b + bufs[i].length);
  }
  p->wr.send_flags |= VRDMA_SEND_INLINE;
  p->wr.num_sge = 1;
}

void wr_set_inline_data(ibv_qp_ex* x, void* addr, size_t length) {
  ibv_data_buf b{addr, length};
  wr_set_inline_data_list(x, 1, &b);
}

void wr_start(ibv_qp_ex* x) {
  qp_of(x).pending.clear();
  qp_of(x).pending_bad = false;
}

void wr_abort(ibv_qp_ex* x) { wr_start(x); }

int wr_complete(ibv_qp_ex* x) {
  Qp& q = qp_of(x);
  if (x->qp_base.qp_type == IBV_QPT_UC)  // READ and atomics need a response UC does not give
    for (const PendingWr& p : q.pending)
      if (p.wr.opcode == VRDMA_WR_RDMA_READ || p.wr.opcode == VRDMA_WR_ATOMIC_CMP_AND_SWP ||
          p.wr.opcode == VRDMA_WR_ATOMIC_FETCH_AND_ADD)
        q.pending_bad = true;
  if (q.pending_bad || q.pending.empty()) {
    int err = q.pending_bad ? EOPNOTSUPP : 0;
    wr_start(x);
    return err;
  }
  vrdma_send_wr* prev = nullptr;
  for (PendingWr& p : q.pending) {
    if (p.wr.send_flags & VRDMA_SEND_INLINE)
      p.sge[0] = {reinterpret_cast<uint64_t>(p.inline_bytes.data()), uint32_t(p.inline_bytes.size()), 0};
    p.wr.sg_list = p.sge;
    if (prev) prev->next = &p.wr;
    prev = &p.wr;
  }
  vrdma_send_wr* bad = nullptr;
  int err = vrdma_post_send(q.v, &q.pending.front().wr, &bad);
  wr_start(x);
  return err;
}

// What vrdma does not carry out: the batch is refused at wr_complete.
void refuse(ibv_qp_ex* x) {
  begin(x, VRDMA_WR_SEND);
  qp_of(x).pending_bad = true;
}
void wr_bind_mw(ibv_qp_ex* x, ibv_mw*, uint32_t, const ibv_mw_bind_info*) { refuse(x); }
void wr_local_inv(ibv_qp_ex* x, uint32_t) { refuse(x); }
void wr_send_inv(ibv_qp_ex* x, uint32_t) { refuse(x); }
void wr_send_tso(ibv_qp_ex* x, void*, uint16_t, uint16_t) { refuse(x); }
void wr_set_ud_addr(ibv_qp_ex* x, ibv_ah* ah, uint32_t qpn, uint32_t qkey) {
  Qp& q = qp_of(x);
  PendingWr* p = last(x);
  if (!q.ud || !p || !ud_destination(q, ah, qpn, qkey, p->wr)) q.pending_bad = true;
}
void wr_set_xrc_srqn(ibv_qp_ex* x, uint32_t) { qp_of(x).pending_bad = true; }
void wr_atomic_write(ibv_qp_ex* x, uint32_t, uint64_t, const void*) { refuse(x); }

}  // namespace

void install_wr_ops(ibv_qp_ex* x) {
  x->wr_atomic_cmp_swp = wr_cmp_swp;
  x->wr_atomic_fetch_add = wr_fetch_add;
  x->wr_bind_mw = wr_bind_mw;
  x->wr_local_inv = wr_local_inv;
  x->wr_rdma_read = wr_rdma_read;
  x->wr_rdma_write = wr_rdma_write;
  x->wr_rdma_write_imm = wr_rdma_write_imm;
  x->wr_send = wr_send;
  x->wr_send_imm = wr_send_imm;
  x->wr_send_inv = wr_send_inv;
  x->wr_send_tso = wr_send_tso;
  x->wr_set_ud_addr = wr_set_ud_addr;
  x->wr_set_xrc_srqn = wr_set_xrc_srqn;
  x->wr_set_inline_data = wr_set_inline_data;
  x->wr_set_inline_data_list = wr_set_inline_data_list;
  x->wr_set_sge = wr_set_sge;
  x->wr_set_sge_list = wr_set_sge_list;
  x->wr_start = wr_start;
  x->wr_complete = wr_complete;
  x->wr_abort = wr_abort;
  x->wr_atomic_write = wr_atomic_write;
}

}  // namespace rb::verbs
