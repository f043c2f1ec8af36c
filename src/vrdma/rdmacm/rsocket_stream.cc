// An rsocket's stream: sends into the peer's ring, arrivals out of ours, credits both ways, and
// the wait for either (see rsocket.hh for the protocol).
#include <endian.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "vrdma/rdmacm/rsocket.hh"
#include "vrdma/rdmacm/state.hh"

namespace rb::rsock {
namespace {

using rdmacm::fail;

constexpr uint64_t kMaxChunk = kRing / 4;  // a message's most: a credit frees a quarter at a time
constexpr uint32_t kDataReserve = 2;        // receives kept for credits and the end of stream

uint64_t room(const Socket& s) { return kRing - (s.sent - s.peer_taken); }

bool may_post(const Socket& s, uint32_t reserve) {
  return s.messages_sent - s.peer_messages + reserve < s.peer.recv_depth && s.sends_out + 1 < kSendDepth;
}

// One WRITE WITH IMMEDIATE of `len` bytes of our region at `local` to the peer's ring at `offset`.
bool post_write(Socket& s, const uint8_t* local, uint32_t len, uint64_t offset, uint32_t imm, bool signal) {
  ibv_sge sge{reinterpret_cast<uint64_t>(local), len, s.mr->lkey};
  ibv_send_wr wr{}, *bad = nullptr;
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.imm_data = htobe32(imm);
  wr.sg_list = len ? &sge : nullptr;
  wr.num_sge = len ? 1 : 0;
  wr.wr.rdma.remote_addr = s.peer.ring_addr + offset;
  wr.wr.rdma.rkey = s.peer.rkey;
  if (len <= kInline) wr.send_flags |= IBV_SEND_INLINE;
  uint32_t covered = s.unsignaled + 1;
  if (signal || covered >= kSignalEvery) {
    wr.send_flags |= IBV_SEND_SIGNALED;
    wr.wr_id = covered;
  }
  if (ibv_post_send(s.id->qp, &wr, &bad) != 0) {
    s.error = errno ? errno : EIO;
    s.broken = true;
    return false;
  }
  s.unsignaled = (wr.send_flags & IBV_SEND_SIGNALED) ? 0 : covered;
  ++s.sends_out;
  ++s.messages_sent;
  return true;
}

// A credit carries at most what its fields hold (a peer that claimed more than it sent would
// otherwise spill one field into the next); what is left goes with the next one.
void credit_if_due(Socket& s) {
  uint64_t bytes = s.taken - s.credited, used = s.messages_arrived - s.messages_credited;
  if (bytes < kRing / 4 && used < kRecvDepth / 4) return;
  if (!may_post(s, 0)) return;
  bytes = std::min<uint64_t>(bytes, kRing);
  used = std::min<uint64_t>(used, kRecvDepth);
  uint32_t imm = kImmCredit | uint32_t(bytes) | uint32_t(used) << kCreditBytesBits;
  if (post_write(s, nullptr, 0, 0, imm, false)) {
    s.credited += bytes;
    s.messages_credited += used;
  }
}

void take(Socket& s, const ibv_wc& wc, uint32_t& used) {
  if (wc.status != IBV_WC_SUCCESS) {
    if (!s.broken) s.error = ECONNRESET;
    s.broken = true;
    return;
  }
  if (wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM) {
    s.sends_out -= std::min<uint32_t>(s.sends_out, uint32_t(wc.wr_id));
    return;
  }
  ++used;
  ++s.messages_arrived;
  uint32_t imm = be32toh(wc.imm_data);
  switch (imm & kImmKind) {
    case kImmData:  // never more than our ring holds unread: a peer past that broke the protocol
      if (s.arrived - s.taken + (imm & ~kImmKind) > kRing) {
        s.broken = true;
        s.error = EPROTO;
        break;
      }
      s.arrived += imm & ~kImmKind;
      break;
    case kImmCredit:  // never past what was sent: a peer's claim moves only its own ring
      s.peer_taken = std::min(s.sent, s.peer_taken + (imm & ((1u << kCreditBytesBits) - 1)));
      s.peer_messages = std::min(s.messages_sent, s.peer_messages + ((imm & ~kImmKind) >> kCreditBytesBits));
      break;
    case kImmFin: s.peer_fin = true; break;
    default: s.broken = true; s.error = EPROTO;
  }
}

size_t copy_out(const Socket& s, const iovec* iov, int n, uint64_t want) {
  uint64_t from = s.taken, done = 0;
  for (int i = 0; i < n && done < want; ++i) {
    uint8_t* dst = static_cast<uint8_t*>(iov[i].iov_base);
    uint64_t left = std::min<uint64_t>(iov[i].iov_len, want - done);
    while (left) {
      uint64_t at = (from + done) % kRing, piece = std::min(left, kRing - at);
      std::memcpy(dst, s.recv_ring() + at, piece);
      dst += piece;
      left -= piece;
      done += piece;
    }
  }
  return done;
}

uint64_t total_of(const iovec* iov, int n) {
  uint64_t t = 0;
  for (int i = 0; i < n; ++i) t += iov[i].iov_len;
  return t;
}

// Copies `len` bytes of the program's, from `at` bytes into its iovecs, into the send ring.
void gather(Socket& s, const iovec* iov, int n, uint64_t at, uint64_t len) {
  uint8_t* dst = s.send_ring() + s.sent % kRing;
  for (int i = 0; i < n && len; ++i) {
    if (at >= iov[i].iov_len) {
      at -= iov[i].iov_len;
      continue;
    }
    uint64_t piece = std::min<uint64_t>(iov[i].iov_len - at, len);
    std::memcpy(dst, static_cast<const uint8_t*>(iov[i].iov_base) + at, piece);
    dst += piece;
    len -= piece;
    at = 0;
  }
}

bool dont_wait(const Socket& s, int flags) { return s.nonblocking || (flags & MSG_DONTWAIT); }

}  // namespace

void post_receives(Socket& s, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) {
    ibv_recv_wr wr{}, *bad = nullptr;
    if (ibv_post_recv(s.id->qp, &wr, &bad) != 0) {
      s.error = errno ? errno : EIO;
      s.broken = true;
      return;
    }
  }
}

bool progress(Socket& s) {
  if (!s.cq) return false;
  ibv_wc wc[32];
  uint32_t used = 0;
  int n;
  while ((n = ibv_poll_cq(s.cq, 32, wc)) > 0) {
    for (int i = 0; i < n; ++i) take(s, wc[i], used);
    if (n < 32) break;
  }
  if (n < 0) s.broken = true;
  if (used && !s.broken) post_receives(s, used);
  if (!s.broken) credit_if_due(s);
  return !s.broken;
}

ssize_t stream_send(Socket& s, const iovec* iov, int n, int flags) {
  if (s.phase != Phase::connected) return fail(ENOTCONN);
  uint64_t total = total_of(iov, n), done = 0;
  while (done < total || total == 0) {
    progress(s);
    if (s.broken || s.disconnected || s.fin_sent) {
      if (done) return ssize_t(done);
      return fail(s.fin_sent ? EPIPE : s.error ? s.error : ECONNRESET);
    }
    if (total == 0) return 0;
    uint64_t at = s.sent % kRing;
    uint64_t chunk = std::min({total - done, room(s), kRing - at, kMaxChunk});
    if (!chunk || !may_post(s, kDataReserve)) {
      if (done) return ssize_t(done);
      if (dont_wait(s, flags)) return fail(EAGAIN);
      wait_socket(s, -1);
      continue;
    }
    gather(s, iov, n, done, chunk);
    if (!post_write(s, s.send_ring() + at, uint32_t(chunk), at, kImmData | uint32_t(chunk), false)) continue;
    s.sent += chunk;
    done += chunk;
  }
  return ssize_t(done);
}

ssize_t stream_recv(Socket& s, const iovec* iov, int n, int flags) {
  if (s.phase != Phase::connected) return fail(ENOTCONN);
  uint64_t want = total_of(iov, n);
  while (true) {
    progress(s);
    uint64_t ready = s.arrived - s.taken;
    if (ready || !want) {
      size_t got = copy_out(s, iov, n, std::min(ready, want));
      if (!(flags & MSG_PEEK)) {
        s.taken += got;
        credit_if_due(s);
      }
      return ssize_t(got);
    }
    if (s.peer_fin || s.disconnected) return 0;
    if (s.broken) return fail(s.error ? s.error : ECONNRESET);
    if (dont_wait(s, flags)) return fail(EAGAIN);
    wait_socket(s, -1);
  }
}

int send_fin(Socket& s) {
  int64_t until = now_ns() + 2'000'000'000;
  while (!s.broken && !may_post(s, 0) && now_ns() < until) {
    progress(s);
    if (!may_post(s, 0)) wait_socket(s, 10);
  }
  if (s.broken || !may_post(s, 0)) return fail(s.error ? s.error : ETIMEDOUT);
  if (!post_write(s, nullptr, 0, 0, kImmFin, true)) return -1;
  s.fin_sent = true;
  return 0;
}

// A DISCONNECTED (the peer closed, or died) on the socket's channel.
void read_cm_events(Socket& s) {
  rdma_cm_event* e = nullptr;
  while (rdma_get_cm_event(s.channel, &e) == 0) {
    if (e->event == RDMA_CM_EVENT_DISCONNECTED) s.disconnected = true;
    rdma_ack_cm_event(e);
  }
}

short ready_events(Socket& s, short wanted) {
  short r = 0;
  if (s.phase == Phase::listening) {
    pollfd p{s.fd, POLLIN, 0};
    return poll(&p, 1, 0) > 0 ? short(POLLIN & wanted) : 0;
  }
  if (s.phase != Phase::connected) return short(POLLOUT & wanted);
  progress(s);
  if (s.arrived > s.taken || s.peer_fin || s.disconnected) r |= POLLIN;
  if (!s.fin_sent && room(s) && may_post(s, kDataReserve)) r |= POLLOUT;
  if (s.broken) r |= POLLERR;
  if (s.peer_fin && s.fin_sent) r |= POLLHUP;
  return short(r & (wanted | POLLERR | POLLHUP));
}

int arm(Socket& s) {
  if (s.cq && !s.cq_armed) {
    if (ibv_req_notify_cq(s.cq, 0) != 0) return -1;
    s.cq_armed = true;
  }
  return 0;
}

// Takes the CQ's events (the notification fired, or the socket goes) and re-arms later.
void disarm(Socket& s) {
  if (!s.cq_channel) return;
  ibv_cq* cq = nullptr;
  void* ctx = nullptr;
  unsigned events = 0;
  while (ibv_get_cq_event(s.cq_channel, &cq, &ctx) == 0) ++events;
  if (events) {
    ibv_ack_cq_events(s.cq, events);
    s.cq_armed = false;
  }
}

int wait_socket(Socket& s, int timeout_ms) {
  int64_t spin_until = now_ns() + spin_ns();
  uint64_t arrived = s.arrived, taken = s.peer_taken, msgs = s.peer_messages, out = s.sends_out;
  bool fin = s.peer_fin, broken = s.broken;
  // What changed since the wait began: a peer's end of stream that came before it is no news (a
  // sender whose peer had half-closed spun here for ever instead of sleeping).
  auto changed = [&] {
    return s.arrived != arrived || s.peer_taken != taken || s.peer_messages != msgs || s.sends_out != out ||
           s.peer_fin != fin || s.broken != broken;
  };
  while (now_ns() < spin_until) {
    progress(s);
    if (changed()) return 0;
  }
  if (arm(s) != 0) return -1;
  progress(s);
  if (changed()) return 0;
  pollfd p[2] = {{s.cq_channel ? s.cq_channel->fd : -1, POLLIN, 0}, {s.fd, POLLIN, 0}};
  int n = poll(p, 2, timeout_ms);
  if (p[0].revents) disarm(s);
  if (p[1].revents) read_cm_events(s);
  return n < 0 ? -1 : 0;
}

}  // namespace rb::rsock
