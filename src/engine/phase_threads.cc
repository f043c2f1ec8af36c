#include "engine/phase_threads.hh"

#include <algorithm>

namespace rb::engine {

std::vector<std::unique_ptr<ThreadState>> thread_states(const Session& session, int threads,
                                                        const std::vector<const transport::MemoryRegion*>& mr_in_domain,
                                                        const std::function<uint64_t(int)>& area_of) {
  const size_t ept = size_t(session.ept);
  std::vector<std::unique_ptr<ThreadState>> out;
  for (int t = 0; t < threads; ++t) {
    auto st = std::make_unique<ThreadState>();
    st->index = t;
    st->first_ep = int(size_t(t) * ept);
    st->qps = session.qps;
    st->mr = mr_in_domain[0];
    for (size_t e = 0; e < ept; ++e) {
      size_t global = size_t(t) * ept + e;
      st->eps.push_back(session.eps[global].get());
      st->lane_mrs.push_back(mr_in_domain[session.domain_of_endpoint(global)]);
    }
    st->area_off = area_of(t);
    out.push_back(std::move(st));
  }
  return out;
}

std::vector<const transport::MemoryRegion*> session_mrs(const Session& session) {
  std::vector<const transport::MemoryRegion*> out;
  for (const auto& mr : session.mrs) out.push_back(mr.get());
  return out;
}

void in_pieces(uint64_t len, const std::function<void(uint64_t off, uint64_t n)>& fn, const std::function<void()>& between) {
  constexpr uint64_t kPiece = 64ull << 20;
  for (uint64_t off = 0; off < len; off += kPiece) {
    fn(off, std::min(kPiece, len - off));
    between();
  }
}

void quiesce_lanes(ThreadState& t, double timeout_s) {
  double settle = t.status.is_ok() ? timeout_s : std::min(1.0, timeout_s);
  for (auto* ep : t.eps) {
    Status q = ep->quiesce(settle);
    if (t.status.is_ok() && !q.is_ok()) t.status = q;
  }
}

Status first_failure(const std::vector<std::unique_ptr<ThreadState>>& threads, const std::function<bool(size_t)>& stopped) {
  for (size_t i = 0; i < threads.size(); ++i)
    if (stopped(i) && !threads[i]->status && threads[i]->status.code() != Errc::interrupted) return threads[i]->status;
  return {};
}

}  // namespace rb::engine
