#include "vrdma/lib/qp_view.hh"

namespace rb::vrdma {

Result<QpView> view_qp(std::span<uint8_t> mem) {
  auto bad = [](const char* why) { return Status(Errc::validation, std::string("the peer QP's memory: ") + why); };
  uint64_t L = mem.size();
  if (L < sizeof(proto::QpHeader)) return bad("shorter than its header");
  auto* h = reinterpret_cast<proto::QpHeader*>(mem.data());
  if (h->magic != proto::kQpMagic) return bad("not laid out as a QP");
  uint64_t r = h->recv_ring_off, a = h->arrival_ring_off;  // read once: the peer may change them
  if (r < sizeof(proto::QpHeader) || r >= L || a >= L || a <= r || r % 64 || a % 64) return bad("ring offsets out of place");
  auto recvs = SpscRing<proto::RecvEntry>::attach(mem.subspan(r, a - r));
  if (!recvs) return recvs.status();
  auto arrivals = SpscRing<proto::Arrival>::attach(mem.subspan(a));
  if (!arrivals) return arrivals.status();
  return QpView{h, *recvs, *arrivals};
}

}  // namespace rb::vrdma
