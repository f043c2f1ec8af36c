#pragma once
// The bookkeeping of one endpoint's ops, all of it made up front: a pool of slots, one per op
// UCX holds (handed to UCX as the request's user_data, so a callback knows its op without a
// lookup), and the completions that callbacks leave for poll(). Posting and completing allocate
// nothing; only the completion ring grows, once, if arrivals from the peer outpace poll().
#include <ucp/api/ucp.h>

#include <cstdint>
#include <vector>

#include "core/ring_slots.hh"
#include "transport/transport.hh"

namespace rb::transport::ucx {

// Tagged messages: a send carries tag 0, a send_imm kImmTag with its immediate in the low 32
// bits. Receives match any tag, so both kinds take receives in the order they were posted.
constexpr ucp_tag_t kImmTag = 1ull << 32;
inline ucp_tag_t tag_of(const WorkRequest& w) { return w.op == Op::send_imm ? kImmTag | w.imm : 0; }

// What a write with immediate data tells the target, in an active message's header.
struct ImmNotice {
  uint32_t imm;
  uint32_t len;
};

// Where an op stands once UCX has it: most ops have one request; a write with immediate data
// has two in turn (its put and flush, then the notice), and a delivery-complete write ends
// with the flush that makes it visible.
enum class Stage : uint8_t { single, notify_after_flush };

class OpTable;

struct Slot {
  OpTable* table = nullptr;
  uint64_t wr_id = 0;
  Op op = Op::write;
  uint32_t len = 0;
  bool signal = false;
  Stage stage = Stage::single;
  uint8_t parts = 1;            // requests of this op still to report (a write in two puts has 2)
  ucs_status_t status = UCS_OK; // the first failure among them
  bool pending = false;         // a request of UCX's is out whose callback has not come yet
  void* request = nullptr;      // that request, once UCX returned it
  uint64_t operand = 0;         // atomics: what UCX reads at post (fadd's addend, cswap's compare)
  ImmNotice notice{};           // write_imm: the header of its notice, alive until sent
};

// A ring of completions that grows when full and never shrinks.
class CompletionRing {
 public:
  explicit CompletionRing(uint64_t capacity) : v_(capacity) {}
  bool empty() const { return head_ == tail_; }
  // The next entry, for the caller to fill field by field: a Completion built elsewhere and
  // copied in is read back, 16 bytes at a time, from stores of 1 to 8 bytes just made, which
  // stalls on store forwarding once per op.
  Completion& push() {
    if (tail_ - head_ == v_.capacity()) grow();
    return v_[tail_++];
  }
  size_t take(std::span<Completion> out) {
    size_t n = 0;
    for (; n < out.size() && head_ != tail_; ++n) out[n] = v_[head_++];
    return n;
  }
  void clear() { head_ = tail_ = 0; }

 private:
  void grow() {
    RingSlots<Completion> bigger(v_.capacity() * 2);
    for (uint64_t i = head_; i != tail_; ++i) bigger[i - head_] = v_[i];
    tail_ -= head_;
    head_ = 0;
    v_ = std::move(bigger);
  }
  RingSlots<Completion> v_;
  uint64_t head_ = 0, tail_ = 0;
};

class OpTable {
 public:
  explicit OpTable(uint32_t slots);
  OpTable(const OpTable&) = delete;  // slots point back here
  OpTable& operator=(const OpTable&) = delete;

  // A free slot filled from `w`, or null when every slot is taken (the endpoint is busy).
  Slot* acquire(const WorkRequest& w) {
    if (n_free_ == 0) return nullptr;
    Slot* s = free_[--n_free_];
    s->wr_id = w.wr_id;
    s->op = w.op;
    s->len = w.op == Op::fadd || w.op == Op::cswap ? kAtomicBytes : w.len;
    s->signal = w.flags & wr_flag::signal;
    s->stage = Stage::single;
    s->parts = 1;
    s->status = UCS_OK;
    s->pending = false;
    s->request = nullptr;
    return s;
  }
  // Marks `s` as waiting for UCX; call before handing UCX a request for it.
  void starting(Slot& s) { s.pending = true; }
  // The op takes one more request than it had, each reported through started() or a callback;
  // it completes when the last one has.
  void add_part(Slot& s) { ++s.parts; }
  // What UCX returned: done at once (UCS_OK), in flight (a request; unless its callback has
  // already run inside the call, as for a receive posted with UCP_OP_ATTR_FLAG_NO_IMM_CMPL), or
  // failed. A failure is a completion like any other: errors are values.
  void started(Slot& s, ucs_status_ptr_t r) {
    if (r == nullptr) finish(s, UCS_OK, s.len);
    else if (UCS_PTR_IS_ERR(r)) finish(s, UCS_PTR_STATUS(r), s.len);
    else if (s.pending) s.request = r;  // else the callback has run (and freed it) already
  }
  // A request of the op ended. Once the last has: queues the op's completion (signaled ops and
  // every failure) and frees the slot, or moves a write with immediate data on to its notice.
  void finish(Slot& s, ucs_status_t st, uint32_t len, bool has_imm = false, uint32_t imm = 0) {
    // Every field is read before any is written: a read of bytes just stored (parts, pending)
    // stalls on store forwarding, and this runs once per op.
    ucs_status_t status = s.status == UCS_OK ? st : s.status;
    uint8_t parts = uint8_t(s.parts - 1);
    bool notify = s.stage == Stage::notify_after_flush, signal = s.signal;
    s.pending = false;
    s.request = nullptr;
    s.status = status;
    s.parts = parts;
    if (parts > 0) return;
    if (notify && status == UCS_OK) {
      notify_next(s);
      return;
    }
    if (signal || status != UCS_OK) report(s, len, has_imm, imm);
    free_[n_free_++] = &s;
  }
  // An op that UCX finished inside the post, with no slot (wr_flag::inject): its completion, if
  // signaled or failed.
  void done_at_once(const WorkRequest& w, ucs_status_t st) {
    if (!(w.flags & wr_flag::signal) && st == UCS_OK) return;
    Slot s;
    s.wr_id = w.wr_id;
    s.op = w.op;
    s.status = st;
    report(s, w.len, false, 0);
  }
  // A receive ended: its length and immediate come from what arrived.
  void received(Slot& s, ucs_status_t st, const ucp_tag_recv_info_t& info);

  // A notice of a write with immediate data has arrived from the peer.
  void arrived(const ImmNotice& n);
  // Writes with immediate data whose data is visible: the endpoint sends their notices.
  bool notices_waiting() const { return ready_head_ != ready_tail_; }
  Slot* next_notice() { return notices_waiting() ? ready_[ready_head_++ % ready_.size()] : nullptr; }

  size_t take(std::span<Completion> out) { return cq_.take(out); }
  bool has_completions() const { return !cq_.empty(); }
  void drop_completions() { cq_.clear(); }
  uint32_t in_flight() const { return uint32_t(slots_.size()) - n_free_; }
  // Every slot UCX holds a request of, for cancelling receives.
  template <class F>
  void for_each_in_flight(F&& f) {
    for (auto& s : slots_)
      if (s.request) f(s);
  }

 private:
  void notify_next(Slot& s);
  void report(const Slot& s, uint32_t len, bool has_imm, uint32_t imm);

  std::vector<Slot> slots_;
  std::vector<Slot*> free_;   // a stack of n_free_ free slots
  std::vector<Slot*> ready_;  // notices to send, oldest first: the target checks their order
  uint64_t ready_head_ = 0, ready_tail_ = 0;
  uint32_t n_free_ = 0;
  CompletionRing cq_;
};

}  // namespace rb::transport::ucx
