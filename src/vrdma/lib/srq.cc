#include "vrdma/lib/srq.hh"

#include <algorithm>

namespace rb::vrdma {

Call<std::unique_ptr<Srq>> Srq::create(Context& ctx, uint32_t pd, uint32_t max_wr) {
  auto fail = [](int err, std::string m) {
    Call<std::unique_ptr<Srq>> c;
    c.error = {err, std::move(m)};
    return c;
  };
  if (max_wr == 0 || max_wr > (1u << 16)) return fail(EINVAL, "an SRQ's max_wr goes from 1 to 65536");
  uint64_t slots = 1;
  while (slots < max_wr) slots <<= 1;
  auto mem = SharedMemory::create("vrdma-srq", SpscRing<proto::RecvEntry>::bytes_for(slots));
  if (!mem) return fail(ENOMEM, mem.status().message());
  std::unique_ptr<Srq> s(new Srq(ctx, pd, std::move(*mem)));
  auto ring = SpscRing<proto::RecvEntry>::create({s->mem_.data(), s->mem_.size()}, slots);
  if (!ring) return fail(EIO, "cannot lay out the SRQ's ring");
  s->ring_.emplace(*ring);
  auto num = ctx.create_srq(pd, s->mem_.fd(), s->mem_.size());
  if (!num.ok()) return fail(num.error.err, num.error.message);
  s->num_ = *num.value;
  Call<std::unique_ptr<Srq>> c;
  c.value = std::move(s);
  return c;
}

bool Srq::buffers_ok(const vrdma_recv_wr& wr) const {
  if (wr.num_sge < 0 || wr.num_sge > int(proto::kMaxSge)) return false;
  for (int i = 0; i < wr.num_sge; ++i) {
    const vrdma_sge& g = wr.sg_list[i];
    const Region* r = ctx_.region(g.lkey);
    if (!r || r->pd != pd_ || !(r->access & proto::local_write)) return false;
    uint64_t va = r->va();
    if (g.addr < va || g.length > r->len || g.addr - va > r->len - g.length) return false;
  }
  return true;
}

int Srq::post(vrdma_recv_wr* wr, vrdma_recv_wr** bad) {
  std::lock_guard lk(mu_);
  for (; wr; wr = wr->next) {
    if (!buffers_ok(*wr)) {
      if (bad) *bad = wr;
      return wr->num_sge > int(proto::kMaxSge) || wr->num_sge < 0 ? EINVAL : EFAULT;
    }
    if (!ring_->push(recv_entry(*wr, next_seq_))) {
      if (bad) *bad = wr;
      return ENOMEM;
    }
    outstanding_.emplace(next_seq_++, wr->wr_id);
  }
  return 0;
}

std::optional<uint64_t> Srq::take(uint64_t seq) {
  std::lock_guard lk(mu_);
  auto it = outstanding_.find(seq);
  if (it == outstanding_.end()) return std::nullopt;
  uint64_t wr_id = it->second;
  outstanding_.erase(it);
  return wr_id;
}

}  // namespace rb::vrdma
