#include "transport/ofi/ofi_domain.hh"

#include <rdma/fi_atomic.h>
#include <rdma/fi_domain.h>

#include <set>

#include <fmt/format.h>

#include "core/netif.hh"
#include "transport/ofi/ofi_endpoint.hh"
#include "transport/ofi/ofi_info.hh"
#include "transport/ofi/ofi_memory.hh"
#include "transport/ofi/shm_names.hh"

namespace rb::transport::ofi {
namespace {

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
    return make_memory_region(f_, mr, addr, len, caps_.virtual_addressing);
  }

  Result<std::unique_ptr<Endpoint>> open_endpoint(const EndpointOptions& o) override {
    if (o.event && !caps_.can_wait)
      return Status(Errc::unsupported,
                    fmt::format("ofi: no event endpoints on provider {}: its CQs take no wait object", info_.provider));
    EpSetup setup{caps_.atomics, caps_.imm_data, len_in_cq_data_, prov_key_ ? 0 : next_key_++};
    return ofi::open_endpoint(f_, uint64_t(o.depth) + o.rx_slots + caps_.tx_depth + caps_.rx_depth, setup, o);
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
Caps domain_caps(const fi_info* info) {
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

}  // namespace rb::transport::ofi
