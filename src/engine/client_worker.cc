#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstring>

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

inline void cpu_relax() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#endif
}

inline uint8_t load_acquire(const uint8_t* p) { return std::atomic_ref<const uint8_t>(*p).load(std::memory_order_acquire); }

constexpr double kYieldAfterNs = 50e3;
constexpr int kSleepMs = 100;  // --event: longest sleep before the stop flag and the stall limit are looked at again

// Ops whose latency is a whole round trip (the answer is the op's own completion), not a ping-pong.
bool round_trip(Op op) { return op == Op::read || is_atomic(op); }

struct Budget {  // how long a loop runs: a count, or until a tick
  uint64_t count = 0;
  uint64_t end_tick = 0;
};

constexpr int kLaneShift = 48;  // wr_id = lane << 48 | the lane's own sequence number
constexpr uint64_t kSeqMask = (1ull << kLaneShift) - 1;

// One endpoint's stream inside a thread: its own sequence, signal groups, pending batch and
// post timestamps, so selective completion stays exact per queue.
struct Lane {
  transport::Endpoint* ep = nullptr;
  const transport::MemoryRegion* mr = nullptr;  // the local memory as this endpoint's domain knows it
  int global = 0;          // global endpoint index: names the message stream the peer checks
  uint64_t msg_base = 0;   // messages sent by earlier runs of this phase (warm-up)
  uint64_t posted = 0, completed = 0, share = 0, measured = 0;
  uint64_t slot = 0;       // the next op's local slot, counted round (a division per op cost more)
  bool stop = false, kick = true;
  size_t head = 0, n = 0;
  std::vector<WorkRequest> pend;
  std::vector<uint64_t> post_tick, offs;
};

class ClientLoop {
 public:
  ClientLoop(ThreadState& t, PhaseContext& pc)
      : t_(t), pc_(pc), s_(*pc.spec), size_(pc.phase.size), gen_(s_, t.index, size_, pc.seed),
        timeout_ticks_(pc.clock->from_ns(s_.timeout_s * 1e9)), yield_after_ticks_(pc.clock->from_ns(kYieldAfterNs)) {
    uint32_t ring = 1;
    while (ring < s_.depth * 2) ring <<= 1;
    mask_ = ring - 1;
    lanes_.resize(t_.eps.size());
    for (size_t i = 0; i < lanes_.size(); ++i) {
      Lane& l = lanes_[i];
      l.ep = t_.eps[i];
      l.mr = i < t_.lane_mrs.size() ? t_.lane_mrs[i] : t_.mr;
      l.global = t_.first_ep + int(i);
      l.pend.resize(s_.batch);
      l.post_tick.assign(ring, 0);
      l.offs.assign(ring, 0);
    }
    stride_ = align_up(size_);
    kind_ = is_message(pc.phase.op) ? Kind::message : is_atomic(pc.phase.op) ? Kind::atomic : Kind::rma;
    mirror_ = s_.wants_mirror();
    uint64_t slots = std::max<uint64_t>(1, s_.local_area() / stride_);
    // The default local buffer is batch x size for each size of a run, as in a run of that size
    // alone: the small ops of a list do not go round a buffer sized for its largest.
    if (!s_.local_mr && !s_.validate) slots = std::min<uint64_t>(slots, uint64_t(s_.batch));
    // With --validate every send in flight owns its buffer, so each lane has slots of its own.
    lane_slots_ = s_.validate ? std::max<uint64_t>(1, slots / lanes_.size()) : slots;
    local_slots_ = slots;
    echo_off_ = t_.area_off + align_up(s_.local_area());
  }

  Status run(const Budget& b, bool record) {
    switch (pc_.phase.mode) {
      case Mode::bw: return bw(b, record);
      case Mode::lat: return lat(b, record);
    }
    return {};
  }

  void report_lanes() {
    t_.lane_total.clear();
    t_.lane_measured.clear();
    for (auto& l : lanes_) {
      t_.lane_total.push_back(l.msg_base);
      t_.lane_measured.push_back(l.measured);
    }
  }

 private:
  bool over(const Budget& b, uint64_t done, uint64_t now) const {
    return b.count ? done >= b.count : now >= b.end_tick;
  }

  Status fail_cqe(const Lane& l, const Completion& c) {
    std::string what = c.len ? fmt::format("{} of {} B", transport::op_name(c.op), c.len) : transport::op_name(c.op);
    return {Errc::io, fmt::format("thread {}: {} failed: {}", t_.index, what, l.ep->describe_error(c))};
  }
  Status io_error(const Lane& l) { return {Errc::io, fmt::format("thread {}: {}", t_.index, l.ep->last_error())}; }
  Status stalled(uint64_t outstanding) {
    return {Errc::timeout, fmt::format("thread {}: no completion for {:.0f} s with {} ops outstanding "
                                       "(peer dead or transport stalled; --timeout sets the limit)",
                                       t_.index, s_.timeout_s, outstanding)};
  }
  Status interrupted() { return {Errc::interrupted, "stopped"}; }

  // A local slot of its own for every op in flight with --validate (its payload or its fetched value
  // must survive until the op completes), else any slot.
  uint64_t local_slot(size_t lane_idx, uint64_t seq) const {
    return s_.validate ? lane_idx * lane_slots_ + seq % lane_slots_ : seq % local_slots_;
  }

  // local_slot(lane_idx, seq) for the lane's next op, seq counting from 0 at the start of bw().
  uint64_t next_slot(Lane& l, size_t lane_idx) const {
    uint64_t c = l.slot;
    if (++l.slot == (s_.validate ? lane_slots_ : local_slots_)) l.slot = 0;
    return s_.validate ? lane_idx * lane_slots_ + c : c;
  }

  // The fields every op of a phase shares, set once in each pending slot of every lane.
  void prefill() {
    for (auto& l : lanes_)
      for (auto& w : l.pend) {
        w = WorkRequest{};
        w.op = pc_.phase.op;
        w.len = uint32_t(size_);
        w.mr = l.mr;
      }
  }

  // Fills the rest of `w` field by field where it lies: a WorkRequest built aside and copied in
  // was read back whole right after its parts were stored, a store-forwarding stall that took
  // most of the loop.
  void fill(WorkRequest& w, Lane& l, size_t lane_idx, uint64_t seq, uint8_t flags) {
    w.flags = flags;
    w.wr_id = (uint64_t(lane_idx) << kLaneShift) | seq;
    w.imm = uint32_t(l.msg_base + seq);  // the peer checks that immediates arrive in order
    if (kind_ == Kind::message) {
      uint64_t slot = next_slot(l, lane_idx);
      w.local_off = t_.area_off + slot * stride_;
      if (s_.validate)
        fill_pattern(t_.area() + slot * stride_, size_, message_seed(pc_.seed, l.global, l.msg_base + seq), 0);
    } else if (kind_ == Kind::atomic) {
      w.local_off = t_.area_off + next_slot(l, lane_idx) * stride_;
      w.remote_off = counter_offset(s_, t_.index, int(lane_idx));
      set_operands(w, l.msg_base + seq);
    } else {
      uint64_t off = gen_.next();
      l.offs[seq & mask_] = off;
      // With --validate the local area mirrors the remote region, so source and destination share
      // offsets; otherwise the slots go round the local area (local_slots_ of them fit).
      w.local_off = t_.area_off + (mirror_ ? off : next_slot(l, lane_idx) * stride_);
      w.remote_off = off + pc_.remote_base;
      if (s_.validate && (w.op == Op::write || w.op == Op::write_imm)) {
        w.flags = flags | wr_flag::delivery;
        mark_coverage(off);
      }
    }
  }

  // The n-th atomic op of a lane: fadd adds 1; cswap expects n (what the n ops before it left)
  // and stores n + 1, so a chain executed in order always matches and leaves the count.
  static void set_operands(WorkRequest& w, uint64_t n) {
    w.operand = w.op == Op::fadd ? 1 : n + 1;
    w.compare = n;
  }

  Status verify_cswap(const Lane& l, size_t lane_idx, uint64_t seq) {
    uint64_t seen;
    std::memcpy(&seen, t_.area() + local_slot(lane_idx, seq) * stride_, sizeof seen);
    uint64_t want = l.msg_base + seq;
    if (seen == want) return {};
    return {Errc::validation, fmt::format("thread {}: cswap #{} on endpoint {} found {} in the counter, expected {} "
                                          "(the value the cswap before it left)", t_.index, want, l.global, seen, want)};
  }

  void mark_coverage(uint64_t off) {
    auto& cov = t_.coverage;
    uint64_t first = off / kAlign, end = off + size_;
    for (uint64_t g = first; g * kAlign < end; ++g) {
      uint8_t v = (g + 1) * kAlign <= end ? kCoverFull : kCoverPartial;
      if (cov[g] < v) cov[g] = v;
    }
  }

  Status verify_read(const Lane& l, uint64_t seq) {
    uint64_t off = l.offs[seq & mask_];
    const uint8_t* p = t_.area() + off;
    size_t bad = check_pattern(p, size_, pc_.seed, off);
    if (bad == size_) return {};
    return {Errc::validation,
            fmt::format("thread {}: read #{} of {} B at remote offset {:#x}: byte {} is {:#04x}, expected {:#04x}", t_.index,
                        seq, size_, off, bad, p[bad], pattern_byte(pc_.seed, off + bad))};
  }

  // Posts the lane's next ops, --batch at a time, until its window (--depth) is full, it must
  // stop, or the transport refuses more; then the caller polls once. Filling the window before
  // polling, as perftest does, keeps a poll per batch off the path of small messages. With --lazy
  // a lane posts only right after its completion queue gave something back (or when it has
  // nothing in flight), so posts go out in bursts from the completion loop. The number posted, or
  // -1 on a transport error.
  int post_window(Lane& l, size_t i, const Budget& b, uint64_t now) {
    const Clock& clk = *pc_.clock;
    const uint32_t depth = s_.depth, batch = s_.batch, signal = s_.signal;
    int total = 0;
    while (true) {
      if (!l.stop && l.head == l.n) {
        // In duration mode stop only at a signal boundary so the last op posted asks for a completion.
        if ((b.count && l.posted >= l.share) || (!b.count && l.posted % signal == 0 && now >= b.end_tick)) {
          l.stop = true;
        } else {
          uint64_t n = batch;
          if (b.count) n = std::min<uint64_t>(n, l.share - l.posted);
          // A batch ends at the op that asks for a completion: unsignaled ops complete only with
          // it, so a batch straddling it could leave the window full of ops nothing will complete.
          if (signal > 1) n = std::min<uint64_t>(n, signal - l.posted % signal);
          if (l.posted - l.completed + n > depth) n = 0;
          // So at most the batch's last op closes a signal group, or ends the lane's share.
          bool last_signals = (l.posted + n) % signal == 0 || (b.count && l.posted + n == l.share);
          uint8_t before_last = signal == 1 ? wr_flag::signal | wr_flag::more : wr_flag::more;
          uint8_t last = last_signals ? wr_flag::signal : 0;
          for (uint64_t k = 0; k < n; ++k) fill(l.pend[k], l, i, l.posted + k, k + 1 < n ? before_last : last);
          l.head = 0;
          l.n = n;
        }
      }
      if (l.head == l.n || (s_.lazy && !l.kick)) return total;
      int a = l.ep->post({l.pend.data() + l.head, l.n - l.head});
      if (a < 0) return -1;
      for (int k = 0; k < a; ++k) l.post_tick[(l.posted + k) & mask_] = now;
      l.posted += uint64_t(a);
      l.head += size_t(a);
      total += a;
      // Lazy lanes post again after a completion, or when no signaled op is in flight (nothing
      // would ever complete to wake them).
      l.kick = l.head < l.n || l.posted - l.posted % signal <= l.completed;
      if (a == 0 || l.head < l.n || s_.lazy) return total;  // the queue is full, or lazy posts one batch
      now = clk.now();
    }
  }

  // The stream: every lane keeps up to --depth ops in flight (post_window), polling its
  // completion queue once per pass.
  Status bw(const Budget& b, bool record) {
    const Clock& clk = *pc_.clock;
    const uint32_t signal = s_.signal;
    const size_t L = lanes_.size();
    for (size_t i = 0; i < L; ++i) {
      Lane& l = lanes_[i];
      l.posted = l.completed = 0;
      l.slot = 0;
      l.head = l.n = 0;
      l.stop = false;
      l.kick = true;
      l.share = b.count ? b.count / L + (i < b.count % L ? 1 : 0) : 0;
    }
    uint64_t last_progress = clk.now();
    Completion cqes[64];
    prefill();
    int idle = 0;
    while (true) {
      uint64_t now = clk.now();
      if (pc_.abort->load(std::memory_order_relaxed)) return interrupted();
      bool all_done = true, progress = false;
      uint64_t outstanding = 0;
      for (size_t i = 0; i < L; ++i) {
        Lane& l = lanes_[i];
        int posted = post_window(l, i, b, now);
        if (posted < 0) return io_error(l);
        if (posted > 0) progress = true;
        int n = l.ep->poll(cqes);
        if (n < 0) return io_error(l);
        if (n > 0) {
          uint64_t done_tick = clk.now();
          uint64_t ops = 0;
          for (int c = 0; c < n; ++c) {
            const Completion& cq = cqes[c];
            if (!cq.ok()) return fail_cqe(l, cq);
            uint64_t seq = cq.wr_id & kSeqMask, group = signal > 1 ? seq % signal + 1 : 1;
            if (s_.validate && (cq.op == Op::read || cq.op == Op::cswap))
              for (uint64_t q = seq + 1 - group; q <= seq; ++q) {
                Status v = cq.op == Op::read ? verify_read(l, q) : verify_cswap(l, size_t(cq.wr_id >> kLaneShift), q);
                if (!v) return v;
              }
            if (record) t_.hist.record(uint64_t(clk.to_ns(done_tick - l.post_tick[seq & mask_])));
            ops += group;
          }
          l.completed += ops;
          if (record) l.measured += ops;
          l.kick = true;
          progress = true;
          t_.ops.store(t_.ops.load(std::memory_order_relaxed) + ops, std::memory_order_relaxed);
          t_.bytes.store(t_.bytes.load(std::memory_order_relaxed) + ops * size_, std::memory_order_relaxed);
        }
        outstanding += l.posted - l.completed + (l.n - l.head);  // in flight, or refused by a full queue
        all_done = all_done && l.stop && l.completed >= l.posted;
      }
      if (all_done) {
        for (auto& l : lanes_) l.msg_base += l.posted;  // message numbers continue across warm-up and measurement
        return {};
      }
      if (progress) {
        last_progress = now;
        idle = 0;
      } else if (outstanding && now - last_progress > timeout_ticks_) {
        return stalled(outstanding);
      } else if (s_.event && outstanding) {
        Status st = waiter_.sleep(t_.eps, kSleepMs);
        if (!st) return st;
      } else if (++idle > 256) {
        // Nothing completes: the peer (or another of our threads) may need this core to make
        // progress, which matters whenever threads outnumber cores.
        sched_yield();
      }
    }
  }

  // Waits for the completion of `want_id` on `l` (any remote_write when want_op is one) or, when
  // echo_byte is set, for it to flip to `tag`. The awaited completion is copied to `got`.
  Status wait(Lane& l, uint64_t want_id, transport::Op want_op, const uint8_t* echo_byte, uint8_t tag,
              Completion* got = nullptr) {
    const Clock& clk = *pc_.clock;
    uint64_t start = clk.now();
    Completion* cqes = wait_cqes_;  // a member: an array here was zeroed on every call
    bool found = false;
    for (uint32_t spins = 0;; ++spins) {
      if (echo_byte && !pc_.target_progress && spins % PhaseContext::kPassivePollEvery != 0) {
        if (load_acquire(echo_byte) == tag) return {};
        cpu_relax();
        continue;
      }
      int n = l.ep->poll({cqes, kWaitCqes});
      if (n < 0) return io_error(l);
      for (int i = 0; i < n; ++i) {
        if (!cqes[i].ok()) return fail_cqe(l, cqes[i]);
        if (cqes[i].op == want_op && (want_op == Op::remote_write || cqes[i].wr_id == want_id)) {
          found = true;
          if (got) *got = cqes[i];
        }
      }
      if (echo_byte ? load_acquire(echo_byte) == tag : found) return {};
      if (n == 0) {
        uint64_t now = clk.now();
        if (now - start > timeout_ticks_) return stalled(1);
        if (pc_.abort->load(std::memory_order_relaxed)) return interrupted();
        if (s_.event) {
          transport::Endpoint* one[] = {l.ep};
          Status st = waiter_.sleep(one, kSleepMs);
          if (!st) return st;
          continue;
        }
        // Our own copy engine may need this core to answer (threads outnumber cores). A peer
        // process is left alone: yielding here measurably slows network ping-pongs.
        if (pc_.yield_to_engine && now - start > yield_after_ticks_) sched_yield();
      }
    }
  }

  // Ping-pong, one op in flight; iteration i uses endpoint i mod (rails x qps).
  Status lat(const Budget& b, bool record) {
    const Clock& clk = *pc_.clock;
    Op op = pc_.phase.op;
    for (uint64_t i = 0;; ++i, ++seq_) {
      if (over(b, i, clk.now())) return {};
      if (pc_.abort->load(std::memory_order_relaxed)) return interrupted();
      size_t li = seq_ % lanes_.size();
      Lane& l = lanes_[li];
      Timed one;
      Status st = op == Op::write       ? ping_write(l, one)
                  : op == Op::write_imm ? ping_write_imm(l, one)
                  : op == Op::read      ? fetch_read(l, li, one)
                  : is_atomic(op)       ? fetch_atomic(l, li, one)
                                        : ping_send(l, li, one);
      if (!st) return st;
      double ns = clk.to_ns(one.t1 - one.t0);
      if (!round_trip(op)) ns /= 2;  // ping-pong: one message is half the round trip
      if (record) {
        t_.hist.record(uint64_t(ns + 0.5));
        ++l.measured;
      }
      ++l.msg_base;
      t_.ops.store(t_.ops.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
      t_.bytes.store(t_.bytes.load(std::memory_order_relaxed) + size_, std::memory_order_relaxed);
    }
  }

  struct Timed {
    uint64_t t0 = 0, t1 = 0;
  };

  uint64_t lat_id(size_t li) const { return (uint64_t(li) << kLaneShift) | (seq_ & kSeqMask); }
  uint64_t lat_seed() const { return message_seed(pc_.seed, t_.first_ep, seq_); }
  uint8_t* echo() const { return static_cast<uint8_t*>(t_.mr->addr()) + echo_off_; }
  uint64_t slice() const { return uint64_t(t_.index) * s_.gap(); }

  // WRITE: the peer polls the last byte of its slot and writes the payload back into our echo
  // slot; we poll that byte in turn.
  Status ping_write(Lane& l, Timed& tm) {
    uint8_t* src = t_.area();
    uint8_t tag = uint8_t(seq_ % 255 + 1);
    if (s_.validate) fill_pattern(src, size_ - 1, lat_seed(), 0);
    src[size_ - 1] = tag;
    WorkRequest w{Op::write, uint8_t(lat_flags() | wr_flag::polled), uint32_t(size_), l.mr, t_.area_off, slice(), lat_id(0)};
    tm.t0 = pc_.clock->now();
    Status st = l.ep->post({&w, 1}) == 1 ? Status{} : post_retry(l, w);
    if (st) st = wait(l, 0, Op::write, echo() + size_ - 1, tag);
    tm.t1 = pc_.clock->now();
    if (st && s_.validate) st = verify_echo(echo(), size_ - 1, lat_seed(), "write");
    return st;
  }

  // WRITE with immediate: both sides learn of the peer's write from a completion, so both may sleep.
  Status ping_write_imm(Lane& l, Timed& tm) {
    if (s_.validate) fill_pattern(t_.area(), size_, lat_seed(), 0);
    WorkRequest w{Op::write_imm, lat_flags(), uint32_t(size_), l.mr, t_.area_off, slice(), lat_id(0)};
    w.imm = uint32_t(seq_);
    Completion back;
    tm.t0 = pc_.clock->now();
    Status st = l.ep->post({&w, 1}) == 1 ? Status{} : post_retry(l, w);
    if (st) st = wait(l, 0, Op::remote_write, nullptr, 0, &back);
    tm.t1 = pc_.clock->now();
    if (st && s_.validate) st = verify_imm(back, "write-imm");
    if (st && s_.validate) st = verify_echo(echo(), size_, lat_seed(), "write-imm");
    return st;
  }

  Status fetch_read(Lane& l, size_t li, Timed& tm) {
    uint64_t off = s_.random() ? gen_.next() : slice();
    l.offs[(seq_ & kSeqMask) & mask_] = off;
    uint64_t local = s_.wants_mirror() ? off : 0;
    WorkRequest w{Op::read, wr_flag::signal, uint32_t(size_), l.mr, t_.area_off + local, off, lat_id(li)};
    tm.t0 = pc_.clock->now();
    Status st = l.ep->post({&w, 1}) == 1 ? Status{} : post_retry(l, w);
    if (st) st = wait(l, w.wr_id, Op::read, nullptr, 0);
    tm.t1 = pc_.clock->now();
    if (st && s_.validate) st = verify_read(l, seq_ & kSeqMask);
    return st;
  }

  // One atomic on the lane's counter; it held exactly the lane's earlier ops when it ran.
  Status fetch_atomic(Lane& l, size_t li, Timed& tm) {
    WorkRequest w{pc_.phase.op, wr_flag::signal, transport::kAtomicBytes, l.mr, t_.area_off, counter_offset(s_, t_.index, int(li)),
                  lat_id(li)};
    set_operands(w, l.msg_base);
    tm.t0 = pc_.clock->now();
    Status st = l.ep->post({&w, 1}) == 1 ? Status{} : post_retry(l, w);
    if (st) st = wait(l, w.wr_id, w.op, nullptr, 0);
    tm.t1 = pc_.clock->now();
    if (!st || !s_.validate) return st;
    uint64_t seen;
    std::memcpy(&seen, t_.area(), sizeof seen);
    if (seen == l.msg_base) return {};
    return {Errc::validation, fmt::format("thread {}: {} #{} on endpoint {} found {} in the counter, expected {}",
                                          t_.index, transport::op_name(w.op), l.msg_base, l.global, seen, l.msg_base)};
  }

  // SEND (or SEND with immediate): the peer answers each message with one of its own.
  Status ping_send(Lane& l, size_t li, Timed& tm) {
    Op op = pc_.phase.op;
    WorkRequest r{Op::recv, wr_flag::signal, uint32_t(size_), l.mr, echo_off_, 0, lat_id(li)};
    Status st = post_retry(l, r);
    if (s_.validate) fill_pattern(t_.area(), size_, lat_seed(), 0);
    WorkRequest w{op, lat_flags(), uint32_t(size_), l.mr, t_.area_off, 0, lat_id(li)};
    w.imm = uint32_t(seq_);
    Completion back;
    tm.t0 = pc_.clock->now();
    if (st && l.ep->post({&w, 1}) != 1) st = post_retry(l, w);
    if (st) st = wait(l, r.wr_id, Op::recv, nullptr, 0, &back);
    tm.t1 = pc_.clock->now();
    if (st && op == Op::send_imm) st = verify_imm(back, "send-imm");
    if (st && s_.validate) st = verify_echo(echo(), size_, lat_seed(), transport::op_name(op));
    return st;
  }

  Status verify_imm(const Completion& c, const char* what) {
    if (c.has_imm && c.imm == uint32_t(seq_)) return {};
    if (!c.has_imm)
      return {Errc::validation, fmt::format("thread {}: the answer to {} #{} came without immediate data", t_.index, what, seq_)};
    return {Errc::validation, fmt::format("thread {}: the answer to {} #{} carried immediate {}, expected {}", t_.index,
                                          what, seq_, c.imm, uint32_t(seq_))};
  }

  // Small ping-pong payloads go inline and ask for no completion: the echo is the completion.
  uint8_t lat_flags() const { return size_ <= pc_.inject_max ? wr_flag::inject : wr_flag::signal; }

  Status post_retry(Lane& l, const WorkRequest& w) {
    uint64_t start = pc_.clock->now();
    Completion cqes[8];
    while (true) {
      int a = l.ep->post({&w, 1});
      if (a == 1) return {};
      if (a < 0) return io_error(l);
      int n = l.ep->poll(cqes);  // progress; completions of earlier ops are of no further interest
      for (int i = 0; i < n; ++i)
        if (!cqes[i].ok()) return fail_cqe(l, cqes[i]);
      if (pc_.clock->now() - start > timeout_ticks_) return stalled(1);
      if (pc_.abort->load(std::memory_order_relaxed)) return interrupted();
    }
  }

  Status verify_echo(const uint8_t* p, size_t len, uint64_t mseed, const char* what) {
    size_t bad = check_pattern(p, len, mseed, 0);
    if (bad == len) return {};
    return {Errc::validation, fmt::format("thread {}: {} #{} of {} B came back wrong: byte {} is {:#04x}, expected {:#04x}",
                                          t_.index, what, seq_, size_, bad, p[bad], pattern_byte(mseed, bad))};
  }

  ThreadState& t_;
  PhaseContext& pc_;
  const RunSpec& s_;
  uint64_t size_;
  AddressGen gen_;
  uint64_t timeout_ticks_, yield_after_ticks_;
  EventWaiter waiter_;
  uint64_t mask_ = 0, local_slots_ = 1, lane_slots_ = 1, echo_off_ = 0, seq_ = 0;
  uint64_t stride_ = 0;  // bytes between local slots: the op size rounded up to kAlign
  enum class Kind : uint8_t { rma, message, atomic } kind_ = Kind::rma;  // of the phase's op
  bool mirror_ = false;  // the local area mirrors the remote region (RunSpec::wants_mirror)
  static constexpr size_t kWaitCqes = 8;
  Completion wait_cqes_[kWaitCqes];
  std::vector<Lane> lanes_;
};

}  // namespace

// Keeps the endpoints progressing (for the peer's sake) until `until` holds; none of our own ops
// is in flight, so any completion is an error or of no interest.
template <class Until>
Status progress_until(ThreadState& t, PhaseContext& pc, Until until) {
  Completion cq[64];
  int idle = 0;
  while (!until() && !pc.abort->load(std::memory_order_relaxed)) {
    int got = 0;
    for (auto* ep : t.eps) {
      int n = ep->poll(cq);
      if (n < 0) return {Errc::io, fmt::format("thread {}: {}", t.index, ep->last_error())};
      for (int i = 0; i < n; ++i)
        if (!cq[i].ok()) return {Errc::io, fmt::format("thread {}: {}", t.index, ep->describe_error(cq[i]))};
      got += n;
    }
    if (got == 0 && ++idle > 256) sched_yield();
  }
  return {};
}

void run_client_thread(ThreadState& t, PhaseContext& pc, StartBarrier& start) {
  const RunSpec& s = *pc.spec;
  if (!s.cpus.empty()) {
    Status p = pin_this_thread(s.cpus[size_t(t.index) % s.cpus.size()]);
    if (!p) {
      t.status = p;
      pc.abort->store(true);
      start.arrive();
      t.done.store(true);
      return;
    }
  }
  ClientLoop loop(t, pc);
  const Clock& clk = *pc.clock;
  Budget warm, measure;
  if (s.duration_s > 0) {
    warm.end_tick = clk.now() + clk.from_ns(s.warmup_seconds() * 1e9);
  } else {
    warm.count = s.warmup_iters_for(pc.phase.mode);
  }
  Status st = (warm.count || warm.end_tick) ? loop.run(warm, false) : Status{};
  if (!st) {
    t.status = st;
    pc.abort->store(true);
    for (auto* ep : t.eps) (void)ep->quiesce(1);
    start.arrive();
    t.done.store(true);
    return;
  }
  start.arrive();
  Status wait = progress_until(t, pc, [&] { return start.open(); });
  if (!wait) {
    t.status = wait;
    pc.abort->store(true);
    t.done.store(true);
    return;
  }
  // Warm-up boundary: nothing before this point is counted.
  t.hist.reset();
  t.warmup_ops = t.ops.load();
  t.ops.store(0);
  t.bytes.store(0);
  t.measuring.store(true);
  t.t_begin = clk.now();
  if (s.duration_s > 0) measure.end_tick = t.t_begin + clk.from_ns(s.duration_s * 1e9);
  else measure.count = s.iters_for(pc.phase.mode);
  t.status = loop.run(measure, true);
  t.t_end = clk.now();
  loop.report_lanes();
  if (pc.release && t.status.is_ok()) {
    t.measuring.store(false);
    t.done.store(true);
    t.status = progress_until(t, pc, [&] { return pc.release->load(std::memory_order_acquire); });
  }
  quiesce_lanes(t, s.timeout_s);
  t.measuring.store(false);
  if (!t.status) pc.abort->store(true);
  t.done.store(true);
}

}  // namespace rb::engine
