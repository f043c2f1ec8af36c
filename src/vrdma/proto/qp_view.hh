#pragma once
// A QP's shared memory as laid out by another process, checked before anything in it is used:
// the header's magic and offsets against the mapping's size, then each ring's own header. The
// fuzzer drives this with arbitrary bytes.
#include <span>

#include "core/spsc_ring.hh"
#include "core/status.hh"
#include "vrdma/proto/qp_layout.hh"

namespace rb::vrdma {

struct QpView {
  proto::QpHeader* header;
  SpscRing<proto::RecvEntry> recvs;
  SpscRing<proto::Arrival> arrivals;
  SpscRing<proto::SendEntry> sends;  // router path: the owner's requests
  SpscRing<proto::Cqe> cqes;         // router path: the router's answers
};

// Bytes of a QP's memory with `recv_slots` and `send_slots` (powers of two), and the offsets of
// its rings, as view_qp expects them.
struct QpLayout {
  uint64_t recv_off, arrival_off, send_off, cqe_off, total;
};
QpLayout qp_layout(uint64_t recv_slots, uint64_t send_slots);

// `mem` must be 64-byte aligned (a mapping is).
Result<QpView> view_qp(std::span<uint8_t> mem);

}  // namespace rb::vrdma
