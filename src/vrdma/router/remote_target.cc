// QPs across hosts, the target's router: the peer router's ops for one of our QPs are carried
// out one at a time in arrival order (a SEND waits for a receive up to the RNR bound, later ops
// wait behind it, as on a wire). Every op is checked against our region table before a byte
// moves; a payload too large to ride in the op is pulled from the initiator's registration with
// READs straight into the target buffers. The answer goes back when the bytes are in place.
#include <algorithm>
#include <atomic>
#include <cstring>

#include <vrdma/vrdma.h>

#include "vrdma/proto/copy.hh"
#include "vrdma/router/data_path.hh"

namespace rb::vrdma {
namespace {

struct Dest {
  uint8_t* p = nullptr;
  uint64_t len = 0;
  void* desc = nullptr;
  const std::shared_ptr<RegionBacking>* backing = nullptr;  // pinned by the READs that fill it
};

Dest dest_in(const MemoryRegionEntry& mr, uint64_t addr, uint64_t len) {
  return {mr.data() + (addr - mr.va), len, mr.fabric() ? mr.fabric()->desc() : nullptr, &mr.backing};
}

// A SEND's destination: the receive's SGEs, each in a region of `pd` the owner may write. Not
// success: the arrival says why (a bad buffer, a message longer than the receive).
int receive_buffers(const Session& owner, uint32_t pd, const proto::RecvEntry& recv, uint64_t len, Dest* dest,
                    uint32_t& ndest, proto::Arrival& arrival) {
  uint64_t room = 0;
  for (uint32_t k = 0; k < std::min(recv.nsge, proto::kMaxSge); ++k) {
    const proto::Sge& g = recv.sge[k];
    const MemoryRegionEntry* mr = find_region(owner, pd, g.lkey, false, g.addr, g.len, proto::local_write);
    if (!mr) {
      arrival.status = uint8_t(proto::ArrivalStatus::bad_buffer);
      return VRDMA_WC_REM_ACCESS_ERR;
    }
    dest[ndest++] = dest_in(*mr, g.addr, g.len);
    room += g.len;
  }
  if (room < len) {
    arrival.status = uint8_t(proto::ArrivalStatus::too_long);
    return VRDMA_WC_REM_INV_REQ_ERR;
  }
  return VRDMA_WC_SUCCESS;
}

}  // namespace

using proto::LinkType;

void Router::link_op(const proto::LinkMessage& m) {
  auto op = m.as<proto::LinkOp>();
  if (!known_opcode(op.opcode) || op.len > kMaxMessageBytes) {  // never taken for something it is not
    link_send(m.h.from, LinkType::op_reply, m.h.req, proto::LinkOpReply{VRDMA_WC_LOC_QP_OP_ERR});
    return;
  }
  QpEntry* q = remote_peer_of(op.to_qp, m.h.from_router, op.from_qp);
  if (!q || !q->view) {  // not connected to the sender: not yet (an error now), or not any more
    auto t = qps_.find(op.to_qp);
    bool not_yet = t != qps_.end() && !t->second.peer;
    link_send(m.h.from, LinkType::op_reply, m.h.req, proto::LinkOpReply{not_yet ? VRDMA_WC_REM_OP_ERR : proto::kNoSuchQp});
    return;
  }
  // Answers to this QP's own requests that came before this op on the link complete first: the
  // owner must not see the peer's reply before the completion of what it replies to.
  retire_remote(*q, usage_.at(sessions_.at(q->owner).tenant.name));
  RemoteIn in;
  in.op = op;
  in.payload.assign(m.tail.begin(), m.tail.end());
  in.req = m.h.req;
  in.from = m.h.from;
  in.since_ns = now_ns();
  q->remote->in.push_back(std::move(in));
  serve_inbound(*q);
}

bool Router::serve_inbound(QpEntry& q) {
  RemoteQp& r = *q.remote;
  bool any = false;
  while (!r.in.empty()) {
    RemoteIn& in = r.in.front();
    if (in.reads_left < 0 && in.op.epoch && in.op.epoch == r.failed_epoch) {
      in.status = VRDMA_WC_WR_FLUSH_ERR;  // behind a failure its sender had not seen when it sent
      in.reads_left = 0;
    } else if (in.reads_left < 0) {
      r.failed_epoch = 0;  // the sender has moved on (recovered): the epoch may come round again
    }
    if (in.reads_left < 0 && !start_inbound(q, in)) break;  // waits for a receive or for room
    if (in.pulling()) pull_more(q, in);
    if (in.reads_left > 0 || in.pulling()) break;  // its payload is on its way
    finish_inbound(q, in);
    r.in.pop_front();
    any = true;
  }
  if (!r.in.empty()) deferred_ = true;
  return any;
}

// Checks the op and moves (or starts pulling) its payload; false when it must wait. After a
// true return, reads_left says how many pulls are in flight and pulling() whether more are to
// post (neither: done, status set).
bool Router::start_inbound(QpEntry& q, RemoteIn& in) {
  const Session& owner = sessions_.at(q.owner);
  const proto::LinkOp& op = in.op;
  auto done = [&](int status) {
    in.status = status;
    in.reads_left = 0;
    return true;
  };
  Dest dest[proto::kMaxSge];
  uint32_t ndest = 0;
  bool announces = op.opcode == VRDMA_WR_SEND || op.opcode == VRDMA_WR_SEND_WITH_IMM ||
                   op.opcode == VRDMA_WR_RDMA_WRITE_WITH_IMM;
  if (op.opcode == VRDMA_WR_ATOMIC_FETCH_AND_ADD || op.opcode == VRDMA_WR_ATOMIC_CMP_AND_SWP) {
    uint8_t* t = op.remote_addr % 8 ? nullptr : locate(owner, q.pd, op.rkey, true, op.remote_addr, 8, proto::remote_atomic);
    if (t && reinterpret_cast<uintptr_t>(t) % 8) t = nullptr;  // a split lock otherwise
    if (!t) return done(VRDMA_WC_REM_ACCESS_ERR);
    in.old = apply_atomic(t, op.opcode == VRDMA_WR_ATOMIC_FETCH_AND_ADD, op.compare_add, op.swap);
    in.byte_len = 8;
    return done(VRDMA_WC_SUCCESS);
  }
  if (announces && q.view->arrivals.size() >= q.view->arrivals.capacity()) return false;
  if ((op.opcode == VRDMA_WR_RDMA_WRITE || op.opcode == VRDMA_WR_RDMA_WRITE_WITH_IMM) && op.len) {
    const MemoryRegionEntry* mr = find_region(owner, q.pd, op.rkey, true, op.remote_addr, op.len, proto::remote_write);
    if (!mr) return done(VRDMA_WC_REM_ACCESS_ERR);
    dest[ndest++] = dest_in(*mr, op.remote_addr, op.len);
  }
  proto::RecvEntry recv;
  bool needs_recv = op.opcode != VRDMA_WR_RDMA_WRITE &&
                    !(op.opcode == VRDMA_WR_RDMA_WRITE_WITH_IMM && (q.flags & proto::imm_without_recv));
  if (needs_recv) {
    // An SRQ's receive is claimed now: the ops of its other QPs (and their peers' libraries, on
    // the direct path) may take the next ones before this one ends.
    if (q.srq ? !q.srq->ring->claim(recv) : !next_receive(q, recv)) {
      if (now_ns() - in.since_ns > kRnrNs) return done(VRDMA_WC_RNR_RETRY_EXC_ERR);
      deferred_ = true;
      return false;
    }
    in.uses_recv = true;
    in.arrival.recv_seq = recv.seq;
  } else {
    in.arrival.no_recv = 1;
  }
  in.arrival.imm = op.imm;
  in.arrival.byte_len = op.len;
  in.arrival.kind = uint8_t(op.opcode == VRDMA_WR_RDMA_WRITE_WITH_IMM ? proto::ArrivalKind::write_imm
                            : op.opcode == VRDMA_WR_SEND           ? proto::ArrivalKind::send
                                                                   : proto::ArrivalKind::send_imm);
  if (op.opcode == VRDMA_WR_SEND || op.opcode == VRDMA_WR_SEND_WITH_IMM) {
    int st = receive_buffers(owner, q.pd, recv, op.len, dest, ndest, in.arrival);
    if (st != VRDMA_WC_SUCCESS) return done(st);
  }
  in.byte_len = op.len;
  in.status = VRDMA_WC_SUCCESS;
  if (!op.npieces) {  // the payload came with the op
    Piece from{in.payload.data(), in.payload.size()};
    Piece to[proto::kMaxSge];
    for (uint32_t k = 0; k < ndest; ++k) to[k] = {dest[k].p, dest[k].len};
    if (!in.payload.empty()) copy_pieces(&from, 1, to, int(ndest));
    in.reads_left = 0;
    return true;
  }
  for (uint32_t k = 0; k < ndest; ++k) in.into.push_back({dest[k].p, dest[k].len, dest[k].desc, *dest[k].backing});
  in.pull_left = op.len;
  in.reads_left = 0;
  pull_more(q, in);
  return true;
}

// Pulls more of an op's payload from the initiator's pieces into its destination, one READ per
// overlap of a source piece and a destination (a piece at most), while fewer than
// kPullsInFlight are. read_failed is set when a READ could not be posted or the pieces fall short.
void Router::pull_more(QpEntry& q, RemoteIn& in) {
  if (q.peer_lost_ns && in.pulling()) {
    // The sender's QP is gone: what it sent can never complete, and its router holds the pieces
    // only a while. The pulls in flight finish; no more go (the op fails, nothing is announced).
    in.read_failed = true;
    return;
  }
  uint32_t npieces = std::min<uint32_t>(in.op.npieces, proto::kMaxSge);
  while (in.pulling() && in.reads_left < kPullsInFlight) {
    if (in.pull_src >= npieces || in.pull_dst >= in.into.size()) {
      in.read_failed = true;
      break;
    }
    const proto::LinkPiece& src = in.op.pieces[in.pull_src];
    const LocalPiece& dst = in.into[in.pull_dst];
    uint64_t n = std::min({in.pull_left, uint64_t(src.len) - in.pull_soff, dst.len - in.pull_doff, kRmaPiece});
    if (n) {
      LocalPiece part{static_cast<uint8_t*>(dst.p) + in.pull_doff, n, dst.desc, dst.pin};
      if (!fabric_->read(in.from, {&part, 1}, src.addr + in.pull_soff, src.key, uint64_t(q.num) << 32, *this)) {
        in.read_failed = true;
        break;
      }
      ++in.reads_left;
    }
    in.pull_left -= n;
    in.pull_soff += n;
    in.pull_doff += n;
    if (in.pull_soff == src.len) ++in.pull_src, in.pull_soff = 0;
    if (in.pull_doff == dst.len) ++in.pull_dst, in.pull_doff = 0;
  }
}

void Router::finish_inbound(QpEntry& q, RemoteIn& in) {
  if (in.read_failed) {  // the initiator's memory could not be read: nothing is announced
    in.status = VRDMA_WC_REM_OP_ERR;
    in.arrival.status = uint8_t(proto::ArrivalStatus::bad_buffer);
  }
  bool announces = in.op.opcode == VRDMA_WR_SEND || in.op.opcode == VRDMA_WR_SEND_WITH_IMM ||
                   in.op.opcode == VRDMA_WR_RDMA_WRITE_WITH_IMM;
  bool consumed = in.status == VRDMA_WC_SUCCESS || in.arrival.status != uint8_t(proto::ArrivalStatus::ok);
  if (announces && consumed && in.status != VRDMA_WC_RNR_RETRY_EXC_ERR) {
    proto::RecvEntry used;
    if (in.uses_recv && !q.srq) q.view->recvs.pop(used);
    announce(q, in.arrival);
    wake_recv(q);
  }
  if (in.status != VRDMA_WC_SUCCESS) q.remote->failed_epoch = in.op.epoch;
  proto::LinkOpReply rep{in.status, in.status == VRDMA_WC_SUCCESS ? in.byte_len : 0, in.old};
  link_send(in.from, LinkType::op_reply, in.req, rep);
}

}  // namespace rb::vrdma
