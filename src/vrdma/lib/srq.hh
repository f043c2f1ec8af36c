#pragma once
// A shared receive queue: the receives the SENDs to any of its QPs take, in the order posted.
// The ring lives in shared memory the router maps and hands to its QPs' peers on the direct path;
// every sender (those peers' libraries, the router) claims a receive with a compare-and-swap of
// the head. Each arrival names the receive it used by number, and the QP that got it reports
// the completion.
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>

#include <vrdma/vrdma.h>

#include "core/shm.hh"
#include "core/spsc_ring.hh"
#include "vrdma/lib/context.hh"
#include "vrdma/proto/qp_layout.hh"

namespace rb::vrdma {

// A receive request (checked already) as the entry a ring carries, numbered `seq`.
inline proto::RecvEntry recv_entry(const vrdma_recv_wr& wr, uint64_t seq) {
  proto::RecvEntry e;
  e.wr_id = wr.wr_id;
  e.seq = seq;
  e.nsge = uint32_t(wr.num_sge);
  for (int i = 0; i < wr.num_sge; ++i) e.sge[i] = {wr.sg_list[i].addr, wr.sg_list[i].length, wr.sg_list[i].lkey};
  return e;
}

class Srq {
 public:
  static Call<std::unique_ptr<Srq>> create(Context& ctx, uint32_t pd, uint32_t max_wr);
  uint32_t num() const { return num_; }
  uint32_t pd() const { return pd_; }
  uint32_t capacity() const { return uint32_t(ring_->capacity()); }
  // Thread-safe, as verbs' post_srq_recv is.
  int post(vrdma_recv_wr* wr, vrdma_recv_wr** bad);
  // The wr_id of receive `seq`, which is then no longer outstanding; nullopt for a number
  // that is not outstanding.
  std::optional<uint64_t> take(uint64_t seq);

 private:
  Srq(Context& ctx, uint32_t pd, SharedMemory mem) : ctx_(ctx), pd_(pd), mem_(std::move(mem)) {}
  bool buffers_ok(const vrdma_recv_wr& wr) const;

  Context& ctx_;
  uint32_t pd_, num_ = 0;
  SharedMemory mem_;
  std::optional<SpscRing<proto::RecvEntry>> ring_;  // we produce; senders claim
  std::mutex mu_;
  std::unordered_map<uint64_t, uint64_t> outstanding_;  // seq -> wr_id
  uint64_t next_seq_ = 0;
};

}  // namespace rb::vrdma
