#include "transport/ucx/op_table.hh"

#include "transport/ucx/ucx_status.hh"

namespace rb::transport::ucx {

OpTable::OpTable(uint32_t slots) : slots_(slots), free_(slots), ready_(slots), n_free_(slots), cq_(slots * 2) {
  for (uint32_t i = 0; i < slots; ++i) {
    slots_[i].table = this;
    free_[i] = &slots_[i];
  }
}

void OpTable::notify_next(Slot& s) {
  s.stage = Stage::single;
  s.parts = 1;
  ready_[ready_tail_++ % ready_.size()] = &s;
}

void OpTable::report(const Slot& s, uint32_t len, bool has_imm, uint32_t imm) {
  Completion& c = cq_.push();
  c.wr_id = s.wr_id;
  c.op = s.op;
  c.len = len;
  c.status = s.status == UCS_OK ? WcStatus::success : wc_status_of(s.status);
  c.vendor_err = int(s.status);
  c.has_imm = has_imm;
  c.imm = has_imm ? imm : 0;
}

void OpTable::received(Slot& s, ucs_status_t st, const ucp_tag_recv_info_t& info) {
  bool arrived = st == UCS_OK || st == UCS_ERR_MESSAGE_TRUNCATED;  // else (cancelled) nothing came
  uint32_t len = arrived ? uint32_t(info.length) : s.len;
  bool has_imm = arrived && (info.sender_tag & kImmTag);
  finish(s, st, len, has_imm, uint32_t(info.sender_tag));
}

void OpTable::arrived(const ImmNotice& n) {
  Completion& c = cq_.push();
  c.wr_id = 0;
  c.op = Op::remote_write;
  c.len = n.len;
  c.status = WcStatus::success;
  c.vendor_err = 0;
  c.has_imm = true;
  c.imm = n.imm;
}

}  // namespace rb::transport::ucx
