#include <sched.h>

#include <atomic>
#include <chrono>
#include <thread>

#include <fmt/format.h>

#include "bench/pattern.hh"
#include "bench/worker.hh"
#include "core/affinity.hh"

namespace rb::bench {
namespace {

using transport::Completion;
using transport::WorkRequest;
namespace wr_flag = transport::wr_flag;

constexpr uint64_t kSendTag = 1ull << 62;  // wr_id bit that marks the server's own sends

class ServerLoop {
 public:
  ServerLoop(ThreadState& t, PhaseContext& pc, uint64_t slot_off, uint64_t echo_off, uint32_t rx_slots)
      : t_(t), pc_(pc), s_(*pc.spec), size_(pc.phase.size), slot_off_(slot_off), echo_off_(echo_off), rx_slots_(rx_slots) {
    for (auto* v : {&pending_recv_, &arrived_}) v->reserve(64);
    for (auto* v : {&pending_send_, &sent_}) v->reserve(64);
  }

  Status run() {
    Op op = pc_.phase.op;
    if (op == Op::send) return pc_.phase.mode == Mode::lat ? send_echo() : send_sink();
    if (op == Op::write && pc_.phase.mode == Mode::lat) return write_echo();
    return passive();
  }

 private:
  bool stopping() const { return pc_.abort->load(std::memory_order_relaxed); }
  bool inline_ok() const { return size_ <= pc_.inject_max; }
  void count(uint64_t n) {
    t_.ops.store(t_.ops.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
    t_.bytes.store(t_.bytes.load(std::memory_order_relaxed) + n * size_, std::memory_order_relaxed);
  }
  Status io_error() { return {Errc::io, fmt::format("server thread {}: {}", t_.index, t_.ep->last_error())}; }
  Status cqe_error(const Completion& c) {
    return {Errc::io, fmt::format("server thread {}: {} of {} B failed: {}", t_.index, transport::op_name(c.op), c.len,
                                  t_.ep->describe_error(c.err))};
  }
  void idle(int& n) {
    // Park between empty polls so a passive side does not starve the measuring threads of a core;
    // where the transport moves data without us (copy engines), sleep instead.
    if (++n <= 256) return;
    if (pc_.target_progress) sched_yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(200));
  }

  // Echo loops spin for healthy ping-pongs but give the core away once a wait is long
  // (the client or its copy engine needs it when threads outnumber cores).
  void long_wait(uint64_t since) const {
    if (pc_.yield_to_engine && pc_.clock->to_ns(pc_.clock->now() - since) > 50e3) sched_yield();
  }

  Status post_one(const WorkRequest& w) {
    Completion cq[16];
    while (!stopping()) {
      int a = t_.ep->post({&w, 1});
      if (a == 1) return {};
      if (a < 0) return io_error();
      int n = t_.ep->poll(cq);  // progress while the queue is full
      for (int i = 0; i < n; ++i) {
        Status s = handle(cq[i]);
        if (!s) return s;
      }
    }
    return {};
  }

  // Completion handling shared by the echo and sink loops.
  Status handle(const Completion& c) {
    if (c.err) return cqe_error(c);
    if (c.op == Op::recv) pending_recv_.push_back(c);
    else if (c.op == Op::send && (c.wr_id & kSendTag)) pending_send_.push_back(c.wr_id & ~kSendTag);
    return {};
  }

  WorkRequest recv_wr(uint64_t slot) {
    return {Op::recv, wr_flag::signal, uint32_t(size_), t_.mr, t_.area_off + slot * align_up(size_), 0, slot};
  }

  Status passive() {
    Completion cq[64];
    int n_idle = 0;
    while (!stopping()) {
      int n = t_.ep->poll(cq);
      if (n < 0) return io_error();
      for (int i = 0; i < n; ++i)
        if (cq[i].err) return cqe_error(cq[i]);
      if (n == 0) idle(n_idle);
      else n_idle = 0;
    }
    return {};
  }

  Status write_echo() {
    const uint8_t* slot = static_cast<uint8_t*>(t_.mr->addr()) + slot_off_;
    Completion cq[16];
    for (uint64_t i = 0; !stopping(); ++i) {
      uint8_t tag = uint8_t(i % 255 + 1);
      uint64_t since = pc_.clock->now();
      while (std::atomic_ref<const uint8_t>(slot[size_ - 1]).load(std::memory_order_acquire) != tag) {
        if (stopping()) return {};
        int n = t_.ep->poll(cq);
        if (n < 0) return io_error();
        for (int k = 0; k < n; ++k)
          if (cq[k].err) return cqe_error(cq[k]);
        long_wait(since);
      }
      if (s_.validate) {
        uint64_t mseed = message_seed(pc_.seed, t_.index, i);
        size_t bad = check_pattern(slot, size_ - 1, mseed, 0);
        if (bad != size_ - 1)
          return {Errc::validation,
                  fmt::format("server thread {}: write #{} of {} B: byte {} is {:#04x}, expected {:#04x}", t_.index, i,
                              size_, bad, slot[bad], pattern_byte(mseed, bad))};
      }
      WorkRequest w{Op::write, inline_ok() ? wr_flag::inject : wr_flag::signal, uint32_t(size_), t_.mr, slot_off_,
                    echo_off_, i};
      Status s = post_one(w);
      if (!s) return s;
      count(1);
    }
    return {};
  }

  Status check_message(uint64_t slot, uint64_t seq, uint32_t len) {
    if (len != size_)
      return {Errc::validation, fmt::format("server thread {}: message #{} has {} B, expected {}", t_.index, seq, len, size_)};
    if (!s_.validate) return {};
    const uint8_t* p = t_.area() + slot * align_up(size_);
    uint64_t mseed = message_seed(pc_.seed, t_.index, seq);
    size_t bad = check_pattern(p, size_, mseed, 0);
    if (bad == size_) return {};
    return {Errc::validation, fmt::format("server thread {}: send #{} of {} B: byte {} is {:#04x}, expected {:#04x}", t_.index,
                                          seq, size_, bad, p[bad], pattern_byte(mseed, bad))};
  }

  Status send_echo() {
    for (uint64_t s = 0; s < 2; ++s) {
      Status st = post_one(recv_wr(s));
      if (!st) return st;
    }
    Completion cq[16];
    uint64_t seq = 0;
    uint64_t since = pc_.clock->now();
    while (!stopping()) {
      int n = t_.ep->poll(cq);
      if (n < 0) return io_error();
      if (n) since = pc_.clock->now();
      else long_wait(since);
      for (int i = 0; i < n; ++i) {
        Status st = handle(cq[i]);
        if (!st) return st;
      }
      arrived_.clear();
      arrived_.swap(pending_recv_);  // post_one may queue more while we answer these
      for (auto& r : arrived_) {
        Status st = check_message(r.wr_id, seq, r.len);
        if (!st) return st;
        ++seq;
        // An inline send leaves the slot free at once; otherwise the slot is reposted when the send completes.
        bool inl = inline_ok();
        WorkRequest w{Op::send, inl ? wr_flag::inject : wr_flag::signal, uint32_t(size_),
                      t_.mr, t_.area_off + r.wr_id * align_up(size_), 0, r.wr_id | kSendTag};
        st = post_one(w);
        if (!st) return st;
        if (inl) st = post_one(recv_wr(r.wr_id));
        if (!st) return st;
        count(1);
      }
      sent_.clear();
      sent_.swap(pending_send_);
      for (uint64_t slot : sent_) {
        Status st = post_one(recv_wr(slot));
        if (!st) return st;
      }
    }
    return {};
  }

  Status send_sink() {
    for (uint64_t s = 0; s < rx_slots_; ++s) {
      Status st = post_one(recv_wr(s));
      if (!st) return st;
    }
    Completion cq[64];
    uint64_t seq = 0;
    int n_idle = 0;
    while (!stopping()) {
      int n = t_.ep->poll(cq);
      if (n < 0) return io_error();
      if (n == 0) {
        idle(n_idle);
        continue;
      }
      n_idle = 0;
      for (int i = 0; i < n; ++i) {
        const Completion& c = cq[i];
        if (c.err) return cqe_error(c);
        if (c.op != Op::recv) continue;
        Status st = check_message(c.wr_id, seq, c.len);
        if (!st) return st;
        ++seq;
        count(1);
        st = post_one(recv_wr(c.wr_id));
        if (!st) return st;
      }
    }
    return {};
  }

  ThreadState& t_;
  PhaseContext& pc_;
  const RunSpec& s_;
  uint64_t size_, slot_off_, echo_off_;
  uint32_t rx_slots_;
  // Swapped, never reallocated, so the echo loop allocates nothing per message.
  std::vector<Completion> pending_recv_, arrived_;
  std::vector<uint64_t> pending_send_, sent_;
};

}  // namespace

void run_server_thread(ThreadState& t, PhaseContext& pc, uint64_t slot_off, uint64_t remote_echo_off, uint32_t rx_slots,
                       int cpu) {
  if (cpu >= 0) (void)pin_this_thread(cpu);
  ServerLoop loop(t, pc, slot_off, remote_echo_off, rx_slots);
  t.status = loop.run();
  Status q = t.ep->quiesce(pc.spec->timeout_s);
  if (t.status.is_ok() && !q.is_ok()) t.status = q;
  t.exited.store(true);
}

}  // namespace rb::bench
