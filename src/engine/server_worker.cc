#include <sched.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "engine/addressing.hh"
#include "engine/event_wait.hh"
#include "engine/pattern.hh"
#include "engine/worker.hh"
#include "core/affinity.hh"

namespace rb::engine {
namespace {

using transport::Completion;
using transport::WorkRequest;
namespace wr_flag = transport::wr_flag;

constexpr uint64_t kSendTag = 1ull << 62;  // wr_id bit that marks the server's own sends
constexpr int kLaneShift = 48;              // wr_id = lane << 48 | slot
constexpr uint64_t kSlotMask = (1ull << kLaneShift) - 1;
constexpr int kSleepMs = 100;  // --event: longest sleep before the stop flag is looked at again

// One server thread serves the endpoints (rails x qps) of the client thread it is paired with.
class ServerLoop {
 public:
  ServerLoop(ThreadState& t, PhaseContext& pc, uint64_t slot_off, uint64_t echo_off, uint32_t rx_slots)
      : t_(t), pc_(pc), s_(*pc.spec), size_(pc.phase.size), slot_off_(slot_off), echo_off_(echo_off), rx_slots_(rx_slots),
        lane_seq_(t.eps.size(), 0) {
    for (auto* v : {&pending_recv_, &arrived_}) v->reserve(64);
    for (auto* v : {&pending_send_, &sent_}) v->reserve(64);
  }

  Status run() {
    Op op = pc_.phase.op;
    bool lat = pc_.phase.mode == Mode::lat;
    if (is_message(op)) return lat ? send_echo() : send_sink();
    if (op == Op::write && lat) return write_echo();
    if (op == Op::write_imm && lat) return write_imm_echo();
    return passive();
  }

 private:
  size_t lanes() const { return t_.eps.size(); }
  static size_t lane_of(uint64_t wr_id) { return size_t((wr_id & ~kSendTag) >> kLaneShift); }
  bool stopping() const { return pc_.abort->load(std::memory_order_relaxed); }
  bool inline_ok() const { return size_ <= pc_.inject_max; }
  void count(uint64_t n) {
    t_.ops.store(t_.ops.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
    t_.bytes.store(t_.bytes.load(std::memory_order_relaxed) + n * size_, std::memory_order_relaxed);
  }
  Status io_error(size_t l) {
    return {Errc::io, fmt::format("server thread {}: {}", t_.index, t_.eps[l]->last_error())};
  }
  Status cqe_error(size_t l, const Completion& c) {
    return {Errc::io, fmt::format("server thread {}: {} of {} B failed: {}", t_.index, transport::op_name(c.op), c.len,
                                  t_.eps[l]->describe_error(c))};
  }
  // Nothing came: with --event sleep on the endpoints' wait objects, else spin a while and then
  // park so a passive side does not starve the measuring threads of a core; where the transport
  // moves data without us (copy engines, shared memory) and nothing is announced to us, sleep
  // instead. Writes with immediate data are announced: their stream waits on our polls.
  Status idle(int& n) {
    if (s_.event) return waiter_.sleep(t_.eps, kSleepMs);
    if (++n <= 256) return {};
    if (pc_.target_progress || pc_.phase.op == Op::write_imm) sched_yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(200));
    return {};
  }

  // Echo loops spin for healthy ping-pongs but give the core away once a wait is long
  // (the client's copy engine needs it when threads outnumber cores).
  Status long_wait(uint64_t since) {
    if (s_.event) return waiter_.sleep(t_.eps, kSleepMs);
    if (pc_.yield_to_engine && pc_.clock->to_ns(pc_.clock->now() - since) > 50e3) sched_yield();
    return {};
  }

  // The answer of every ping-pong goes through here: the first post is tried before anything
  // else, since building the completion array (zeroed) cost more than the post itself.
  Status post_one(size_t l, const WorkRequest& w) {
    int a = t_.eps[l]->post({&w, 1});
    if (a == 1) return {};
    if (a < 0) return io_error(l);
    return post_when_room(l, w);
  }

  Status post_when_room(size_t l, const WorkRequest& w) {
    Completion cq[16];
    while (!stopping()) {
      int a = t_.eps[l]->post({&w, 1});
      if (a == 1) return {};
      if (a < 0) return io_error(l);
      int n = t_.eps[l]->poll(cq);  // progress while the queue is full
      for (int i = 0; i < n; ++i) {
        Status s = handle(l, cq[i]);
        if (!s) return s;
      }
    }
    return {};
  }

  // Completion handling shared by the echo loop.
  Status handle(size_t l, const Completion& c) {
    if (!c.ok()) return cqe_error(l, c);
    if (c.op == Op::recv) pending_recv_.push_back(c);
    else if (is_message(c.op) && (c.wr_id & kSendTag)) pending_send_.push_back(c.wr_id & ~kSendTag);
    return {};
  }

  // Receive slots are per lane: lane l owns slots [l*rx_slots, (l+1)*rx_slots) of the thread's ring.
  const transport::MemoryRegion* mr(size_t l) const { return l < t_.lane_mrs.size() ? t_.lane_mrs[l] : t_.mr; }

  WorkRequest recv_wr(size_t l, uint64_t slot) {
    return {Op::recv, wr_flag::signal, uint32_t(size_), mr(l), t_.area_off + slot_offset(slot), 0,
            (uint64_t(l) << kLaneShift) | slot};
  }

  // Where receive slot `slot` lands in the thread's area (its own place, or its turn in --recv-mr).
  uint64_t slot_offset(uint64_t slot) const {
    return receive_landing(slot, rx_slots_, s_.recv_mr, align_up(size_)) * align_up(size_);
  }

  // The target of a one-sided stream: it only drives progress, and counts (and checks the order
  // of) the arrivals that writes with immediate data announce.
  Status passive() {
    Completion cq[64];
    int n_idle = 0;
    while (!stopping()) {
      int got = 0;
      for (size_t l = 0; l < lanes(); ++l) {
        int n = t_.eps[l]->poll(cq);
        if (n < 0) return io_error(l);
        for (int i = 0; i < n; ++i) {
          if (!cq[i].ok()) return cqe_error(l, cq[i]);
          if (cq[i].op != Op::remote_write) continue;
          Status st = check_arrival(cq[i], uint64_t(t_.first_ep) + l, lane_seq_[l]++);
          if (!st) return st;
          count(1);
        }
        got += n;
      }
      if (got) n_idle = 0;
      else if (Status st = idle(n_idle); !st) return st;
    }
    return {};
  }

  // A write with immediate data as the target sees it: every one announced, in order, whole.
  Status check_arrival(const Completion& c, uint64_t stream, uint64_t seq) {
    if (!c.has_imm)
      return {Errc::validation, fmt::format("server thread {}: write-imm #{} on endpoint {} arrived without its immediate",
                                            t_.index, seq, stream)};
    if (c.len != size_)
      return {Errc::validation, fmt::format("server thread {}: write-imm #{} has {} B, expected {}", t_.index, seq, c.len, size_)};
    if (s_.validate && c.imm != uint32_t(seq))
      return {Errc::validation, fmt::format("server thread {}: write-imm #{} on endpoint {} carried immediate {}, expected {} "
                                            "(lost or out of order)", t_.index, seq, stream, c.imm, uint32_t(seq))};
    return {};
  }

  Status write_echo() {
    const uint8_t* slot = static_cast<uint8_t*>(t_.mr->addr()) + slot_off_;
    Completion cq[16];
    for (uint64_t i = 0; !stopping(); ++i) {
      uint8_t tag = uint8_t(i % 255 + 1);
      size_t l = i % lanes();  // the client writes on lane i mod lanes; answer on the same one
      uint64_t since = pc_.clock->now();
      uint32_t spins = 0;
      while (std::atomic_ref<const uint8_t>(slot[size_ - 1]).load(std::memory_order_acquire) != tag) {
        if (!pc_.target_progress && ++spins % PhaseContext::kPassivePollEvery != 0) continue;
        if (stopping()) return {};
        for (size_t k = 0; k < lanes(); ++k) {
          int n = t_.eps[k]->poll(cq);
          if (n < 0) return io_error(k);
          for (int c = 0; c < n; ++c)
            if (!cq[c].ok()) return cqe_error(k, cq[c]);
        }
        if (Status st = long_wait(since); !st) return st;
      }
      if (s_.validate) {
        uint64_t mseed = message_seed(pc_.seed, t_.first_ep, i);
        size_t bad = check_pattern(slot, size_ - 1, mseed, 0);
        if (bad != size_ - 1)
          return {Errc::validation,
                  fmt::format("server thread {}: write #{} of {} B: byte {} is {:#04x}, expected {:#04x}", t_.index, i,
                              size_, bad, slot[bad], pattern_byte(mseed, bad))};
      }
      WorkRequest w{Op::write, uint8_t((inline_ok() ? wr_flag::inject : wr_flag::signal) | wr_flag::polled),
                    uint32_t(size_), mr(l), slot_off_, echo_off_, i};
      Status s = post_one(l, w);
      if (!s) return s;
      count(1);
    }
    return {};
  }

  // Write-with-immediate ping-pong: the client's write announces itself with a completion; the
  // payload goes back the same way from where it landed, carrying the same immediate.
  Status write_imm_echo() {
    const uint8_t* slot = static_cast<uint8_t*>(t_.mr->addr()) + slot_off_;
    Completion cq[16];
    for (uint64_t i = 0; !stopping(); ++i) {
      size_t l = i % lanes();
      std::optional<Completion> arrival;
      uint64_t since = pc_.clock->now();
      while (!arrival) {
        if (stopping()) return {};
        int got = 0;
        for (size_t k = 0; k < lanes(); ++k) {
          int n = t_.eps[k]->poll(cq);
          if (n < 0) return io_error(k);
          got += n;
          for (int c = 0; c < n; ++c) {
            if (!cq[c].ok()) return cqe_error(k, cq[c]);
            if (cq[c].op == Op::remote_write) arrival = cq[c];
          }
        }
        if (got == 0)
          if (Status st = long_wait(since); !st) return st;
      }
      Status st = check_arrival(*arrival, uint64_t(t_.first_ep), i);
      if (st && s_.validate) st = check_payload(slot, message_seed(pc_.seed, t_.first_ep, i), i, "write-imm");
      if (!st) return st;
      WorkRequest w{Op::write_imm, inline_ok() ? wr_flag::inject : wr_flag::signal, uint32_t(size_), mr(l), slot_off_,
                    echo_off_, i};
      w.imm = arrival->imm;
      st = post_one(l, w);
      if (!st) return st;
      count(1);
    }
    return {};
  }

  Status check_payload(const uint8_t* p, uint64_t mseed, uint64_t seq, const char* what) {
    size_t bad = check_pattern(p, size_, mseed, 0);
    if (bad == size_) return {};
    return {Errc::validation, fmt::format("server thread {}: {} #{} of {} B: byte {} is {:#04x}, expected {:#04x}", t_.index,
                                          what, seq, size_, bad, p[bad], pattern_byte(mseed, bad))};
  }

  Status check_message(uint64_t slot, uint64_t stream, uint64_t seq, const Completion& c) {
    if (c.len != size_)
      return {Errc::validation, fmt::format("server thread {}: message #{} has {} B, expected {}", t_.index, seq, c.len, size_)};
    if (pc_.phase.op == Op::send_imm && !c.has_imm)
      return {Errc::validation, fmt::format("server thread {}: send-imm #{} arrived without its immediate", t_.index, seq)};
    if (!s_.validate) return {};
    if (pc_.phase.op == Op::send_imm && c.imm != uint32_t(seq))
      return {Errc::validation, fmt::format("server thread {}: send-imm #{} carried immediate {}, expected {} (lost or out "
                                            "of order)", t_.index, seq, c.imm, uint32_t(seq))};
    const uint8_t* p = t_.area() + slot_offset(slot);
    uint64_t mseed = message_seed(pc_.seed, int(stream), seq);
    size_t bad = check_pattern(p, size_, mseed, 0);
    if (bad == size_) return {};
    return {Errc::validation, fmt::format("server thread {}: send #{} of {} B: byte {} is {:#04x}, expected {:#04x}", t_.index,
                                          seq, size_, bad, p[bad], pattern_byte(mseed, bad))};
  }

  Status send_echo() {
    for (size_t l = 0; l < lanes(); ++l)
      for (uint64_t s = 0; s < 2; ++s) {
        Status st = post_one(l, recv_wr(l, l * 2 + s));
        if (!st) return st;
      }
    Completion cq[16];
    uint64_t seq = 0;  // the client's ping-pongs, in order across its lanes
    uint64_t since = pc_.clock->now();
    while (!stopping()) {
      int got = 0;
      for (size_t l = 0; l < lanes(); ++l) {
        int n = t_.eps[l]->poll(cq);
        if (n < 0) return io_error(l);
        for (int i = 0; i < n; ++i) {
          Status st = handle(l, cq[i]);
          if (!st) return st;
        }
        got += n;
      }
      if (got) since = pc_.clock->now();
      else if (Status st = long_wait(since); !st) return st;
      arrived_.clear();
      arrived_.swap(pending_recv_);  // post_one may queue more while we answer these
      for (auto& r : arrived_) {
        size_t l = lane_of(r.wr_id);
        uint64_t slot = r.wr_id & kSlotMask;
        Status st = check_message(slot, uint64_t(t_.first_ep), seq, r);
        if (!st) return st;
        ++seq;
        // An inline send leaves the slot free at once; otherwise the slot is reposted when the send completes.
        bool inl = inline_ok();
        WorkRequest w{pc_.phase.op, inl ? wr_flag::inject : wr_flag::signal, uint32_t(size_),
                      mr(l), t_.area_off + slot_offset(slot), 0, r.wr_id | kSendTag};
        w.imm = r.imm;
        st = post_one(l, w);
        if (!st) return st;
        if (inl) st = post_one(l, recv_wr(l, slot));
        if (!st) return st;
        count(1);
      }
      sent_.clear();
      sent_.swap(pending_send_);
      for (uint64_t id : sent_) {
        Status st = post_one(lane_of(id), recv_wr(lane_of(id), id & kSlotMask));
        if (!st) return st;
      }
    }
    return {};
  }

  // One message of the stream on lane l: check it, count it, give its slot back.
  Status take_message(size_t l, const Completion& c) {
    uint64_t slot = c.wr_id & kSlotMask;
    // Each endpoint is its own ordered stream of messages.
    Status st = check_message(slot, uint64_t(t_.first_ep) + l, lane_seq_[l]++, c);
    if (!st) return st;
    count(1);
    return post_one(l, recv_wr(l, slot));
  }

  Status send_sink() {
    for (size_t l = 0; l < lanes(); ++l)
      for (uint64_t s = 0; s < rx_slots_; ++s) {
        Status st = post_one(l, recv_wr(l, l * rx_slots_ + s));
        if (!st) return st;
      }
    Completion cq[64];
    int n_idle = 0;
    while (!stopping()) {
      int got = 0;
      for (size_t l = 0; l < lanes(); ++l) {
        int n = t_.eps[l]->poll(cq);
        if (n < 0) return io_error(l);
        got += n;
        for (int i = 0; i < n; ++i) {
          const Completion& c = cq[i];
          if (!c.ok()) return cqe_error(l, c);
          if (c.op != Op::recv) continue;
          Status st = take_message(l, c);
          if (!st) return st;
        }
        // Receives that completed while a repost waited for room (post_one polls) count too.
        while (!pending_recv_.empty()) {
          arrived_.clear();
          arrived_.swap(pending_recv_);
          for (auto& c : arrived_) {
            Status st = take_message(lane_of(c.wr_id), c);
            if (!st) return st;
          }
        }
      }
      if (got) n_idle = 0;
      else if (Status st = idle(n_idle); !st) return st;
    }
    return {};
  }

  ThreadState& t_;
  PhaseContext& pc_;
  const RunSpec& s_;
  uint64_t size_, slot_off_, echo_off_;
  uint32_t rx_slots_;
  std::vector<uint64_t> lane_seq_;
  // Swapped, never reallocated, so the echo loop allocates nothing per message.
  std::vector<Completion> pending_recv_, arrived_;
  std::vector<uint64_t> pending_send_, sent_;
  EventWaiter waiter_;
};

}  // namespace

void run_server_thread(ThreadState& t, PhaseContext& pc, uint64_t slot_off, uint64_t remote_echo_off, uint32_t rx_slots,
                       int cpu) {
  if (cpu >= 0) (void)pin_this_thread(cpu);
  ServerLoop loop(t, pc, slot_off, remote_echo_off, rx_slots);
  t.status = loop.run();
  quiesce_lanes(t, pc.spec->timeout_s);
  t.exited.store(true);
}

}  // namespace rb::engine
