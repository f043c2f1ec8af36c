#pragma once
// librdmacm's objects as vrdma keeps them. An event channel's fd is an epoll set: of an eventfd
// that counts the events queued for the channel, and of the TCP sockets of its ids (listening, or
// carrying a connection's CM messages). So the fd is readable when rdma_get_cm_event has something
// to give or to read, as the kernel's rdma_cm channel is, and needs no thread of its own: the
// messages are read by whoever calls rdma_get_cm_event.
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <array>
#include <deque>
#include <mutex>
#include <optional>
#include <set>

#include "core/unique_fd.hh"
#include "vrdma/rdmacm/wire.hh"

#define RDMACM_EXPORT extern "C" __attribute__((visibility("default")))

namespace rb::rdmacm {

// A setup failure says why on stderr, as the verbs layer does.
template <typename... Args>
void say(const char* fmt, Args... args) {
  std::fprintf(stderr, "vrdma-rdmacm: ");
  std::fprintf(stderr, fmt, args...);
  std::fputc('\n', stderr);
}

// The connection manager's own sockets, made by the system call itself: a preloaded librspreload
// turns every socket() into an rsocket, and an rsocket's connect needs a kernel socket.
inline int kernel_socket(int domain, int type, int protocol) {
  return int(syscall(SYS_socket, domain, type, protocol));
}

// librdmacm's convention: -1 with errno set.
inline int fail(int err) {
  errno = err;
  return -1;
}

struct Id;

struct Event {
  rdma_cm_event ev{};  // first: the program holds a pointer to it
  uint8_t private_data[kRepPrivate] = {};
};

struct Channel {
  rdma_event_channel base{};  // first; base.fd is the epoll set
  UniqueFd epoll, queued;     // queued: an eventfd (semaphore) counting `events`
  UniqueFd timer;             // a timerfd at the earliest deadline of its ids' handshakes
  std::mutex mu;               // guards `events`
  std::deque<Event*> events;
  // Guards reading the sockets and `watched`: an id destroyed while another thread waits on the
  // channel is taken out under it, so the waiter never reads a freed id.
  std::mutex read_mu;
  std::set<Id*> watched;
  Id* sync_owner = nullptr;  // made for a synchronous id (no channel given): goes with it
};

enum class State { idle, bound, addr_resolved, route_resolved, listening, awaiting_req, requested,
                   connecting, accepting, connected, disconnected };

struct Id {
  rdma_cm_id base{};  // first; base.channel is `channel`
  Channel* channel = nullptr;
  State state = State::idle;
  bool sync = false;          // made without a channel: each call waits for its own event
  UniqueFd sock;              // the listening socket, or the connection's
  MessageReader reader;       // what the connection's socket has brought of its next message
  int64_t deadline_ns = 0;    // a handshake's step (REP, RTU, REQ) must come by then; 0: none
  Id* listener = nullptr;     // for an id made by a connect request
  // A listener's connections whose REQ has not come: at most kMaxAwaiting (the oldest goes), so a
  // peer that connects and says nothing holds a bounded number of the program's descriptors.
  std::deque<Id*> awaiting;
  int backlog = 0;
  // A listener's: the nonces of the REQs it took within kReqSkewNs, and when each was sent (a REQ
  // seen again is a replay).
  std::deque<std::pair<std::array<uint8_t, 16>, int64_t>> taken_nonces;
  // When it began to listen (CLOCK_REALTIME): a REQ sent before was for another listener, or for
  // this one's last run, whose nonces are forgotten.
  int64_t listening_since_ns = 0;
  Message peer;               // the peer's REQ (passive side) or REP (active side)
  uint32_t psn = 0;           // our QP's first PSN
  uint8_t req_nonce[16] = {};  // the nonce of our REQ (active side): its REP must carry it back
  uint8_t responder_resources = 1, initiator_depth = 1;
  std::optional<ibv_qp_init_attr> child_qp;  // rdma_create_ep on a listener: the QP each request gets
  ibv_pd* child_pd = nullptr;
  bool own_cqs = false;       // rdma_create_qp made the CQs (and their channels)
};

inline Id* of(rdma_cm_id* id) { return reinterpret_cast<Id*>(id); }
inline Channel* of(rdma_event_channel* c) { return reinterpret_cast<Channel*>(c); }

// vrdma0's context, opened once for the process as librdmacm opens every device once; and a PD
// on it for ids whose programs give none (rdma_create_ep). Null (errno set) without a router.
ibv_context* device();
ibv_pd* device_pd();

// Channels and events.
Channel* make_channel();
void destroy_channel(Channel* c);
// Queues an event for `id` on its channel; `data` is copied.
void post(Id& id, rdma_cm_event_type type, int status, const Message* m = nullptr, Id* listen_id = nullptr);
// Puts `id`'s socket in its channel's set, or takes it out; the _locked forms with the channel's
// read_mu held (on_readable's callers hold it).
void watch(Id& id);
void unwatch(Id& id);
void watch_locked(Id& id);
void unwatch_locked(Id& id);
// Sends on a CM socket wait at most this long, and each step of a handshake must come within
// kStepSeconds (as IB CM's REQ and REP time out): a dead or hostile peer costs a program a
// bounded wait, never a hang.
constexpr int kMessageSeconds = 2;
constexpr int64_t kStepSeconds = 5;
// Sets (or, with 0, clears) `id`'s deadline, with the channel's read_mu held.
void set_deadline_locked(Id& id, int64_t deadline_ns);
int64_t monotonic_ns();
// What a passed deadline does: the handshake fails as a lost peer's would.
void expire_locked(Id& id);
void set_deadlines(int fd);
// GID 0 of vrdma0 (the router's address): what a peer's QP connects to.
ibv_gid local_gid();
// For a synchronous id: the next event for it, which must be `want` (its status as errno if not).
int wait_for(Id& id, rdma_cm_event_type want);

// A REQ's or REP's MAC of its tenant (tenant_mac.cc): sign fills m.mac (false, errno set, when the
// router cannot); sender_of says whether a peer's message carries our tenant's MAC, or that the
// router could not tell (errno set): a router slow to answer is not another tenant.
bool sign(Message& m);
enum class Sender { our_tenant, another_tenant, unknown };
Sender sender_of(const Message& m);
// A fresh random nonce for a REQ.
void fresh_nonce(uint8_t out[16]);

// The messages a socket brings, and the QP steps they make (with the channel's read_mu held).
void on_readable(Id& id);
// Ends the connection's socket: out of the channel's set, closed.
void close_locked(Id& id);
// A listener's connection that never became the program's: closed and freed.
void drop_awaiting(Id& child);
constexpr size_t kMinAwaiting = 16;
int connect_qp(Id& id);   // RTR and RTS to the peer in `id.peer`
void qp_to_error(Id& id);

}  // namespace rb::rdmacm
