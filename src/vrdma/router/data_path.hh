#pragma once
// What the router path's two halves share: the one-host mover (data_path.cc) and the requests to
// and from other hosts (remote_path.cc, remote_target.cc).
#include <algorithm>
#include <chrono>
#include <cstdint>

#include <sys/epoll.h>

#include <vrdma/vrdma.h>

#include "vrdma/proto/copy.hh"
#include "vrdma/router/router.hh"

namespace rb::vrdma {

// How long an idle router loop sleeps; < 0: until woken.
int64_t idle_sleep_ns(bool deferred, bool connecting, IdleSpin::Turn turn);
// epoll_wait with a timeout in nanoseconds (a router's nap is shorter than a millisecond); < 0 waits.
int epoll_wait_ns(int epfd, epoll_event* evs, int max, int64_t timeout_ns);

// A message is at most 2^31 B, as verbs caps it (and a byte count fits a completion).
constexpr uint64_t kMaxMessageBytes = 1ull << 31;

inline bool is_atomic(uint8_t op) { return op == VRDMA_WR_ATOMIC_FETCH_AND_ADD || op == VRDMA_WR_ATOMIC_CMP_AND_SWP; }
// What a request's opcode may be: anything else in a ring (or on the link) is refused, never
// taken for something it is not.
inline bool known_opcode(uint8_t op) { return op >= VRDMA_WR_RDMA_WRITE && op <= VRDMA_WR_ATOMIC_FETCH_AND_ADD; }
// Inline bytes are a payload: SENDs and WRITEs carry them, a READ or an atomic that claims some
// has no local buffer for what it brings back (one once succeeded with its bytes lost).
inline bool carries_inline(const proto::SendEntry& e) {
  return !e.inline_len || !(e.opcode == VRDMA_WR_RDMA_READ || is_atomic(e.opcode));
}

// Bytes one QP moves in one turn of the loop: a larger request is moved over several turns, so
// a tenant's 2 GiB WRITE delays another's next request by one such copy (about 0.1 ms), not by
// the whole of it.
constexpr uint64_t kTurnBytes = 1 << 20;

// Across hosts, a WRITE, READ or pull longer than this goes on the link in pieces of it, a few
// at a time (CutRma, RemoteIn): the fabric's queue to a peer is one for every tenant.
constexpr uint64_t kRmaPiece = kTurnBytes;
constexpr int kPullsInFlight = 4;  // of one op's payload

constexpr int kBatch = 32;                 // requests of one QP per turn: QPs take turns
// What one tenant moves in one turn of a loop, over all its QPs: a tenant with a thousand QPs
// delays another's next request by one such share, not by a thousand of them (512 QPs with a
// 1 MiB WRITE each held another tenant's 64 B WRITE for 133 ms a turn).
constexpr uint64_t kTenantTurnBytes = kTurnBytes;
constexpr int kTenantTurnOps = 4 * kBatch;
// And the router's time one tenant takes in a turn: requests cost very different amounts (a 4 KiB
// datagram to another host is a MAC and a sendmsg, 20-40 us; a 64 B copy, 0.1 us), so a share
// counted in requests alone let a tenant's 128 datagrams a turn hold another tenant's next one
// 5 ms each turn, and its 300 datagrams 1-3 s (probe 21). Each tenant still moves one request
// a turn at least.
constexpr int64_t kTenantTurnNs = 100'000;
constexpr int64_t kRnrNs = 1'000'000'000;  // a SEND waits this long for a receive
constexpr int kSpinRounds = 200;  // empty turns of the router path (each yields the core) before parking

inline int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// `owner`'s region named by `key` (an lkey, or an rkey when by_rkey) holding [addr, addr+len),
// or null unless the region is of `pd` and allows `need`.
const MemoryRegionEntry* find_region(const Session& owner, uint32_t pd, uint32_t key, bool by_rkey, uint64_t addr,
                                     uint64_t len, uint32_t need);
inline uint8_t* locate(const Session& owner, uint32_t pd, uint32_t key, bool by_rkey, uint64_t addr, uint64_t len,
                       uint32_t need) {
  const MemoryRegionEntry* mr = find_region(owner, pd, key, by_rkey, addr, len, need);
  return mr ? mr->data() + (addr - mr->va) : nullptr;
}

// A request's local side: its SGEs (or inline bytes) as pieces of `owner`'s mappings, in `out`
// (kMaxSge of them); false when one is not inside a region of `pd` allowing `need`.
bool gather_request(const Session& owner, uint32_t pd, proto::SendEntry& e, uint32_t need, Piece* out, int& n,
                    uint64_t& total);

// Refills the tenant's buckets and the QP's for the time passed; true when a request may go now.
bool tokens_ready(TenantUsage& u, QpEntry& q, const Tenant& t, int64_t now);
// Charges a request that went.
void charge(TenantUsage& u, QpEntry& q, const Tenant& t, int64_t now, uint64_t bytes);

// When a QP whose peer has gone (peer_lost_ns) stops waiting for it: the owner's peer timeout
// later, that timeout read from the QP's header and held to what vrdma_set_peer_timeout allows.
inline int64_t peer_lost_until(const QpEntry& q) {
  uint64_t t = q.header()->peer_timeout_ns.load(std::memory_order_relaxed);
  return q.peer_lost_ns + int64_t(std::min<uint64_t>(t, VRDMA_MAX_PEER_TIMEOUT_NS));
}

// The ring a QP's incoming SENDs take receives from: its SRQ's, or its own.
inline SpscRing<proto::RecvEntry>& receive_ring(QpEntry& q) { return q.srq ? *q.srq->ring : q.view->recvs; }

// The peer's next receive, skipping those its owner withdrew; left in place, marked as being
// filled (QpHeader::filling) until announce(). False: none.
bool next_receive(QpEntry& q, proto::RecvEntry& out);
// Pushes an arrival into `q`'s ring (room checked), and clears the mark next_receive left.
void announce(QpEntry& q, const proto::Arrival& a);

// The answer to a request in the owner's CQE ring (signaled, or failed; a failure stops the QP
// unless it asked to stay ready).
void complete(QpEntry& q, TenantUsage& u, uint64_t wr_id, uint8_t opcode, int status, uint32_t byte_len,
              bool signaled);

}  // namespace rb::vrdma
