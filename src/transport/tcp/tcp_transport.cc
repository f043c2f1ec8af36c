#include "transport/tcp/tcp_transport.hh"

#include <fmt/format.h>

#include "core/netif.hh"
#include "transport/tcp/tcp_endpoint.hh"

namespace rb::transport::tcp {
namespace {

class TcpMr final : public MemoryRegion {
 public:
  TcpMr(std::shared_ptr<RegionTable> t, void* a, size_t l) : t_(std::move(t)), a_(a), l_(l) {
    key_ = t_->add(static_cast<uint8_t*>(a), l);
  }
  ~TcpMr() override { t_->remove(key_); }
  void* addr() const override { return a_; }
  size_t len() const override { return l_; }
  void* desc() const override { return nullptr; }
  RemoteRegion remote() const override { return {0, key_, l_, {}}; }

 private:
  std::shared_ptr<RegionTable> t_;
  void* a_;
  size_t l_;
  uint64_t key_;
};

Caps tcp_caps() {
  Caps c;
  c.write = c.read = c.send = true;
  c.max_msg = 1ull << 31;
  c.tx_depth = 4096;
  c.rx_depth = 4096;
  c.target_progress = true;  // the target's endpoint applies writes and serves reads
  c.selective_completion = true;
  c.peer_sees_writes = c.peer_memory_readable = true;  // writes land in the target's registered memory
  c.checks_bounds = true;
  c.checks_keys = true;  // the target looks the key up in its own region table
  c.atomics = true;      // the target's endpoint applies them with atomic_ref on its region
  c.imm_data = true;     // the immediate rides in the frame's header extension
  c.can_wait = true;     // every completion arrives through the one socket arm_wait hands out
  return c;
}

class TcpDomain final : public Domain {
 public:
  TcpDomain(std::string ip, SocketOptions so)
      : ip_(std::move(ip)), so_(so), regions_(std::make_shared<RegionTable>()), caps_(tcp_caps()) {
    std::string iface = interface_name_of(ip_);
    info_ = {"tcp", "kernel", "tcp", iface.empty() ? ip_ : iface, ""};
  }
  const Caps& caps() const override { return caps_; }
  const DomainInfo& info() const override { return info_; }
  Result<std::unique_ptr<MemoryRegion>> register_memory(void* addr, size_t len) override {
    return std::unique_ptr<MemoryRegion>(new TcpMr(regions_, addr, len));
  }
  Result<std::unique_ptr<Endpoint>> open_endpoint(const EndpointOptions& o) override {
    return open_tcp_endpoint(regions_, ip_, so_, std::max<uint32_t>(o.depth, 64));
  }

 private:
  std::string ip_;
  SocketOptions so_;
  std::shared_ptr<RegionTable> regions_;
  Caps caps_;
  DomainInfo info_;
};

}  // namespace

Result<std::unique_ptr<Domain>> open_domain(const OpenArgs& opt) {
  SocketOptions so;
  so.nodelay = opt.options.flag("nodelay");
  so.sndbuf = int(opt.options.number("sndbuf"));
  so.rcvbuf = int(opt.options.number("rcvbuf"));
  std::string ip = opt.local_ip;
  if (!opt.domain.empty()) {  // a NIC named by --domain/--domains: use its address
    ip = interface_named(opt.domain).ip;
    if (ip.empty())
      return Status(Errc::invalid_argument, fmt::format("--domain {}: no network interface of that name here", opt.domain));
  }
  return std::unique_ptr<Domain>(new TcpDomain(ip, so));
}

TransportEntry registry_entry() {
  TransportEntry e;
  e.name = "tcp";
  e.description = "kernel TCP sockets, the baseline: SEND as framed messages, WRITE/READ as requests the peer applies";
  e.domain_help = "a network interface of this side (its address is used); default: the one carrying --addr";
  e.options = {
      {"nodelay", OptionType::boolean, "1", "TCP_NODELAY: send small frames at once (0 lets Nagle batch them)"},
      {"sndbuf", OptionType::bytes, "", "SO_SNDBUF of every connection; default: the kernel's", {}, 4096, 1ull << 30},
      {"rcvbuf", OptionType::bytes, "", "SO_RCVBUF of every connection; default: the kernel's", {}, 4096, 1ull << 30},
  };
  e.test_variants = {""};
  e.open = open_domain;
  e.probe = [] {
    return std::vector<Availability>{{"tcp", true, "one connection per endpoint pair, both directions on it; TCP_NODELAY on by default",
                                      tcp_caps()}};
  };
  return e;
}

}  // namespace rb::transport::tcp
