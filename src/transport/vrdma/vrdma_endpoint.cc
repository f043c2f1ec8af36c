// One endpoint = one RC QP and its CQ (send and receive completions both). Work requests map
// one to one onto libvrdma's; on the direct path they complete inside vrdma_post_send.
#include "transport/vrdma/vrdma_endpoint.hh"

#include <algorithm>
#include <sys/epoll.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace rb::transport::vrdma {
namespace {

WcStatus status_of(int s) {
  switch (s) {
    case VRDMA_WC_SUCCESS: return WcStatus::success;
    case VRDMA_WC_LOC_LEN_ERR: return WcStatus::local_length;
    case VRDMA_WC_LOC_PROT_ERR: return WcStatus::local_protection;
    case VRDMA_WC_WR_FLUSH_ERR: return WcStatus::flushed;
    case VRDMA_WC_REM_ACCESS_ERR: return WcStatus::remote_access;
    case VRDMA_WC_RNR_RETRY_EXC_ERR: return WcStatus::rnr;
    case VRDMA_WC_REM_INV_REQ_ERR: return WcStatus::remote_operation;
    default: return WcStatus::fatal;
  }
}

Op op_of(int opcode) {
  switch (opcode) {
    case VRDMA_WC_SEND: return Op::send;
    case VRDMA_WC_RDMA_WRITE: return Op::write;
    case VRDMA_WC_RDMA_READ: return Op::read;
    case VRDMA_WC_COMP_SWAP: return Op::cswap;
    case VRDMA_WC_FETCH_ADD: return Op::fadd;
    case VRDMA_WC_RECV_RDMA_WITH_IMM: return Op::remote_write;
    default: return Op::recv;
  }
}

int opcode_of(Op op) {
  switch (op) {
    case Op::write: return VRDMA_WR_RDMA_WRITE;
    case Op::write_imm: return VRDMA_WR_RDMA_WRITE_WITH_IMM;
    case Op::send_imm: return VRDMA_WR_SEND_WITH_IMM;
    case Op::read: return VRDMA_WR_RDMA_READ;
    case Op::send: return VRDMA_WR_SEND;
    case Op::fadd: return VRDMA_WR_ATOMIC_FETCH_AND_ADD;
    case Op::cswap: return VRDMA_WR_ATOMIC_CMP_AND_SWP;
    default: return -1;
  }
}

class VrdmaEp final : public Endpoint {
 public:
  VrdmaEp(vrdma_cq* cq, vrdma_qp* qp, std::shared_ptr<std::atomic<bool>> routed)
      : cq_(cq), qp_(qp), routed_(std::move(routed)) {}
  VrdmaEp(const VrdmaEp&) = delete;  // send_ points into itself
  VrdmaEp& operator=(const VrdmaEp&) = delete;
  ~VrdmaEp() override {
    vrdma_destroy_qp(qp_);
    vrdma_destroy_cq(cq_);
  }

  std::vector<uint8_t> address() const override {
    std::vector<uint8_t> a(VRDMA_ADDRESS_BYTES);
    vrdma_qp_address(qp_, a.data(), a.size());
    return a;
  }
  Status connect(std::span<const uint8_t> peer) override {
    if (vrdma_connect_qp(qp_, peer.data(), peer.size()) != 0)
      return {Errc::io, fmt::format("vrdma: connecting QP {:#x}: {}", vrdma_qp_num(qp_), vrdma_last_error())};
    if (vrdma_qp_router_path(qp_)) routed_->store(true, std::memory_order_relaxed);
    return {};
  }
  Status set_remote(const RemoteRegion& r) override {
    base_ = r.base;
    send_.rkey = uint32_t(r.key);
    return {};
  }

  int post(std::span<const WorkRequest> wrs) override {
    int n = 0;
    for (const auto& w : wrs) {
      int r = post_one(w);
      if (r == 0) break;  // a full receive ring: the caller polls and retries
      if (r < 0) return n ? n : -1;
      ++n;
    }
    return n;
  }

  int poll(std::span<Completion> out) override {
    vrdma_wc wc[32];
    int want = int(std::min<size_t>(out.size(), 32));
    int n = vrdma_poll_cq(cq_, want, wc);
    if (n < 0) {
      err_ = fmt::format("vrdma: poll_cq: {}", vrdma_last_error());
      return -1;
    }
    for (int i = 0; i < n; ++i) {
      Completion& c = out[i];
      c = {};
      c.wr_id = wc[i].wr_id;
      bool imm = wc[i].wc_flags & VRDMA_WC_WITH_IMM;
      c.op = op_of(wc[i].opcode);
      if (imm && c.op == Op::write) c.op = Op::write_imm;
      if (imm && c.op == Op::send) c.op = Op::send_imm;
      c.len = wc[i].byte_len;
      c.status = status_of(wc[i].status);
      c.vendor_err = wc[i].status;
      c.has_imm = imm && (c.op == Op::recv || c.op == Op::remote_write);
      c.imm = wc[i].imm_data;
    }
    return n;
  }

  Status quiesce(double) override {
    vrdma_withdraw_recvs(qp_);
    vrdma_wc wc[64];
    while (vrdma_poll_cq(cq_, 64, wc) > 0) {
    }
    vrdma_recover_qp(qp_);
    return {};
  }

  std::string describe_error(const Completion& c) const override {
    return fmt::format("{}: {}", wc_status_name(c.status), vrdma_wc_status_str(c.vendor_err));
  }
  const std::string& last_error() const override { return err_; }
  // Requests complete inside post, so only arrivals from the peer (receives, write-imm) are
  // waited for; the peer rings the CQ's eventfd after pushing one to an armed QP.
  int arm_wait(WaitHandle& out) override {
    if (vrdma_req_notify_cq(cq_) == 1) return 0;
    out = {vrdma_cq_event_fd(cq_), EPOLLIN};
    return 1;
  }

 private:
  // 1: taken, 0: busy, -1: refused (err_ says why).
  int post_one(const WorkRequest& w) {
    auto* mr = static_cast<vrdma_mr*>(w.mr->desc());
    vrdma_sge sge{reinterpret_cast<uint64_t>(w.mr->addr()) + w.local_off, w.len, mr->lkey};
    if (w.op == Op::recv) {
      vrdma_recv_wr r{};
      r.wr_id = w.wr_id;
      r.sg_list = &sge;
      r.num_sge = 1;
      vrdma_recv_wr* bad = nullptr;
      if (int e = vrdma_post_recv(qp_, &r, &bad); e) return e == ENOMEM ? 0 : refuse(e);
      return 1;
    }
    int opcode = opcode_of(w.op);
    if (opcode < 0) {
      err_ = fmt::format("vrdma: {} is not an op to post", op_name(w.op));
      return -1;
    }
    // The fields no op here changes (the SGE list, the rkey) stay as they were set once: filling
    // a whole request anew for each was a tenth of a 64 B WRITE's instructions.
    vrdma_send_wr& s = send_;
    send_sge_ = sge;
    s.wr_id = w.wr_id;
    s.opcode = opcode;
    s.send_flags = ((w.flags & wr_flag::signal) ? unsigned(VRDMA_SEND_SIGNALED) : 0u) |
                   ((w.flags & wr_flag::inject) ? unsigned(VRDMA_SEND_INLINE) : 0u);
    s.imm_data = w.imm;
    s.remote_addr = base_ + w.remote_off;
    s.compare_add = w.op == Op::cswap ? w.compare : w.operand;
    s.swap = w.operand;
    vrdma_send_wr* bad = nullptr;
    if (int e = vrdma_post_send(qp_, &s, &bad); e) return e == ENOMEM ? 0 : refuse(e);  // ENOMEM: the send ring is full
    return 1;
  }

  int refuse(int e) {
    err_ = fmt::format("vrdma: post on QP {:#x}: {} ({})", vrdma_qp_num(qp_), vrdma_last_error(), std::strerror(e));
    return -1;
  }

  vrdma_cq* cq_;
  vrdma_qp* qp_;
  std::shared_ptr<std::atomic<bool>> routed_;
  uint64_t base_ = 0;
  vrdma_sge send_sge_{};
  vrdma_send_wr send_{.sg_list = &send_sge_, .num_sge = 1};  // what post_one sends: see there
  std::string err_;
};

}  // namespace

Result<std::unique_ptr<Endpoint>> open_endpoint(vrdma_context* ctx, vrdma_pd* pd, const EndpointOptions& o,
                                                bool router_path, std::shared_ptr<std::atomic<bool>> routed) {
  vrdma_cq* cq = vrdma_create_cq(ctx, int(o.depth + o.rx_slots + 16));
  if (!cq) return Status(Errc::io, fmt::format("vrdma: create_cq: {}", vrdma_last_error()));
  vrdma_qp_init_attr a{};
  a.send_cq = a.recv_cq = cq;
  a.max_send_wr = std::max<uint32_t>(o.depth, 1);
  a.max_recv_wr = std::max<uint32_t>(o.rx_slots, 1);
  a.max_inline_data = kInlineBytes;
  // The contract's write-imm consumes no receive (fi_writedata), and a failed op leaves the
  // endpoint usable for the ops after it, already posted or not.
  a.flags = VRDMA_QP_IMM_WITHOUT_RECV | VRDMA_QP_NO_ERROR_STATE;
  if (router_path) a.flags |= VRDMA_QP_ROUTER_PATH;
  vrdma_qp* qp = vrdma_create_qp(pd, &a);
  if (!qp) {
    Status st(Errc::io, fmt::format("vrdma: create_qp: {}", vrdma_last_error()));
    vrdma_destroy_cq(cq);
    return st;
  }
  return std::unique_ptr<Endpoint>(new VrdmaEp(cq, qp, std::move(routed)));
}

}  // namespace rb::transport::vrdma
