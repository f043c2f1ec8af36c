// Event channels: the queue of events that an epoll set makes pollable, and rdma_get_cm_event,
// which reads the ids' sockets while it waits.
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "vrdma/rdmacm/state.hh"

namespace rb::rdmacm {

Channel* make_channel() {
  auto* c = new Channel();
  c->epoll.reset(epoll_create1(EPOLL_CLOEXEC));
  c->queued.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK | EFD_SEMAPHORE));
  c->timer.reset(timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK));
  epoll_event ev{EPOLLIN, {.ptr = nullptr}};
  epoll_event tv{EPOLLIN, {.ptr = c}};  // the channel itself: a deadline passed
  if (!c->epoll || !c->queued || !c->timer || epoll_ctl(c->epoll.get(), EPOLL_CTL_ADD, c->queued.get(), &ev) != 0 ||
      epoll_ctl(c->epoll.get(), EPOLL_CTL_ADD, c->timer.get(), &tv) != 0) {
    int err = errno;
    delete c;
    errno = err;
    return nullptr;
  }
  c->base.fd = c->epoll.get();
  return c;
}

void destroy_channel(Channel* c) {
  for (Event* e : c->events) delete e;
  delete c;
}

namespace {

// A UD id's event carries the peer's QP, Q_Key and an address for its router (param.ud).
void fill_ud(rdma_ud_param& u, const Message& m, const uint8_t* private_data) {
  u.private_data = m.private_len ? private_data : nullptr;
  u.private_data_len = m.private_len;
  u.qp_num = m.qp_num;
  u.qkey = m.psn;  // a datagram reply carries the Q_Key where a connection's has its PSN
  u.ah_attr.is_global = 1;
  std::memcpy(u.ah_attr.grh.dgid.raw, m.gid, 16);
  u.ah_attr.grh.hop_limit = 64;
  u.ah_attr.port_num = 1;
}

void fill_conn(rdma_conn_param& p, const Message& m, const uint8_t* private_data) {
  p.private_data = m.private_len ? private_data : nullptr;
  p.private_data_len = m.private_len;
  p.responder_resources = m.responder_resources;
  p.initiator_depth = m.initiator_depth;
  p.retry_count = m.retry_count;
  p.rnr_retry_count = m.rnr_retry_count;
  p.srq = m.srq;
  p.qp_num = m.qp_num;
}

}  // namespace

void post(Id& id, rdma_cm_event_type type, int status, const Message* m, Id* listen_id) {
  auto* e = new Event();
  e->ev.id = &id.base;
  e->ev.listen_id = listen_id ? &listen_id->base : nullptr;
  e->ev.event = type;
  e->ev.status = status;
  if (m) {
    std::memcpy(e->private_data, m->private_data, m->private_len);
    if (id.base.ps == RDMA_PS_UDP) fill_ud(e->ev.param.ud, *m, e->private_data);
    else fill_conn(e->ev.param.conn, *m, e->private_data);
  }
  Channel& c = *id.channel;
  std::lock_guard lock(c.mu);
  c.events.push_back(e);
  uint64_t one = 1;
  (void)!write(c.queued.get(), &one, sizeof one);
}

void watch_locked(Id& id) {
  Channel& c = *id.channel;
  epoll_event ev{EPOLLIN, {.ptr = &id}};
  if (id.sock && epoll_ctl(c.epoll.get(), EPOLL_CTL_ADD, id.sock.get(), &ev) == 0) c.watched.insert(&id);
}

int64_t monotonic_ns() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return int64_t(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}

namespace {

// The channel's timer at the earliest deadline of the ids it watches (disarmed if none).
void arm_timer_locked(Channel& c) {
  int64_t next = 0;
  for (Id* id : c.watched)
    if (id->deadline_ns && (!next || id->deadline_ns < next)) next = id->deadline_ns;
  itimerspec at{};
  at.it_value.tv_sec = next / 1'000'000'000;
  at.it_value.tv_nsec = next % 1'000'000'000;
  timerfd_settime(c.timer.get(), TFD_TIMER_ABSTIME, &at, nullptr);
}

// Ids whose deadline has passed fail their handshake.
void expire_due_locked(Channel& c) {
  uint64_t fired;
  (void)!read(c.timer.get(), &fired, sizeof fired);
  int64_t now = monotonic_ns();
  std::vector<Id*> due;
  for (Id* id : c.watched)
    if (id->deadline_ns && id->deadline_ns <= now) due.push_back(id);
  for (Id* id : due) expire_locked(*id);
  arm_timer_locked(c);
}

}  // namespace

void set_deadline_locked(Id& id, int64_t deadline_ns) {
  id.deadline_ns = deadline_ns;
  arm_timer_locked(*id.channel);
}

void unwatch_locked(Id& id) {
  Channel& c = *id.channel;
  if (c.watched.erase(&id) && id.sock) epoll_ctl(c.epoll.get(), EPOLL_CTL_DEL, id.sock.get(), nullptr);
}

void watch(Id& id) {
  std::lock_guard lock(id.channel->read_mu);
  watch_locked(id);
}

void unwatch(Id& id) {
  std::lock_guard lock(id.channel->read_mu);
  unwatch_locked(id);
}

void close_locked(Id& id) {
  unwatch_locked(id);
  id.sock.reset();
}

namespace {

Event* pop(Channel& c) {
  std::lock_guard lock(c.mu);
  if (c.events.empty()) return nullptr;
  Event* e = c.events.front();
  c.events.pop_front();
  uint64_t n;
  (void)!read(c.queued.get(), &n, sizeof n);
  return e;
}

// Reads what the ready sockets bring (each may queue events); false if nothing was ready within
// the wait.
bool read_ready(Channel& c, int timeout_ms) {
  epoll_event evs[16];
  int n = epoll_wait(c.epoll.get(), evs, 16, timeout_ms);
  if (n <= 0) return false;
  std::lock_guard lock(c.read_mu);
  for (int i = 0; i < n; ++i) {
    void* tag = evs[i].data.ptr;
    if (tag == &c) expire_due_locked(c);
    else if (auto* id = static_cast<Id*>(tag); id && c.watched.count(id)) on_readable(*id);
  }
  return true;
}

}  // namespace

int wait_for(Id& id, rdma_cm_event_type want) {
  if (id.base.event) rdma_ack_cm_event(id.base.event);  // a synchronous id keeps its last event
  id.base.event = nullptr;
  rdma_cm_event* e = nullptr;
  if (rdma_get_cm_event(&id.channel->base, &e) != 0) return -1;
  id.base.event = e;
  if (e->event == want) return 0;
  int status = e->status < 0 ? -e->status : e->status;
  switch (e->event) {
    case RDMA_CM_EVENT_REJECTED: return fail(ECONNREFUSED);
    case RDMA_CM_EVENT_UNREACHABLE: return fail(status ? status : EHOSTUNREACH);
    default: return fail(status ? status : EPROTO);
  }
}

}  // namespace rb::rdmacm

using namespace rb::rdmacm;

RDMACM_EXPORT rdma_event_channel* rdma_create_event_channel() {
  Channel* c = make_channel();
  return c ? &c->base : nullptr;
}

RDMACM_EXPORT void rdma_destroy_event_channel(rdma_event_channel* channel) {
  if (channel) destroy_channel(of(channel));
}

RDMACM_EXPORT int rdma_get_cm_event(rdma_event_channel* channel, rdma_cm_event** event) {
  if (!channel || !event) return fail(EINVAL);
  Channel& c = *of(channel);
  bool nonblocking = fcntl(c.base.fd, F_GETFL) & O_NONBLOCK;
  while (true) {
    if (Event* e = pop(c)) {
      *event = &e->ev;
      return 0;
    }
    if (!read_ready(c, nonblocking ? 0 : -1) && nonblocking) return fail(EAGAIN);
  }
}

RDMACM_EXPORT int rdma_ack_cm_event(rdma_cm_event* event) {
  if (!event) return fail(EINVAL);
  delete reinterpret_cast<Event*>(event);
  return 0;
}

RDMACM_EXPORT const char* rdma_event_str(rdma_cm_event_type event) {
  static const char* const names[] = {
      "RDMA_CM_EVENT_ADDR_RESOLVED",    "RDMA_CM_EVENT_ADDR_ERROR",       "RDMA_CM_EVENT_ROUTE_RESOLVED",
      "RDMA_CM_EVENT_ROUTE_ERROR",      "RDMA_CM_EVENT_CONNECT_REQUEST",  "RDMA_CM_EVENT_CONNECT_RESPONSE",
      "RDMA_CM_EVENT_CONNECT_ERROR",    "RDMA_CM_EVENT_UNREACHABLE",      "RDMA_CM_EVENT_REJECTED",
      "RDMA_CM_EVENT_ESTABLISHED",      "RDMA_CM_EVENT_DISCONNECTED",     "RDMA_CM_EVENT_DEVICE_REMOVAL",
      "RDMA_CM_EVENT_MULTICAST_JOIN",   "RDMA_CM_EVENT_MULTICAST_ERROR",  "RDMA_CM_EVENT_ADDR_CHANGE",
      "RDMA_CM_EVENT_TIMEWAIT_EXIT"};
  return unsigned(event) < std::size(names) ? names[event] : "UNKNOWN EVENT";
}
