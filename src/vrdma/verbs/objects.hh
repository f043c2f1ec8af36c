#pragma once
// The verbs objects this layer hands out: each starts with the libibverbs struct a program sees
// (so the program's pointer is ours, and container_of finds the rest) and holds the libvrdma
// object that does the work. Every object of a process that loads this layer is one of these:
// the only device listed is vrdma0.
#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <vector>

#include <vrdma/vrdma.h>

#include "core/unique_fd.hh"

namespace rb::verbs {

// Each object's verbs struct is its first member, so a program's pointer is the object's.
template <typename Outer, typename Verbs>
Outer* ours(Verbs* v) {
  return reinterpret_cast<Outer*>(v);
}

// vrdma0's kernel-style names: its uverbs name, and the device node programs look for under it
// (device_node.cc answers for that node; there is no kernel device).
constexpr const char* kUverbsName = "uverbs-vrdma0";
constexpr const char* kDeviceNodePath = "/dev/infiniband/uverbs-vrdma0";

struct Device {
  ibv_device dev{};
  uint64_t guid = 0;  // network order, as verbs reports it
};

struct Context {
  verbs_context vctx{};  // a real verbs_context: the inline verbs calls reach our ops through it
  vrdma_context* v = nullptr;
  // The GID table: [0] the router's address as a RoCE v2 GID (IPv4-mapped, or its IPv6 address),
  // which names this host's router to other hosts; [1] a link-local IPv6 GID (fe80::, from the
  // node GUID and the router's address), which names it on this host alone, as a NIC's fe80:: GID
  // does on its link.
  static constexpr int kGids = 2;
  union ibv_gid gids[kGids]{};
  const union ibv_gid& gid() const { return gids[0]; }
  vrdma_router_address router{};
  UniqueFd async_fd;     // no asynchronous events happen; a reader blocks as on a quiet NIC
  // The program holds &vctx.context, which sits at the end of verbs_context.
  static Context* of(ibv_context* c) {
    return reinterpret_cast<Context*>(reinterpret_cast<char*>(c) - offsetof(verbs_context, context));
  }
};

struct Pd {
  ibv_pd pd{};
  vrdma_pd* v = nullptr;
};

struct Mr {
  ibv_mr mr{};
  vrdma_mr* v = nullptr;
};

struct CompChannel {
  ibv_comp_channel ch{};  // ch.fd is an epoll set of its CQs' event descriptors
};

// ibv_cq_ex begins with ibv_cq's fields, so one object serves both: a plain CQ's program holds
// cq(), an extended CQ's holds &ex (ibv_cq_ex_to_cq gives cq() back).
struct Cq {
  ibv_cq_ex ex{};
  vrdma_cq* v = nullptr;
  vrdma_wc current{};  // an extended CQ's completion between start_poll/next_poll and the next
  ibv_cq* cq() { return reinterpret_cast<ibv_cq*>(&ex); }
};
static_assert(offsetof(ibv_cq_ex, cqe) == offsetof(ibv_cq, cqe) &&
              offsetof(ibv_cq_ex, async_events_completed) == offsetof(ibv_cq, async_events_completed));

struct Srq {
  ibv_srq srq{};
  vrdma_srq* v = nullptr;
};

struct Ah {
  ibv_ah ah{};
  ibv_ah_attr attr{};
  vrdma_ah* v = nullptr;  // another host's router; null: this host's
};

// A request built through the ibv_wr_* calls, kept until wr_complete posts the lot.
struct PendingWr {
  vrdma_send_wr wr{};
  vrdma_sge sge[VRDMA_MAX_SGE]{};
  std::vector<uint8_t> inline_bytes;
};

struct Qp {
  ibv_qp_ex ex{};  // ex.qp_base is the ibv_qp programs hold
  vrdma_qp* v = nullptr;
  Context* ctx = nullptr;
  ibv_qp_cap cap{};
  ibv_qp_attr attr{};  // what modify_qp set, for query_qp
  bool sq_sig_all = false;
  bool ud = false;                    // a datagram QP: connected to none; ready at RTR
  bool connected = false;             // connected at RTR, to:
  vrdma_router_address peer_router{};
  std::deque<PendingWr> pending;  // the ibv_wr_* batch since wr_start
  bool pending_bad = false;       // a call in the batch was not one vrdma carries out
  static Qp* of(ibv_qp* q) { return reinterpret_cast<Qp*>(q); }  // ex.qp_base is at offset 0
};

}  // namespace rb::verbs
