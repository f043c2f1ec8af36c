#pragma once
// A reliable-connected QP on the direct path: its peer is a process of the same tenant on this
// host, and this library moves the bytes itself, through mappings of the peer's regions the router
// granted after its checks (as a NIC's DMA would). Requests complete inside post_send, in order.
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <unordered_map>

#include <vrdma/vrdma.h>

#include "core/shm.hh"
#include "core/spsc_ring.hh"
#include "vrdma/lib/context.hh"
#include "vrdma/proto/qp_layout.hh"

namespace rb::vrdma {

class Cq;
class Srq;

struct QpAttr {
  uint32_t pd = 0;
  Cq* send_cq = nullptr;
  Cq* recv_cq = nullptr;
  uint32_t max_send_wr = 0, max_recv_wr = 0, max_inline = 0;
  bool sig_all = false;
  uint32_t flags = 0;  // proto::QpFlags
  Srq* srq = nullptr;  // where its receives come from (then post_recv is refused)
};

class Qp {
 public:
  static Call<std::unique_ptr<Qp>> create(Context& ctx, const QpAttr& attr);
  static Call<std::unique_ptr<Qp>> make(Context& ctx, const QpAttr& attr);
  ~Qp();
  uint32_t num() const { return num_; }
  void address(uint8_t out[VRDMA_ADDRESS_BYTES]) const;
  Call<bool> connect(const uint8_t* address, size_t len);
  // By the peer router's address (all zero: ours) and QP number.
  Call<bool> connect_at(const proto::RouterAddress& at, uint32_t peer);
  // A datagram QP: ready to send and receive with this Q_Key (again: a new Q_Key).
  Call<bool> ud_ready(uint32_t qkey);
  bool datagram() const { return attr_.flags & proto::datagram; }
  int post_send(vrdma_send_wr* wr, vrdma_send_wr** bad);
  int post_recv(vrdma_recv_wr* wr, vrdma_recv_wr** bad);
  // The receive side's completions, for the recv CQ: arrivals in order, then flushes.
  int take_arrivals(int n, vrdma_wc* out);
  // Router path: the router's answers to our requests, for the send CQ.
  int take_answers(int n, vrdma_wc* out);
  bool answers_waiting() const { return router_path_ && !my_cqes_->empty(); }
  // Takes back every receive still posted: each completes on the recv CQ with
  // VRDMA_WC_WR_FLUSH_ERR, and the peer skips them (verbs would move the QP through error).
  void withdraw_recvs();
  // Out of the error state into ready, the connection kept (verbs: modify_qp through RESET back
  // to RTS with the same peer). A peer that is gone stays gone.
  bool recover() {
    error_ = false;
    hdr_->router_error.store(0, std::memory_order_release);
    return !peer_broken();
  }
  void set_peer_timeout(uint64_t ns) { hdr_->peer_timeout_ns.store(ns, std::memory_order_relaxed); }
  bool router_path() const { return router_path_; }
  const QpAttr& attr() const { return attr_; }
  // Event path: the recv CQ asks peers to ring its doorbell after their next arrival.
  void arm() { hdr_->armed.store(1, std::memory_order_relaxed); }
  // Event path: the send CQ asks the router to ring it after its next answer (router path).
  void arm_send() { hdr_->send_armed.store(1, std::memory_order_relaxed); }
  // Something take_arrivals would report now (an arrival, or receives to flush).
  bool wake_worthy() const {
    return !my_arrivals_->empty() || ((error_ || recvs_orphaned()) && !posted_recvs_.empty()) ||
           (filled_ && hdr_->filling.load(std::memory_order_acquire) != filled_);  // a kept receive let go
  }

 private:
  Qp(Context& ctx, const QpAttr& attr, SharedMemory mem);
  struct Outcome {
    int status = VRDMA_WC_SUCCESS;
    uint32_t byte_len = 0;
  };
  Call<bool> connect_to(uint32_t peer, uint64_t router, const proto::RouterAddress& peer_at);
  Outcome execute(const vrdma_send_wr& wr);
  Outcome rdma(const vrdma_send_wr& wr, uint32_t need, bool write);
  [[gnu::noinline]] Outcome rdma_pieces(const vrdma_send_wr& wr, uint8_t* far, uint64_t total, bool write);
  Outcome atomic(const vrdma_send_wr& wr);
  Outcome deliver(const vrdma_send_wr& wr, proto::ArrivalKind kind, uint32_t len);
  Outcome await_peer();
  Outcome announce(const vrdma_send_wr& wr, uint32_t write_len);
  // The bytes the request's SGEs (or inline data) name, gathered; nullopt when an SGE is not
  // inside a region of this PD with `access`.
  bool local_ok(const vrdma_sge* sg, int n, uint32_t access, uint64_t& total);
  // One SGE of local_ok's: inline, since nearly every request has one.
  bool local_sge_ok(const vrdma_sge& sg, uint32_t access) {
    const RegionCheck* r = region_check(sg.lkey);
    if (!r || r->pd != attr_.pd || (access && !(r->access & access))) return false;
    return sg.addr >= r->va && sg.length <= r->len && sg.addr - r->va <= r->len - sg.length;
  }
  // What a local SGE is checked against: a copy of the region of the last lkey looked up, good
  // until the next deregistration (the lookup takes the context's lock: a third of a 64 B
  // WRITE's cost on the direct path).
  struct RegionCheck {
    uint32_t lkey = 0, pd = 0, access = 0;
    uint64_t va = 0, len = 0;
    uint64_t epoch = ~0ull;  // matches no regions_epoch() until filled
  };
  // The last lkey's and the last rkey's answers are asked for again by nearly every request: those
  // checks are inline, the lookups behind them (region_lookup, grant_lookup) are not.
  const RegionCheck* region_check(uint32_t lkey) {
    uint64_t epoch = ctx_.regions_epoch();  // read first: a deregistration after it shows next time
    if (last_region_.epoch == epoch && last_region_.lkey == lkey) return &last_region_;
    return region_lookup(lkey, epoch);
  }
  const RegionCheck* region_lookup(uint32_t lkey, uint64_t epoch);
  RegionCheck last_region_;
  const Grant* grant(uint32_t key) {
    uint64_t epoch = hdr_->grant_epoch.load(std::memory_order_acquire);
    if (epoch == grant_epoch_ && last_grant_ && last_grant_key_ == key) return last_grant_;
    return grant_lookup(key, epoch);
  }
  const Grant* grant_lookup(uint32_t key, uint64_t epoch);
  bool peer_broken() const { return hdr_->state.load(std::memory_order_relaxed) != 0 || ctx_.router_gone(); }
  bool recvs_orphaned() const;  // the peer is gone and this QP flushes its receives for it
  // A request's end: a completion when it failed or asked for one (most succeed unasked: inline).
  void complete(const vrdma_send_wr& wr, const Outcome& o) {
    if (o.status != VRDMA_WC_SUCCESS || attr_.sig_all || (wr.send_flags & VRDMA_SEND_SIGNALED)) report(wr, o);
  }
  void report(const vrdma_send_wr& wr, const Outcome& o);
  void fail_qp() {
    if (!(attr_.flags & proto::no_error_state)) error_ = true;
  }

  Context& ctx_;
  QpAttr attr_;
  uint32_t num_ = 0;
  SharedMemory mem_;  // ours: receive ring (we produce) and arrival ring (we consume)
  proto::QpHeader* hdr_ = nullptr;
  std::optional<SpscRing<proto::RecvEntry>> my_recvs_;
  std::optional<SpscRing<proto::Arrival>> my_arrivals_;
  std::optional<SpscRing<proto::SendEntry>> my_sends_;  // router path: we produce, the router consumes
  std::optional<SpscRing<proto::Cqe>> my_cqes_;         // router path: the router produces
  bool router_path_ = false;
  bool connected_ = false;
  bool peer_connected_back_ = false;  // the peer QP's connected_to names this one
  UniqueFd router_kick_;  // the router's eventfd: written after a post when it is parked
  int post_to_router(vrdma_send_wr* wr, vrdma_send_wr** bad);
  bool carries(const vrdma_send_wr& wr) const {  // an opcode and SGE count this QP takes
    bool known = wr.opcode >= VRDMA_WR_RDMA_WRITE && wr.opcode <= VRDMA_WR_ATOMIC_FETCH_AND_ADD;
    if (datagram()) known = wr.opcode == VRDMA_WR_SEND || wr.opcode == VRDMA_WR_SEND_WITH_IMM;
    return known && wr.num_sge >= 0 && wr.num_sge <= int(proto::kMaxSge);
  }
  std::optional<Mapping> peer_mem_;  // the peer's: we consume its receives, produce its arrivals
  proto::QpHeader* peer_hdr_ = nullptr;
  uint32_t peer_flags_ = 0;
  UniqueFd peer_doorbell_;   // the peer's recv CQ eventfd: written when it sleeps on an arrival
  void ring_peer();  // read once at connect: the peer cannot change our behaviour later
  std::optional<SpscRing<proto::RecvEntry>> peer_recvs_;
  // A peer whose receives come from its SRQ: that SRQ's ring, which every sender to its QPs (and
  // the router) claims from.
  std::optional<Mapping> peer_srq_mem_;
  std::optional<SpscRing<proto::RecvEntry>> peer_srq_;
  bool take_peer_receive(proto::RecvEntry& e);
  Call<bool> map_peer_srq(uint64_t len);
  std::optional<SpscRing<proto::Arrival>> peer_arrivals_;
  struct Posted {
    uint64_t seq, wr_id;
  };
  std::deque<Posted> posted_recvs_;  // ours, in order: a peer cannot rename our requests
  uint64_t next_recv_seq_ = 0, withdrawn_below_ = 0;
  uint64_t filled_ = 0;  // a receive kept at withdraw_recvs for the router filling it: its seq + 1
  std::optional<uint64_t> let_go_unfilled(uint64_t mark);
  vrdma_wc flushed_recv(uint64_t wr_id) const;
  std::unordered_map<uint32_t, Grant> grants_;
  uint64_t grant_epoch_ = 0;
  const Grant* last_grant_ = nullptr;  // in grants_: the last key asked for, most requests' key
  uint32_t last_grant_key_ = 0;
  bool error_ = false;
};

}  // namespace rb::vrdma
