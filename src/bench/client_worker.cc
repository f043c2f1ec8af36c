#include <sched.h>

#include <algorithm>
#include <atomic>

#include <fmt/format.h>

#include "bench/addressing.hh"
#include "bench/pattern.hh"
#include "bench/worker.hh"
#include "core/affinity.hh"

namespace rb::bench {
namespace {

using transport::Completion;
using transport::WorkRequest;
namespace wr_flag = transport::wr_flag;

inline uint8_t load_acquire(const uint8_t* p) { return std::atomic_ref<const uint8_t>(*p).load(std::memory_order_acquire); }

constexpr double kYieldAfterNs = 50e3;

struct Budget {  // how long a loop runs: a count, or until a tick
  uint64_t count = 0;
  uint64_t end_tick = 0;
};

class ClientLoop {
 public:
  ClientLoop(ThreadState& t, PhaseContext& pc)
      : t_(t), pc_(pc), s_(*pc.spec), size_(pc.phase.size), gen_(s_, t.index, size_, pc.seed),
        timeout_ticks_(pc.clock->from_ns(s_.timeout_s * 1e9)), yield_after_ticks_(pc.clock->from_ns(kYieldAfterNs)) {
    uint32_t ring = 1;
    while (ring < s_.depth * 2) ring <<= 1;
    mask_ = ring - 1;
    post_tick_.assign(ring, 0);
    offs_.assign(ring, 0);
    wrs_.resize(s_.batch);
    local_slots_ = std::max<uint64_t>(1, s_.local_area() / align_up(size_));
    echo_off_ = t_.area_off + align_up(s_.local_area());
  }

  Status run(const Budget& b, bool record) {
    switch (pc_.phase.mode) {
      case Mode::bw: return bw(b, record);
      case Mode::lat: return lat(b, record);
    }
    return {};
  }

 private:
  bool over(const Budget& b, uint64_t done, uint64_t now) const {
    return b.count ? done >= b.count : now >= b.end_tick;
  }

  Status fail_cqe(const Completion& c) {
    return {Errc::io, fmt::format("thread {}: {} of {} B failed: {}", t_.index, transport::op_name(c.op), c.len,
                                  t_.ep->describe_error(c.err))};
  }
  Status stalled(uint64_t outstanding) {
    return {Errc::timeout, fmt::format("thread {}: no completion for {:.0f} s with {} ops outstanding "
                                       "(peer dead or transport stalled; --timeout sets the limit)",
                                       t_.index, s_.timeout_s, outstanding)};
  }
  Status interrupted() { return {Errc::interrupted, "stopped"}; }

  WorkRequest make(uint64_t seq, uint8_t flags) {
    Op op = pc_.phase.op;
    WorkRequest w{op, flags, uint32_t(size_), t_.mr, 0, 0, seq};
    if (op == Op::send) {
      uint64_t slot = seq % local_slots_;
      w.local_off = t_.area_off + slot * align_up(size_);
      if (s_.validate)
        fill_pattern(t_.area() + slot * align_up(size_), size_, message_seed(pc_.seed, t_.index, seq_ + seq), 0);
    } else {
      uint64_t off = gen_.next();
      offs_[seq & mask_] = off;
      // With --validate the local area mirrors the remote region, so source and destination share offsets.
      w.local_off = t_.area_off + (s_.wants_mirror() ? off : (seq % local_slots_) * align_up(size_) % s_.local_area());
      w.remote_off = off;
      if (s_.validate && op == Op::write) {
        flags |= wr_flag::delivery;
        w.flags = flags;
        mark_coverage(off);
      }
    }
    return w;
  }

  void mark_coverage(uint64_t off) {
    auto& cov = t_.coverage;
    uint64_t first = off / kAlign, end = off + size_;
    for (uint64_t g = first; g * kAlign < end; ++g) {
      uint8_t v = (g + 1) * kAlign <= end ? kCoverFull : kCoverPartial;
      if (cov[g] < v) cov[g] = v;
    }
  }

  Status verify_read(uint64_t seq) {
    uint64_t off = offs_[seq & mask_];
    const uint8_t* p = t_.area() + off;
    size_t bad = check_pattern(p, size_, pc_.seed, off);
    if (bad == size_) return {};
    return {Errc::validation,
            fmt::format("thread {}: read #{} of {} B at remote offset {:#x}: byte {} is {:#04x}, expected {:#04x}", t_.index,
                        seq, size_, off, bad, p[bad], pattern_byte(pc_.seed, off + bad))};
  }

  Status bw(const Budget& b, bool record) {
    const Clock& clk = *pc_.clock;
    const uint32_t depth = s_.depth, batch = s_.batch, signal = s_.signal;
    uint64_t posted = 0, completed = 0, last_progress = clk.now();
    size_t pend_n = 0, pend_head = 0;
    bool stop_posting = false;
    Completion cqes[64];
    int idle = 0;
    while (true) {
      uint64_t now = clk.now();
      if (!stop_posting && pend_head == pend_n) {
        // In duration mode stop only at a signal boundary so the last op posted asks for a completion.
        if ((b.count && posted >= b.count) || (!b.count && posted % signal == 0 && now >= b.end_tick)) stop_posting = true;
        if (pc_.abort->load(std::memory_order_relaxed)) return interrupted();
      }
      if (!stop_posting && pend_head == pend_n && posted - completed + batch <= depth) {
        uint64_t n = batch;
        if (b.count) n = std::min<uint64_t>(n, b.count - posted);
        for (uint64_t k = 0; k < n; ++k) {
          uint64_t seq = posted + k;
          bool sig = (seq + 1) % signal == 0 || (b.count && seq + 1 == b.count);
          uint8_t flags = (sig ? wr_flag::signal : 0) | (k + 1 < n ? wr_flag::more : 0);
          wrs_[k] = make(seq, flags);
        }
        pend_head = 0;
        pend_n = n;
      }
      if (pend_head < pend_n) {
        int a = t_.ep->post({wrs_.data() + pend_head, pend_n - pend_head});
        if (a < 0) return {Errc::io, fmt::format("thread {}: {}", t_.index, t_.ep->last_error())};
        for (int k = 0; k < a; ++k) post_tick_[(posted + k) & mask_] = now;
        posted += uint64_t(a);
        pend_head += size_t(a);
      }
      int n = t_.ep->poll(cqes);
      if (n < 0) return {Errc::io, fmt::format("thread {}: {}", t_.index, t_.ep->last_error())};
      if (n > 0) {
        uint64_t done_tick = clk.now();
        uint64_t ops = 0;
        for (int i = 0; i < n; ++i) {
          const Completion& c = cqes[i];
          if (c.err) return fail_cqe(c);
          uint64_t seq = c.wr_id, group = signal > 1 ? seq % signal + 1 : 1;
          if (s_.validate && c.op == Op::read)
            for (uint64_t q = seq + 1 - group; q <= seq; ++q) {
              Status v = verify_read(q);
              if (!v) return v;
            }
          if (record) t_.hist.record(uint64_t(clk.to_ns(done_tick - post_tick_[seq & mask_])));
          ops += group;
        }
        completed += ops;
        last_progress = done_tick;
        t_.ops.store(t_.ops.load(std::memory_order_relaxed) + ops, std::memory_order_relaxed);
        t_.bytes.store(t_.bytes.load(std::memory_order_relaxed) + ops * size_, std::memory_order_relaxed);
        idle = 0;
      } else if (posted > completed && now - last_progress > timeout_ticks_) {
        return stalled(posted - completed);
      } else if (++idle > 256) {
        // Nothing completes: the peer (or another of our threads) may need this core to make
        // progress, which matters whenever threads outnumber cores.
        sched_yield();
      }
      if (stop_posting && completed >= posted) {
        seq_ += posted;  // message numbers continue across warm-up and measurement, as the peer counts them
        return {};
      }
    }
  }

  // Waits for the completion of `want` (a wr_id) or, when want_echo, for the echo byte to flip.
  Status wait(uint64_t want_id, transport::Op want_op, const uint8_t* echo_byte, uint8_t tag) {
    const Clock& clk = *pc_.clock;
    uint64_t start = clk.now();
    Completion cqes[8];
    bool got = false;
    while (true) {
      int n = t_.ep->poll(cqes);
      if (n < 0) return {Errc::io, fmt::format("thread {}: {}", t_.index, t_.ep->last_error())};
      for (int i = 0; i < n; ++i) {
        if (cqes[i].err) return fail_cqe(cqes[i]);
        if (cqes[i].op == want_op && cqes[i].wr_id == want_id) got = true;
      }
      if (echo_byte ? load_acquire(echo_byte) == tag : got) return {};
      if (n == 0) {
        uint64_t now = clk.now();
        if (now - start > timeout_ticks_) return stalled(1);
        if (pc_.abort->load(std::memory_order_relaxed)) return interrupted();
        // Our own copy engine may need this core to answer (threads outnumber cores). A peer
        // process is left alone: yielding here measurably slows network ping-pongs.
        if (pc_.yield_to_engine && now - start > yield_after_ticks_) sched_yield();
      }
    }
  }

  Status lat(const Budget& b, bool record) {
    const Clock& clk = *pc_.clock;
    Op op = pc_.phase.op;
    uint8_t* src = t_.area();
    uint8_t* echo = static_cast<uint8_t*>(t_.mr->addr()) + echo_off_;
    uint64_t remote = uint64_t(t_.index) * s_.gap();
    for (uint64_t i = 0;; ++i, ++seq_) {
      uint64_t now = clk.now();
      if (over(b, i, now)) return {};
      if (pc_.abort->load(std::memory_order_relaxed)) return interrupted();
      uint64_t mseed = message_seed(pc_.seed, t_.index, seq_);
      uint64_t t0, t1;
      Status st;
      if (op == Op::write) {
        uint8_t tag = uint8_t(seq_ % 255 + 1);
        if (s_.validate) fill_pattern(src, size_ - 1, mseed, 0);
        src[size_ - 1] = tag;
        WorkRequest w{Op::write, lat_flags(), uint32_t(size_), t_.mr, t_.area_off, remote, seq_};
        t0 = clk.now();
        if (t_.ep->post({&w, 1}) != 1) st = post_retry(w);
        if (st) st = wait(0, Op::write, echo + size_ - 1, tag);
        t1 = clk.now();
        if (st && s_.validate) st = verify_echo(echo, size_ - 1, mseed, "write");
      } else if (op == Op::read) {
        uint64_t off = s_.random() ? gen_.next() : remote;
        offs_[seq_ & mask_] = off;
        uint64_t local = s_.wants_mirror() ? off : 0;
        WorkRequest w{Op::read, wr_flag::signal, uint32_t(size_), t_.mr, t_.area_off + local, off, seq_};
        t0 = clk.now();
        if (t_.ep->post({&w, 1}) != 1) st = post_retry(w);
        if (st) st = wait(seq_, Op::read, nullptr, 0);
        t1 = clk.now();
        if (st && s_.validate) st = verify_read(seq_);
      } else {
        WorkRequest r{Op::recv, wr_flag::signal, uint32_t(size_), t_.mr, echo_off_, 0, seq_};
        st = post_retry(r);
        if (s_.validate) fill_pattern(src, size_, mseed, 0);
        WorkRequest w{Op::send, lat_flags(), uint32_t(size_), t_.mr, t_.area_off, 0, seq_};
        t0 = clk.now();
        if (st && t_.ep->post({&w, 1}) != 1) st = post_retry(w);
        if (st) st = wait(seq_, Op::recv, nullptr, 0);
        t1 = clk.now();
        if (st && s_.validate) st = verify_echo(echo, size_, mseed, "send");
      }
      if (!st) return st;
      double ns = clk.to_ns(t1 - t0);
      if (op != Op::read) ns /= 2;  // ping-pong: one message is half the round trip
      if (record) t_.hist.record(uint64_t(ns + 0.5));
      t_.ops.store(t_.ops.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
      t_.bytes.store(t_.bytes.load(std::memory_order_relaxed) + size_, std::memory_order_relaxed);
    }
  }

  // Small ping-pong payloads go inline and ask for no completion: the echo is the completion.
  uint8_t lat_flags() const { return size_ <= pc_.inject_max ? wr_flag::inject : wr_flag::signal; }

  Status post_retry(const WorkRequest& w) {
    uint64_t start = pc_.clock->now();
    Completion cqes[8];
    while (true) {
      int a = t_.ep->post({&w, 1});
      if (a == 1) return {};
      if (a < 0) return {Errc::io, fmt::format("thread {}: {}", t_.index, t_.ep->last_error())};
      int n = t_.ep->poll(cqes);  // progress; completions of earlier ops are of no further interest
      for (int i = 0; i < n; ++i)
        if (cqes[i].err) return fail_cqe(cqes[i]);
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
  uint64_t mask_ = 0, local_slots_ = 1, echo_off_ = 0, seq_ = 0;
  std::vector<uint64_t> post_tick_, offs_;
  std::vector<WorkRequest> wrs_;
};

}  // namespace

void run_client_thread(ThreadState& t, PhaseContext& pc, StartBarrier& start) {
  const RunSpec& s = *pc.spec;
  if (!s.cpus.empty()) {
    Status p = pin_this_thread(s.cpus[size_t(t.index) % s.cpus.size()]);
    if (!p) {
      t.status = p;
      pc.abort->store(true);
      start.arrive_and_drop();
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
    (void)t.ep->quiesce(1);
    start.arrive_and_drop();
    t.done.store(true);
    return;
  }
  start.arrive_and_wait();
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
  Status q = t.ep->quiesce(s.timeout_s);
  if (t.status.is_ok() && !q.is_ok()) t.status = q;
  t.measuring.store(false);
  if (!t.status) pc.abort->store(true);
  t.done.store(true);
}

}  // namespace rb::bench
