// QPs across hosts, the initiator's router: each request from the owner's send ring is checked
// against our region table, then goes out as one RMA (WRITE, READ: into or out of the peer
// router's registration of the target region, at bounds its router told us once per key) or as
// an op the peer's router carries out (SEND, immediates, atomics, inline WRITE). Requests stay
// in flight up to a window and are answered in the owner's CQE ring in posting order.
#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include <vrdma/vrdma.h>

#include "vrdma/router/data_path.hh"

namespace rb::vrdma {
namespace {

constexpr size_t kWindow = 64;                // requests of one QP in flight
constexpr int64_t kOpBoundNs = 3'000'000'000;  // no answer in this long: the peer's router is gone
// Of a payload the peer's router pulls, what it has on the link at once: what such a request is
// charged on the links (charged whole, one tenant's 2 GiB SEND kept every other tenant to one
// request there until it was pulled).
constexpr uint64_t kMayStillPull = uint64_t(kPullsInFlight) * kRmaPiece;
// The part [off, off + len) of `local`'s bytes, as pieces; their number.
size_t slice(std::span<const LocalPiece> local, uint64_t off, uint64_t len, LocalPiece* out) {
  size_t n = 0;
  for (const LocalPiece& l : local) {
    if (!len) break;
    if (off >= l.len) {
      off -= l.len;
      continue;
    }
    uint64_t take = std::min<uint64_t>(l.len - off, len);
    out[n++] = {static_cast<uint8_t*>(l.p) + off, take, l.desc, l.pin};
    len -= take;
    off = 0;
  }
  return n;
}

}  // namespace

using proto::LinkType;

bool Router::pump_remote(QpEntry& q) {
  RemoteQp& r = *q.remote;
  const Session& me = sessions_.at(q.owner);
  TenantUsage& u = usage_.at(me.tenant.name);
  q.waiting = false;
  bool moved = serve_inbound(q);
  moved = retire_remote(q, u) || moved;
  int64_t now = now_ns();
  if (r.key_asked && now - r.key_asked_ns > kOpBoundNs) {  // the peer's router never answered
    r.key_asked = 0;
    break_qp(q);
  }
  if (q.peer_lost_ns) {  // the peer QP has gone: nothing more goes out to it (see peer_lost)
    if (now < peer_lost_until(q)) {
      deferred_ = true;
      q.waiting = !q.view->sends.empty();
      return moved;
    }
    if (!q.header()->state.load(std::memory_order_acquire)) break_qp(q);
  }
  // A request going in pieces goes on before any after it.
  auto cut_waiting = [&] {
    if (r.out.empty() || !r.out.back().cut || r.out.back().cut->all_posted()) return false;
    RemoteOut& o = r.out.back();
    return !post_pieces(r, o, uint64_t(q.num) << 32 | o.seq);
  };
  proto::SendEntry e;
  int n = 0;
  // A request failed and waits to be answered behind one still in flight: as on RC, the ones
  // after it flush (complete() puts the QP in error when it is answered). Sent instead, they were
  // delivered, and answered success after the failure (probe 17).
  bool stops = !(q.flags & proto::no_error_state);
  bool failing = stops && std::any_of(r.out.begin(), r.out.end(),
                                      [](const RemoteOut& o) { return o.done && o.status != VRDMA_WC_SUCCESS; });
  for (; n < kBatch && r.out.size() < kWindow && !r.key_asked && !cut_waiting() && q.view->sends.peek(e); ++n) {
    RemoteOut o;
    o.wr_id = e.wr_id;
    o.seq = r.next_seq;
    o.opcode = e.opcode;
    o.signaled = e.flags & VRDMA_SEND_SIGNALED;
    o.posted_ns = now;
    proto::QpHeader* h = q.header();
    if (h->router_error.load(std::memory_order_acquire) || failing) {
      o.done = true;
      o.status = VRDMA_WC_WR_FLUSH_ERR;
    } else if (h->state.load(std::memory_order_acquire)) {  // the first request a broken QP sees fails
      o.done = true;
      o.status = VRDMA_WC_REM_OP_ERR;
      failing = true;
    } else {
      if (!tokens_ready(u, q, me.tenant, now)) {
        if (!q.throttled_since_ns) q.throttled_since_ns = now;
        break;
      }
      if (!room_for_request(*u.on_links, *on_links_, kRmaPiece)) break;  // its share of the links is out
      o.on_link = LinkCharge(u.on_links, on_links_);
      if (!post_remote(q, me, e, o)) break;  // it waits for a key's answer
      failing = stops && o.done && o.status != VRDMA_WC_SUCCESS;
      charge(u, q, me.tenant, now, o.byte_len);
      if (o.done) o.on_link = {};
      else if (!o.cut) o.on_link.grow(o.pulls.empty() ? o.byte_len : std::min<uint64_t>(o.byte_len, kMayStillPull));
    }
    ++r.next_seq;
    q.view->sends.pop(e);
    r.out.push_back(std::move(o));
  }
  moved = retire_remote(q, u) || n > 0 || moved;
  // Answers come on the fabric's fd, but a peer that died sends none: look again soon.
  if (!r.out.empty() || !r.in.empty() || r.key_asked || !q.view->sends.empty()) deferred_ = true;
  // Requests left that this turn could not take (a key's answer, tokens, the window or the link
  // full) wait for an answer or the next look: no reason to spin. Spinning on them, both routers
  // stayed busy for every key asked and another tenant's latency went from 73 us to 1.4 ms.
  q.waiting = n < kBatch && !q.view->sends.empty();
  return moved;
}

// A WRITE or READ straight into the peer host's memory, under the key its router gave for the
// rkey: VRDMA_WC_SUCCESS once on the fabric, kWaitingForKey while the key is asked for, else
// the status the request fails with.
int Router::post_one_sided(QpEntry& q, const proto::SendEntry& e, std::span<const LocalPiece> pieces, uint64_t total,
                           RemoteOut& o, uint64_t cookie) {
  RemoteQp& r = *q.remote;
  auto k = r.keys.find(e.rkey);
  // Looked up only off the fast path: a key already known needs no question.
  auto refusals = [&]() -> Pace& { return usage_.at(sessions_.at(q.owner).tenant.name).key_refusals; };
  if (k == r.keys.end()) {
    if (refusals().available(now_ns()) < 1) return kWaitingForKey;  // its refusals are spent (TenantUsage)
    r.key_asked = e.rkey;
    r.key_asked_ns = now_ns();
    if (!link_send(r.peer_at, LinkType::key_ask, uint64_t(q.num) << 32 | e.rkey, proto::LinkKeyAsk{q.num, q.peer, e.rkey}))
      r.key_asked = 0;
    return kWaitingForKey;
  }
  const proto::LinkKey& key = k->second;
  if (key.err) {
    r.keys.erase(k);  // a refusal answers the op that asked, and is asked again next time
    refusals().take(now_ns());
    return VRDMA_WC_REM_ACCESS_ERR;
  }
  uint32_t need = e.opcode == VRDMA_WR_RDMA_READ ? proto::remote_read : proto::remote_write;
  if ((need & ~key.access) || e.remote_addr < key.va || total > key.len || e.remote_addr - key.va > key.len - total)
    return VRDMA_WC_REM_ACCESS_ERR;
  uint64_t at = key.fabric_base + (e.remote_addr - key.va);
  o.one_sided = true;
  o.rkey = e.rkey;
  if (total > kRmaPiece) {  // its pieces go from pump_remote, in turns
    o.cut = std::make_unique<CutRma>();
    CutRma& c = *o.cut;
    c.local.assign(pieces.begin(), pieces.end());
    c.at = at;
    c.key = key.fabric_key;
    c.total = total;
    c.read = e.opcode == VRDMA_WR_RDMA_READ;
    return VRDMA_WC_SUCCESS;
  }
  Status st = e.opcode == VRDMA_WR_RDMA_READ ? fabric_->read(r.peer_at, pieces, at, key.fabric_key, cookie, *this)
                                             : fabric_->write(r.peer_at, pieces, at, key.fabric_key, cookie, *this);
  return st ? VRDMA_WC_SUCCESS : VRDMA_WC_REM_OP_ERR;
}

// Posts the next pieces of a cut WRITE or READ while its tenant has less than its share on the
// links (so one piece at least when it has nothing else there); true once all are posted. A
// piece is charged as a whole one, the last included (on_rma knows not which piece completed).
bool Router::post_pieces(const RemoteQp& r, RemoteOut& o, uint64_t cookie) {
  CutRma& c = *o.cut;
  while (!c.all_posted() && room_for_piece(*o.on_link.tenant(), *on_links_, kRmaPiece)) {
    uint64_t len = std::min(kRmaPiece, c.total - c.posted);
    LocalPiece part[proto::kMaxSge];
    size_t n = slice(c.local, c.posted, len, part);
    Status st = c.read ? fabric_->read(r.peer_at, {part, n}, c.at + c.posted, c.key, cookie, *this)
                       : fabric_->write(r.peer_at, {part, n}, c.at + c.posted, c.key, cookie, *this);
    if (!st) {
      c.failed = true;
      break;
    }
    c.posted += len;
    ++c.in_flight;
    o.on_link.grow(kRmaPiece);
  }
  if (c.failed && !c.in_flight && !o.done) o.fail(VRDMA_WC_REM_OP_ERR);
  return c.all_posted();
}

// Sends `e` on its way; false when it must wait (a key's answer), else `o` is in flight or done.
bool Router::post_remote(QpEntry& q, const Session& me, proto::SendEntry& e, RemoteOut& o) {
  RemoteQp& r = *q.remote;
  auto finish = [&](int status) {  // done without the fabric: failed, or (zero-length) succeeded
    o.done = true;
    o.status = status;
    o.byte_len = 0;
    return true;
  };
  // The ring is the owner's to scribble on.
  if (!known_opcode(e.opcode) || !carries_inline(e)) return finish(VRDMA_WC_LOC_QP_OP_ERR);
  bool reads_in = e.opcode == VRDMA_WR_RDMA_READ || is_atomic(e.opcode);
  LocalPiece local[proto::kMaxSge];
  uint64_t total = 0;
  uint32_t n = 0;
  if (e.inline_len) {
    if (e.inline_len > proto::kRouterInline) return finish(VRDMA_WC_LOC_PROT_ERR);
    total = e.inline_len;
  } else {
    if (e.nsge > proto::kMaxSge) return finish(VRDMA_WC_LOC_PROT_ERR);
    for (; n < e.nsge; ++n) {
      const proto::Sge& g = e.sge[n];
      const MemoryRegionEntry* mr =
          find_region(me, q.pd, g.lkey, false, g.addr, g.len, reads_in ? uint32_t(proto::local_write) : 0u);
      if (!mr || !mr->fabric()) return finish(VRDMA_WC_LOC_PROT_ERR);
      uint64_t off = g.addr - mr->va;
      local[n] = {mr->data() + off, g.len, mr->fabric()->desc(), mr->backing};
      total += g.len;
    }
  }
  if (total > kMaxMessageBytes) return finish(VRDMA_WC_LOC_QP_OP_ERR);  // as verbs caps a message
  o.byte_len = uint32_t(total);
  uint64_t cookie = uint64_t(q.num) << 32 | o.seq;
  bool one_sided = (e.opcode == VRDMA_WR_RDMA_WRITE && !e.inline_len) || e.opcode == VRDMA_WR_RDMA_READ;
  if (one_sided && total == 0) return finish(VRDMA_WC_SUCCESS);  // nothing to move, no key to check
  if (one_sided) {
    int posted = post_one_sided(q, e, {local, n}, total, o, cookie);
    return posted == kWaitingForKey ? false : posted == VRDMA_WC_SUCCESS ? true : finish(posted);
  }
  proto::LinkOp op;
  op.from_qp = q.num;
  op.to_qp = q.peer;
  op.epoch = q.flags & proto::no_error_state ? 0 : r.epoch;
  r.epoch_sent = true;
  op.opcode = e.opcode;
  op.imm = e.imm;
  op.remote_addr = e.remote_addr;
  op.rkey = e.rkey;
  op.compare_add = e.compare_add;
  op.swap = e.swap;
  std::vector<uint8_t> payload;
  if (is_atomic(e.opcode)) {
    if (n != 1 || total != 8) return finish(VRDMA_WC_LOC_PROT_ERR);
    o.result_lkey = e.sge[0].lkey;
    o.result_addr = e.sge[0].addr;
  } else if (e.inline_len || total <= proto::kLinkInline) {
    op.len = uint32_t(total);
    if (e.inline_len) payload.assign(e.inline_data, e.inline_data + e.inline_len);
    for (uint32_t k = 0; k < n; ++k)
      payload.insert(payload.end(), static_cast<uint8_t*>(local[k].p), static_cast<uint8_t*>(local[k].p) + local[k].len);
  } else {
    if (!register_pulls({local, n}, o, op.pieces)) return finish(VRDMA_WC_LOC_PROT_ERR);
    op.len = uint32_t(total);
    op.npieces = uint8_t(n);
  }
  return link_send(r.peer_at, LinkType::op, cookie, op, payload) ? true : finish(VRDMA_WC_REM_OP_ERR);
}

// The target's router pulls a large op's payload. The region's own registration is readable by
// other routers only where the region grants remote read, so these bytes get one of their own,
// readable, held by the op until it is answered (and the region stays mapped with it).
bool Router::register_pulls(std::span<const LocalPiece> local, RemoteOut& o, proto::LinkPiece* pull) {
  for (size_t k = 0; k < local.size(); ++k) {
    auto piece = fabric_->register_region(local[k].p, local[k].len, proto::remote_read);
    if (!piece) return false;
    pull[k] = {(*piece)->base(), (*piece)->key(), uint32_t(local[k].len)};
    o.pulls.push_back(std::shared_ptr<FabricMr>(std::move(*piece)));
    o.pins.push_back(local[k].pin);
  }
  return true;
}

// The pieces of an op given up before its answer (its QP gone, or no answer in the bound) stay
// readable a while: the peer's router may still be pulling them, and a READ of a registration
// that has closed makes the fabric drop the whole link (see blank_for_peers).
// What may still be pulled stays on the tenant's link share meanwhile: a destroyed QP gave the
// whole share back while the pulls went on, and the tenant's next SEND started beside them. The
// peer's router stops pulling once it learns the QP has gone (pull_more), so what remains is at
// most the pulls it has in flight.
void Router::keep_pulls_a_while(RemoteOut& o) {
  if (o.pulls.empty()) return;
  Released keep;
  keep.until_ns = now_ns() + kReleaseGraceNs;
  keep.pulls = std::move(o.pulls);
  keep.pins = std::move(o.pins);
  keep.on_link = std::move(o.on_link);
  if (keep.on_link.bytes() > kMayStillPull) keep.on_link.shrink(keep.on_link.bytes() - kMayStillPull);
  released_.push_back(std::move(keep));
}

// Answers the requests at the front that are done, in posting order.
bool Router::retire_remote(QpEntry& q, TenantUsage& u) {
  RemoteQp& r = *q.remote;
  bool any = false;
  int64_t now = now_ns();
  while (!r.out.empty()) {
    RemoteOut& o = r.out.front();
    if (!o.done && now - o.posted_ns > kOpBoundNs) {
      keep_pulls_a_while(o);
      o.fail(VRDMA_WC_REM_OP_ERR);
      break_qp(q);
    }
    if (!o.done) break;
    if (o.peer_lost && now < peer_lost_until(q)) {  // answered "no such QP": waits out the peer timeout
      deferred_ = true;
      break;
    }
    if (q.view->cqes.size() >= q.view->cqes.capacity()) {
      deferred_ = true;
      break;
    }
    complete(q, u, o.wr_id, o.opcode, o.status, o.byte_len, o.signaled);
    if (o.status != VRDMA_WC_SUCCESS && r.epoch_sent) {  // what goes after the owner recovers
      r.epoch_sent = false;
      if (!++r.epoch) r.epoch = 1;
    }
    r.out.pop_front();
    any = true;
  }
  if (any) wake_send(q);
  return any;
}

namespace {

RemoteOut* find_out(RemoteQp& r, uint32_t seq) {
  if (r.out.empty() || seq < r.out.front().seq || seq - r.out.front().seq >= r.out.size()) return nullptr;
  return &r.out[seq - r.out.front().seq];
}

}  // namespace

void Router::on_rma(uint64_t cookie, bool ok) {
  auto it = qps_.find(uint32_t(cookie >> 32));
  if (it == qps_.end() || !it->second.remote) return;
  QpEntry& q = it->second;
  RemoteQp& r = *q.remote;
  uint32_t seq = uint32_t(cookie);
  if (seq == 0) {  // a pull of a peer's op for us
    if (!r.in.empty() && r.in.front().reads_left > 0) {
      RemoteIn& in = r.in.front();
      --in.reads_left;
      in.read_failed = in.read_failed || !ok;
    }
    serve_inbound(q);
    return;
  }
  RemoteOut* o = find_out(r, seq);
  if (!o || o->done) return;
  ok = ok && !o->key_revoked;
  if (!ok && !o->key_revoked)
    log_limited("rma failed", fmt::format("link: an RMA of QP {:#x} to {} failed: {}", q.num, proto::to_string(r.peer_at),
                                          fabric_->last_failure()));
  if (CutRma* c = o->cut.get()) {  // one piece: the request is done when its last is
    --c->in_flight;
    o->on_link.shrink(kRmaPiece);
    o->posted_ns = now_ns();  // the op bound counts from its last progress
    c->failed = c->failed || !ok;
    if (c->in_flight || !c->all_posted()) return;
    ok = !c->failed;
  }
  if (ok) o->done = true;
  else o->fail(VRDMA_WC_REM_ACCESS_ERR);
}

void Router::link_op_reply(const proto::LinkMessage& m) {
  auto it = qps_.find(uint32_t(m.h.req >> 32));
  if (it == qps_.end() || !it->second.remote) return;
  QpEntry& q = it->second;
  RemoteOut* o = find_out(*q.remote, uint32_t(m.h.req));
  if (!o || o->done) return;
  auto rep = m.as<proto::LinkOpReply>();
  o->done = true;
  if (rep.status == proto::kNoSuchQp) {  // the peer QP has gone
    o->fail(VRDMA_WC_REM_OP_ERR);
    o->peer_lost = true;
    peer_lost(q);
    return;
  }
  o->status = rep.status;
  o->byte_len = rep.status == VRDMA_WC_SUCCESS ? rep.byte_len : 0;
  if (rep.status == VRDMA_WC_SUCCESS && is_atomic(o->opcode)) {
    // Looked up again: the region may have gone while the op was away.
    uint8_t* dst = locate(sessions_.at(q.owner), q.pd, o->result_lkey, false, o->result_addr, 8, proto::local_write);
    if (dst) std::memcpy(dst, &rep.old, 8);
    else o->status = VRDMA_WC_LOC_PROT_ERR;
  }
}

}  // namespace rb::vrdma
