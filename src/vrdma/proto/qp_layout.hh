#pragma once
// A QP's shared memory: a memfd its owner creates, the router maps (to mark it broken when a peer
// dies) and the connected peer maps (the direct path). Plain data at fixed offsets:
//
//   [QpHeader][receive ring: RecvEntry][arrival ring: Arrival][send ring: SendEntry][CQE ring: Cqe]
//
// The owner posts receives into the receive ring; whoever moves the peer's SENDs (the peer's
// library on the direct path, the router on the router path) takes them in order, fills the
// buffer and pushes one Arrival per receive it used. On the router path the owner also posts
// its requests into the send ring, and the router answers each in the CQE ring. Each ring has
// one producer and one consumer. Whatever a peer writes here is checked before use: it can lose or corrupt its own
// messages to us, never reach outside our regions.
#include <atomic>
#include <cstdint>

#include <vrdma/vrdma.h>

namespace rb::vrdma::proto {

constexpr uint32_t kQpMagic = 0x50515256;  // "VRQP"
// 8, as programs ask of a verbs device: UCX's RC QPs want 5 send SGEs, its UD QPs 6.
constexpr uint32_t kMaxSge = 8;
// QP numbers fit verbs' 24 bits (programs print and parse them as 6 hex digits).
constexpr uint32_t kQpNumMask = 0xffffff;

enum class QpState : uint32_t { ready = 0, error = 1 };
enum QpFlags : uint32_t {
  imm_without_recv = 1,  // a WRITE with immediate data to this QP consumes no receive
  router_path = 2,       // the owner asks for the router path (else the tenant's config decides)
  no_error_state = 4,    // a failed request completes with its status and the QP stays ready
  keep_recvs = 8,        // a peer that goes does not flush this QP's posted receives
  datagram = 16,         // UD: no peer; each SEND names its destination (see SendEntry)
};

struct alignas(64) QpHeader {
  uint32_t magic = kQpMagic;
  uint32_t recv_slots = 0;     // capacity of each ring, a power of two
  uint64_t recv_ring_off = 0;  // byte offsets of the rings
  uint64_t arrival_ring_off = 0;
  uint64_t total_len = 0;
  std::atomic<uint32_t> state{0};  // QpState: the router marks it broken when the peer dies
  uint32_t flags = 0;              // QpFlags, set by the owner before anyone else maps it
  // Bumped by the router whenever the peer deregisters a region: the owner then drops every
  // mapping of the peer's regions it holds and asks again, so a revoked key fails at once.
  std::atomic<uint64_t> grant_epoch{0};
  // Receives numbered below this were withdrawn by the owner: the peer skips them.
  std::atomic<uint64_t> withdrawn_below{0};
  // The owner sleeps on its recv CQ: the peer writes the doorbell it got at connect after its
  // next arrival, and clears this.
  std::atomic<uint32_t> armed{0};
  // Router path.
  uint32_t send_slots = 0;
  uint64_t send_ring_off = 0, cqe_ring_off = 0;
  std::atomic<uint32_t> router_parked{0};  // the router sleeps: write its kick eventfd after a post
  std::atomic<uint32_t> router_error{0};   // the router failed a request: later ones flush until the owner recovers
  // The owner sleeps on its send CQ: the router writes the send doorbell (else the recv CQ's)
  // after its next answer, and clears this.
  std::atomic<uint32_t> send_armed{0};
  // Direct path: the QP the owner connected this one to (0: none yet), stored once it has. A peer
  // takes a receive of this QP only when that is the peer itself, as an RC responder takes
  // packets from its own peer alone: a QP connected to X one-sidedly must not use up X's receives.
  std::atomic<uint32_t> connected_to{0};
  // Set by the owner (vrdma_set_peer_timeout): how long the router goes on as if a peer that has
  // gone were there, as an RC transport retries an unanswered request before it gives up.
  std::atomic<uint64_t> peer_timeout_ns{0};
  // The router fills receive `filling - 1` (0: none). It marks a receive before it looks at
  // withdrawn_below again, and withdraw_recvs stores withdrawn_below before it reads this, so
  // either the router sees the withdrawal and leaves the receive alone, or the owner sees the
  // mark and leaves that receive to its arrival: bytes never land in a receive already flushed.
  std::atomic<uint64_t> filling{0};
};
static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(std::atomic<uint32_t>::is_always_lock_free);

struct Sge {
  uint64_t addr = 0;  // the owner's virtual address
  uint32_t len = 0;
  uint32_t lkey = 0;
};

struct RecvEntry {
  uint64_t wr_id = 0;
  uint64_t seq = 0;  // the owner numbers its receives from 0
  uint32_t nsge = 0;
  uint32_t pad = 0;
  Sge sge[kMaxSge];
};

enum class ArrivalKind : uint8_t { send = 1, send_imm = 2, write_imm = 3 };
enum class ArrivalStatus : uint8_t { ok = 0, too_long = 1, bad_buffer = 2 };

struct Arrival {
  uint64_t recv_seq = 0;  // the receive it used
  uint32_t byte_len = 0;
  uint32_t imm = 0;
  uint8_t kind = 0;    // ArrivalKind
  uint8_t status = 0;  // ArrivalStatus
  uint8_t no_recv = 0; // a write-imm to a QP with imm_without_recv: it used no receive
  uint8_t pad = 0;
  uint32_t src_qp = 0; // a datagram QP's arrival: the QP that sent it (the router says, not the sender)
};

constexpr uint32_t kRouterInline = 64;  // inline payload a send-ring entry carries

// A request on the router path, as the owner posted it (vrdma_send_wr's fields). A datagram
// QP's SEND carries its destination QP in remote_addr and that QP's Q_Key in compare_add.
struct SendEntry {
  uint64_t wr_id = 0;
  uint64_t remote_addr = 0;
  uint64_t compare_add = 0, swap = 0;
  uint32_t rkey = 0, imm = 0;
  uint32_t nsge = 0;
  uint8_t opcode = 0;  // vrdma_wr_opcode
  uint8_t flags = 0;   // vrdma_send_flags
  uint16_t inline_len = 0;
  Sge sge[kMaxSge];
  uint8_t inline_data[kRouterInline];
};

// The router's answer to a request (signaled, or failed).
struct Cqe {
  uint64_t wr_id = 0;
  uint32_t byte_len = 0;
  uint8_t status = 0;  // vrdma_wc_status
  uint8_t opcode = 0;  // the request's vrdma_wr_opcode
  uint8_t pad[2] = {};
};

// The layout is an ABI between processes that may be built apart (a client library and the
// router of another release): a size that moves is a new layout, so it must be a deliberate one.
static_assert(sizeof(QpHeader) == 128 && sizeof(Sge) == 16 && sizeof(RecvEntry) == 24 + 16 * kMaxSge);
static_assert(sizeof(Arrival) == 24 && sizeof(SendEntry) == 48 + 16 * kMaxSge + kRouterInline && sizeof(Cqe) == 16);
// The public header says the same things in C: one value each, asserted here.
static_assert(kMaxSge == VRDMA_MAX_SGE);
static_assert(uint32_t(imm_without_recv) == uint32_t(VRDMA_QP_IMM_WITHOUT_RECV) &&
              uint32_t(router_path) == uint32_t(VRDMA_QP_ROUTER_PATH) &&
              uint32_t(no_error_state) == uint32_t(VRDMA_QP_NO_ERROR_STATE) &&
              uint32_t(keep_recvs) == uint32_t(VRDMA_QP_KEEP_RECVS) &&
              uint32_t(datagram) == uint32_t(VRDMA_QP_DATAGRAM));

}  // namespace rb::vrdma::proto
