#include "transport/ofi/ofi_endpoint.hh"

#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <sys/epoll.h>

#include <chrono>
#include <cstring>

#include <fmt/format.h>

#include "core/ring_slots.hh"
#include "transport/ofi/ofi_info.hh"
#include "transport/ofi/wc_status.hh"


namespace rb::transport::ofi {
namespace {

// FI_CONTEXT2 mode: the provider owns this memory from post to completion. An atomic's operands
// live here too, since a provider may read them after the post has returned.
struct OpContext {
  fi_context2 fc;
  uint64_t wr_id;
  Op op;
  uint32_t len;
  bool posted_recv;  // a receive still waiting for a message (cancelled by quiesce)
  uint64_t operand, compare;
};

// tcp;ofi_rxm completes a peer's write with CQ data with len 0 (shm gives the length), so where
// the provider carries 8 bytes of CQ data the initiator puts the write's length in the upper half,
// beside the 32-bit immediate, and the target takes the provider's len when it gives one.
uint64_t write_imm_data(const WorkRequest& w, bool len_in_cq_data) {
  return w.imm | (len_in_cq_data ? uint64_t(w.len) << 32 : 0);
}

bool is_atomic(Op op) { return op == Op::fadd || op == Op::cswap; }

// A peer's write with CQ data arrives with no context of ours (nothing was posted for it).
bool is_arrival(uint64_t flags, const void* op_context) { return (flags & FI_REMOTE_WRITE) || !op_context; }

class OfiEp final : public Endpoint {
 public:
  OfiEp(std::shared_ptr<Fabric> f, uint64_t contexts, const EpSetup& setup)
      : f_(std::move(f)), setup_(setup), ring_(contexts) {}
  ~OfiEp() override {
    close_fid(ep_);
    close_fid(cq_);
    close_fid(av_);
    close_fid(ring_mr_);
  }

  Status open(const EndpointOptions& o) {
    fi_av_attr av_attr{};
    av_attr.type = FI_AV_TABLE;
    av_attr.count = 4;
    int rc = fi_av_open(f_->domain, &av_attr, &av_, nullptr);
    if (rc) return fail("fi_av_open", rc);
    if (Status s = open_cq(o.event); !s) return s;
    rc = fi_endpoint(f_->domain, f_->info.get(), &ep_, nullptr);
    if (rc) return fail("fi_endpoint", rc);
    rc = fi_ep_bind(ep_, &av_->fid, 0);
    if (rc) return fail("fi_ep_bind(av)", rc);
    rc = fi_ep_bind(ep_, &cq_->fid, FI_TRANSMIT | FI_RECV | (o.selective ? FI_SELECTIVE_COMPLETION : 0));
    if (rc) return fail("fi_ep_bind(cq)", rc);
    rc = fi_enable(ep_);
    if (rc) return fail("fi_enable", rc);
    return register_ring();
  }

  std::vector<uint8_t> address() const override {
    std::vector<uint8_t> a(256);
    size_t len = a.size();
    if (fi_getname(&ep_->fid, a.data(), &len) != 0) return {};
    a.resize(len);
    return a;
  }

  Status connect(std::span<const uint8_t> peer) override {
    int rc = fi_av_insert(av_, peer.data(), 1, &peer_, 0, nullptr);
    if (rc != 1) return fail("fi_av_insert", rc < 0 ? rc : -FI_EINVAL);
    return {};
  }
  Status set_remote(const RemoteRegion& r) override {
    remote_ = r;
    return {};
  }

  int post(std::span<const WorkRequest> wrs) override {
    int n = 0;
    for (const auto& w : wrs) {
      if (!accepts(w.op)) return n ? n : -1;
      OpContext* ctx = &ring_[next_];
      ctx->wr_id = w.wr_id;
      ctx->op = w.op;
      ctx->len = is_atomic(w.op) ? kAtomicBytes : w.len;
      ctx->posted_recv = w.op == Op::recv;
      ctx->operand = w.operand;
      ctx->compare = w.compare;
      uint64_t flags = (w.flags & wr_flag::signal ? FI_COMPLETION : 0) | (w.flags & wr_flag::more ? FI_MORE : 0) |
                       (w.flags & wr_flag::inject ? FI_INJECT : 0);
      ssize_t rc = submit(w, ctx, flags);
      if (rc == -FI_EAGAIN) break;
      if (rc != 0) {
        err_ = fmt::format("posting {} of {} B: {}", op_name(w.op), ctx->len, fi_error(int(rc)));
        return n ? n : -1;
      }
      ++next_;
      ++n;
      if ((w.flags & wr_flag::signal) || w.op == Op::recv) ++outstanding_;
    }
    return n;
  }

  Status quiesce(double timeout_s) override {
    for (auto& c : ring_)
      if (c.posted_recv) fi_cancel(&ep_->fid, &c);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    Completion sink[64];
    while (outstanding_ > 0) {
      if (poll(sink) < 0) return {Errc::io, err_};
      if (std::chrono::steady_clock::now() > deadline)
        return {Errc::timeout, fmt::format("{} ops still in flight after {:.0f} s at the end of a phase", outstanding_, timeout_s)};
    }
    return {};
  }

  int poll(std::span<Completion> out) override {
    fi_cq_data_entry ents[64];
    size_t want = std::min<size_t>(out.size(), 64);
    ssize_t rc = fi_cq_read(cq_, ents, want);
    if (rc > 0) {
      for (ssize_t i = 0; i < rc; ++i) out[i] = completion_of(ents[i]);
      return int(rc);
    }
    if (rc == -FI_EAGAIN) return 0;
    if (rc == -FI_EAVAIL) {
      fi_cq_err_entry e{};
      if (fi_cq_readerr(cq_, &e, 0) != 1) return 0;
      out[0] = error_of(e);
      return 1;
    }
    err_ = "fi_cq_read: " + fi_error(int(rc));
    return -1;
  }

  std::string describe_error(const Completion& c) const override {
    return fmt::format("{}: {}", wc_status_name(c.status), err_.empty() ? fi_strerror(c.vendor_err) : err_.c_str());
  }
  const std::string& last_error() const override { return err_; }

  // fi_trywait drives the provider's progress and answers FI_SUCCESS only when nothing is ready,
  // after which anything that arrives signals the CQ's fd.
  int arm_wait(WaitHandle& out) override {
    if (wait_fd_ < 0) {
      err_ = "ofi: arm_wait needs an endpoint opened with EndpointOptions::event";
      return -1;
    }
    fid* cq = &cq_->fid;
    int rc = fi_trywait(f_->fabric, &cq, 1);
    if (rc == FI_SUCCESS) {
      out = {wait_fd_, EPOLLIN};
      return 1;
    }
    if (rc == -FI_EAGAIN) return 0;
    err_ = "fi_trywait: " + fi_error(rc);
    return -1;
  }

 private:
  Status fail(const char* what, int rc) {
    err_ = fmt::format("{}: {}", what, fi_error(rc));
    return {Errc::io, err_};
  }

  // Polling endpoints keep FI_WAIT_NONE: a wait object costs every completion a signal.
  Status open_cq(bool event) {
    fi_cq_attr cq_attr{};
    cq_attr.format = FI_CQ_FORMAT_DATA;
    cq_attr.wait_obj = event ? FI_WAIT_FD : FI_WAIT_NONE;
    cq_attr.size = f_->info->tx_attr->size + f_->info->rx_attr->size;
    int rc = fi_cq_open(f_->domain, &cq_attr, &cq_, nullptr);
    if (rc) return fail("fi_cq_open", rc);
    if (!event) return {};
    rc = fi_control(&cq_->fid, FI_GETWAIT, &wait_fd_);
    if (rc) return fail("fi_control(FI_GETWAIT)", rc);
    return {};
  }

  // Atomic operands are read from the contexts: a provider that wants every local buffer
  // registered (FI_MR_LOCAL) gets the ring registered once, here.
  Status register_ring() {
    if (!(f_->info->domain_attr->mr_mode & FI_MR_LOCAL) || !setup_.atomics) return {};
    int rc = fi_mr_reg(f_->domain, &*ring_.begin(), ring_.capacity() * sizeof(OpContext), FI_READ | FI_WRITE, 0,
                       setup_.ring_key, 0, &ring_mr_, nullptr);
    if (rc) return fail("fi_mr_reg(operands)", rc);
    operand_desc_ = fi_mr_desc(ring_mr_);
    return {};
  }

  // Refuses what this provider does not offer, naming what is missing.
  bool accepts(Op op) {
    switch (op) {
      case Op::write:
      case Op::read:
      case Op::send:
      case Op::recv: return true;
      case Op::write_imm:
      case Op::send_imm:
        if (setup_.imm_data) return true;
        err_ = fmt::format("ofi: {} needs remote CQ data of 4 bytes or more, which provider {} does not offer",
                           op_name(op), f_->info->fabric_attr->prov_name);
        return false;
      case Op::fadd:
      case Op::cswap:
        if (setup_.atomics) return true;
        err_ = fmt::format("ofi: {} needs 64-bit fetch-add and compare-swap, which provider {} does not offer",
                           op_name(op), f_->info->fabric_attr->prov_name);
        return false;
      default:
        err_ = fmt::format("ofi: {} is not an op to post: it is how a peer's write_imm shows up", op_name(op));
        return false;
    }
  }

  ssize_t submit(const WorkRequest& w, OpContext* ctx, uint64_t flags) {
    switch (w.op) {
      case Op::write:
      case Op::write_imm:
      case Op::read: return post_rma(w, ctx, flags);
      case Op::fadd:
      case Op::cswap: return post_atomic(w, ctx, flags);
      default: return post_msg(w, ctx, flags);
    }
  }

  ssize_t post_rma(const WorkRequest& w, OpContext* ctx, uint64_t flags) {
    iovec iov{local(w), w.len};
    void* desc = w.mr->desc();
    fi_rma_iov rma{remote_.base + w.remote_off, w.len, remote_.key};
    fi_msg_rma m{&iov, &desc, 1, peer_, &rma, 1, ctx, 0};
    if (w.op == Op::read) return fi_readmsg(ep_, &m, flags);
    if (w.flags & wr_flag::delivery) flags |= FI_DELIVERY_COMPLETE;
    if (w.op == Op::write_imm) {
      flags |= FI_REMOTE_CQ_DATA;
      m.data = write_imm_data(w, setup_.len_in_cq_data);
    }
    return fi_writemsg(ep_, &m, flags);
  }

  ssize_t post_msg(const WorkRequest& w, OpContext* ctx, uint64_t flags) {
    iovec iov{local(w), w.len};
    void* desc = w.mr->desc();
    fi_msg m{&iov, &desc, 1, peer_, ctx, 0};
    if (w.op == Op::recv) return fi_recvmsg(ep_, &m, FI_COMPLETION);
    if (w.op == Op::send_imm) {
      flags |= FI_REMOTE_CQ_DATA;
      m.data = w.imm;
    }
    return fi_sendmsg(ep_, &m, flags);
  }

  // One uint64 at the peer; the value found there lands at local_off. FI_INJECT is dropped: it
  // concerns the operands, which live in the context until the completion anyway.
  ssize_t post_atomic(const WorkRequest& w, OpContext* ctx, uint64_t flags) {
    flags &= ~uint64_t(FI_INJECT);
    fi_ioc operand{&ctx->operand, 1};
    fi_ioc result{local(w), 1};
    void* result_desc = w.mr->desc();
    fi_rma_ioc target{remote_.base + w.remote_off, 1, remote_.key};
    fi_op op = w.op == Op::fadd ? FI_SUM : FI_CSWAP;
    fi_msg_atomic m{&operand, &operand_desc_, 1, peer_, &target, 1, FI_UINT64, op, ctx, 0};
    if (w.op == Op::fadd) return fi_fetch_atomicmsg(ep_, &m, &result, &result_desc, 1, flags);
    fi_ioc compare{&ctx->compare, 1};
    return fi_compare_atomicmsg(ep_, &m, &compare, &operand_desc_, 1, &result, &result_desc, 1, flags);
  }

  static void* local(const WorkRequest& w) { return static_cast<uint8_t*>(w.mr->addr()) + w.local_off; }

  Completion completion_of(const fi_cq_data_entry& e) {
    if (is_arrival(e.flags, e.op_context)) return arrival_of(e);
    auto* ctx = static_cast<OpContext*>(e.op_context);
    ctx->posted_recv = false;
    if (outstanding_) --outstanding_;
    Completion c{ctx->wr_id, ctx->op, ctx->op == Op::recv ? uint32_t(e.len) : ctx->len};
    if (ctx->op == Op::recv && (e.flags & FI_REMOTE_CQ_DATA)) {
      c.has_imm = true;
      c.imm = uint32_t(e.data);
    }
    return c;
  }

  // A peer's write_imm: it consumed no receive and ends nothing this side posted, so neither the
  // receives nor the outstanding count move.
  Completion arrival_of(const fi_cq_data_entry& e) const {
    uint32_t len = e.len ? uint32_t(e.len) : setup_.len_in_cq_data ? uint32_t(e.data >> 32) : 0;
    Completion c{0, Op::remote_write, len};
    c.has_imm = (e.flags & FI_REMOTE_CQ_DATA) != 0;
    c.imm = uint32_t(e.data);
    return c;
  }

  Completion error_of(const fi_cq_err_entry& e) {
    bool arrival = is_arrival(e.flags, e.op_context);
    auto* ctx = arrival ? nullptr : static_cast<OpContext*>(e.op_context);
    if (ctx) {
      ctx->posted_recv = false;
      if (outstanding_) --outstanding_;
    }
    const char* prov = fi_cq_strerror(cq_, e.prov_errno, e.err_data, nullptr, 0);
    // Providers often repeat the generic text as their own: say it once.
    if (prov && *prov && std::strcmp(prov, fi_strerror(e.err)) != 0) err_ = fmt::format("{} (provider: {})", fi_strerror(e.err), prov);
    else err_ = fi_strerror(e.err);
    int code = e.err ? e.err : FI_EOTHER;
    if (!ctx) return {0, Op::remote_write, uint32_t(e.len), wc_status_of(code), code};
    return {ctx->wr_id, ctx->op, ctx->len, wc_status_of(code), code};
  }

  std::shared_ptr<Fabric> f_;
  EpSetup setup_;
  fid_av* av_ = nullptr;
  fid_cq* cq_ = nullptr;
  fid_ep* ep_ = nullptr;
  fid_mr* ring_mr_ = nullptr;
  void* operand_desc_ = nullptr;
  int wait_fd_ = -1;  // the CQ's, closed with it
  fi_addr_t peer_ = FI_ADDR_UNSPEC;
  RemoteRegion remote_;
  RingSlots<OpContext> ring_;
  uint64_t next_ = 0, outstanding_ = 0;
  std::string err_;
};

}  // namespace

Result<std::unique_ptr<Endpoint>> open_endpoint(std::shared_ptr<Fabric> f, uint64_t contexts, const EpSetup& setup,
                                                const EndpointOptions& o) {
  auto ep = std::make_unique<OfiEp>(std::move(f), contexts, setup);
  Status s = ep->open(o);
  if (!s) return s;
  return std::unique_ptr<Endpoint>(std::move(ep));
}

}  // namespace rb::transport::ofi
