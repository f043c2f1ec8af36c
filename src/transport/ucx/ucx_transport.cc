#include "transport/ucx/ucx_transport.hh"

#include <fmt/format.h>

#include "core/netif.hh"
#include "transport/ucx/ucx_context.hh"
#include "transport/ucx/ucx_endpoint.hh"
#include "transport/ucx/ucx_memory.hh"
#include "transport/ucx/ucx_probe.hh"
#include "transport/ucx/ucx_variants.hh"

namespace rb::transport::ucx {
namespace {

class UcxDomain final : public Domain {
 public:
  UcxDomain(std::shared_ptr<Context> ctx, const Settings& s, const EndpointConfig& ep_cfg)
      : ctx_(std::move(ctx)), allocs_(std::make_shared<Allocations>()), caps_(caps_for(s.tls)), ep_cfg_(ep_cfg) {
    info_ = {"ucx", s.tls.empty() ? "all" : s.tls, "ucp", s.net_devices.empty() ? "all" : s.net_devices,
             "UCX " + ucx_version()};
  }
  const Caps& caps() const override { return caps_; }
  const DomainInfo& info() const override { return info_; }
  Result<std::unique_ptr<HostMemory>> allocate(size_t len) override { return ucx::allocate(ctx_, allocs_, len); }
  Result<std::unique_ptr<MemoryRegion>> register_memory(void* addr, size_t len) override {
    return register_region(ctx_, *allocs_, addr, len);
  }
  Result<std::unique_ptr<Endpoint>> open_endpoint(const EndpointOptions& o) override {
    return ucx::open_endpoint(ctx_, o, ep_cfg_);
  }

 private:
  std::shared_ptr<Context> ctx_;
  std::shared_ptr<Allocations> allocs_;
  Caps caps_;
  EndpointConfig ep_cfg_;
  DomainInfo info_;
};

bool is_loopback(const std::string& ip) { return ip.empty() || ip.rfind("127.", 0) == 0 || ip == "::1"; }

// The network device UCX may use: --domain, else the interface carrying the run when that is all
// a run can use (a peer on this host, or tcp alone), else every device (rc finds its NIC).
std::string net_devices_of(const OpenArgs& a) {
  if (!a.domain.empty()) return a.domain;
  if (a.local_ip.empty() || (!is_loopback(a.local_ip) && a.variant != "tcp")) return "";
  return interface_name_of(a.local_ip);
}

std::string bytes_text(const OpenArgs& a, const char* key) {
  return a.options.has(key) ? std::to_string(a.options.number(key)) : "";
}

}  // namespace

Result<std::unique_ptr<Domain>> open_domain(const OpenArgs& a) {
  Settings s{a.variant, net_devices_of(a), bytes_text(a, "rndv_thresh"), bytes_text(a, "zcopy_thresh")};
  auto ctx = open_context(s);
  if (!ctx) {
    const char* flag = a.domain.empty() ? "-t" : "--domain";
    std::string what = a.domain.empty() ? (a.variant.empty() ? "ucx" : "ucx:" + a.variant) : a.domain;
    return Status(Errc::unavailable, fmt::format("{} {}: {}; rdmabench --list shows what UCX can use here", flag, what,
                                                 ctx.status().message()));
  }
  // A peer on this host is reached through shared memory where the list allows it, and UCX has
  // no peer error handling there (ucx_endpoint.hh); every other peer gets it.
  EndpointConfig cfg;
  cfg.peer_errors = !(is_loopback(a.local_ip) && may_use_shared_memory(s.tls));
  cfg.puts_in_order = initiator_moves_everything(s.tls);
  return std::unique_ptr<Domain>(new UcxDomain(std::move(ctx.value()), s, cfg));
}

TransportEntry registry_entry() {
  TransportEntry e;
  e.name = "ucx";
  e.description = "UCX (UCP): RMA on rkeys, tagged SEND/RECV, atomics; any UCX transport list";
  e.variant_help = "a UCX_TLS-style transport list (posix, tcp, shm, rc,...; posix,cma); none: UCX picks";
  for (const auto& v : known_variants()) e.variants.push_back({v.name, v.help});
  e.any_variant = true;
  e.domain_help =
      "a UCX network device (NET_DEVICES: eth1 for tcp, mlx5_0:1 for rc/ud/dc); default: the interface carrying "
      "--addr for a peer on this host or -t ucx:tcp, else every device UCX finds";
  e.options = {
      {"rndv_thresh", OptionType::bytes, "", "UCX RNDV_THRESH: messages from this size on go by rendezvous; default: UCX's"},
      {"zcopy_thresh", OptionType::bytes, "", "UCX ZCOPY_THRESH: sends from this size on are zero-copy; default: UCX's"},
  };
  e.test_variants = {"posix", "tcp"};
  e.open = open_domain;
  e.probe = probe;
  e.probe_variant = probe_variant;
  // No remove_leftovers_of: posix unlinks its /dev/shm file right after creating it (peers
  // open it through /proc/PID/fd) and sysv marks its segments for removal at once, so a killed
  // process leaves nothing behind.
  return e;
}

}  // namespace rb::transport::ucx
