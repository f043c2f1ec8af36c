// The router path: the router is the NIC. It takes each request from the initiator's send ring,
// checks it against its own region table (owner, PD, bounds, access), moves the bytes between
// the mappings it holds of both regions, and answers in the initiator's CQE ring; SENDs fill the
// target's posted receives. Tenant rate limits are token buckets: a request without tokens
// stays at the head of its ring (deferred), never slept on inside the loop.
#include <sys/epoll.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>

#include <vrdma/vrdma.h>

#include "vrdma/proto/copy.hh"
#include "vrdma/router/data_path.hh"

namespace rb::vrdma {

const MemoryRegionEntry* find_region(const Session& owner, uint32_t pd, uint32_t key, bool by_rkey, uint64_t addr,
                                     uint64_t len, uint32_t need) {
  const MemoryRegionEntry* mr = nullptr;
  if (!by_rkey) {
    auto it = owner.mrs.find(key);
    if (it != owner.mrs.end()) mr = &it->second;
  } else {
    mr = owner.region_by_rkey(key);
  }
  if (!mr || mr->pd != pd || (need & ~mr->access)) return nullptr;
  if (addr < mr->va || len > mr->len || addr - mr->va > mr->len - len) return nullptr;
  return mr;
}

bool gather_request(const Session& owner, uint32_t pd, proto::SendEntry& e, uint32_t need, Piece* out, int& n,
                    uint64_t& total) {
  n = 0;
  total = 0;
  if (e.inline_len) {
    if (e.inline_len > proto::kRouterInline) return false;
    out[0] = {e.inline_data, e.inline_len};
    n = 1;
    total = e.inline_len;
    return true;
  }
  if (e.nsge > proto::kMaxSge) return false;
  for (uint32_t i = 0; i < e.nsge; ++i) {
    uint8_t* p = locate(owner, pd, e.sge[i].lkey, false, e.sge[i].addr, e.sge[i].len, need);
    if (!p) return false;
    out[n++] = {p, e.sge[i].len};
    total += e.sge[i].len;
  }
  return true;
}

namespace {

constexpr double kBurstS = 0.05;  // a bucket holds this many seconds of its rate

struct Outcome {
  int status = VRDMA_WC_SUCCESS;
  uint32_t byte_len = 0;
  bool wait = false;     // no receive yet (RNR) or no room for the answer: try again later
  bool partial = false;  // `step` more bytes moved, the rest next turn (see kTurnBytes)
  uint64_t step = 0;     // bytes moved this turn
};

// The pieces of `in` that hold its bytes [skip, skip + len); how many.
int slice(const Piece* in, int n, uint64_t skip, uint64_t len, Piece* out) {
  int k = 0;
  for (int i = 0; i < n && len; ++i) {
    if (skip >= in[i].len) {
      skip -= in[i].len;
      continue;
    }
    uint64_t take = std::min(in[i].len - skip, len);
    out[k++] = {in[i].p + skip, take};
    skip = 0;
    len -= take;
  }
  return k;
}

// Bytes [skip, skip + len) of the list `from` into the same bytes of the list `to`.
void copy_range(const Piece* from, int nfrom, const Piece* to, int nto, uint64_t skip, uint64_t len) {
  Piece f[proto::kMaxSge], t[proto::kMaxSge];
  int nf = slice(from, nfrom, skip, len, f), nt = slice(to, nto, skip, len, t);
  copy_pieces(f, nf, t, nt);
}

bool is_send(uint8_t op) { return op == VRDMA_WR_SEND || op == VRDMA_WR_SEND_WITH_IMM; }

// An atomic's target: 8 bytes on an 8-byte boundary of the mapping (an unaligned one would be a
// split lock, and undefined behaviour), or null.
uint8_t* atomic_target(uint8_t* p) { return p && reinterpret_cast<uintptr_t>(p) % 8 == 0 ? p : nullptr; }

class Mover {
 public:
  // `done`: bytes of this request moved in earlier turns; `budget`: at most this many now.
  Mover(const Session& me, QpEntry& q, const Session& them, QpEntry& peer, uint64_t done, uint64_t budget)
      : me_(me), q_(q), them_(them), peer_(peer), done_(done), budget_(budget) {}

  bool gather(proto::SendEntry& e, uint32_t need) { return gather_request(me_, q_.pd, e, need, pieces_, n_, total_); }

  Outcome run(proto::SendEntry& e) {
    // The ring is the owner's to scribble on.
    if (!known_opcode(e.opcode) || !carries_inline(e)) return {VRDMA_WC_LOC_QP_OP_ERR};
    bool reads_in = e.opcode == VRDMA_WR_RDMA_READ || is_atomic(e.opcode);
    if (!gather(e, reads_in ? uint32_t(proto::local_write) : 0u)) return {VRDMA_WC_LOC_PROT_ERR};
    if (total_ > kMaxMessageBytes) return {VRDMA_WC_LOC_QP_OP_ERR};  // as verbs caps a message
    switch (e.opcode) {
      case VRDMA_WR_RDMA_WRITE:
      case VRDMA_WR_RDMA_WRITE_WITH_IMM: return write(e);
      case VRDMA_WR_RDMA_READ: return read(e);
      case VRDMA_WR_SEND:
      case VRDMA_WR_SEND_WITH_IMM: return deliver(e, true);
      default: return atomic(e);
    }
  }

 private:
  Outcome write(proto::SendEntry& e) {
    // Zero bytes are not checked against a key, as on InfiniBand (the library's rdma()).
    uint8_t* dst = total_ ? locate(them_, peer_.pd, e.rkey, true, e.remote_addr, total_, proto::remote_write) : nullptr;
    if (total_ && !dst) return {VRDMA_WC_REM_ACCESS_ERR};
    bool imm = e.opcode == VRDMA_WR_RDMA_WRITE_WITH_IMM;
    // The notice of a write with immediate data must find room before any byte moves.
    if (imm && peer_.view->arrivals.size() >= peer_.view->arrivals.capacity()) return {0, 0, true};
    if (imm && !(peer_.flags & proto::imm_without_recv) && !next_receive()) return rnr();
    Piece to{dst, total_};
    if (Outcome o; move(pieces_, n_, &to, 1, o)) return o;
    if (!imm) return {VRDMA_WC_SUCCESS, uint32_t(total_), false, false, step_};
    return deliver(e, false);
  }

  // Moves the next part of the request, at most the turn's budget; true (and `o` says so) when
  // more is left for later turns.
  bool move(const Piece* from, int nfrom, const Piece* to, int nto, Outcome& o) {
    uint64_t left = total_ > done_ ? total_ - done_ : 0;
    step_ = std::min(left, budget_);
    copy_range(from, nfrom, to, nto, done_, step_);
    if (step_ == left) return false;
    o = {VRDMA_WC_SUCCESS, 0, false, true, step_};
    return true;
  }

  Outcome read(proto::SendEntry& e) {
    uint8_t* src = total_ ? locate(them_, peer_.pd, e.rkey, true, e.remote_addr, total_, proto::remote_read) : nullptr;
    if (total_ && !src) return {VRDMA_WC_REM_ACCESS_ERR};
    Piece from{src, total_};
    if (Outcome o; move(&from, 1, pieces_, n_, o)) return o;
    return {VRDMA_WC_SUCCESS, uint32_t(total_), false, false, step_};
  }

  Outcome atomic(proto::SendEntry& e) {
    if (n_ != 1 || total_ != 8 || e.remote_addr % 8) return {VRDMA_WC_REM_ACCESS_ERR};
    uint8_t* t = atomic_target(locate(them_, peer_.pd, e.rkey, true, e.remote_addr, 8, proto::remote_atomic));
    if (!t) return {VRDMA_WC_REM_ACCESS_ERR};
    uint64_t old = apply_atomic(t, e.opcode == VRDMA_WR_ATOMIC_FETCH_AND_ADD, e.compare_add, e.swap);
    std::memcpy(pieces_[0].p, &old, 8);
    return {VRDMA_WC_SUCCESS, 8, false, false, 8};
  }

  bool next_receive() { return vrdma::next_receive(peer_, recv_); }

  Outcome rnr() {
    int64_t now = now_ns();
    if (!peer_.rnr_since_ns) peer_.rnr_since_ns = now;
    if (now - peer_.rnr_since_ns > kRnrNs) {
      peer_.rnr_since_ns = 0;
      return {VRDMA_WC_RNR_RETRY_EXC_ERR};
    }
    return {0, 0, true};
  }

  // SEND: fills the peer's next receive; write-imm: only announces. Either pushes an arrival.
  Outcome deliver(proto::SendEntry& e, bool with_data) {
    proto::Arrival a;
    a.imm = e.imm;
    a.kind = uint8_t(!with_data                    ? proto::ArrivalKind::write_imm
                     : e.opcode == VRDMA_WR_SEND   ? proto::ArrivalKind::send
                                                   : proto::ArrivalKind::send_imm);
    a.byte_len = uint32_t(total_);
    Outcome o{VRDMA_WC_SUCCESS, uint32_t(total_), false, false, with_data ? 0 : step_};
    bool unbound = !with_data && (peer_.flags & proto::imm_without_recv);
    if (peer_.view->arrivals.size() >= peer_.view->arrivals.capacity()) return {0, 0, true};
    if (unbound) {
      a.no_recv = 1;
    } else {
      // A SEND claims its receive at its first byte and fills that one to its last, turn after
      // turn: an SRQ's receive is shared by all its QPs' senders (and their peers' libraries on
      // the direct path), and a QP's own may be withdrawn meanwhile, which its mark holds off
      // (QpHeader::filling). A QP's own receive leaves its ring at the last byte.
      bool claimed = q_.claimed_recv.has_value();
      if (claimed) recv_ = *q_.claimed_recv;
      else if (peer_.srq ? !peer_.srq->ring->claim(recv_) : !next_receive()) return rnr();
      peer_.rnr_since_ns = 0;
      a.recv_seq = recv_.seq;
      if (!claimed) q_.claimed_recv = recv_;
      if (with_data && fill(a, o)) return o;  // more of it next turn
      if (!peer_.srq) receive_ring(peer_).pop(recv_);
      q_.claimed_recv.reset();
    }
    announce(peer_, a);
    return o;
  }

  // True when part of the message is left for later turns (`o` says so).
  bool fill(proto::Arrival& a, Outcome& o) {
    Piece to[proto::kMaxSge];
    uint32_t n = std::min(recv_.nsge, proto::kMaxSge);
    uint64_t room = 0;
    for (uint32_t i = 0; i < n; ++i) {
      uint8_t* p = locate(them_, peer_.pd, recv_.sge[i].lkey, false, recv_.sge[i].addr, recv_.sge[i].len, proto::local_write);
      if (!p) {
        a.status = uint8_t(proto::ArrivalStatus::bad_buffer);
        o.status = VRDMA_WC_REM_ACCESS_ERR;
        return false;
      }
      to[i] = {p, recv_.sge[i].len};
      room += recv_.sge[i].len;
    }
    if (room < total_) {
      a.status = uint8_t(proto::ArrivalStatus::too_long);
      o.status = VRDMA_WC_REM_INV_REQ_ERR;
      return false;
    }
    if (move(pieces_, n_, to, int(n), o)) return true;
    o.step = step_;
    return false;
  }

  const Session& me_;
  QpEntry& q_;
  const Session& them_;
  QpEntry& peer_;
  Piece pieces_[proto::kMaxSge] = {};
  int n_ = 0;
  uint64_t total_ = 0;
  uint64_t done_, budget_, step_ = 0;
  proto::RecvEntry recv_;
};

}  // namespace

bool TokenBuckets::ready(uint64_t rate_ops, uint64_t rate_bytes, int64_t now) {
  if (!rate_ops && !rate_bytes) return true;
  double dt = refill_ns ? double(now - refill_ns) * 1e-9 : kBurstS;
  refill_ns = now;
  if (rate_ops) ops = std::min(ops + dt * double(rate_ops), std::max(1.0, double(rate_ops) * kBurstS));
  if (rate_bytes) bytes = std::min(bytes + dt * double(rate_bytes), double(rate_bytes) * kBurstS);
  return (!rate_ops || ops > 0) && (!rate_bytes || bytes > 0);
}

bool tokens_ready(TenantUsage& u, QpEntry& q, const Tenant& t, int64_t now) {
  if (!t.rate_limited()) return true;
  std::lock_guard lk(u.tokens_mu);  // a tenant's QPs may be on several data threads
  // Both refill whether or not the other is ready, so time is never lost to either.
  bool tenant = u.tokens.ready(t.rate_ops, t.rate_bytes, now);
  bool qp = q.tokens.ready(t.qp_rate_ops, t.qp_rate_bytes, now);
  return tenant && qp;
}

void charge(TenantUsage& u, QpEntry& q, const Tenant& t, int64_t now, uint64_t bytes) {
  if (q.throttled_since_ns) {
    u.throttled_ns.fetch_add(uint64_t(now - q.throttled_since_ns), std::memory_order_relaxed);
    q.throttled_since_ns = 0;
  }
  if (t.rate_limited()) {
    std::lock_guard lk(u.tokens_mu);
    u.tokens.take(bytes);
  }
  q.tokens.take(bytes);
  u.ops_moved.fetch_add(1, std::memory_order_relaxed);
  u.bytes_moved.fetch_add(bytes, std::memory_order_relaxed);
}

bool next_receive(QpEntry& q, proto::RecvEntry& out) {
  if (q.srq) return q.srq->ring->peek(out);  // an SRQ's receives are never withdrawn
  proto::QpHeader* h = q.header();
  uint64_t below = h->withdrawn_below.load(std::memory_order_acquire);
  // The owner numbers its receives one by one, so the withdrawn ones at the head are skipped in
  // one step (below - seq of them). The owner writes the indices, the numbers and `below`: a ring
  // whose numbers do not add up gets a few steps a turn and waits like a missing receive, so it
  // costs its owner, not the router (one slot at a time, 2^19-slot rings held it 286 ms a turn).
  constexpr int kStepsPerTurn = 4;
  for (int steps = 0; steps < kStepsPerTurn && q.view->recvs.peek(out); ++steps) {
    if (out.seq >= below) {  // marked, then looked at again (QpHeader::filling)
      h->filling.store(out.seq + 1, std::memory_order_seq_cst);
      below = h->withdrawn_below.load(std::memory_order_seq_cst);
      if (out.seq >= below) return true;
      h->filling.store(0, std::memory_order_release);
    }
    q.view->recvs.skip(below - out.seq);
  }
  return false;
}

void announce(QpEntry& q, const proto::Arrival& a) {
  q.view->arrivals.push(a);
  q.header()->filling.store(0, std::memory_order_release);  // after the push: see QpHeader::filling
}

void complete(QpEntry& q, TenantUsage& u, uint64_t wr_id, uint8_t opcode, int status, uint32_t byte_len,
              bool signaled) {
  if (status != VRDMA_WC_SUCCESS) {
    if (!(q.flags & proto::no_error_state)) q.header()->router_error.store(1, std::memory_order_release);
    u.errors.fetch_add(1, std::memory_order_relaxed);
  }
  if (status == VRDMA_WC_SUCCESS && !signaled) return;
  proto::Cqe c;
  c.wr_id = wr_id;
  c.byte_len = byte_len;
  c.status = uint8_t(status);
  c.opcode = opcode;
  q.view->cqes.push(c);
}

bool Router::pump(const std::vector<uint32_t>& list, Turns& turns, bool& deferred, bool& busy) {
  bool moved = false;
  deferred = false;
  turns.shares.clear();  // a tenant's first QP of the turn opens its share
  auto share_of = [&](TenantUsage* u) -> TurnShare& {
    for (TurnShare& s : turns.shares)
      if (s.usage == u) return s;
    return turns.shares.emplace_back(TurnShare{u, kTenantTurnBytes, kTenantTurnOps, kTenantTurnNs});
  };
  size_t n = list.size(), start = n ? turns.rotor++ % n : 0;  // not the same QP first each turn
  for (size_t i = 0; i < n; ++i) {
    auto it = qps_.find(list[(start + i) % n]);
    if (it == qps_.end()) continue;
    QpEntry& q = it->second;
    TurnShare& share = share_of(&usage_.at(sessions_.at(q.owner).tenant.name));
    if (share.spent()) {  // its tenant has had its turn: next turn (a remote QP may have answers to take)
      busy = busy || q.remote || (q.view && !q.view->sends.empty());
      continue;
    }
    int64_t began = now_ns();
    bool m;
    if (q.remote) {  // cross-host QPs are the control thread's alone (the fabric is), and it is the one here
      m = pump_remote(q);  // held to the tenant's share of the links; its time counts here
    } else {
      m = (q.flags & proto::datagram) ? pump_datagrams(q, deferred, share) : pump_qp(q, deferred, share);
    }
    share.ns -= now_ns() - began;
    moved = m || moved;
    busy = busy || (m && !q.waiting);  // a QP that moved and then waits is no reason to spin
  }
  return moved;
}

// A SEND flushed after it claimed a receive: the receiver learns of that receive as one that
// failed (it cannot go back into an SRQ's ring, whose producer is its owner).
static void give_up_claimed_receive(QpEntry& q, QpEntry& peer) {
  if (!q.claimed_recv) return;
  proto::Arrival a;
  a.recv_seq = q.claimed_recv->seq;
  a.kind = uint8_t(proto::ArrivalKind::send);
  a.status = uint8_t(proto::ArrivalStatus::bad_buffer);
  if (!peer.srq) receive_ring(peer).pop(*q.claimed_recv);
  if (peer.view->arrivals.size() < peer.view->arrivals.capacity()) announce(peer, a);
  else peer.header()->filling.store(0, std::memory_order_release);
  q.claimed_recv.reset();
}

bool Router::pump_qp(QpEntry& q, bool& deferred_, TurnShare& share) {
  q.waiting = false;
  if (!q.view) return false;
  // Every turn, from the router's records alone: the peer is connected back to this QP and of
  // its tenant. A peer that has gone (its number is never reissued) fails the QP's requests.
  QpEntry* peer_p = connected_peer(q);
  if (!peer_p) {
    if (!q.peer_gone) return false;
    bool moved = fail_lost_peer(q, deferred_);
    q.waiting = !q.view->sends.empty();
    return moved;
  }
  if (!peer_p->view) {  // the peer has not connected back yet
    q.waiting = true;
    return false;
  }
  QpEntry& peer = *peer_p;
  const Session& me = sessions_.at(q.owner);
  const Session& them = sessions_.at(peer.owner);
  TenantUsage& u = *share.usage;
  proto::QpHeader* h = q.header();
  proto::SendEntry e;
  int done = 0;
  uint64_t budget = std::min(kTurnBytes, share.bytes);
  const uint64_t given = budget;
  bool moved = false, arrived = false;
  for (; done < std::min(kBatch, share.ops) && budget && q.view->sends.peek(e); ++done) {
    if (q.view->cqes.size() >= q.view->cqes.capacity()) {  // the owner has not taken our answers
      deferred_ = q.waiting = true;
      break;
    }
    int64_t now = now_ns();
    Outcome o;
    bool flushing = h->router_error.load(std::memory_order_acquire) != 0;
    if (flushing) {
      o.status = VRDMA_WC_WR_FLUSH_ERR;
      give_up_claimed_receive(q, peer);
    } else {
      if (!tokens_ready(u, q, me.tenant, now)) {
        if (!q.throttled_since_ns) q.throttled_since_ns = now;
        deferred_ = q.waiting = true;
        break;
      }
      o = Mover(me, q, them, peer, q.head_done, budget).run(e);
      if (o.wait) {
        deferred_ = q.waiting = true;
        break;
      }
      charge(u, q, me.tenant, now, o.step);
      budget -= std::min(budget, std::max<uint64_t>(o.step, 1));
      if (o.partial) {  // the rest of it next turn: other QPs (and tenants) get theirs first
        q.head_done += o.step;
        moved = true;
        break;
      }
    }
    q.head_done = 0;
    q.view->sends.pop(e);
    complete(q, u, e.wr_id, e.opcode, o.status, o.byte_len, e.flags & VRDMA_SEND_SIGNALED);
    arrived = arrived || is_send(e.opcode) || e.opcode == VRDMA_WR_RDMA_WRITE_WITH_IMM;
  }
  share.bytes -= given - budget;
  share.ops -= done;
  if (arrived) wake_recv(peer);  // once a turn, whatever the batch
  if (done) wake_send(q);
  return done > 0 || moved;
}

// A QP whose peer has gone: its requests wait out the peer timeout (see peer_lost), then the
// first fails with VRDMA_WC_REM_OP_ERR, the QP breaks and the rest flush.
bool Router::fail_lost_peer(QpEntry& q, bool& deferred_) {
  proto::QpHeader* h = q.header();
  if (q.peer_lost_ns && now_ns() < peer_lost_until(q)) {
    deferred_ = true;
    return false;
  }
  if (!h->state.load(std::memory_order_acquire)) break_qp(q);
  TenantUsage& u = usage_.at(sessions_.at(q.owner).tenant.name);
  proto::SendEntry e;
  int done = 0;
  for (; done < kBatch && q.view->cqes.size() < q.view->cqes.capacity() && q.view->sends.pop(e); ++done) {
    bool flushing = h->router_error.load(std::memory_order_acquire) != 0;
    complete(q, u, e.wr_id, e.opcode, flushing ? VRDMA_WC_WR_FLUSH_ERR : VRDMA_WC_REM_OP_ERR, 0,
             e.flags & VRDMA_SEND_SIGNALED);
  }
  if (!q.view->sends.empty()) deferred_ = true;
  if (done) wake_send(q);
  return done > 0;
}

// Rings an owner that sleeps on its CQ (it armed the QP), as a peer's library does on the
// direct path.
void Router::wake_recv(QpEntry& q) {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (!q.header()->armed.load(std::memory_order_relaxed)) return;
  q.header()->armed.store(0, std::memory_order_relaxed);
  ring_bell(q.doorbell, q.fd_owner);
}

void Router::wake_send(QpEntry& q) {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (!q.header()->send_armed.load(std::memory_order_relaxed)) return;
  q.header()->send_armed.store(0, std::memory_order_relaxed);
  ring_bell(q.send_doorbell ? q.send_doorbell : q.doorbell, q.fd_owner);
}

bool Router::work_waiting(const std::vector<uint32_t>& list) const {
  for (uint32_t num : list) {
    auto it = qps_.find(num);
    if (it != qps_.end() && it->second.view && !it->second.waiting && !it->second.view->sends.empty()) return true;
  }
  return false;
}

void Router::set_parked(const std::vector<uint32_t>& list, bool parked) {
  for (uint32_t num : list) {
    auto it = qps_.find(num);
    if (it != qps_.end()) it->second.header()->router_parked.store(parked ? 1 : 0, std::memory_order_relaxed);
  }
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

// Deferred work (tokens, a receive, room for answers) is looked at again after a millisecond, a
// pending connect after 50; otherwise the loop sleeps until a client kicks it or a control
// message comes, or its nap ends.
int64_t idle_sleep_ns(bool deferred, bool connecting, IdleSpin::Turn turn) {
  int64_t ns = deferred ? 1'000'000 : connecting ? 50'000'000 : -1;
  return turn == IdleSpin::Turn::nap && (ns < 0 || ns > IdleSpin::kNapNs) ? IdleSpin::kNapNs : ns;
}

int epoll_wait_ns(int epfd, epoll_event* evs, int max, int64_t timeout_ns) {
  if (timeout_ns < 0) return epoll_wait(epfd, evs, max, -1);
  timespec t{time_t(timeout_ns / 1'000'000'000), long(timeout_ns % 1'000'000'000)};
  return epoll_pwait2(epfd, evs, max, &t, nullptr);
}

// A data thread (--threads N > 1): moves its shard of same-host router-path QPs, spinning while
// they are busy and parking on its own kick eventfd when they are not. It holds its mutex while
// it moves; the control thread takes every data thread's mutex before it changes anything.
void Router::run_data(DataThread& d) {
  epoll_event evs[4];
  IdleSpin spin(kSpinRounds);
  while (!stopping_.load(std::memory_order_relaxed)) {
    bool moved, deferred = false, busy = false;
    while (d.control_waiting.load(std::memory_order_acquire)) sched_yield();
    {
      std::lock_guard lk(d.mu);
      moved = pump(d.qps, d.turns_over_qps, deferred, busy);
      if (moved) d.turns.fetch_add(1, std::memory_order_relaxed);
    }
    if (busy) {
      spin.worked();
      continue;
    }
    IdleSpin::Turn turn = spin.turn();
    if (turn == IdleSpin::Turn::again) continue;
    int64_t timeout_ns;
    {
      std::lock_guard lk(d.mu);
      set_parked(d.qps, true);
      timeout_ns = work_waiting(d.qps) ? 0 : idle_sleep_ns(deferred, false, turn);
    }
    int n = epoll_wait_ns(d.epoll.get(), evs, 4, timeout_ns);
    uint64_t v;
    while (n > 0 && read(d.kick.get(), &v, sizeof v) > 0) {
    }
    std::lock_guard lk(d.mu);
    set_parked(d.qps, false);
  }
}

}  // namespace rb::vrdma
