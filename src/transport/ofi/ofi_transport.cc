#include "transport/ofi/ofi_transport.hh"

#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

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

// FI_CONTEXT2 mode: the provider owns this memory from post to completion.
struct OpContext {
  fi_context2 fc;
  uint64_t wr_id;
  Op op;
  uint32_t len;
  bool posted_recv;  // a receive still waiting for a message (cancelled by quiesce)
};

class OfiEp final : public Endpoint {
 public:
  OfiEp(std::shared_ptr<Fabric> f, uint64_t contexts) : f_(std::move(f)), ring_(contexts) {}
  ~OfiEp() override {
    close_fid(ep_);
    close_fid(cq_);
    close_fid(av_);
  }

  Status open(const EndpointOptions& o) {
    fi_av_attr av_attr{};
    av_attr.type = FI_AV_TABLE;
    av_attr.count = 4;
    int rc = fi_av_open(f_->domain, &av_attr, &av_, nullptr);
    if (rc) return fail("fi_av_open", rc);
    fi_cq_attr cq_attr{};
    cq_attr.format = FI_CQ_FORMAT_DATA;
    cq_attr.wait_obj = FI_WAIT_NONE;
    cq_attr.size = f_->info->tx_attr->size + f_->info->rx_attr->size;
    rc = fi_cq_open(f_->domain, &cq_attr, &cq_, nullptr);
    if (rc) return fail("fi_cq_open", rc);
    rc = fi_endpoint(f_->domain, f_->info.get(), &ep_, nullptr);
    if (rc) return fail("fi_endpoint", rc);
    rc = fi_ep_bind(ep_, &av_->fid, 0);
    if (rc) return fail("fi_ep_bind(av)", rc);
    rc = fi_ep_bind(ep_, &cq_->fid, FI_TRANSMIT | FI_RECV | (o.selective ? FI_SELECTIVE_COMPLETION : 0));
    if (rc) return fail("fi_ep_bind(cq)", rc);
    rc = fi_enable(ep_);
    if (rc) return fail("fi_enable", rc);
    return {};
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
      if (w.op != Op::write && w.op != Op::read && w.op != Op::send && w.op != Op::recv) {
        err_ = fmt::format("ofi: {} is not supported yet", op_name(w.op));
        return n ? n : -1;
      }
      OpContext* ctx = &ring_[next_];
      ctx->wr_id = w.wr_id;
      ctx->op = w.op;
      ctx->len = w.len;
      ctx->posted_recv = w.op == Op::recv;
      uint64_t flags = (w.flags & wr_flag::signal ? FI_COMPLETION : 0) | (w.flags & wr_flag::more ? FI_MORE : 0) |
                       (w.flags & wr_flag::inject ? FI_INJECT : 0);
      iovec iov{static_cast<uint8_t*>(w.mr->addr()) + w.local_off, w.len};
      void* desc = w.mr->desc();
      ssize_t rc;
      if (w.op == Op::write || w.op == Op::read) {
        fi_rma_iov rma{remote_.base + w.remote_off, w.len, remote_.key};
        fi_msg_rma m{&iov, &desc, 1, peer_, &rma, 1, ctx, 0};
        if (w.op == Op::write) {
          if (w.flags & wr_flag::delivery) flags |= FI_DELIVERY_COMPLETE;
          rc = fi_writemsg(ep_, &m, flags);
        } else {
          rc = fi_readmsg(ep_, &m, flags);
        }
      } else {
        fi_msg m{&iov, &desc, 1, peer_, ctx, 0};
        rc = w.op == Op::send ? fi_sendmsg(ep_, &m, flags) : fi_recvmsg(ep_, &m, FI_COMPLETION);
      }
      if (rc == -FI_EAGAIN) break;
      if (rc != 0) {
        err_ = fmt::format("posting {} of {} B: {}", op_name(w.op), w.len, fi_error(int(rc)));
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
      for (ssize_t i = 0; i < rc; ++i) {
        auto* ctx = static_cast<OpContext*>(ents[i].op_context);
        ctx->posted_recv = false;
        if (outstanding_) --outstanding_;
        out[i] = {ctx->wr_id, ctx->op, ctx->op == Op::recv ? uint32_t(ents[i].len) : ctx->len};
      }
      return int(rc);
    }
    if (rc == -FI_EAGAIN) return 0;
    if (rc == -FI_EAVAIL) {
      fi_cq_err_entry e{};
      if (fi_cq_readerr(cq_, &e, 0) != 1) return 0;
      auto* ctx = static_cast<OpContext*>(e.op_context);
      if (ctx) ctx->posted_recv = false;
      if (outstanding_) --outstanding_;
      const char* prov = fi_cq_strerror(cq_, e.prov_errno, e.err_data, nullptr, 0);
      // Providers often repeat the generic text as their own: say it once.
      if (prov && *prov && std::strcmp(prov, fi_strerror(e.err)) != 0) err_ = fmt::format("{} (provider: {})", fi_strerror(e.err), prov);
      else err_ = fi_strerror(e.err);
      int code = e.err ? e.err : FI_EOTHER;
      out[0] = {ctx ? ctx->wr_id : 0, ctx ? ctx->op : Op::write, ctx ? ctx->len : 0, wc_status_of(code), code};
      return 1;
    }
    err_ = "fi_cq_read: " + fi_error(int(rc));
    return -1;
  }

  std::string describe_error(const Completion& c) const override {
    return fmt::format("{}: {}", wc_status_name(c.status), err_.empty() ? fi_strerror(c.vendor_err) : err_.c_str());
  }
  const std::string& last_error() const override { return err_; }
  int arm_wait(WaitHandle&) override {
    err_ = "ofi: event endpoints are not implemented yet";
    return -1;
  }

 private:
  Status fail(const char* what, int rc) {
    err_ = fmt::format("{}: {}", what, fi_error(rc));
    return {Errc::io, err_};
  }

  std::shared_ptr<Fabric> f_;
  fid_av* av_ = nullptr;
  fid_cq* cq_ = nullptr;
  fid_ep* ep_ = nullptr;
  fi_addr_t peer_ = FI_ADDR_UNSPEC;
  RemoteRegion remote_;
  RingSlots<OpContext> ring_;
  uint64_t next_ = 0, outstanding_ = 0;
  std::string err_;
};

// What a provider's fi_info promises. No bounds checks claimed: shm's CMA path checks neither
// keys nor bounds (docs/transports.md), and rdmabench never relies on a provider for protection.
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
  if (i->nic && i->nic->link_attr && i->nic->link_attr->speed) c.link_gbps = double(i->nic->link_attr->speed) / 1e9;
  return c;
}

class OfiDomain final : public Domain {
 public:
  explicit OfiDomain(std::shared_ptr<Fabric> f) : f_(std::move(f)) {
    const fi_info* i = f_->info.get();
    caps_ = caps_of(i);
    uint32_t v = fi_version();
    info_ = {"ofi", i->fabric_attr->prov_name, i->fabric_attr->name, i->domain_attr->name,
             fmt::format("{}.{}", FI_MAJOR(v), FI_MINOR(v))};
    prov_key_ = i->domain_attr->mr_mode & FI_MR_PROV_KEY;
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
    if (o.event && !caps_.can_wait) return Status(Errc::unsupported, "ofi: no event endpoints on this provider");
    auto ep = std::make_unique<OfiEp>(f_, uint64_t(o.depth) + o.rx_slots + caps_.tx_depth + caps_.rx_depth);
    Status s = ep->open(o);
    if (!s) return s;
    return std::unique_ptr<Endpoint>(std::move(ep));
  }

 private:
  std::shared_ptr<Fabric> f_;
  Caps caps_;
  DomainInfo info_;
  bool prov_key_ = false;
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

std::vector<Availability> probe() {
  std::vector<Availability> out;
  std::set<std::string> seen_layers;
  if (auto all = query("")) {
    // One line per (provider, domain): a NIC or interface is what --domain picks.
    std::map<std::pair<std::string, std::string>, const fi_info*> first;
    for (auto* i = all->get(); i; i = i->next) first.emplace(std::pair{i->fabric_attr->prov_name, i->domain_attr->name}, i);
    for (auto& [key, info] : first) {
      const std::string& name = key.first;
      out.push_back({"ofi:" + name, true, describe(info), caps_of(info)});
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
