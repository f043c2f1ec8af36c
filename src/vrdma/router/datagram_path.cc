// The datagram path: a datagram (UD) QP's SENDs, each to the QP it names on this host, moved by
// the control thread (any datagram QP may fill any other's receives). UD promises no more than
// this: a datagram arrives whole, after a routing header, or not at all. One that cannot arrive
// (no such datagram QP of this tenant, another Q_Key, no receive posted, no room for the notice)
// is dropped and its sender's completion says success, as a network would: so a sender learns
// nothing of QPs it may not reach.
#include <algorithm>

#include <vrdma/vrdma.h>

#include "vrdma/proto/copy.hh"
#include "vrdma/proto/gid.hh"
#include "vrdma/router/data_path.hh"

namespace rb::vrdma {
namespace {

// The routing header, then the message, into `to`'s next receive; false: dropped.
bool deliver_datagram(const Session& them, QpEntry& to, const Piece* msg, int n, uint64_t len,
                      const proto::SendEntry& e, uint32_t src_qp, const proto::Gid& gid) {
  proto::RecvEntry r;
  if (to.view->arrivals.size() >= to.view->arrivals.capacity() || !next_receive(to, r)) return false;
  proto::Arrival a;
  a.recv_seq = r.seq;
  a.kind = uint8_t(e.opcode == VRDMA_WR_SEND ? proto::ArrivalKind::send : proto::ArrivalKind::send_imm);
  a.imm = e.imm;
  a.src_qp = src_qp;
  a.byte_len = uint32_t(len + proto::kGrhBytes);
  Piece dst[proto::kMaxSge];
  uint32_t nd = std::min(r.nsge, proto::kMaxSge);
  uint64_t room = 0;
  for (uint32_t i = 0; i < nd && !a.status; ++i) {
    uint8_t* p = locate(them, to.pd, r.sge[i].lkey, false, r.sge[i].addr, r.sge[i].len, proto::local_write);
    if (!p) a.status = uint8_t(proto::ArrivalStatus::bad_buffer);
    dst[i] = {p, r.sge[i].len};
    room += r.sge[i].len;
  }
  if (!a.status && room < a.byte_len) a.status = uint8_t(proto::ArrivalStatus::too_long);
  if (!a.status) {
    uint8_t grh[proto::kGrhBytes];
    proto::write_grh(grh, gid, gid, uint32_t(len));  // sender and receiver share this router's GID
    Piece src[proto::kMaxSge + 1];
    src[0] = {grh, sizeof grh};
    std::copy(msg, msg + n, src + 1);
    copy_pieces(src, n + 1, dst, int(nd));
  }
  receive_ring(to).pop(r);
  to.view->arrivals.push(a);
  return true;
}

}  // namespace

QpEntry* Router::datagram_target(const Session& from, uint32_t num, uint32_t qkey) {
  auto it = qps_.find(num);
  if (it == qps_.end()) return nullptr;
  QpEntry& t = it->second;
  if (!(t.flags & proto::datagram) || !t.view || t.srq || t.qkey != qkey) return nullptr;
  auto owner = sessions_.find(t.owner);
  if (owner == sessions_.end() || owner->second.tenant.name != from.tenant.name) return nullptr;
  return &t;
}

bool Router::pump_datagrams(QpEntry& q, bool& deferred) {
  q.waiting = false;
  if (!q.view) return false;
  const Session& me = sessions_.at(q.owner);
  TenantUsage& u = usage_.at(me.tenant.name);
  const proto::Gid gid = proto::router_gid(opts_.listen.ip, opts_.listen.port);
  proto::SendEntry e;
  int done = 0;
  for (; done < kBatch && q.view->sends.peek(e); ++done) {
    if (q.view->cqes.size() >= q.view->cqes.capacity()) {  // the owner has not taken our answers
      deferred = q.waiting = true;
      break;
    }
    int64_t now = now_ns();
    int status = VRDMA_WC_SUCCESS;
    uint32_t len = 0;
    if (q.header()->router_error.load(std::memory_order_acquire)) {
      status = VRDMA_WC_WR_FLUSH_ERR;
    } else {
      if (!tokens_ready(u, q, me.tenant, now)) {
        if (!q.throttled_since_ns) q.throttled_since_ns = now;
        deferred = q.waiting = true;
        break;
      }
      Piece msg[proto::kMaxSge];
      int n = 0;
      uint64_t total = 0;
      if (e.opcode != VRDMA_WR_SEND && e.opcode != VRDMA_WR_SEND_WITH_IMM) status = VRDMA_WC_LOC_QP_OP_ERR;
      else if (!gather_request(me, q.pd, e, 0, msg, n, total)) status = VRDMA_WC_LOC_PROT_ERR;
      else if (total > VRDMA_UD_MTU) status = VRDMA_WC_LOC_LEN_ERR;
      else {
        len = uint32_t(total);
        QpEntry* to = e.remote_addr <= proto::kQpNumMask
                          ? datagram_target(me, uint32_t(e.remote_addr), uint32_t(e.compare_add))
                          : nullptr;
        if (to && deliver_datagram(sessions_.at(to->owner), *to, msg, n, total, e, q.num, gid)) wake_recv(*to);
      }
      charge(u, q, me.tenant, now, len);
    }
    q.view->sends.pop(e);
    complete(q, u, e.wr_id, e.opcode, status, len, e.flags & VRDMA_SEND_SIGNALED);
  }
  if (done) wake_send(q);
  return done > 0;
}

}  // namespace rb::vrdma
