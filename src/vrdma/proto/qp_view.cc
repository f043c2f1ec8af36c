#include "vrdma/proto/qp_view.hh"

namespace rb::vrdma {

namespace {
uint64_t align64(uint64_t n) { return (n + 63) & ~uint64_t(63); }
}  // namespace

QpLayout qp_layout(uint64_t recv_slots, uint64_t send_slots) {
  QpLayout l;
  l.recv_off = align64(sizeof(proto::QpHeader));
  l.arrival_off = l.recv_off + align64(SpscRing<proto::RecvEntry>::bytes_for(recv_slots));
  l.send_off = l.arrival_off + align64(SpscRing<proto::Arrival>::bytes_for(recv_slots));
  l.cqe_off = l.send_off + align64(SpscRing<proto::SendEntry>::bytes_for(send_slots));
  l.total = l.cqe_off + align64(SpscRing<proto::Cqe>::bytes_for(send_slots));
  return l;
}

Result<QpView> view_qp(std::span<uint8_t> mem) {
  auto bad = [](const char* why) { return Status(Errc::validation, std::string("the peer QP's memory: ") + why); };
  uint64_t L = mem.size();
  if (L < sizeof(proto::QpHeader)) return bad("shorter than its header");
  auto* h = reinterpret_cast<proto::QpHeader*>(mem.data());
  if (h->magic != proto::kQpMagic) return bad("not laid out as a QP");
  // Read once: the peer may change them under us.
  uint64_t r = h->recv_ring_off, a = h->arrival_ring_off, s = h->send_ring_off, c = h->cqe_ring_off;
  if (r < sizeof(proto::QpHeader) || !(r < a && a < s && s < c && c < L) || (r | a | s | c) % 64)
    return bad("ring offsets out of place");
  auto recvs = SpscRing<proto::RecvEntry>::attach(mem.subspan(r, a - r));
  if (!recvs) return recvs.status();
  auto arrivals = SpscRing<proto::Arrival>::attach(mem.subspan(a, s - a));
  if (!arrivals) return arrivals.status();
  auto sends = SpscRing<proto::SendEntry>::attach(mem.subspan(s, c - s));
  if (!sends) return sends.status();
  auto cqes = SpscRing<proto::Cqe>::attach(mem.subspan(c));
  if (!cqes) return cqes.status();
  return QpView{h, *recvs, *arrivals, *sends, *cqes};
}

}  // namespace rb::vrdma
