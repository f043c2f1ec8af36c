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
};

// `mem` must be 64-byte aligned (a mapping is).
Result<QpView> view_qp(std::span<uint8_t> mem);

}  // namespace rb::vrdma
