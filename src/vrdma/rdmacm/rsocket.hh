#pragma once
// rsocket: stream sockets over RDMA, librdmacm's r* API (rsocket, rconnect, rsend, rpoll, ...),
// carried by vrdma0 through this library's rdma_cm and the verbs layer. librspreload, preloaded
// after libvrdma-rdmacm.so, turns a program's TCP sockets into these, so iperf3 or sockperf run
// on vrdma unmodified.
//
// The stream: each side registers one region holding its receive ring and a send staging ring of
// the same size (kRing); the receive ring's address and key travel in the connect's private data.
// A SEND of n bytes is an RDMA WRITE WITH IMMEDIATE (imm: data, n) from the staging ring into the
// peer's receive ring at the same offset, so the peer learns of it from a completion, never by
// reading memory a peer may be writing. The receiver hands back room with a zero-length WRITE WITH
// IMMEDIATE (imm: credit, the bytes it has taken and the receives it has used since its last
// credit) once a quarter of either is due; so a sender never overwrites what is unread, nor sends
// an immediate with no receive posted for it. Shutdown sends an end-of-stream immediate. One CQ a
// socket, with a completion channel: a blocked call spins VRDMA_RSOCKET_SPIN_US, then sleeps on it.
#include <infiniband/verbs.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>

namespace rb::rsock {

constexpr uint32_t kRing = 1u << 20;     // each direction's ring
constexpr uint32_t kRecvDepth = 64;      // receives posted: the immediates a peer may have in flight
constexpr uint32_t kSendDepth = 128;     // send queue
constexpr uint32_t kInline = 64;         // what the verbs layer carries inline
constexpr uint32_t kSignalEvery = 16;    // one signaled send in so many

// The immediate's top two bits say what it is; a credit's low 28 carry bytes (21 bits, up to
// kRing) and receives (7 bits, up to kRecvDepth).
constexpr uint32_t kImmData = 0u << 30, kImmCredit = 1u << 30, kImmFin = 2u << 30;
constexpr uint32_t kImmKind = 3u << 30;
constexpr uint32_t kCreditBytesBits = 21;
static_assert(kRing < (1u << kCreditBytesBits) && kRecvDepth < 128);

// What each side tells the other in the connect's private data.
struct RingInfo {
  uint32_t magic = 0x72736b31;  // "rsk1"
  uint32_t ring = 0;            // bytes
  uint64_t ring_addr = 0;       // the receive ring
  uint32_t rkey = 0;
  uint32_t recv_depth = 0;
};
static_assert(sizeof(RingInfo) <= 56, "a REQ carries 56 bytes of private data");

enum class Phase { fresh, bound, listening, connected, closed };

struct Socket {
  int fd = -1;  // the id the program's preload maps to: the event channel's fd
  int domain = AF_INET;
  Phase phase = Phase::fresh;
  bool nonblocking = false;
  int flags = 0;  // F_GETFL's
  rdma_event_channel* channel = nullptr;
  rdma_cm_id* id = nullptr;
  // Connected: the region [recv ring | send ring] and its resources.
  ibv_pd* pd = nullptr;
  ibv_comp_channel* cq_channel = nullptr;
  ibv_cq* cq = nullptr;
  ibv_mr* mr = nullptr;
  uint8_t* region = nullptr;
  RingInfo peer;
  // The stream's counters: running totals.
  uint64_t sent = 0, peer_taken = 0;            // bytes sent; bytes the peer has taken
  uint64_t messages_sent = 0, peer_messages = 0;  // immediates sent; the peer's receives used up
  uint64_t arrived = 0, taken = 0;              // bytes arrived; bytes the program has read
  uint64_t messages_arrived = 0, credited = 0, messages_credited = 0;
  uint32_t unsignaled = 0;  // sends since the last signaled one
  uint32_t sends_out = 0;   // sends posted whose completion has not been seen (signaled ones cover those before)
  bool peer_fin = false, fin_sent = false, broken = false, disconnected = false;
  int error = 0;  // what a failed connect or a broken stream reports
  bool cq_armed = false;
  // Options kept for getsockopt's sake.
  int nodelay = 0, reuseaddr = 0, keepalive = 0;
  int sndbuf = int(kRing), rcvbuf = int(kRing);
  int owner = 0;  // F_SETOWN's

  uint8_t* recv_ring() const { return region; }
  uint8_t* send_ring() const { return region + kRing; }
};
constexpr size_t kRegionBytes = 2 * size_t(kRing);

// The process's sockets, by fd. Null for an fd that is not one.
Socket* find(int fd);
Socket* add(Socket* s);  // takes ownership
void remove(int fd);     // destroys it

// Setup (rsocket_setup.cc): the connection's resources once the cm id has a QP's worth of verbs.
int make_resources(Socket& s);
void free_resources(Socket& s);
// Waits for the next cm event on the socket's channel (up to the cm's own bounds): it must be
// `want`; fills `*event` (acked by the caller) or fails with errno.
int wait_event(Socket& s, rdma_cm_event_type want, rdma_cm_event** event);

// The stream (rsocket_stream.cc).
void post_receives(Socket& s, uint32_t n);
// Reaps completions: arrivals, credits, end of stream, send completions; false: the QP broke.
bool progress(Socket& s);
ssize_t stream_send(Socket& s, const iovec* iov, int n, int flags);
ssize_t stream_recv(Socket& s, const iovec* iov, int n, int flags);
int send_fin(Socket& s);
short ready_events(Socket& s, short wanted);  // POLLIN/POLLOUT/POLLHUP/POLLERR now
// Blocks until `s` may have changed (a completion or a cm event) or `timeout_ms` passes.
int wait_socket(Socket& s, int timeout_ms);
// Arms the CQ's notification; the fds a blocked poll() waits on for `s`.
int arm(Socket& s);
void disarm(Socket& s);
void read_cm_events(Socket& s);  // the DISCONNECTED (peer closed or died) its channel holds

// What a blocked call spins for before it sleeps (VRDMA_RSOCKET_SPIN_US; default 20 us).
int64_t spin_ns();
int64_t now_ns();

}  // namespace rb::rsock
