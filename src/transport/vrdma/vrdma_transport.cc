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

Caps vrdma_caps() {
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
  return c;
}

class VrdmaDomain final : public Domain {
 public:
  VrdmaDomain(vrdma_context* ctx, vrdma_pd* pd, const std::string& socket)
      : ctx_(ctx), pd_(pd), regions_(std::make_shared<Regions>()), caps_(vrdma_caps()),
        info_{"vrdma", "direct", "vrdmad", socket, "libvrdma " RDMABENCH_VERSION} {}
  ~VrdmaDomain() override {
    vrdma_dealloc_pd(pd_);
    vrdma_close(ctx_);
  }
  const Caps& caps() const override { return caps_; }
  const DomainInfo& info() const override { return info_; }
  Result<std::unique_ptr<HostMemory>> allocate(size_t len) override { return vrdma::allocate(pd_, regions_, len); }
  Result<std::unique_ptr<MemoryRegion>> register_memory(void* addr, size_t len) override {
    return register_range(*regions_, addr, len);
  }
  Result<std::unique_ptr<Endpoint>> open_endpoint(const EndpointOptions& o) override {
    return vrdma::open_endpoint(ctx_, pd_, o);
  }

 private:
  vrdma_context* ctx_;
  vrdma_pd* pd_;
  std::shared_ptr<Regions> regions_;
  Caps caps_;
  DomainInfo info_;
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
  return std::unique_ptr<Domain>(new VrdmaDomain(ctx, pd, socket));
}

std::vector<Availability> probe() {
  std::string socket = vrdma_default_socket();
  vrdma_context* ctx = vrdma_open(socket.c_str());
  if (!ctx) return {{"vrdma", false, fmt::format("{}; start vrdmad", vrdma_last_error())}};
  std::string detail = fmt::format("router at {}, tenant {}, direct path", socket, vrdma_tenant(ctx));
  vrdma_close(ctx);
  return {{"vrdma", true, detail, vrdma_caps()}};
}

}  // namespace

TransportEntry registry_entry() {
  TransportEntry e;
  e.name = "vrdma";
  e.description = "vrdma, the virtual RDMA network of this project: RC queue pairs through this host's router (vrdmad)";
  e.options = {{"socket", OptionType::string, "",
                "the router's socket; default: $VRDMA_SOCKET, else $XDG_RUNTIME_DIR/vrdma.sock, else /run/vrdma/vrdma.sock"}};
  e.test_variants = {""};
  e.open = open_domain;
  e.probe = probe;
  return e;
}

}  // namespace rb::transport::vrdma
