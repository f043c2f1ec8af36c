#include "transport/vrdma/vrdma_transport.hh"

#include <fmt/format.h>

#include "transport/vrdma/vrdma_endpoint.hh"
#include "transport/vrdma/vrdma_memory.hh"

namespace rb::transport::vrdma {
namespace {

std::string socket_of(const OptionValues& o) {
  std::string s = o.text("socket");
  return s.empty() ? vrdma_default_socket() : s;
}

Caps vrdma_caps(bool router_path) {
  Caps c;
  c.write = c.read = c.send = true;
  c.max_msg = 1ull << 30;
  c.inject = kInlineBytes;
  c.tx_depth = c.rx_depth = 4096;
  c.virtual_addressing = true;        // remote addresses are the owner's virtual addresses, as in verbs
  c.selective_completion = true;      // unsignaled requests complete into nothing but errors
  c.peer_sees_writes = c.peer_memory_readable = true;  // bytes land in the target's own region
  c.checks_bounds = c.checks_keys = true;  // the router grants only a key of the peer's PD; bounds per request
  c.atomics = true;                   // atomic_ref on the peer's region (direct path)
  c.imm_data = true;                  // write-imm on QPs made with VRDMA_QP_IMM_WITHOUT_RECV
  c.can_wait = true;                  // the CQ's eventfd, rung by the peer after an arrival
  // On the router path the router moves the bytes; a target that polls its CQ gives it the core
  // when there is nothing (libvrdma yields every 16th empty poll), which a target spinning on a
  // byte alone would not, and two cores hold client, router and server.
  c.target_progress = router_path;
  return c;
}

class VrdmaDomain final : public Domain {
 public:
  VrdmaDomain(vrdma_context* ctx, vrdma_pd* pd, const std::string& socket, bool router_path)
      : ctx_(ctx), pd_(pd), regions_(std::make_shared<Regions>()), caps_(vrdma_caps(router_path)),
        info_{"vrdma", router_path ? "router" : "direct", "vrdmad", socket, "libvrdma " RDMABENCH_VERSION},
        router_path_(router_path) {}
  ~VrdmaDomain() override {
    vrdma_dealloc_pd(pd_);
    vrdma_close(ctx_);
  }
  // Once an endpoint has connected on the router path (its peer on another host), the target must
  // poll to give the routers the core: the caps say so from then on.
  const Caps& caps() const override {
    caps_.target_progress = router_path_ || routed_->load(std::memory_order_relaxed);
    return caps_;
  }
  const DomainInfo& info() const override { return info_; }
  Result<std::unique_ptr<HostMemory>> allocate(size_t len) override { return vrdma::allocate(pd_, regions_, len); }
  Result<std::unique_ptr<MemoryRegion>> register_memory(void* addr, size_t len) override {
    return register_range(pd_, *regions_, addr, len);
  }
  Result<std::unique_ptr<Endpoint>> open_endpoint(const EndpointOptions& o) override {
    return vrdma::open_endpoint(ctx_, pd_, o, router_path_, routed_);
  }

 private:
  vrdma_context* ctx_;
  vrdma_pd* pd_;
  std::shared_ptr<Regions> regions_;
  mutable Caps caps_;
  DomainInfo info_;
  bool router_path_;
  std::shared_ptr<std::atomic<bool>> routed_ = std::make_shared<std::atomic<bool>>(false);
};

Result<std::unique_ptr<Domain>> open_domain(const OpenArgs& a) {
  std::string socket = socket_of(a.options);
  vrdma_context* ctx = vrdma_open(socket.c_str());
  if (!ctx)
    return Status(Errc::unavailable, fmt::format("-t vrdma: {}; start vrdmad (or give its socket with -o socket=PATH)",
                                                 vrdma_last_error()));
  vrdma_pd* pd = vrdma_alloc_pd(ctx);
  if (!pd) {
    Status st(Errc::unavailable, fmt::format("-t vrdma: alloc_pd: {}", vrdma_last_error()));
    vrdma_close(ctx);
    return st;
  }
  bool routed = a.variant == "router" || vrdma_tenant_routed(ctx);
  return std::unique_ptr<Domain>(new VrdmaDomain(ctx, pd, socket, routed));
}

std::vector<Availability> probe_at(const std::string& socket) {
  vrdma_context* ctx = vrdma_open(socket.c_str());
  if (!ctx) {
    std::string why = fmt::format("{}; start vrdmad", vrdma_last_error());
    return {{"vrdma", false, why}, {"vrdma:router", false, why}};
  }
  bool routed = vrdma_tenant_routed(ctx);
  std::string where = fmt::format("router at {}, tenant {}", socket, vrdma_tenant(ctx));
  vrdma_close(ctx);
  return {{"vrdma", true, fmt::format("{}, {} path", where, routed ? "router" : "direct"), vrdma_caps(routed)},
          {"vrdma:router", true, where + ", router path", vrdma_caps(true)}};
}

std::vector<Availability> probe() { return probe_at(vrdma_default_socket()); }

}  // namespace

TransportEntry registry_entry() {
  TransportEntry e;
  e.name = "vrdma";
  e.description = "vrdma, the virtual RDMA network of this project: RC queue pairs through this host's router (vrdmad)";
  e.options = {{"socket", OptionType::string, "",
                "the router's socket; default: $VRDMA_SOCKET, else $XDG_RUNTIME_DIR/vrdma.sock, else /run/vrdma/vrdma.sock"}};
  e.variant_help = "the data path; none: as the tenant's config says (same-host peers of a tenant without rate limits "
                   "take the direct path)";
  e.variants = {{"router", "the router moves every byte, checked against its region table (FreeFlow's path; QoS is "
                           "enforced there)"}};
  e.test_variants = {"", "router"};
  e.open = open_domain;
  e.probe = probe;
  e.probe_with = [](const OptionValues& o) { return probe_at(socket_of(o)); };
  return e;
}

}  // namespace rb::transport::vrdma
