#include "transport/ofi/ofi_transport.hh"

#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <sys/epoll.h>

#include <chrono>
#include <cstring>
#include <map>
#include <set>

#include <fmt/format.h>

#include "core/netif.hh"
#include "core/ring_slots.hh"
#include "transport/ofi/ofi_info.hh"
#include "transport/ofi/shm_names.hh"
#include "transport/ofi/wc_status.hh"

namespace rb::transport::ofi {
namespace {

template <class F>
void close_fid(F* f) {
  if (f) fi_close(&f->fid);
}

// The fabric and domain outlive every endpoint and MR made from them.
struct Fabric {
  InfoPtr info;
  fid_fabric* fabric = nullptr;
  fid_domain* domain = nullptr;
  ~Fabric() {
    close_fid(domain);
    close_fid(fabric);
  }
};

class OfiMr final : public MemoryRegion {
 public:
  OfiMr(std::shared_ptr<Fabric> f, fid_mr* mr, void* a, size_t l, bool virt)
      : f_(std::move(f)), mr_(mr), addr_(a), len_(l), virt_(virt) {}
  ~OfiMr() override { close_fid(mr_); }
  void* addr() const override { return addr_; }
  size_t len() const override { return len_; }
  void* desc() const override { return fi_mr_desc(mr_); }
  RemoteRegion remote() const override {
    return {virt_ ? reinterpret_cast<uint64_t>(addr_) : 0, fi_mr_key(mr_), len_};
  }

 private:
  std::shared_ptr<Fabric> f_;
  fid_mr* mr_;
  void* addr_;
  size_t len_;
  bool virt_;
};

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

// What an endpoint needs from its domain besides the fabric: the ops it may accept, how its
// immediates travel, and a key for registering its contexts where the provider asks for it.
struct EpSetup {
  bool atomics = false, imm_data = false;
  bool len_in_cq_data = false;  // see write_imm_data
  uint64_t ring_key = 0;
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

// What a provider's fi_info promises. No bounds checks claimed: shm's CMA path checks neither
// keys nor bounds (docs/transports.md), and rdmabench never relies on a provider for protection.
// Atomics as fi_info lists them; an open domain also asks which ops and types (offers_atomics).
// can_wait stays false: only an open domain can try a CQ with a wait object (cq_takes_wait_fd);
// domain_caps() adds what an open domain says.
Caps caps_of(const fi_info* i) {
  Caps c;
  c.write = c.read = c.send = true;
  c.max_msg = i->ep_attr->max_msg_size;
  c.inject = i->tx_attr->inject_size;
  c.tx_depth = uint32_t(i->tx_attr->size);
  c.rx_depth = uint32_t(i->rx_attr->size);
  c.virtual_addressing = i->domain_attr->mr_mode & FI_MR_VIRT_ADDR;
  c.target_progress = i->domain_attr->data_progress != FI_PROGRESS_AUTO;
  c.selective_completion = true;  // FI_SELECTIVE_COMPLETION is part of the core API
  c.peer_sees_writes = c.peer_memory_readable = true;  // RMA targets the registered host memory itself
  c.atomics = i->caps & FI_ATOMIC;
  // The immediate rides in the CQ data. A provider that needs a posted receive for a remote
  // write's CQ data (FI_RX_CQ_DATA) would break "a write_imm consumes no receive".
  c.imm_data = i->domain_attr->cq_data_size >= 4 && !((i->mode | i->rx_attr->mode) & FI_RX_CQ_DATA);
  if (i->nic && i->nic->link_attr && i->nic->link_attr->speed) c.link_gbps = double(i->nic->link_attr->speed) / 1e9;
  return c;
}

// FI_ATOMIC alone does not say which ops and types: fadd is a fetching FI_SUM and cswap a
// compare FI_CSWAP, both on one FI_UINT64.
bool offers_atomics(fid_domain* d) {
  fi_atomic_attr sum{}, cswap{};
  return fi_query_atomic(d, FI_UINT64, FI_SUM, &sum, FI_FETCH_ATOMIC) == 0 && sum.count >= 1 &&
         fi_query_atomic(d, FI_UINT64, FI_CSWAP, &cswap, FI_COMPARE_ATOMIC) == 0 && cswap.count >= 1;
}

// A thread can sleep for completions where the provider's CQ takes an FD wait object, which
// fi_trywait then covers with the provider's own progress. Measured on libfabric 1.17 with two
// processes on loopback: shm refuses one (fi_cq_open -FI_ENOSYS, "CQ wait not yet supported"):
// its progress is manual and nothing would signal a sleeping peer. tcp;ofi_rxm takes one, and
// its fd covers the sockets: a process asleep in epoll wakes for a peer's send, write with CQ
// data, or the response to its own read, tens to hundreds of microseconds after the peer acts.
// Providers not measured here (verbs, efa, ...) are taken at their word: a wait object they
// accept is one that fi_trywait and the fd keep honest.
bool cq_takes_wait_fd(fid_domain* d) {
  fi_cq_attr a{};
  a.format = FI_CQ_FORMAT_DATA;
  a.wait_obj = FI_WAIT_FD;
  a.size = 1;
  fid_cq* cq = nullptr;
  if (fi_cq_open(d, &a, &cq, nullptr) != 0) return false;
  int fd = -1;
  bool ok = fi_control(&cq->fid, FI_GETWAIT, &fd) == 0 && fd >= 0;
  fi_close(&cq->fid);
  return ok;
}

class OfiDomain final : public Domain {
 public:
  explicit OfiDomain(std::shared_ptr<Fabric> f) : f_(std::move(f)) {
    const fi_info* i = f_->info.get();
    caps_ = caps_of(i);
    caps_.atomics = caps_.atomics && offers_atomics(f_->domain);
    caps_.can_wait = cq_takes_wait_fd(f_->domain);
    uint32_t v = fi_version();
    info_ = {"ofi", i->fabric_attr->prov_name, i->fabric_attr->name, i->domain_attr->name,
             fmt::format("libfabric {}.{}", FI_MAJOR(v), FI_MINOR(v))};
    prov_key_ = i->domain_attr->mr_mode & FI_MR_PROV_KEY;
    len_in_cq_data_ = i->domain_attr->cq_data_size >= 8;
  }
  const Caps& caps() const override { return caps_; }
  const DomainInfo& info() const override { return info_; }

  Result<std::unique_ptr<MemoryRegion>> register_memory(void* addr, size_t len) override {
    fid_mr* mr = nullptr;
    uint64_t access = FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
    uint64_t key = prov_key_ ? 0 : next_key_++;
    int rc = fi_mr_reg(f_->domain, addr, len, access, 0, key, 0, &mr, nullptr);
    if (rc) return Status(Errc::io, fmt::format("fi_mr_reg of {} B: {}", len, fi_error(rc)));
    return std::unique_ptr<MemoryRegion>(new OfiMr(f_, mr, addr, len, caps_.virtual_addressing));
  }

  Result<std::unique_ptr<Endpoint>> open_endpoint(const EndpointOptions& o) override {
    if (o.event && !caps_.can_wait)
      return Status(Errc::unsupported,
                    fmt::format("ofi: no event endpoints on provider {}: its CQs take no wait object", info_.provider));
    EpSetup setup{caps_.atomics, caps_.imm_data, len_in_cq_data_, prov_key_ ? 0 : next_key_++};
    auto ep = std::make_unique<OfiEp>(f_, uint64_t(o.depth) + o.rx_slots + caps_.tx_depth + caps_.rx_depth, setup);
    Status s = ep->open(o);
    if (!s) return s;
    return std::unique_ptr<Endpoint>(std::move(ep));
  }

 private:
  std::shared_ptr<Fabric> f_;
  Caps caps_;
  DomainInfo info_;
  bool prov_key_ = false, len_in_cq_data_ = false;
  uint64_t next_key_ = 1;
};

std::string domain_names(const fi_info* list) {
  std::set<std::string> names;
  for (auto* i = list; i; i = i->next) names.insert(i->domain_attr->name);
  std::string s;
  for (auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

}  // namespace

Result<std::unique_ptr<Domain>> open_domain(const OpenArgs& opt) {
  std::string why;
  // Auto: a peer on this host (loopback) is best reached through shared memory; otherwise take
  // libfabric's own preference among the providers on the interface that carries the run.
  bool local = opt.local_ip.rfind("127.", 0) == 0 || opt.local_ip == "::1";
  if (opt.variant.empty() && local && opt.domain.empty() && query("shm")) {
    OpenArgs shm = opt;
    shm.variant = "shm";
    return open_domain(shm);
  }
  auto infos = query(opt.variant, &why);
  if (!infos)
    return Status(Errc::unavailable,
                  fmt::format("libfabric provider '{}' has no RDM endpoint with MSG+RMA here ({}); see rdmabench --list",
                              opt.variant.empty() ? "(any)" : opt.variant, why));
  const fi_info* chosen = nullptr;
  if (!opt.domain.empty()) {
    uint32_t family = opt.local_ip.find(':') != std::string::npos ? FI_SOCKADDR_IN6 : FI_SOCKADDR_IN;
    for (auto* i = infos->get(); i; i = i->next)
      if (opt.domain == i->domain_attr->name && (!chosen || (!opt.local_ip.empty() && i->addr_format == family &&
                                                             chosen->addr_format != family)))
        chosen = i;
    if (!chosen)
      return Status(Errc::invalid_argument, fmt::format("--domain {}: provider {} has no such domain; choose one of: {}",
                                                        opt.domain, infos->get()->fabric_attr->prov_name,
                                                        domain_names(infos->get())));
  } else {
    // A run stays on the interface that carries the out-of-band connection (lo for loopback).
    std::string iface = opt.local_ip.empty() ? "" : interface_name_of(opt.local_ip);
    // An interface can appear once per address family (an IPv6 link-local fabric beside the
    // IPv4 one): take the entry of the family the run's address has, else the first.
    uint32_t family = opt.local_ip.find(':') != std::string::npos ? FI_SOCKADDR_IN6 : FI_SOCKADDR_IN;
    const fi_info* same_family = nullptr;
    bool network_domains = false;
    for (auto* i = infos->get(); i; i = i->next) {
      if (!iface.empty() && iface == i->domain_attr->name) {
        if (!chosen) chosen = i;
        if (!same_family && i->addr_format == family) same_family = i;
      }
      if (interface_exists(i->domain_attr->name)) network_domains = true;
    }
    if (same_family) chosen = same_family;
    if (!chosen && network_domains)
      return Status(Errc::invalid_argument,
                    fmt::format("provider {} has no domain on interface '{}' (which carries {}; an interface that has "
                                "just come up can take a moment to be listed); pass --domain, one of: {}",
                                infos->get()->fabric_attr->prov_name, iface, opt.local_ip, domain_names(infos->get())));
    if (!chosen) chosen = infos->get();
  }
  if (std::string_view(chosen->fabric_attr->prov_name).starts_with("shm")) prepare_shm_names();
  auto f = std::make_shared<Fabric>();
  f->info.reset(fi_dupinfo(chosen));
  int rc = fi_fabric(f->info->fabric_attr, &f->fabric, nullptr);
  if (rc) return Status(Errc::io, "fi_fabric: " + fi_error(rc));
  rc = fi_domain(f->fabric, f->info.get(), &f->domain, nullptr);
  if (rc) return Status(Errc::io, "fi_domain: " + fi_error(rc));
  return std::unique_ptr<Domain>(new OfiDomain(std::move(f)));
}

// caps_of() completed by an open domain of `info`: which atomics it has and whether its CQ can wake
// a sleeper. --list and the pre-run check need these too, or they would refuse --event and
// claim atomics a provider lacks. Falls back to the fi_info promise when the domain will not open.
static Caps domain_caps(const fi_info* info) {
  Caps c = caps_of(info);
  Fabric f;
  f.info.reset(fi_dupinfo(info));
  if (!f.info || fi_fabric(f.info->fabric_attr, &f.fabric, nullptr) != 0 ||
      fi_domain(f.fabric, f.info.get(), &f.domain, nullptr) != 0)
    return c;
  c.atomics = c.atomics && offers_atomics(f.domain);
  c.can_wait = cq_takes_wait_fd(f.domain);
  return c;
}

std::vector<Availability> probe() {
  std::vector<Availability> out;
  std::set<std::string> seen_layers;
  if (auto all = query("")) {
    // One line per (provider, domain): a NIC or interface is what --domain picks.
    std::map<std::pair<std::string, std::string>, const fi_info*> first;
    for (auto* i = all->get(); i; i = i->next) first.emplace(std::pair{i->fabric_attr->prov_name, i->domain_attr->name}, i);
    for (auto& [key, info] : first) {
      const std::string& name = key.first;
      out.push_back({"ofi:" + name, true, describe(info), domain_caps(info)});
      size_t p = 0;
      while (p <= name.size()) {
        size_t e = name.find(';', p);
        if (e == std::string::npos) e = name.size();
        seen_layers.insert(name.substr(p, e - p));
        p = e + 1;
      }
    }
  }
  fi_info* provs = nullptr;
  if (fi_getinfo(FI_VERSION(1, 9), nullptr, nullptr, FI_PROV_ATTR_ONLY, nullptr, &provs) == 0) {
    std::set<std::string> names;
    for (auto* i = provs; i; i = i->next) names.insert(i->fabric_attr->prov_name);
    fi_freeinfo(provs);
    for (auto& n : names) {
      if (seen_layers.count(n)) continue;
      std::string why;
      auto r = query(n, &why);
      out.push_back({"ofi:" + n, false,
                     r ? "no RDM endpoint with MSG+RMA and SAS ordering" : "no usable device or endpoint (" + why + ")"});
    }
  }
  return out;
}

TransportEntry registry_entry() {
  TransportEntry e;
  e.name = "ofi";
  e.description = "libfabric RDM endpoints with MSG and RMA, on any provider";
  e.is_default = true;
  e.variant_help = "a libfabric provider; none: shm for a peer on this host, else libfabric's choice";
  e.variants = {{"shm", "shared memory between processes on one host"},
                {"tcp", "libfabric's tcp provider, with rxm"},
                {"verbs", "InfiniBand and RoCE NICs"},
                {"efa", "AWS Elastic Fabric Adapter"},
                {"cxi", "HPE Slingshot"}};
  e.any_variant = true;
  e.domain_help = "a libfabric domain (NIC or interface) of this side; default: the interface carrying --addr";
  e.test_variants = {"shm", "tcp"};
  e.open = open_domain;
  e.probe = probe;
  e.remove_leftovers_of = [](int pid) { remove_shm_names_of(pid); };
  return e;
}

}  // namespace rb::transport::ofi
