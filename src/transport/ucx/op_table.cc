#include "transport/ucx/op_table.hh"

#include "transport/ucx/ucx_status.hh"

namespace rb::transport::ucx {

OpTable::OpTable(uint32_t slots) : slots_(slots), free_(slots), ready_(slots), n_free_(slots), cq_(slots * 2) {
  for (uint32_t i = 0; i < slots; ++i) {
    slots_[i].table = this;
    free_[i] = &slots_[i];
  }
}

Slot* OpTable::acquire(const WorkRequest& w) {
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

void OpTable::started(Slot& s, ucs_status_ptr_t r) {
  if (r == nullptr) finish(s, UCS_OK, s.len);
  else if (UCS_PTR_IS_ERR(r)) finish(s, UCS_PTR_STATUS(r), s.len);
  else if (s.pending) s.request = r;  // else the callback has run (and freed it) already
}

void OpTable::finish(Slot& s, ucs_status_t st, uint32_t len, bool has_imm, uint32_t imm) {
  s.pending = false;
  s.request = nullptr;
  if (s.status == UCS_OK) s.status = st;
  if (--s.parts > 0) return;
  if (s.stage == Stage::notify_after_flush && s.status == UCS_OK) {
    s.stage = Stage::single;
    s.parts = 1;
    ready_[ready_tail_++ % ready_.size()] = &s;
    return;
  }
  if (s.signal || s.status != UCS_OK) {
    Completion c{s.wr_id, s.op, len, wc_status_of(s.status), int(s.status)};
    c.has_imm = has_imm;
    c.imm = has_imm ? imm : 0;
    cq_.push(c);
  }
  release(s);
}

void OpTable::received(Slot& s, ucs_status_t st, const ucp_tag_recv_info_t& info) {
  bool arrived = st == UCS_OK || st == UCS_ERR_MESSAGE_TRUNCATED;  // else (cancelled) nothing came
  uint32_t len = arrived ? uint32_t(info.length) : s.len;
  bool has_imm = arrived && (info.sender_tag & kImmTag);
  finish(s, st, len, has_imm, uint32_t(info.sender_tag));
}

void OpTable::arrived(const ImmNotice& n) {
  Completion c{0, Op::remote_write, n.len};
  c.has_imm = true;
  c.imm = n.imm;
  cq_.push(c);
}

}  // namespace rb::transport::ucx
