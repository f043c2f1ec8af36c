#include "vrdma/lib/qp.hh"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <new>

#include <fmt/format.h>

#include "vrdma/proto/copy.hh"
#include "vrdma/lib/cq.hh"
#include "vrdma/proto/qp_view.hh"
#include "vrdma/lib/ah.hh"
#include "vrdma/lib/srq.hh"

namespace rb::vrdma {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kRnrTimeout = std::chrono::seconds(1);  // a SEND waits this long for a receive
constexpr uint32_t kAddressMagic = 0x44415256;       // "VRAD"

int wc_opcode(int wr_opcode) {
  switch (wr_opcode) {
    case VRDMA_WR_RDMA_WRITE:
    case VRDMA_WR_RDMA_WRITE_WITH_IMM: return VRDMA_WC_RDMA_WRITE;
    case VRDMA_WR_SEND:
    case VRDMA_WR_SEND_WITH_IMM: return VRDMA_WC_SEND;
    case VRDMA_WR_RDMA_READ: return VRDMA_WC_RDMA_READ;
    case VRDMA_WR_ATOMIC_CMP_AND_SWP: return VRDMA_WC_COMP_SWAP;
    default: return VRDMA_WC_FETCH_ADD;
  }
}

Call<std::unique_ptr<Qp>> fail(int err, std::string m) {
  Call<std::unique_ptr<Qp>> c;
  c.error = {err, std::move(m)};
  return c;
}

}  // namespace

Call<std::unique_ptr<Qp>> Qp::create(Context& ctx, const QpAttr& attr) {
  if (attr.max_recv_wr > (1u << 16) || attr.max_send_wr > (1u << 16))
    return fail(EINVAL, "max_send_wr and max_recv_wr go up to 65536");
  QpAttr a = attr;
  if (a.flags & proto::datagram) {
    if (a.srq) return fail(EINVAL, "a datagram QP takes its own receives, not an SRQ's");
    a.flags |= proto::router_path;  // the router finds each datagram's destination
  }
  return make(ctx, a);
}

Call<std::unique_ptr<Qp>> Qp::make(Context& ctx, const QpAttr& attr) {
  uint64_t slots = 1, send_slots = 1;
  // With an SRQ, the arrival ring (as big as the receive ring) must hold as many as it has.
  uint32_t recv_wr = attr.srq ? std::max(attr.max_recv_wr, attr.srq->capacity()) : attr.max_recv_wr;
  while (slots < std::max<uint32_t>(recv_wr, 1)) slots <<= 1;
  while (send_slots < std::max<uint32_t>(attr.max_send_wr, 1)) send_slots <<= 1;
  QpLayout l = qp_layout(slots, send_slots);
  auto mem = SharedMemory::create("vrdma-qp", l.total);
  if (!mem) return fail(ENOMEM, mem.status().message());
  std::unique_ptr<Qp> q(new Qp(ctx, attr, std::move(*mem)));
  q->hdr_ = new (q->mem_.data()) proto::QpHeader();
  q->hdr_->recv_slots = uint32_t(slots);
  q->hdr_->send_slots = uint32_t(send_slots);
  q->hdr_->recv_ring_off = l.recv_off;
  q->hdr_->arrival_ring_off = l.arrival_off;
  q->hdr_->send_ring_off = l.send_off;
  q->hdr_->cqe_ring_off = l.cqe_off;
  q->hdr_->total_len = l.total;
  q->hdr_->flags = attr.flags;
  uint8_t* base = q->mem_.data();
  auto r = SpscRing<proto::RecvEntry>::create({base + l.recv_off, l.arrival_off - l.recv_off}, slots);
  auto a = SpscRing<proto::Arrival>::create({base + l.arrival_off, l.send_off - l.arrival_off}, slots);
  auto sr = SpscRing<proto::SendEntry>::create({base + l.send_off, l.cqe_off - l.send_off}, send_slots);
  auto cr = SpscRing<proto::Cqe>::create({base + l.cqe_off, l.total - l.cqe_off}, send_slots);
  if (!r || !a || !sr || !cr) return fail(EIO, "cannot lay out the QP's rings");
  q->my_recvs_.emplace(*r);
  q->my_arrivals_.emplace(*a);
  q->my_sends_.emplace(*sr);
  q->my_cqes_.emplace(*cr);
  uint64_t total = l.total;
  auto num = ctx.create_qp(attr.pd, q->mem_.fd(), total, attr.recv_cq ? attr.recv_cq->event_fd() : -1,
                           attr.srq ? attr.srq->num() : 0);
  if (!num.ok()) return fail(num.error.err, num.error.message);
  q->num_ = *num.value;
  // The router answers router-path requests on the send CQ: it rings that CQ where it is another.
  if (attr.send_cq && attr.send_cq != attr.recv_cq) {
    auto bell = ctx.send_doorbell(q->num_, attr.send_cq->event_fd());
    if (!bell.ok()) return fail(bell.error.err, bell.error.message);
  }
  if (attr.recv_cq) attr.recv_cq->attach_receiver(q.get());
  if (attr.send_cq) attr.send_cq->attach_sender(q.get());
  Call<std::unique_ptr<Qp>> c;
  c.value = std::move(q);
  return c;
}

Qp::Qp(Context& ctx, const QpAttr& attr, SharedMemory mem) : ctx_(ctx), attr_(attr), mem_(std::move(mem)) {}

Qp::~Qp() {
  if (attr_.recv_cq) attr_.recv_cq->detach(this);
  if (attr_.send_cq) attr_.send_cq->detach(this);
}

// [router id 8][QP number 4][magic 4][where the router listens]: a peer on another host's router
// finds ours by it.
static_assert(16 + sizeof(proto::RouterAddress) <= VRDMA_ADDRESS_BYTES);

void Qp::address(uint8_t out[VRDMA_ADDRESS_BYTES]) const {
  std::memset(out, 0, VRDMA_ADDRESS_BYTES);
  uint64_t router = ctx_.router_id();
  std::memcpy(out, &router, 8);
  std::memcpy(out + 8, &num_, 4);
  std::memcpy(out + 12, &kAddressMagic, 4);
  std::memcpy(out + 16, &ctx_.router_at(), sizeof(proto::RouterAddress));
}

Call<bool> Qp::connect(const uint8_t* address, size_t len) {
  Call<bool> c;
  if (datagram()) {
    c.error = {EINVAL, fmt::format("QP {:#x} is a datagram QP: it connects to no peer (vrdma_ud_ready)", num_)};
    return c;
  }
  uint64_t router;
  uint32_t peer, magic;
  if (len != VRDMA_ADDRESS_BYTES) {
    c.error = {EINVAL, fmt::format("a QP address is {} bytes, not {}", int(VRDMA_ADDRESS_BYTES), len)};
    return c;
  }
  std::memcpy(&router, address, 8);
  std::memcpy(&peer, address + 8, 4);
  std::memcpy(&magic, address + 12, 4);
  proto::RouterAddress peer_at;
  std::memcpy(&peer_at, address + 16, sizeof peer_at);
  if (magic != kAddressMagic) {
    c.error = {EINVAL, "not a vrdma QP address"};
    return c;
  }
  return connect_to(peer, router, peer_at);
}

Call<bool> Qp::ud_ready(uint32_t qkey) {
  Call<bool> c;
  if (!datagram()) {
    c.error = {EINVAL, fmt::format("QP {:#x} is not a datagram QP (VRDMA_QP_DATAGRAM)", num_)};
    return c;
  }
  // The router keeps the Q_Key (a datagram's check is the router's, from its own records).
  auto got = ctx_.connect_qp(num_, qkey, ctx_.router_id(), ctx_.router_at());
  if (!got.ok()) return {std::nullopt, got.error};
  router_path_ = connected_ = true;
  if (got.value->mem) router_kick_ = std::move(got.value->mem);
  c.value = true;
  return c;
}

Call<bool> Qp::connect_at(const proto::RouterAddress& at, uint32_t peer) {
  if (datagram()) {
    Call<bool> c;
    c.error = {EINVAL, fmt::format("QP {:#x} is a datagram QP: it connects to no peer (vrdma_ud_ready)", num_)};
    return c;
  }
  // Our router knows itself by its id; any other id (0) sends the connect to the router at `at`.
  bool ours = at == proto::RouterAddress{} || at == ctx_.router_at();
  return connect_to(peer, ours ? ctx_.router_id() : 0, ours ? ctx_.router_at() : at);
}

Call<bool> Qp::connect_to(uint32_t peer, uint64_t router, const proto::RouterAddress& peer_at) {
  Call<bool> c;
  if (connected_) {
    c.error = {EISCONN, fmt::format("QP {:#x} is connected already", num_)};
    return c;
  }
  auto got = ctx_.connect_qp(num_, peer, router, peer_at);
  if (!got.ok()) return {std::nullopt, got.error};
  if (got.value->router_path) {  // the router moves our bytes: we only post and take answers
    router_path_ = connected_ = true;
    router_kick_ = std::move(got.value->mem);
    c.value = true;
    return c;
  }
  auto m = Mapping::map(got.value->mem.get(), got.value->len);
  if (!m) {
    c.error = {EIO, m.status().message()};
    return c;
  }
  // The peer laid this out: every offset is checked against what we mapped before use.
  auto v = view_qp(m->bytes());
  if (!v) {
    c.error = {EPROTO, v.status().message()};
    return c;
  }
  proto::QpHeader* h = v->header;
  peer_recvs_.emplace(v->recvs);
  peer_arrivals_.emplace(v->arrivals);
  peer_hdr_ = h;
  peer_flags_ = h->flags;
  peer_mem_.emplace(std::move(*m));
  peer_doorbell_ = std::move(got.value->doorbell);
  if (got.value->peer_srq_len) {
    if (auto s = map_peer_srq(got.value->peer_srq_len); !s.ok()) return s;
  }
  connected_ = true;
  hdr_->connected_to.store(peer, std::memory_order_release);
  c.value = true;
  return c;
}

Call<bool> Qp::map_peer_srq(uint64_t len) {
  auto m = ctx_.peer_srq(num_, len);
  if (!m.ok()) return {std::nullopt, m.error};
  // The peer laid it out: attach checks its header against what we mapped.
  auto ring = SpscRing<proto::RecvEntry>::attach(m.value->bytes());
  Call<bool> c;
  if (!ring) {
    c.error = {EPROTO, "the peer's SRQ is not a ring of receives: " + ring.status().message()};
    return c;
  }
  peer_srq_mem_.emplace(std::move(*m.value));
  peer_srq_.emplace(*ring);
  c.value = true;
  return c;
}

// The peer's next receive: claimed from its SRQ, or popped from its own ring (skipping, and
// answering false for, one its owner withdrew).
bool Qp::take_peer_receive(proto::RecvEntry& e) {
  if (peer_srq_) return peer_srq_->claim(e);
  return peer_recvs_->pop(e) && e.seq >= peer_hdr_->withdrawn_below.load(std::memory_order_acquire);
}

bool Qp::recvs_orphaned() const {
  return ctx_.router_gone() || (!(attr_.flags & proto::keep_recvs) && peer_broken());
}

const Grant* Qp::grant_lookup(uint32_t key, uint64_t epoch) {
  if (epoch != grant_epoch_) {  // the peer deregistered something: forget every mapping
    grants_.clear();
    last_grant_ = nullptr;
    grant_epoch_ = epoch;
  }
  if (last_grant_ && last_grant_key_ == key) return last_grant_;
  auto it = grants_.find(key);
  if (it == grants_.end()) {
    auto g = ctx_.grant(num_, key);
    if (!g.ok()) return nullptr;
    it = grants_.emplace(key, std::move(*g.value)).first;
  }
  last_grant_key_ = key;
  return last_grant_ = &it->second;  // a map's elements stay put while it grows
}

const Qp::RegionCheck* Qp::region_lookup(uint32_t lkey, uint64_t epoch) {
  const Region* r = ctx_.region(lkey);
  if (!r) return nullptr;
  last_region_ = {lkey, r->pd, r->access, r->va(), r->len, epoch};
  return &last_region_;
}

bool Qp::local_ok(const vrdma_sge* sg, int n, uint32_t access, uint64_t& total) {
  total = 0;
  for (int i = 0; i < n; ++i)
    if (!local_sge_ok(sg[i], access)) return false;
    else total += sg[i].length;
  return true;
}

int Qp::post_recv(vrdma_recv_wr* wr, vrdma_recv_wr** bad) {
  if (attr_.srq && wr) {  // its receives come from the SRQ: post there
    if (bad) *bad = wr;
    return EINVAL;
  }
  for (; wr; wr = wr->next) {
    uint64_t total;
    if (wr->num_sge < 0 || wr->num_sge > int(proto::kMaxSge) ||
        !local_ok(wr->sg_list, wr->num_sge, proto::local_write, total)) {
      if (bad) *bad = wr;
      return wr->num_sge > int(proto::kMaxSge) ? EINVAL : EFAULT;
    }
    if (!my_recvs_->push(recv_entry(*wr, next_recv_seq_))) {
      if (bad) *bad = wr;
      return ENOMEM;
    }
    posted_recvs_.push_back({next_recv_seq_++, wr->wr_id});
  }
  return 0;
}

int Qp::post_send(vrdma_send_wr* wr, vrdma_send_wr** bad) {
  for (; wr; wr = wr->next) {
    if (!connected_ || !carries(*wr)) {
      if (bad) *bad = wr;
      return !connected_ ? ENOTCONN : EINVAL;
    }
    if (router_path_) return post_to_router(wr, bad);
    Outcome o;
    if (error_) o.status = VRDMA_WC_WR_FLUSH_ERR;
    else if (peer_broken()) o.status = VRDMA_WC_REM_OP_ERR;
    else if (wr->opcode == VRDMA_WR_RDMA_WRITE) o = rdma(*wr, proto::remote_write, true);  // most requests
    else o = execute(*wr);
    complete(*wr, o);
  }
  return 0;
}

namespace {

// The completion of a request, as the initiator's CQ reports it. vrdma tells the initiator too
// which requests carried immediate data (verbs does not).
vrdma_wc initiator_wc(uint64_t wr_id, int status, uint8_t opcode, uint32_t byte_len, uint32_t qp_num) {
  vrdma_wc wc{};
  wc.wr_id = wr_id;
  wc.status = status;
  wc.opcode = wc_opcode(opcode);
  wc.byte_len = byte_len;
  wc.qp_num = qp_num;
  if (opcode == VRDMA_WR_RDMA_WRITE_WITH_IMM || opcode == VRDMA_WR_SEND_WITH_IMM) wc.wc_flags = VRDMA_WC_WITH_IMM;
  return wc;
}

}  // namespace

void Qp::report(const vrdma_send_wr& wr, const Outcome& o) {
  if (o.status != VRDMA_WC_SUCCESS) fail_qp();
  if (attr_.send_cq) attr_.send_cq->push(initiator_wc(wr.wr_id, o.status, wr.opcode, o.byte_len, num_));
}

Qp::Outcome Qp::execute(const vrdma_send_wr& wr) {
  switch (wr.opcode) {
    case VRDMA_WR_RDMA_WRITE: return rdma(wr, proto::remote_write, true);
    case VRDMA_WR_RDMA_WRITE_WITH_IMM: {
      Outcome o = rdma(wr, proto::remote_write, true);
      if (o.status != VRDMA_WC_SUCCESS) return o;
      return deliver(wr, proto::ArrivalKind::write_imm, o.byte_len);
    }
    case VRDMA_WR_SEND: return deliver(wr, proto::ArrivalKind::send, 0);
    case VRDMA_WR_SEND_WITH_IMM: return deliver(wr, proto::ArrivalKind::send_imm, 0);
    case VRDMA_WR_RDMA_READ: return rdma(wr, proto::remote_read, false);
    default: return atomic(wr);
  }
}

Qp::Outcome Qp::rdma(const vrdma_send_wr& wr, uint32_t need, bool write) {
  bool inline_data = write && (wr.send_flags & VRDMA_SEND_INLINE);
  uint64_t total = 0;
  if (inline_data) {
    for (int i = 0; i < wr.num_sge; ++i) total += wr.sg_list[i].length;
    if (total > attr_.max_inline) return {VRDMA_WC_LOC_LEN_ERR, 0};
  } else if (uint32_t access = write ? 0u : uint32_t(proto::local_write);
             wr.num_sge == 1 ? !local_sge_ok(wr.sg_list[0], access) : !local_ok(wr.sg_list, wr.num_sge, access, total)) {
    return {VRDMA_WC_LOC_PROT_ERR, 0};
  } else if (wr.num_sge == 1) {
    total = wr.sg_list[0].length;
  }
  // A zero-length RDMA op moves nothing, so, as on InfiniBand, its rkey and address are not
  // checked (UCX flushes a QP with a zero-length WRITE under rkey 0).
  if (total == 0) return {VRDMA_WC_SUCCESS, 0};
  const Grant* g = grant(wr.rkey);
  if (!g || !(g->access & need) || !g->covers(wr.remote_addr, total)) return {VRDMA_WC_REM_ACCESS_ERR, 0};
  if (wr.num_sge != 1) return rdma_pieces(wr, g->at(wr.remote_addr), total, write);
  auto* near = reinterpret_cast<uint8_t*>(wr.sg_list[0].addr);  // most requests: one buffer
  if (write) copy_one(g->at(wr.remote_addr), near, total);
  else copy_one(near, g->at(wr.remote_addr), total);
  return {VRDMA_WC_SUCCESS, uint32_t(total)};
}

// Out of line: its array of pieces made every request's frame (one buffer or not) dearer.
Qp::Outcome Qp::rdma_pieces(const vrdma_send_wr& wr, uint8_t* far, uint64_t total, bool write) {
  Piece local[proto::kMaxSge];
  for (int i = 0; i < wr.num_sge; ++i)
    local[i] = {reinterpret_cast<uint8_t*>(wr.sg_list[i].addr), wr.sg_list[i].length};
  Piece remote{far, total};
  if (write) copy_pieces(local, wr.num_sge, &remote, 1);
  else copy_pieces(&remote, 1, local, wr.num_sge);
  return {VRDMA_WC_SUCCESS, uint32_t(total)};
}

Qp::Outcome Qp::atomic(const vrdma_send_wr& wr) {
  uint64_t total;
  if (wr.num_sge != 1 || wr.sg_list[0].length != 8 || !local_ok(wr.sg_list, 1, proto::local_write, total))
    return {VRDMA_WC_LOC_PROT_ERR, 0};
  const Grant* g = grant(wr.rkey);
  // Aligned in the peer's address space and in our mapping of it (a region need not start on
  // 8 bytes): an unaligned target would be a split lock.
  if (!g || !(g->access & proto::remote_atomic) || wr.remote_addr % 8 || !g->covers(wr.remote_addr, 8) ||
      reinterpret_cast<uintptr_t>(g->at(wr.remote_addr)) % 8)
    return {VRDMA_WC_REM_ACCESS_ERR, 0};
  uint64_t old = apply_atomic(g->at(wr.remote_addr), wr.opcode == VRDMA_WR_ATOMIC_FETCH_AND_ADD, wr.compare_add,
                              wr.swap);
  std::memcpy(reinterpret_cast<void*>(wr.sg_list[0].addr), &old, 8);
  return {VRDMA_WC_SUCCESS, 8};
}

// Waits (up to kRnrTimeout, as for a receive) until the peer QP is connected to this one; one
// connected to another QP refuses us at once, as an RC responder drops another QP's packets and
// the requester's retries run out. Once connected back it stays so: looked at once.
Qp::Outcome Qp::await_peer() {
  if (peer_connected_back_) return {VRDMA_WC_SUCCESS, 0};
  auto deadline = Clock::now() + kRnrTimeout;
  for (int spins = 0;; ++spins) {
    uint32_t to = peer_hdr_->connected_to.load(std::memory_order_acquire);
    if (to == num_) {
      peer_connected_back_ = true;
      return {VRDMA_WC_SUCCESS, 0};
    }
    if (to != 0) return {VRDMA_WC_RETRY_EXC_ERR, 0};
    if (peer_broken()) return {VRDMA_WC_REM_OP_ERR, 0};
    if (spins % 64 == 63) {
      if (Clock::now() > deadline) return {VRDMA_WC_RETRY_EXC_ERR, 0};
      sched_yield();  // the peer may need this core to connect
    }
  }
}

// Takes the peer's next receive (waiting up to kRnrTimeout for one), fills it with the SEND's
// bytes (none for a write with immediate data) and tells the peer with an arrival.
Qp::Outcome Qp::deliver(const vrdma_send_wr& wr, proto::ArrivalKind kind, uint32_t write_len) {
  bool with_data = kind != proto::ArrivalKind::write_imm;
  uint64_t total = 0;
  if (with_data) {
    if (wr.send_flags & VRDMA_SEND_INLINE) {
      for (int i = 0; i < wr.num_sge; ++i) total += wr.sg_list[i].length;
      if (total > attr_.max_inline) return {VRDMA_WC_LOC_LEN_ERR, 0};
    } else if (!local_ok(wr.sg_list, wr.num_sge, 0, total)) {
      return {VRDMA_WC_LOC_PROT_ERR, 0};
    }
  }
  if (Outcome o = await_peer(); o.status != VRDMA_WC_SUCCESS) return o;
  proto::RecvEntry e;
  if (!with_data && (peer_flags_ & proto::imm_without_recv)) return announce(wr, write_len);
  auto deadline = Clock::now() + kRnrTimeout;
  for (int spins = 0; !take_peer_receive(e); ++spins) {
    if (peer_broken()) return {VRDMA_WC_REM_OP_ERR, 0};
    if (spins % 64 == 63) {
      if (Clock::now() > deadline) return {VRDMA_WC_RNR_RETRY_EXC_ERR, 0};
      sched_yield();  // the receiver may need this core to post
    }
  }
  proto::Arrival a;
  a.recv_seq = e.seq;
  a.kind = uint8_t(kind);
  a.imm = wr.imm_data;
  a.byte_len = with_data ? uint32_t(total) : write_len;
  Outcome o{VRDMA_WC_SUCCESS, a.byte_len};
  if (with_data) {
    uint32_t n = std::min(e.nsge, proto::kMaxSge);
    Piece to[proto::kMaxSge];
    uint64_t room = 0;
    for (uint32_t i = 0; i < n; ++i) {
      const Grant* g = grant(e.sge[i].lkey);
      if (!g || !(g->access & proto::local_write) || !g->covers(e.sge[i].addr, e.sge[i].len)) {
        a.status = uint8_t(proto::ArrivalStatus::bad_buffer);
        o.status = VRDMA_WC_REM_ACCESS_ERR;
        break;
      }
      to[i] = {g->at(e.sge[i].addr), e.sge[i].len};
      room += e.sge[i].len;
    }
    if (a.status == 0 && room < total) {
      a.status = uint8_t(proto::ArrivalStatus::too_long);
      o.status = VRDMA_WC_REM_INV_REQ_ERR;
    }
    if (a.status == 0 && total) {
      Piece from[proto::kMaxSge];
      for (int i = 0; i < wr.num_sge; ++i) from[i] = {reinterpret_cast<uint8_t*>(wr.sg_list[i].addr), wr.sg_list[i].length};
      copy_pieces(from, wr.num_sge, to, int(n));
    }
  }
  for (auto d = Clock::now() + kRnrTimeout; !peer_arrivals_->push(a);) {
    if (peer_broken() || Clock::now() > d) return {VRDMA_WC_REM_OP_ERR, 0};
    sched_yield();
  }
  ring_peer();
  return o;
}

void Qp::ring_peer() {
  std::atomic_thread_fence(std::memory_order_seq_cst);  // the push before the look at `armed` (see Cq::arm)
  if (!peer_doorbell_ || !peer_hdr_->armed.load(std::memory_order_relaxed)) return;
  peer_hdr_->armed.store(0, std::memory_order_relaxed);
  uint64_t one = 1;
  (void)!write(peer_doorbell_.get(), &one, sizeof one);
}

// A write with immediate data to a QP that lets it use no receive: only the arrival.
Qp::Outcome Qp::announce(const vrdma_send_wr& wr, uint32_t write_len) {
  proto::Arrival a;
  a.kind = uint8_t(proto::ArrivalKind::write_imm);
  a.no_recv = 1;
  a.imm = wr.imm_data;
  a.byte_len = write_len;
  for (auto d = Clock::now() + kRnrTimeout; !peer_arrivals_->push(a);) {
    if (peer_broken() || Clock::now() > d) return {VRDMA_WC_REM_OP_ERR, 0};
    sched_yield();
  }
  ring_peer();
  return {VRDMA_WC_SUCCESS, write_len};
}

// Router path: the requests go into the send ring for the router, which answers in the CQE ring.
int Qp::post_to_router(vrdma_send_wr* wr, vrdma_send_wr** bad) {
  int rc = 0;
  for (; wr; wr = wr->next) {
    if (!carries(*wr)) {
      rc = EINVAL;
      break;
    }
    if (error_ || peer_broken()) {
      complete(*wr, {error_ ? VRDMA_WC_WR_FLUSH_ERR : VRDMA_WC_REM_OP_ERR, 0});
      continue;
    }
    proto::SendEntry e;
    e.wr_id = wr->wr_id;
    e.remote_addr = datagram() ? wr->remote_qpn : wr->remote_addr;
    e.compare_add = datagram() ? wr->remote_qkey : wr->compare_add;
    e.swap = datagram() ? (wr->remote_ah ? wr->remote_ah->id : 0) : wr->swap;
    e.rkey = wr->rkey;
    e.imm = wr->imm_data;
    e.opcode = uint8_t(wr->opcode);
    e.flags = uint8_t(wr->send_flags | (attr_.sig_all ? VRDMA_SEND_SIGNALED : 0));
    // The bytes travel in the entry itself; READs and atomics have no payload to carry (the
    // flag means nothing to them, as on the direct path).
    bool payload = wr->opcode != VRDMA_WR_RDMA_READ && wr->opcode != VRDMA_WR_ATOMIC_CMP_AND_SWP &&
                   wr->opcode != VRDMA_WR_ATOMIC_FETCH_AND_ADD;
    if (payload && (wr->send_flags & VRDMA_SEND_INLINE)) {
      uint64_t len = 0;
      for (int i = 0; i < wr->num_sge; ++i) len += wr->sg_list[i].length;
      if (len > proto::kRouterInline || len > attr_.max_inline) {
        complete(*wr, {VRDMA_WC_LOC_LEN_ERR, 0});
        continue;
      }
      for (int i = 0, off = 0; i < wr->num_sge; off += int(wr->sg_list[i].length), ++i)
        std::memcpy(e.inline_data + off, reinterpret_cast<const void*>(wr->sg_list[i].addr), wr->sg_list[i].length);
      e.inline_len = uint16_t(len);
    } else {
      e.nsge = uint32_t(wr->num_sge);
      for (int i = 0; i < wr->num_sge; ++i) e.sge[i] = {wr->sg_list[i].addr, wr->sg_list[i].length, wr->sg_list[i].lkey};
    }
    if (!my_sends_->push(e)) {
      rc = ENOMEM;  // the send queue is full: the caller polls and posts again
      break;
    }
  }
  if (rc && bad) *bad = wr;
  // Dekker with the router's park: push, fence, then look at its flag.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (hdr_->router_parked.load(std::memory_order_relaxed)) {
    uint64_t one = 1;
    (void)!write(router_kick_.get(), &one, sizeof one);
  }
  return rc;
}

int Qp::take_answers(int n, vrdma_wc* out) {
  int got = 0;
  proto::Cqe c;
  while (got < n && my_cqes_->pop(c)) {
    out[got++] = initiator_wc(c.wr_id, c.status, c.opcode, c.byte_len, num_);
    if (c.status != VRDMA_WC_SUCCESS) fail_qp();
  }
  return got;
}

int Qp::take_arrivals(int n, vrdma_wc* out) {
  int got = 0;
  uint64_t mark = filled_ ? hdr_->filling.load(std::memory_order_acquire) : 0;
  proto::Arrival a;
  while (got < n && my_arrivals_->pop(a)) {
    bool unbound = a.no_recv && (attr_.flags & proto::imm_without_recv);
    std::optional<uint64_t> shared;  // the SRQ receive it used
    if (attr_.srq && !unbound && !(shared = attr_.srq->take(a.recv_seq))) continue;  // none of ours
    // An arrival for a receive taken back (and flushed) already, or for none of ours (a peer
    // that misbehaves), completes nothing.
    if (!shared && !unbound && (a.recv_seq < withdrawn_below_ || posted_recvs_.empty())) continue;
    vrdma_wc& wc = out[got++];
    wc = {};
    if (shared) {
      wc.wr_id = *shared;
    } else if (!unbound) {
      wc.wr_id = posted_recvs_.front().wr_id;
      posted_recvs_.pop_front();
    }
    wc.qp_num = num_;
    wc.byte_len = a.byte_len;
    wc.imm_data = a.imm;
    auto kind = proto::ArrivalKind(a.kind);
    wc.opcode = kind == proto::ArrivalKind::write_imm ? VRDMA_WC_RECV_RDMA_WITH_IMM : VRDMA_WC_RECV;
    if (kind != proto::ArrivalKind::send) wc.wc_flags = VRDMA_WC_WITH_IMM;
    if (datagram()) {
      wc.wc_flags |= VRDMA_WC_GRH;
      wc.src_qp = a.src_qp;
    }
    wc.status = a.status == 0                                            ? int(VRDMA_WC_SUCCESS)
                : a.status == uint8_t(proto::ArrivalStatus::too_long) ? int(VRDMA_WC_LOC_LEN_ERR)
                                                                       : int(VRDMA_WC_LOC_PROT_ERR);
    if (wc.status != VRDMA_WC_SUCCESS) fail_qp();
  }
  if (filled_ && got < n)
    if (auto wr_id = let_go_unfilled(mark)) out[got++] = flushed_recv(*wr_id);
  // A QP in error flushes the receives no arrival will ever fill.
  if ((error_ || recvs_orphaned()) && my_arrivals_->empty()) {
    while (got < n && !posted_recvs_.empty()) {
      out[got++] = flushed_recv(posted_recvs_.front().wr_id);
      posted_recvs_.pop_front();
    }
  }
  return got;
}

void Qp::withdraw_recvs() {
  // The withdrawal first, then the router's mark (QpHeader::filling): a receive it marked before
  // it could see the withdrawal is being filled, and completes by its arrival; without this it
  // was flushed here while its SEND went on to write the buffer and answer success (probe 17).
  hdr_->withdrawn_below.store(next_recv_seq_, std::memory_order_seq_cst);
  uint64_t filling = hdr_->filling.load(std::memory_order_seq_cst);
  // What has arrived completes first, as a NIC's CQ holds it ahead of the flush: a disconnect
  // that raced a stream's last bytes once flushed the receives they had filled (rsocket lost
  // its peer's answer and end of stream, 3 runs in 15).
  if (attr_.recv_cq) {
    vrdma_wc done[32];
    for (int n; (n = take_arrivals(32, done)) > 0;)
      for (int i = 0; i < n; ++i) attr_.recv_cq->push(done[i]);
  }
  bool keep = filling && !posted_recvs_.empty() && posted_recvs_.front().seq == filling - 1;
  filled_ = keep ? filling : 0;
  withdrawn_below_ = keep ? filling - 1 : next_recv_seq_;  // the kept one's arrival still counts
  for (size_t k = keep; k < posted_recvs_.size() && attr_.recv_cq; ++k)
    attr_.recv_cq->push(flushed_recv(posted_recvs_[k].wr_id));
  posted_recvs_.resize(keep);
}

// A receive kept at withdraw_recvs whose filler let it go unfilled (it saw the withdrawal after
// all), taken to be flushed. `mark` is QpHeader::filling as read before the arrivals were taken:
// an arrival pushed before the mark was cleared has been taken since.
std::optional<uint64_t> Qp::let_go_unfilled(uint64_t mark) {
  if (!filled_ || posted_recvs_.empty() || posted_recvs_.front().seq != filled_ - 1) {
    filled_ = 0;  // its arrival came
    return std::nullopt;
  }
  if (mark == filled_ || !my_arrivals_->empty()) return std::nullopt;
  filled_ = 0;
  uint64_t wr_id = posted_recvs_.front().wr_id;
  posted_recvs_.pop_front();
  return wr_id;
}

vrdma_wc Qp::flushed_recv(uint64_t wr_id) const {
  vrdma_wc wc{};
  wc.wr_id = wr_id;
  wc.status = VRDMA_WC_WR_FLUSH_ERR;
  wc.opcode = VRDMA_WC_RECV;
  wc.qp_num = num_;
  return wc;
}

}  // namespace rb::vrdma
